"""TIGER's epoch time against MOR's at the same width, and what length bucketing and the fast dropout mask buy, in one
process.

    python benchmarks/bench_tiger.py --run runs/office-quick [--steps 30] [--layers 1] [--dropout 0.1]

Uses a tokenized run's training rows and SIDs. For each form it times ``--steps`` optimizer steps (forward, backward,
AdamW) on the first batches of epoch 1, exactly as the training stage builds them, and projects one epoch as the mean
step time x the epoch's number of batches. Forms: MOR packed with ``layers`` decoder layers and with ``2 x layers``
(the total depth of TIGER's ``layers`` encoder + ``layers`` decoder blocks); TIGER with shuffled batches and torch's
dropout (the first version), length-bucketed with torch's dropout, length-bucketed with the fast mask
(:mod:`crabrec.models.dropout`) and its loss from the whole-vocabulary logits, and the current one: that loss from
each level's own logits (:meth:`crabrec.models.tiger.LevelT5.level_loss`). Width 128, FFN 512, every model at the
same ``--dropout`` (MOR's residual and attention dropout, TIGER's dropout), the quick preset's batch sizes (MOR 128
rows, TIGER 256).
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
    ap.add_argument("--dropout", type=float, default=0.1)
    args = ap.parse_args()
    from crabrec.config import TigerSection, TrainConfig
    from crabrec.data.dataset import Splits
    from crabrec.models.decoder import N_SPECIAL, build_decoder, item_tokens
    from crabrec.models.dropout import use_fast_dropout
    from crabrec.models.tiger import build_tiger, encode_inputs, make_labels, tiger_loss
    from crabrec.sid.codebook import Codebook
    from crabrec.train.decoder import decoder_loss, packed_batcher
    from crabrec.train.loop import batches, length_bucketed

    cb = Codebook.load(args.run / "sid" / "codebook.json")
    train = Splits.load(args.run / "data" / "splits.npz").train
    tokens = item_tokens(cb.token_ids())
    seed, p = 0, args.dropout

    def mor(layers: int):
        size = TrainConfig(hidden=128, layers=layers, heads=4, ff=512, dropout=p, attention_dropout=p)
        return build_decoder(N_SPECIAL + cb.vocab_size, size, seed=seed)

    def tiger_model(fast: bool):
        size = TigerSection(d_model=128, layers=args.layers, heads=4, d_kv=32, ff=512, dropout=p)
        model = build_tiger(cb.sizes, size, seed=seed)
        return model if fast else use_fast_dropout(model, torch.nn.Dropout)  # back to torch's own dropout

    _, make_packed, plan_packed, _ = packed_batcher(train, tokens, 128, seed)
    tiger = tiger_model(fast=True)

    def make_tiger(rows):
        ids, mask = encode_inputs(tiger.config, train.user[rows], train.history[rows], train.length[rows], tokens)
        return {"ids": ids, "mask": mask, "labels": make_labels(train.target[rows], tokens)}

    def full_loss(model, batch):  # the forward's loss: logits over the whole vocabulary, masked to the level
        return model(input_ids=batch["ids"], attention_mask=batch["mask"], labels=batch["labels"]).loss

    shuffled = list(batches(len(train), 256, seed, 1))
    bucketed = length_bucketed(train.length, np.ones(len(train), np.int64), 256, seed, 1)
    n, lay = args.steps, args.layers
    rows = [
        (f"MOR packed, {lay} layer(s)", time_steps(mor(lay), make_packed, decoder_loss, plan_packed(1), n)),
        (f"MOR packed, {2 * lay} layers", time_steps(mor(2 * lay), make_packed, decoder_loss, plan_packed(1), n)),
        ("TIGER, shuffled, torch dropout", time_steps(tiger_model(False), make_tiger, full_loss, shuffled, n)),
        ("TIGER, bucketed, torch dropout", time_steps(tiger_model(False), make_tiger, full_loss, bucketed, n)),
        ("TIGER, bucketed, fast dropout, whole-vocab logits", time_steps(tiger, make_tiger, full_loss, bucketed, n)),
        ("TIGER, bucketed, fast dropout, level logits", time_steps(tiger, make_tiger, tiger_loss, bucketed, n)),
    ]
    print(
        f"{len(train):,} training rows, {torch.get_num_threads()} threads, TIGER {lay}+{lay} layers, width 128, "
        f"dropout {p}"
    )
    print(f"| form | projected s / epoch | x MOR {lay} layer(s) | x MOR {2 * lay} layers |")
    print("|---|---|---|---|")
    for name, sec in rows:
        print(f"| {name} | {sec:.1f} | {sec / rows[0][1]:.2f} | {sec / rows[1][1]:.2f} |")


if __name__ == "__main__":
    main()
