"""Reading order lines joined to their orders (Instacart's layout) against reading the same rows as one table with
the same columns, each in a fresh process: seconds and peak memory of ``load_dataset``.

    python benchmarks/bench_orders.py [--lines 2000000] [--repeats 2] [--dir /tmp/bench_orders]

The folder is Instacart-shaped: ``orders.csv`` (``order_id``, ``user_id``, ``eval_set``, ``order_number``,
``order_dow``, ``order_hour_of_day``, ``days_since_prior_order``; listed by user, order ids shuffled),
``order_products__prior.csv`` (``order_id``, ``product_id``, ``add_to_cart_order``, ``reordered``; listed by order
id) and ``products.csv``; about ten lines an order, a user every 17 orders, items drawn with a long tail. The one
table is the joined rows written out, beside the same ``products.csv``. Both datasets are checked equal; the best
of ``--repeats`` seconds is kept, and each process's peak resident memory is shown.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

LOAD = """
import hashlib, json, resource, sys, time
from crabrec.config import DataConfig
from crabrec.data.loaders import load_dataset
start = time.perf_counter()
ds = load_dataset(DataConfig(path=sys.argv[1], kcore=0))
seconds = time.perf_counter() - start
digest = hashlib.sha256(json.dumps([ds.users, [s.tolist() for s in ds.sequences]]).encode()).hexdigest()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak, "digest": digest, "rows": ds.n_interactions}))
"""


def write_folders(root: Path, n_lines: int) -> tuple[Path, Path]:
    """The Instacart-shaped folder and the folder of the same rows as one table."""
    rng = np.random.default_rng(0)
    n_orders = max(n_lines // 10, 1)
    n_items = 50_000
    user = np.sort(rng.integers(1, n_orders // 17 + 2, n_orders))
    order_id = rng.permutation(n_orders) + 1
    orders = pd.DataFrame({
        "order_id": order_id, "user_id": user, "eval_set": "prior",
        "order_number": pd.Series(user).groupby(user).cumcount().to_numpy() + 1,
        "order_dow": rng.integers(0, 7, n_orders), "order_hour_of_day": rng.integers(0, 24, n_orders),
        "days_since_prior_order": rng.integers(0, 31, n_orders).astype(float),
    })  # fmt: skip
    size = rng.integers(1, 20, n_orders)
    lines = pd.DataFrame({
        "order_id": np.repeat(order_id, size),
        "product_id": rng.zipf(1.3, int(size.sum())) % n_items + 1,
        "add_to_cart_order": np.concatenate([np.arange(1, s + 1) for s in size]),
        "reordered": 0,
    }).sort_values("order_id", kind="stable")  # fmt: skip
    ids = np.arange(1, n_items + 1)
    products = pd.DataFrame({"product_id": ids, "product_name": [f"Product {i}" for i in ids]})
    joined, plain = root / "instacart", root / "one_table"
    for folder in (joined, plain):
        folder.mkdir(parents=True, exist_ok=True)
        products.to_csv(folder / "products.csv", index=False)
    orders.to_csv(joined / "orders.csv", index=False)
    lines.to_csv(joined / "order_products__prior.csv", index=False)
    at = pd.Index(orders["order_id"]).get_indexer(lines["order_id"])
    order = np.argsort(at, kind="stable")
    one = pd.concat([lines.iloc[order].reset_index(drop=True),
                     orders.drop(columns="order_id").iloc[at[order]].reset_index(drop=True)], axis=1)  # fmt: skip
    one.to_csv(plain / "interactions.csv", index=False)
    return joined, plain


def measure(folder: Path, repeats: int) -> dict:
    """The best seconds of ``repeats`` fresh processes, with the peak memory and the dataset's digest."""
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", LOAD, str(folder)], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda r: r["seconds"])
    assert len({r["digest"] for r in runs}) == 1
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--dir", default="/tmp/bench_orders")
    args = ap.parse_args()
    joined, plain = write_folders(Path(args.dir), args.lines)
    a, b = measure(joined, args.repeats), measure(plain, args.repeats)
    assert a["digest"] == b["digest"], "the joined lines and the one table gave different datasets"
    print(f"{a['rows']:,} interactions; the same users and sequences from both\n")
    print("| read | seconds | peak memory |")
    print("|---|---|---|")
    print(f"| lines joined to orders (Instacart's layout) | {a['seconds']:.2f} | {a['peak_mb']:,.0f} MB |")
    print(f"| the same rows as one table of the same columns | {b['seconds']:.2f} | {b['peak_mb']:,.0f} MB |")
    print(f"| ratio | {a['seconds'] / b['seconds']:.2f}× | {a['peak_mb'] / b['peak_mb']:.2f}× |")


if __name__ == "__main__":
    main()
