"""Row-by-row vs packed decoder training on the embedded Office data: time per epoch and validation NDCG@10.

    python benchmarks/bench_packing.py --steps 60 [--codebook runs/office-quick/sid/codebook.json]
    python benchmarks/bench_packing.py --epochs 2 [--codebook ...]

``--steps N``: times N optimizer steps of each form (forward + backward + AdamW, batches as in training) and
projects one epoch. ``--epochs N``: trains both forms for N full epochs with the same seed, optimizer and rows and
reports seconds per epoch and validation NDCG@10 (beam 20, 1,000 rows) after the same number of epochs.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--codebook")
    ap.add_argument("--steps", type=int, default=0)
    args = ap.parse_args()
    from crabrec.config import load_config
    from crabrec.data import compute_popularity, load_dataset, make_splits
    from crabrec.embed import encode, item_texts
    from crabrec.models.backbone import decoder_io
    from crabrec.models.decoder import N_SPECIAL, build_decoder
    from crabrec.sid.build import build_codebook
    from crabrec.sid.codebook import Codebook
    from crabrec.train.decoder import train_decoder

    tmp = Path(tempfile.mkdtemp())
    cfg = load_config(overrides={"runs_dir": str(tmp), "name": "bench", "train": {"epochs": args.epochs}})
    ds = load_dataset(cfg.data)
    splits = make_splits(ds, "auto", cfg.data.max_history)
    splits.save(tmp / "bench" / "data" / "splits.npz")
    pop = compute_popularity(splits.train, ds.n_items)
    if args.codebook:
        cb = Codebook.load(args.codebook)
    else:
        x = encode(item_texts(ds.item_text, cfg.embed), cfg.embed.model_copy(update={"encoder": "hashing-bow"}))
        cb = build_codebook(cfg.tokenize, x, ds.item_ids, cfg.seed)
    if args.steps:
        return time_steps(cfg, splits, cb, args.steps)
    rows = []
    for packing in ("rows", "packed"):
        train_cfg = cfg.train.model_copy(update={"packing": packing})
        model = build_decoder(N_SPECIAL + cb.vocab_size, train_cfg, seed=cfg.seed)
        t = time.perf_counter()
        summary = train_decoder(model, decoder_io(cb), cb, splits, train_cfg, tmp / packing, cfg.seed)
        rows.append((packing, summary["seconds_per_epoch"], summary["best_valid_ndcg@10"], time.perf_counter() - t))
    print(f"Office: {len(splits.train):,} training rows, {ds.n_users:,} users, {np.sum(pop.freq > 0):,} target items")
    print("| form | seconds / epoch | vs rows | valid NDCG@10 after", args.epochs, "epoch(s) |")
    print("|---|---|---|---|")
    for name, sec, ndcg, _ in rows:
        print(f"| {name} | {sec:.1f} | {rows[0][1] / sec:.2f}x faster | {ndcg:.4f} |")


def time_steps(cfg, splits, cb, steps: int) -> None:
    import torch

    from crabrec.config import TrainConfig
    from crabrec.models.decoder import N_SPECIAL, build_decoder, item_tokens
    from crabrec.train.decoder import decoder_loss, packed_batcher, row_batcher
    from crabrec.train.loop import batches

    torch.set_num_threads(2)
    tokens = item_tokens(cb.token_ids())
    out = []
    for packing in ("rows", "packed"):
        if packing == "rows":
            make = row_batcher(splits.train, tokens)
            plan = list(batches(len(splits.train), cfg.train.batch_size, 0, 1))
        else:
            _, make, plan_fn, _ = packed_batcher(splits.train, tokens, cfg.train.batch_size, 0)
            plan = plan_fn(1)
        model = build_decoder(N_SPECIAL + cb.vocab_size, TrainConfig(), seed=0)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        tokens_seen = 0
        picks = np.random.default_rng(0).choice(len(plan), steps + 3, replace=False)
        for i, b in enumerate(picks):
            if i == 3:
                start = time.perf_counter()
            batch = make(plan[b])
            loss = decoder_loss(model, batch)
            loss.backward()
            opt.step()
            opt.zero_grad()
            if i >= 3:
                tokens_seen += batch["ids"].numel()
        sec = (time.perf_counter() - start) / steps
        out.append((packing, len(plan), sec, sec * len(plan), tokens_seen / steps))
    print(f"{steps} timed steps per form (after 3 warm-up steps), default decoder (hidden 128, 2 layers), 2 threads")
    print("| form | steps / epoch | s / step | projected s / epoch | padded tokens / step | vs rows |")
    print("|---|---|---|---|---|---|")
    for name, n_steps, sec, epoch, tok in out:
        print(f"| {name} | {n_steps} | {sec:.3f} | {epoch:.1f} | {tok:,.0f} | {out[0][3] / epoch:.2f}x faster |")


if __name__ == "__main__":
    main()
