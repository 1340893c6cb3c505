"""Train/valid/test samples: leave-one-out, global-time sliding windows, or the files' own split."""

from __future__ import annotations

import numpy as np

from crabrec.data.dataset import Dataset, Samples, Splits
from crabrec.errors import CrabError


def resolve_split(dataset: Dataset, split: str) -> str:
    """``auto``: the files' own split if there is one, else global_time with timestamps, else leave_one_out."""
    if split != "auto":
        return split
    if dataset.given is not None:
        return "given"
    return "global_time" if dataset.timestamps is not None else "leave_one_out"


def make_splits(dataset: Dataset, split: str = "auto", max_history: int = 10) -> Splits:
    kind = resolve_split(dataset, split)
    if kind == "given":
        if dataset.given is None:
            raise CrabError(f"{dataset.source}: split 'given' needs a dataset with its own split (minionerec layout)")
        parts = {name: Samples.from_rows(*dataset.given[name], max_history) for name in ("train", "valid", "test")}
        return Splits(kind=kind, **parts)
    if dataset.given is not None:
        raise CrabError(f"{dataset.source}: this layout ships its own split; use data.split=given (or auto)")
    if kind == "leave_one_out":
        return Splits(kind=kind, **_leave_one_out(dataset, max_history))
    if kind == "global_time":
        if dataset.timestamps is None:
            raise CrabError(
                f"{dataset.source}: split 'global_time' needs timestamps and this dataset has none; "
                "use data.split=leave_one_out"
            )
        return Splits(kind=kind, **_global_time(dataset, max_history))
    raise CrabError(f"unknown split {kind!r}")


def _leave_one_out(dataset: Dataset, h: int) -> dict[str, Samples]:
    """Last item -> test, second-last -> valid, every earlier position (with a non-empty history) -> train."""
    rows: dict[str, tuple[list[int], list[list[int]], list[int]]] = {
        k: ([], [], []) for k in ("train", "valid", "test")
    }
    for u, seq in enumerate(dataset.sequences):
        s = seq.tolist()
        n = len(s)
        for i in range(1, n):
            name = "test" if i == n - 1 else "valid" if i == n - 2 else "train"
            users, hists, targets = rows[name]
            users.append(u)
            hists.append(s[max(0, i - h) : i])
            targets.append(s[i])
    return {k: Samples.from_rows(*v, max_history=h) for k, v in rows.items()}


def _global_time(dataset: Dataset, h: int) -> dict[str, Samples]:
    """MiniOneRec: all sliding windows sorted by target time (stable), then 8:1:1 by row."""
    users, hists, targets, times = [], [], [], []
    assert dataset.timestamps is not None
    for u, (seq, ts) in enumerate(zip(dataset.sequences, dataset.timestamps)):
        s = seq.tolist()
        for i in range(1, len(s)):
            users.append(u)
            hists.append(s[max(0, i - h) : i])
            targets.append(s[i])
            times.append(float(ts[i]))
    allrows = Samples.from_rows(users, hists, targets, max_history=h)
    order = np.argsort(np.asarray(times), kind="stable")
    n = len(order)
    a, b = int(0.8 * n), int(0.9 * n)
    return {"train": allrows.take(order[:a]), "valid": allrows.take(order[a:b]), "test": allrows.take(order[b:])}
