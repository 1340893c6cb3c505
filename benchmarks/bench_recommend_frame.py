"""Many histories ranked from Python: ``recommend_frame`` (one DataFrame built from arrays) against
``recommend_batch`` (a list of ``Recommendation`` objects per history, the reference), the same lists checked equal.

    python benchmarks/bench_recommend_frame.py [--runs runs] [--repeat 20] [--method sasrec]

A quick-preset run of the embedded Office data (trained into ``--runs``/office-quick unless it is there); its test
histories repeated ``--repeat`` times, top 10 each. Prints, for each, the seconds and the memory its answer holds
and the peak of new memory while it is made (tracemalloc: Python's and NumPy's allocations, not torch's).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from pathlib import Path


def measured(make):
    """``(answer, seconds, MB held by the answer, peak MB)`` of ``make()``: timed in one call, traced in another."""
    start = time.perf_counter()
    make()
    seconds = time.perf_counter() - start
    tracemalloc.start()
    out = make()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, seconds, held / 1e6, peak / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="runs", help="where the quick run is kept")
    ap.add_argument("--repeat", type=int, default=20, help="times the test histories are repeated")
    ap.add_argument("--method", default="sasrec")
    args = ap.parse_args()
    import crabrec
    from crabrec.runfiles import RunFiles

    run = crabrec.run(preset="quick", until=["sasrec-eval", "evaluate"], overrides={"runs_dir": str(Path(args.runs))})
    rec = crabrec.load(run, args.method)
    histories = [[rec.item_ids[i] for i in row] for row in RunFiles(run).load_splits().test.rows()] * args.repeat
    frame, f_s, f_held, f_peak = measured(lambda: rec.recommend_frame(histories, 10))
    lists, b_s, b_held, b_peak = measured(lambda: rec.recommend_batch(histories, 10))
    expected = [(r, x.rank, x.item, x.score, x.group) for r, recs in enumerate(lists) for x in recs]
    assert list(frame.itertuples(index=False, name=None)) == expected
    print(f"{run}, {args.method}: {len(histories):,} histories, top 10 ({len(frame):,} items); the same lists\n")
    print("| answer | seconds | held MB | peak new MB |\n|---|---|---|---|")
    print(f"| recommend_batch (reference) | {b_s:.1f} | {b_held:.0f} | {b_peak:.0f} |")
    print(f"| recommend_frame | {f_s:.1f} | {f_held:.0f} | {f_peak:.0f} |")


if __name__ == "__main__":
    main()
