"""The items a batch of histories must not get back (exclude-seen), held flat and padded one batch at a time
(crabrec's ``Ragged``) against one array padded to the longest history of all (the reference), in one process.

    python benchmarks/bench_seen.py [--short 20000] [--long 5] [--long-length 20000] [--batch 256]

``--short`` histories of 10 items and ``--long`` of ``--long-length`` (a few heavy users among many, as
``crabrec recommend --input`` of every user of a shop's data meets them), read in batches of ``--batch`` rows as a
ranker reads them. The batches, cut to their longest row, are checked equal to the reference's. Prints the peak of
new memory (tracemalloc) and seconds of building the rows and reading every batch.
"""

from __future__ import annotations

import argparse
import hashlib
import time
import tracemalloc

import numpy as np


def reference(rows: list[list[int]]) -> np.ndarray:
    """Every row padded to the longest of all, with -1."""
    out = np.full((len(rows), max([1, *map(len, rows)])), -1, dtype=np.int64)
    for r, row in enumerate(rows):
        out[r, : len(row)] = row
    return out


def measured(build, batch: int, widths: list[int]) -> tuple[float, float, str]:
    """Seconds and peak new memory (MB) of building the rows and reading every batch of ``batch`` rows (each dropped
    once read, as a ranker does), and a digest of the batches cut to their rows' longest (``widths``)."""
    digest = hashlib.sha256()
    tracemalloc.start()
    start = time.perf_counter()
    seen = build()
    for n, a in enumerate(range(0, len(seen), batch)):
        rows = seen[np.arange(a, min(a + batch, len(seen)))]
        digest.update(np.ascontiguousarray(rows[:, : widths[n]]).tobytes())
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return seconds, peak, digest.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", type=int, default=20_000)
    ap.add_argument("--long", type=int, default=5)
    ap.add_argument("--long-length", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    from crabrec.data.dataset import Ragged

    rng = np.random.default_rng(0)
    rows = [rng.integers(0, 1000, 10).tolist() for _ in range(args.short)]
    rows += [rng.integers(0, 1000, args.long_length).tolist() for _ in range(args.long)]
    widths = [max(1, *map(len, rows[a : a + args.batch])) for a in range(0, len(rows), args.batch)]
    ref_s, ref_mb, ref = measured(lambda: reference(rows), args.batch, widths)
    ours_s, ours_mb, ours = measured(lambda: Ragged(rows), args.batch, widths)
    assert ref == ours
    print(f"{args.short:,} histories of 10 items and {args.long} of {args.long_length:,}, batches of {args.batch}; "
          "equal: yes\n")  # fmt: skip
    print("| seen items held | seconds | peak new memory (MB) |")
    print("|---|---|---|")
    print(f"| padded to the longest history (reference) | {ref_s:.2f} | {ref_mb:,.0f} |")
    print(f"| flat, padded per batch (crabrec) | {ours_s:.2f} | {ours_mb:,.0f} |")
    print(f"\nmemory: {ref_mb / ours_mb:.0f}x less")


if __name__ == "__main__":
    main()
