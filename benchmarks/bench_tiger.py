"""TIGER's epoch time against MOR's at the same depth and width, and what length bucketing buys, in one process.

    python benchmarks/bench_tiger.py --run runs/office-quick [--steps 30] [--layers 1]

Uses a tokenized run's training rows and SIDs. For each form it times ``--steps`` optimizer steps (forward, backward,
AdamW) on the first batches of epoch 1, exactly as the training stage builds them, and projects one epoch as the mean
step time x the epoch's number of batches: MOR packed (``layers`` decoder layers), TIGER with shuffled batches (the
old plan), TIGER with length-bucketed batches (``layers`` encoder + ``layers`` decoder layers). Width 128, FFN 512,
the quick preset's batch sizes (MOR 128 rows, TIGER 256).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch


def time_steps(model, make, loss_fn, plan: list[np.ndarray], steps: int) -> float:
    """Seconds per epoch projected from ``steps`` timed optimizer steps (after one warm-up step)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    batches = [make(rows) for rows in plan[: steps + 1]]
    for i, batch in enumerate(batches):
        if i == 1:
            start = time.perf_counter()
        loss_fn(model, batch).backward()
        opt.step()
        opt.zero_grad()
    return (time.perf_counter() - start) / max(len(batches) - 1, 1) * len(plan)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True, type=Path)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--layers", type=int, default=1)
    args = ap.parse_args()
    from crabrec.config import TigerSection, TrainConfig
    from crabrec.data.dataset import Splits
    from crabrec.models.decoder import N_SPECIAL, build_decoder, item_tokens
    from crabrec.models.tiger import build_tiger, encode_inputs, make_labels, tiger_loss
    from crabrec.sid.codebook import Codebook
    from crabrec.train.decoder import decoder_loss, packed_batcher
    from crabrec.train.loop import batches, length_bucketed

    cb = Codebook.load(args.run / "sid" / "codebook.json")
    train = Splits.load(args.run / "data" / "splits.npz").train
    tokens = item_tokens(cb.token_ids())
    seed = 0
    mor = build_decoder(
        N_SPECIAL + cb.vocab_size, TrainConfig(hidden=128, layers=args.layers, heads=4, ff=512), seed=seed
    )
    _, make_packed, plan_packed = packed_batcher(train, tokens, 128, seed)
    tiger = build_tiger(
        cb.vocab_size,
        TigerSection(d_model=128, layers=args.layers, heads=4, d_kv=32, ff=512, dropout=0.1, user_bins=2000),
        seed=seed,
    )

    def make_tiger(rows):
        ids, mask = encode_inputs(tiger.config, train.user[rows], train.history[rows], train.length[rows], tokens)
        return {"ids": ids, "mask": mask, "labels": make_labels(train.target[rows], tokens)}

    shuffled = list(batches(len(train), 256, seed, 1))
    bucketed = length_bucketed(train.length, np.ones(len(train), np.int64), 256, seed, 1)
    rows = [
        ("MOR packed", time_steps(mor, make_packed, decoder_loss, plan_packed(1), args.steps)),
        ("TIGER, shuffled batches", time_steps(tiger, make_tiger, tiger_loss, shuffled, args.steps)),
        ("TIGER, length-bucketed", time_steps(tiger, make_tiger, tiger_loss, bucketed, args.steps)),
    ]
    print(f"{len(train):,} training rows, {torch.get_num_threads()} threads, depth {args.layers}, width 128")
    print("| form | projected s / epoch | x MOR |")
    print("|---|---|---|")
    for name, sec in rows:
        print(f"| {name} | {sec:.1f} | {sec / rows[0][1]:.2f} |")


if __name__ == "__main__":
    main()
