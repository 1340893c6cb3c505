"""Row-by-row vs packed decoder training on the embedded Office data: time per epoch and validation NDCG@10.

    python benchmarks/bench_packing.py [--epochs 1] [--codebook runs/office-quick/sid/codebook.json]

Both forms train the default-size decoder (hidden 128, 2 layers) with the same seed, optimizer and rows; the table
reports seconds per epoch, the ratio, and validation NDCG@10 (beam 20, 1,000 rows) after the same number of epochs.
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
    args = ap.parse_args()
    from crabrec.config import load_config
    from crabrec.data import compute_popularity, load_dataset, make_splits
    from crabrec.embed import encode, item_texts
    from crabrec.pipeline import RunContext
    from crabrec.sid.build import build_codebook
    from crabrec.sid.codebook import Codebook
    from crabrec.stages import registry
    from crabrec.stages.model_stages import train_decoder

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
    rows = []
    for packing in ("rows", "packed"):
        run_cfg = cfg.model_copy(update={"train": cfg.train.model_copy(update={"packing": packing})})
        ctx = RunContext(cfg=run_cfg, stages=registry())
        t = time.perf_counter()
        summary = train_decoder(ctx, cb, tmp / packing)
        rows.append((packing, summary["seconds_per_epoch"], summary["best_valid_ndcg@10"], time.perf_counter() - t))
    print(f"Office: {len(splits.train):,} training rows, {ds.n_users:,} users, {np.sum(pop.freq > 0):,} target items")
    print("| form | seconds / epoch | vs rows | valid NDCG@10 after", args.epochs, "epoch(s) |")
    print("|---|---|---|---|")
    for name, sec, ndcg, _ in rows:
        print(f"| {name} | {sec:.1f} | {rows[0][1] / sec:.2f}x faster | {ndcg:.4f} |")


if __name__ == "__main__":
    main()
