"""The frontier's points one after another against N at once (``crabrec frontier --jobs``), side by side.

    python benchmarks/bench_frontier.py RUN [--jobs 2] [--rounds 1] [-- FRONTIER ARGS ...]

RUN is a finished run with MOR evaluated (``crabrec run RUN --until evaluate``); it is never written: each
measurement sweeps a copy of it from scratch (no cached point), the two settings alternating round by round. The
default sweep is RR's α grid and CRAB at three γ (``--only rr,crab --grid crab=0,0.2,1 --grid crab:levels=all
--grid crab:ratio=0.1``: 9 points). It prints each sweep's wall time, the ratio, and how far apart the two sweeps'
test metrics are (one process uses every core's threads, the workers one thread each: floating-point rounding).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT = ["--only", "rr,crab", "--grid", "crab=0,0.2,1", "--grid", "crab:levels=all", "--grid", "crab:ratio=0.1"]
METRICS = ("HR@10", "NDCG@10", "MGU@10", "DGU@10")


def sweep(copy: Path, jobs: int, args: list[str]) -> tuple[float, dict[tuple[str, str], dict]]:
    """One frontier from scratch on ``copy``: (wall seconds, its points by (method, setting))."""
    shutil.rmtree(copy / "frontier", ignore_errors=True)
    command = [sys.executable, "-m", "crabrec", "frontier", str(copy), *args, "--jobs", str(jobs), "--quiet"]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"bench_frontier: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    points = json.loads((copy / "frontier" / "frontier.json").read_text())["points"]
    return seconds, {(p["method"], p["setting"]): p for p in points}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    parser.add_argument("--jobs", type=int, default=2, help="points at once in the side-by-side sweep")
    parser.add_argument("--rounds", type=int, default=1)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # the frontier's own arguments follow --
    args = parser.parse_args(argv[:cut])
    args.frontier = argv[cut + 1 :]
    if not (args.run / "models" / "mor" / "metrics.json").is_file():
        raise SystemExit(f"bench_frontier: {args.run}: MOR not evaluated (crabrec run {args.run} --until evaluate)")
    frontier = args.frontier or DEFAULT
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / args.run.name
        shutil.copytree(args.run, copy, ignore=shutil.ignore_patterns("frontier", "analysis", "seeds", "checkpoint"))
        print(f"frontier {' '.join(frontier)}; {args.rounds} round(s), the two sweeps alternating")
        head = f"| round | one by one (s) | --jobs {args.jobs} (s) | one by one / side by side | points |"
        print(head + " largest test difference |")
        print("|---|---|---|---|---|---|")
        for r in range(1, args.rounds + 1):
            one_s, one = sweep(copy, 1, frontier)
            many_s, many = sweep(copy, args.jobs, frontier)
            if one.keys() != many.keys():
                raise SystemExit("bench_frontier: the two sweeps computed different points")
            gap = max(abs(one[k][f"test {m}"] - many[k][f"test {m}"]) for k in one for m in METRICS)
            print(f"| {r} | {one_s:.1f} | {many_s:.1f} | {one_s / many_s:.2f} | {len(one) - 1} | {gap:.2g} |")


if __name__ == "__main__":
    main()
