"""Train/valid/test samples: leave-one-out, global-time sliding windows, or the files' own split."""

from __future__ import annotations

import numpy as np

from crabrec.data.dataset import HISTORY, PAD, Dataset, Samples, Splits
from crabrec.errors import CrabError


def resolve_split(dataset: Dataset, split: str) -> str:
    """``auto``: the files' own split if there is one, else the recipe's (raw Amazon data), else global_time with
    timestamps, else leave_one_out."""
    return split_reason(dataset, split)[0]


def split_reason(dataset: Dataset, split: str) -> tuple[str, str]:
    """``(split, why)``: the split :func:`resolve_split` picks and the reason, in words a log line can show."""
    if split != "auto":
        return split, "data.split"
    if dataset.given is not None:
        return "given", "the files ship their own split"
    if dataset.split_hint is not None:
        return dataset.split_hint, "the preparation recipe's split (data.recipe)"
    if dataset.timestamps is not None:
        return "global_time", "the data has timestamps; --set data.split=leave_one_out for per-user leave-one-out"
    return "leave_one_out", "the data has no timestamps: each user's last item is the test target"


def make_splits(dataset: Dataset, split: str = "auto", max_history: int = 10) -> Splits:
    """Cut ``dataset`` into train/valid/test (history -> next item) samples with histories of at most
    ``max_history`` items. ``split``: ``leave_one_out`` (each user's last item is test, the one before valid),
    ``global_time`` (two timestamp cut-offs), ``given`` (the layout's own split) or ``auto`` (see
    :func:`resolve_split`)."""
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


def _positions(dataset: Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (user, position ≥ 1) of the sequences, flattened: ``(flat items, row user, row position in the flat
    array, row's sequence start)``, users in order and positions ascending."""
    lengths = np.fromiter((len(s) for s in dataset.sequences), dtype=np.int64, count=len(dataset.sequences))
    flat = np.concatenate(dataset.sequences).astype(np.int64, copy=False) if len(lengths) else np.zeros(0, np.int64)
    index = np.int32 if len(flat) < 2**31 - 1 else np.int64  # positions: half the memory on large data
    starts = (np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(lengths) else np.zeros(0)).astype(index)
    user = np.repeat(np.arange(len(lengths), dtype=index), np.maximum(lengths - 1, 0))
    first = np.zeros(len(flat), dtype=bool)
    first[starts[lengths > 0]] = True
    pos = np.flatnonzero(~first).astype(index)  # every position but each sequence's first
    return flat, user, pos, starts[user]


def _rows(flat: np.ndarray, user: np.ndarray, pos: np.ndarray, start: np.ndarray, h: int) -> Samples:
    """Samples whose target is ``flat[pos]`` and history the (at most ``h``) items before it in its sequence;
    built in chunks so the index temporaries stay small."""
    n = len(pos)
    wide = len(flat) and int(flat.max()) > np.iinfo(HISTORY).max  # (a catalogue of more than 2**31 items)
    history = np.full((n, h), PAD, dtype=np.int64 if wide else HISTORY)
    length = np.minimum(pos - start, h).astype(np.int64)
    cols = np.arange(h)
    for a in range(0, n, 1 << 18):
        b = min(a + (1 << 18), n)
        first = pos[a:b].astype(np.int64) - length[a:b]
        idx = first[:, None] + cols[None, :]
        ok = cols[None, :] < length[a:b, None]
        history[a:b] = np.where(ok, flat[np.minimum(idx, len(flat) - 1)], PAD)
    return Samples(user=user.astype(np.int64), history=history, length=length, target=flat[pos])


def _leave_one_out(dataset: Dataset, h: int) -> dict[str, Samples]:
    """Last item -> test, second-last -> valid, every earlier position (with a non-empty history) -> train."""
    flat, user, pos, start = _positions(dataset)
    ends = np.cumsum([len(s) for s in dataset.sequences], dtype=np.int64)
    back = ends[user] - pos  # 1 = the last item, 2 = the second last
    parts = {"test": back == 1, "valid": back == 2, "train": back > 2}
    return {k: _rows(flat, user[m], pos[m], start[m], h) for k, m in parts.items()}


def _global_time(dataset: Dataset, h: int) -> dict[str, Samples]:
    """MiniOneRec: all sliding windows sorted by target time (stable), then 8:1:1 by row."""
    assert dataset.timestamps is not None
    flat, user, pos, start = _positions(dataset)
    times = np.concatenate(dataset.timestamps).astype(np.float64, copy=False) if len(flat) else np.zeros(0)
    order = np.argsort(times[pos], kind="stable")
    del times
    n = len(order)
    a, b = int(0.8 * n), int(0.9 * n)
    cut = {"train": order[:a], "valid": order[a:b], "test": order[b:]}
    return {k: _rows(flat, user[o], pos[o], start[o], h) for k, o in cut.items()}
