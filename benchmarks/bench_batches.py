"""Building a training batch on the host: the vectorized builders against the per-row reference ones, on a run's
training rows, side by side in one process.

    python benchmarks/bench_batches.py [runs/office-quick] [--batches 100] [--repeats 3] [--backbone PATH]

For TIGER's encoder inputs, the packed decoder batch and the row form (one sequence per training row, padded to 32
tokens; with ``--backbone``, an LLM backbone's prompt around the SIDs), each builder makes the first ``--batches``
batches of epoch 1 of the run's plans (length-bucketed rows, the packed chains), as training builds them; the best
of ``--repeats`` rounds is kept. Both builders' batches are checked equal. On a GPU the host builds the next batch
while the device runs the step, so a batch that takes longer to build than a (replayed) step sets the pace.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch


def best_ms(build: Callable[[np.ndarray], object], plan: list[np.ndarray], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for rows in plan:
            build(rows)
        best = min(best, time.perf_counter() - start)
    return 1000 * best / len(plan)


def same(a, b) -> bool:
    pairs = zip(a.values(), b.values()) if isinstance(a, dict) else zip(a, b)
    return all(x is y is None or torch.equal(x, y) for x, y in pairs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", nargs="?", type=Path, default=Path("runs/office-quick"))
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backbone", type=Path, default=None, help="an LLM backbone folder: the row form with its prompt")
    args = ap.parse_args()
    from crabrec.config import load_config
    from crabrec.models.backbone import decoder_io, load_backbone
    from crabrec.models.decoder import Prompt, encode_rows, item_tokens
    from crabrec.models.packing import build_chains, pack_batch
    from crabrec.models.tiger import build_tiger, encode_inputs
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry
    from crabrec.train.batch_reference import encode_rows_rows, pack_batch_rows, tiger_inputs_rows
    from crabrec.train.loop import by_length, length_bucketed

    cfg = load_config(str(args.run / "config.yaml"))
    files = RunContext(config=cfg, stages=registry()).files
    train, codebook = files.load_splits().train, files.load_codebook()
    tokens = item_tokens(codebook.token_ids())
    config = build_tiger(codebook.sizes, cfg.tiger, seed=0).config
    tiger_plan = by_length(train.length, cfg.tiger.batch_size, cfg.seed)(1)[: args.batches]
    h = train.history.shape[1]
    chains = build_chains(train, h)
    lengths = np.array([len(c) for c in chains.items])
    rows = np.array([int(t.sum()) for t in chains.is_target])
    packed_plan = length_bucketed(lengths, rows, cfg.train.batch_size, cfg.seed, 1)[: args.batches]

    def tiger(builder):
        return lambda r: builder(config, train.user[r], train.history[r], train.length[r], tokens)

    forms = [
        (f"TIGER inputs ({cfg.tiger.batch_size} rows)", tiger(tiger_inputs_rows), tiger(encode_inputs), tiger_plan),
        (
            f"packed MOR batch (about {cfg.train.batch_size} rows)",
            lambda r: pack_batch_rows(chains, r, tokens, h),
            lambda r: pack_batch(chains, r, tokens, h),
            packed_plan,
        ),
    ]
    prompt, row_tokens, what = Prompt(), tokens, "bare SIDs"
    if args.backbone:
        io = decoder_io(codebook, load_backbone(args.backbone, list(codebook.sizes), seed=0)[1])
        prompt, row_tokens, what = io.train_prompt, io.tokens, f"{args.backbone.name}'s prompt"
    row_plan = by_length(train.length, cfg.train.batch_size, cfg.seed)(1)[: args.batches]

    def row_form(builder):
        return lambda r: builder(train.history[r], train.length[r], train.target[r], row_tokens, prompt, 32)

    forms.append(
        (f"row form, {what} ({cfg.train.batch_size} rows)", row_form(encode_rows_rows), row_form(encode_rows), row_plan)
    )
    print(f"{args.run}: the first {args.batches} batches of epoch 1, best of {args.repeats} rounds, 1 thread")
    print("| batch | per-row reference (ms / batch) | vectorized (ms / batch) | faster | equal |")
    print("|---|---|---|---|---|")
    for label, reference, fast, plan in forms:
        equal = all(same(fast(r), reference(r)) for r in plan)
        ref_ms, fast_ms = best_ms(reference, plan, args.repeats), best_ms(fast, plan, args.repeats)
        print(f"| {label} | {ref_ms:.2f} | {fast_ms:.2f} | {ref_ms / fast_ms:.1f}x | {'yes' if equal else 'NO'} |")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
