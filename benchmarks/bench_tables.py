"""Grouping a table's rows into user sequences: the array-based grouping the table, RecBole and MovieLens layouts
use, against a per-user pandas ``groupby`` (how it was done before), side by side in one process; and reading its
time column of numbers written as text: Arrow's cast against ``pd.to_numeric``; and of dates that are not ISO 8601
(Goodreads'): in the first value's format against each value on its own.

    python benchmarks/bench_tables.py [--rows 2000000] [--users 70000] [--repeats 2] [--date-rows 200000]

The table is MovieLens-shaped: ``--rows`` ratings by ``--users`` users over 10,000 items drawn with a long tail,
Unix-second times with ties. Both groupings' datasets, and both readings' seconds, are checked equal; the best of
``--repeats`` is kept, and each reading's peak of new memory (tracemalloc) is shown.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd


def groupby_reference(inter: pd.DataFrame, ts: np.ndarray, items: dict) -> tuple[list, list, list]:
    """The per-user loop: sort by (user, time, row), then one ``groupby`` group at a time."""
    from crabrec.data.loaders import _catalogue_order

    frame = pd.DataFrame({"u": inter["user"].astype(str), "i": inter["item"].astype(str), "t": ts})
    frame["order"] = np.arange(len(frame))
    frame = frame.sort_values(["u", "t", "order"], kind="stable")
    index = {raw: i for i, raw in enumerate(_catalogue_order(list(items)))}
    users, seqs, times = [], [], []
    for user, grp in frame.groupby("u", sort=False):
        users.append(str(user))
        seqs.append(np.fromiter((index[x] for x in grp["i"].tolist()), dtype=np.int64))
        times.append(np.asarray(grp["t"].tolist(), dtype=np.float64))
    return users, seqs, times


def best_s(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--users", type=int, default=70_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--date-rows", type=int, default=200_000)
    args = ap.parse_args()
    from crabrec.data.loaders import _group_interactions

    rng = np.random.default_rng(0)
    items = {str(i): {} for i in range(1, 10_001)}
    inter = pd.DataFrame(
        {
            "user": rng.integers(1, args.users + 1, args.rows).astype(str),
            "item": ((rng.pareto(1.2, args.rows) * 10).astype(np.int64) % 10_000 + 1).astype(str),
        }
    )
    ts = 9e8 + rng.integers(0, args.rows // 4, args.rows).astype(np.float64)  # ~4 rows per second: ties
    fast_s, ds = best_s(lambda: _group_interactions("b", "b", inter, "user", "item", ts, items, "b"), args.repeats)
    ref_s, (users, seqs, times) = best_s(lambda: groupby_reference(inter, ts, items), args.repeats)
    assert ds.users == users
    assert all(np.array_equal(a, b) for a, b in zip(ds.sequences, seqs, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(ds.timestamps, times, strict=True))
    print(f"{args.rows:,} rows, {len(users):,} users, 10,000 items (best of {args.repeats}); equal: yes\n")
    print("| grouping | seconds | rows/s |")
    print("|---|---|---|")
    for name, sec in (("per-user groupby (reference)", ref_s), ("array operations (crabrec)", fast_s)):
        print(f"| {name} | {sec:.2f} | {args.rows / sec:,.0f} |")
    print(f"\nspeed-up: {ref_s / fast_s:.1f}x")
    times_table(ts, args.repeats)
    dates_table(ts[: args.date_rows], args.repeats)


def times_table(ts: np.ndarray, repeats: int) -> None:
    """The time column as pandas reads a table (Arrow strings), read by crabrec and by ``pd.to_numeric``."""
    import tracemalloc

    from crabrec.data.reading import Origin
    from crabrec.data.times import timestamps

    column = pd.Series(ts.astype(np.int64).astype(str), dtype="str")
    origin = Origin("b", 2)

    def measured(fn) -> tuple[float, float, np.ndarray]:
        sec, out = best_s(fn, repeats)
        tracemalloc.start()
        fn()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return sec, peak / 1e6, out

    rows = [
        ("`pd.to_numeric` (reference)", *measured(lambda: pd.to_numeric(column.str.strip()).to_numpy(np.float64))),
        ("Arrow cast (crabrec)", *measured(lambda: timestamps(column, origin, "timestamp"))),
    ]
    assert np.array_equal(rows[0][3], rows[1][3])
    print(f"\nthe time column ({column.dtype}), {len(column):,} rows; equal: yes\n")
    print("| reading | seconds | peak new memory (MB) |")
    print("|---|---|---|")
    for name, sec, mb, _ in rows:
        print(f"| {name} | {sec:.2f} | {mb:,.0f} |")
    print(f"\nspeed-up: {rows[0][1] / rows[1][1]:.1f}x")


def dates_table(ts: np.ndarray, repeats: int) -> None:
    """A column of Goodreads' dates (``Mon Aug 01 13:41:57 -0700 2016``), read by crabrec (in the format of its first
    value) and each value on its own (``format="mixed"``, how pandas reads a column of unknown format)."""
    from crabrec.data.reading import Origin
    from crabrec.data.times import _seconds, timestamps

    local = pd.to_datetime(ts.astype(np.int64), unit="s", utc=True).tz_convert("America/Los_Angeles")
    column = pd.Series(local.strftime("%a %b %d %H:%M:%S %z %Y"), dtype="str")
    each_s, each = best_s(lambda: _seconds(pd.to_datetime(column, utc=True, format="mixed")), repeats)
    ours_s, ours = best_s(lambda: timestamps(column, Origin("b", 2), "date_added"), repeats)
    assert np.array_equal(each, ours)
    print(f"\nthe time column of Goodreads' dates, {len(column):,} rows; equal: yes\n")
    print("| reading | seconds |")
    print("|---|---|")
    print(f"| each value on its own (reference) | {each_s:.2f} |")
    print(f"| in its first value's format (crabrec) | {ours_s:.2f} |")
    print(f"\nspeed-up: {each_s / ours_s:.1f}x")


if __name__ == "__main__":
    main()
