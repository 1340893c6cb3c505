"""Streaming a raw ``amazon18`` review file: ``crabrec data stats`` against ``pandas.read_json(lines=True)``, one run.

    python benchmarks/bench_raw_reviews.py [--lines 5000000] [--dir /tmp/crabrec-raw]

Generates (once, cached in ``--dir``) a gzipped ``Office_Products_5.json.gz`` of ``--lines`` review lines in the real
Amazon-2018 schema (reviewerID, asin, unixReviewTime, overall, verified, reviewTime, reviewerName, reviewText,
summary; Zipf-distributed users and items) and a matching meta file. Each side runs as its own process, timed by
wall clock, with its peak RSS from ``getrusage``: ``crabrec data stats`` (the whole data stage: stream, k-core,
splits, popularity) and ``pandas.read_json(path, lines=True)`` of the same file (parsing only).
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def generate(folder: Path, lines: int, seed: int = 0) -> Path:
    reviews = folder / "Office_Products_5.json.gz"
    if reviews.is_file():
        return reviews
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    n_users, n_items = max(lines // 8, 10), max(lines // 40, 10)
    users = np.minimum(rng.zipf(1.3, lines), n_users) - 1
    items = np.minimum(rng.zipf(1.2, lines), n_items) - 1
    times = rng.integers(1_300_000_000, 1_540_000_000, lines)
    tmp = reviews.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as f:
        for u, i, t in zip(users.tolist(), items.tolist(), times.tolist()):
            f.write(
                f'{{"overall": 5.0, "verified": true, "reviewTime": "01 2, 2017", "reviewerID": "A{u:012d}", '
                f'"asin": "B{i:09d}", "reviewerName": "Reader {u}", "reviewText": "Works as described, would buy '
                f'again. Sturdy and well made for the price.", "summary": "Good", "unixReviewTime": {t}}}\n'
            )
    tmp.rename(reviews)
    with gzip.open(folder / "meta_Office_Products.json.gz", "wt", encoding="utf-8") as f:
        for i in range(n_items):
            f.write(json.dumps({"asin": f"B{i:09d}", "title": f"Office item {i}", "category": ["Office"]}) + "\n")
    return reviews


def measure(cmd: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of ``cmd`` run as a child process."""
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    return seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=5_000_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/crabrec-raw"))
    args = ap.parse_args()
    folder = args.dir / f"amazon18-{args.lines}"
    reviews = generate(folder, args.lines)
    runs = folder / "runs"
    ours = [sys.executable, "-m", "crabrec", "data", "stats", "--data", str(folder), "--format", "amazon18",
            "--set", "data.time_window=[2010-01,2018-12]", "--set", f"runs_dir={runs}"]  # fmt: skip
    pandas = [sys.executable, "-c", f"import pandas as pd; print(len(pd.read_json({str(reviews)!r}, lines=True)))"]
    # RUSAGE_CHILDREN keeps the largest child so far: the smaller side runs first
    t_ours, rss_ours = measure(ours)
    t_pd, rss_pd = measure(pandas)
    print(f"{args.lines:,} amazon18 review lines ({reviews.stat().st_size / 1e6:.0f} MB gzipped)")
    print("| reader | seconds | lines/s | peak RSS MB |\n|---|---|---|---|")
    for label, t, rss in (
        ("crabrec data stats (stream, k-core, splits, files written)", t_ours, rss_ours),
        ("pandas.read_json(lines=True) (parse only)", t_pd, rss_pd),
    ):
        print(f"| {label} | {t:.1f} | {args.lines / t:,.0f} | {rss:.0f} |")
    print(f"speed: {t_pd / t_ours:.2f}x pandas")


if __name__ == "__main__":
    main()
