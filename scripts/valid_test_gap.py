"""Where does a method lose against its base, on validation and on test? HR@10 of both on every row, by target.

    python scripts/valid_test_gap.py BASE_RUN:METHOD RUN:METHOD     # e.g. runs/q:tiger runs/q-point:tiger-crab

Ranks every validation and test row with each method's ranker (as its evaluation does) and prints HR@10 on all rows,
on the rows whose target is popular (in the top popularity group) or not, and, when the second method ranks CRAB's
rebalanced SIDs, on the rows whose target's SID the rebalancing changed or kept; last, the validation HR@10 of both
re-weighted to the test's share of popular targets. The two runs must share their data split (a frontier point and
the run it was swept from do).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def hits(run: Path, method: str, rows) -> np.ndarray:
    """Per row: 1.0 where the target is in the top 10 of ``method`` in ``run`` (the evaluation's own per-row parts)."""
    from crabrec.config import load_saved
    from crabrec.evaluation import user_parts
    from crabrec.methods import get
    from crabrec.runfiles import RunFiles

    files = RunFiles(run)
    ranker = get(method).ranker(files, load_saved(run))
    items, _ = ranker.rank(rows, desc=f"{method} ({run})")
    return user_parts(files, items, rows, ranker.trie).hit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pairs", nargs=2, metavar="RUN:METHOD", help="the base first")
    args = ap.parse_args()
    from crabrec.methods import get
    from crabrec.runfiles import RunFiles

    (base_run, base), (run, method) = ((Path(p.rsplit(":", 1)[0]), p.rsplit(":", 1)[1]) for p in args.pairs)
    files = RunFiles(run)
    splits, pop = files.load_splits(), files.load_popularity()
    popular = pop.group == pop.n_groups - 1
    changed = None
    if get(method).sids == "rebalanced":
        changed = (files.load_codebook().codes != files.load_codebook(rebalanced=True).codes).any(axis=1)
    print(f"| rows | targets | share | {base} HR@10 | {method} HR@10 | change |\n|---|---|---|---|---|---|")
    by_group = {}
    for name, rows in (("validation", splits.valid), ("test", splits.test)):
        a, b = hits(base_run, base, rows), hits(run, method, rows)
        hot = popular[rows.target]
        subsets = [("all", np.ones(len(a), bool)), ("popular", hot), ("other", ~hot)]
        if changed is not None:
            subsets += [("SID changed", changed[rows.target]), ("SID kept", ~changed[rows.target])]
        for label, keep in subsets:
            x, y = a[keep].mean(), b[keep].mean()
            print(f"| {name} | {label} | {keep.mean():.3f} | {x:.4f} | {y:.4f} | {(y - x) / max(x, 1e-12):+.1%} |")
        by_group[name] = hot.mean(), [(h[hot].mean(), h[~hot].mean()) for h in (a, b)]
    share = by_group["test"][0]
    x, y = (share * hot + (1 - share) * other for hot, other in by_group["validation"][1])
    print(f"| validation at the test's mix | all | {share:.3f} popular | {x:.4f} | {y:.4f} | {(y - x) / x:+.1%} |")


if __name__ == "__main__":
    main()
