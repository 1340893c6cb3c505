"""Items that must not be recommended (``unavailable=``): what leaving them out costs the ranking, against every
row excluding them as it does its history's items (the reference, checked equal) and against filtering them out of
a finished list.

    python benchmarks/bench_unavailable.py [--runs runs] [--rows 1000] [--seed 0]

A quick-preset run of the embedded Office data (trained into ``--runs``/office-quick unless it is there). For MOR,
TIGER and SASRec, the first ``--rows`` test histories are ranked (top 10, the history's own items excluded, as
``crabrec recommend`` does) with a seeded 0%, 1%, 10% and 50% of the catalogue unavailable. Printed per method and
share: seconds of the ranking (the median of ``--repeat``), its ratio to none unavailable, and the items the rows
carry to exclude (MB: their histories); the same for the reference; and, for the beam's whole list (20) ranked
without them and filtered afterwards, how many lists keep fewer than 10. Every list is checked to hold no
unavailable item and to keep its 10 items.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

METHODS = ("mor", "tiger", "sasrec")
SHARES = (0.0, 0.01, 0.1, 0.5)
STAGES = ["evaluate", "tiger-eval", "sasrec-eval"]


class EachRow:
    """The reference: a ranker without ``set_unavailable``, so every row carries the unavailable items among the
    items it must not get back (what a method from another package gets)."""

    def __init__(self, ranker) -> None:
        self.base, self.width, self.block = ranker, ranker.width, ranker.block

    def rank(self, rows, desc: str = "ranking", progress: bool = True):
        return self.base.rank(rows, desc, progress)


def timed(rec, histories, users, k: int = 10, repeat: int = 1) -> tuple[float, list[list[str]]]:
    """The median seconds of ``repeat`` rankings, and the lists (each ranking's the same)."""
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        rows = rec.recommend_batch(histories, k, users=users)
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds)), [[r.item for r in row] for row in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="runs", help="where the quick run is kept")
    ap.add_argument("--rows", type=int, default=1000, help="test histories ranked")
    ap.add_argument("--seed", type=int, default=0, help="seed of the unavailable items' draws")
    ap.add_argument("--repeat", type=int, default=3, help="rankings timed (the median is printed)")
    args = ap.parse_args()
    import crabrec
    from crabrec.runfiles import RunFiles

    run = crabrec.run(preset="quick", until=STAGES, overrides={"runs_dir": str(Path(args.runs))})
    test = RunFiles(run).load_splits().test
    n = min(args.rows, len(test))
    print(f"{run}: the first {n} test histories, top 10, the history's own items excluded\n")
    print("| method | unavailable | seconds | ratio to none | rows' items (MB) | each row excluding them (s) | "
          "their rows' items (MB) | short lists when filtered after |")
    print("|---|---|---|---|---|---|---|---|")
    for method in METHODS:
        rec, reference = crabrec.load(run, method), crabrec.load(run, method)
        reference.ranker = EachRow(reference.ranker)
        histories = [[rec.item_ids[i] for i in row] for row in test.rows()[:n]]
        users = test.user[:n].tolist()
        timed(rec, histories[:64], users[:64])  # warm-up
        rng = np.random.default_rng(args.seed)
        none, plain = timed(rec, histories, users, repeat=args.repeat)
        whole = timed(rec, histories, users, rec.max_k)[1]  # the beam's whole list, to filter afterwards
        for share in SHARES:
            gone = rng.choice(len(rec.item_ids), round(share * len(rec.item_ids)), replace=False)
            out = [rec.item_ids[i] for i in gone]
            rec.set_unavailable(out)
            reference.set_unavailable(out)
            seconds, lists = timed(rec, histories, users, repeat=args.repeat) if len(gone) else (none, plain)
            assert all(len(row) == 10 and not set(out) & set(row) for row in lists), method
            ref_seconds, ref_lists = timed(reference, histories, users, repeat=args.repeat)
            assert ref_lists == lists, method
            held = [r.samples(histories, users).seen.flat.nbytes / 1e6 for r in (rec, reference)]
            short = sum(len([i for i in row if i not in set(out)]) < 10 for row in whole)
            print(f"| {method} | {share:.0%} ({len(gone)}) | {seconds:.2f} | {seconds / none:.2f} | {held[0]:.2f} | "
                  f"{ref_seconds:.2f} | {held[1]:.2f} | {short} of {n} |")  # fmt: skip


if __name__ == "__main__":
    main()
