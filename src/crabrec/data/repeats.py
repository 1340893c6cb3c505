"""Repeated interactions: a user meeting an item again (a replay, a purchase made twice, a page viewed again).

``data.repeats`` chooses what a run keeps: ``keep`` (every interaction), ``collapse`` (an item met again right after
itself counts once, so a track played five times in a row is one step of the history) or ``first`` (each user's
first interaction with each item only, the preparation TIGER and SASRec use for Amazon reviews).
"""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np

from crabrec.data.dataset import Dataset, Samples
from crabrec.errors import CrabError

log = logging.getLogger("crabrec")


def _flat(sequences: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All sequences concatenated, and each entry's user (its sequence's index)."""
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    items = np.concatenate(sequences).astype(np.int64) if len(sequences) else np.zeros(0, np.int64)
    return items, np.repeat(np.arange(len(sequences), dtype=np.int64), lengths)


def seen_before(sequences: list[np.ndarray]) -> np.ndarray:
    """Per interaction (all sequences concatenated): True when its item is among the user's earlier ones."""
    items, user = _flat(sequences)
    key = user * (int(items.max()) + 1 if len(items) else 1) + items
    first = np.zeros(len(items), dtype=bool)
    first[np.unique(key, return_index=True)[1]] = True  # the index of each key's first occurrence
    return ~first


def back_to_back(sequences: list[np.ndarray]) -> np.ndarray:
    """Per interaction (all sequences concatenated): True when it repeats the user's interaction just before it."""
    items, user = _flat(sequences)
    out = np.zeros(len(items), dtype=bool)
    out[1:] = (items[1:] == items[:-1]) & (user[1:] == user[:-1])
    return out


def drop_repeats(ds: Dataset, how: str) -> Dataset:
    """``ds`` with the repeats ``how`` names left out (``collapse``: back to back; ``first``: every one), and a note
    counting them. Each user keeps at least its first interaction, so no user is lost here."""
    if how == "keep":
        return ds
    if ds.given is not None:
        raise CrabError(
            f"{ds.source}: data.repeats={how}: this layout ships its own split, whose samples crabrec keeps as "
            "given; remove data.repeats"
        )
    drop = seen_before(ds.sequences) if how == "first" else back_to_back(ds.sequences)
    n = int(drop.sum())
    if n == 0:
        return ds
    bounds = np.cumsum([len(s) for s in ds.sequences])[:-1]
    keep = np.split(~drop, bounds)
    note = f"{n:,} repeated interaction{'s' * (n != 1)} left out ({n / len(drop):.1%}; data.repeats={how}: " + (
        "an item met again right after itself counts once)" if how == "collapse" else "each item once per user)"
    )
    log.info("%s: %s", ds.source, note)
    return replace(
        ds,
        sequences=[s[k] for s, k in zip(ds.sequences, keep)],
        timestamps=None if ds.timestamps is None else [t[k] for t, k in zip(ds.timestamps, keep)],
        notes=[*ds.notes, note],
    )


def repeat_stats(ds: Dataset, test: Samples, how: str) -> dict[str, float | int | str]:
    """How much the data repeats itself (after ``data.repeats=how``): interactions whose item the user met before,
    those right after the same item, and the share of test targets among their row's history items (a model can
    score them; a recommendation that leaves seen items out cannot return them)."""
    mask = np.arange(test.history.shape[1])[None, :] < test.length[:, None]
    in_history = ((test.history == test.target[:, None]) & mask).any(axis=1)
    return {
        "setting": how,
        "window": int(test.history.shape[1]),
        "repeated": int(seen_before(ds.sequences).sum()),
        "back_to_back": int(back_to_back(ds.sequences).sum()),
        "test_targets_in_history": round(float(in_history.mean()), 4) if len(test) else 0.0,
    }


def describe_repeats(r: dict[str, float | int | str], interactions: int) -> list[tuple[str, str]]:
    """``(label, text)`` lines on the repeats, none when there are none."""
    if not r.get("repeated"):
        return []
    further = {
        "keep": "data.repeats=collapse or first leaves them out",
        "collapse": "data.repeats=first leaves them all out",
    }.get(str(r["setting"]))
    return [
        (
            "repeats",
            f"{r['repeated']:,} interactions ({int(r['repeated']) / interactions:.1%}) meet an item their user "
            f"met before, {r['back_to_back']:,} right after itself" + (f"; {further}" if further else ""),
        ),
        (
            "test in history",
            f"{float(r['test_targets_in_history']):.1%} of test targets are among the {r['window']} items "
            "before them (hits for a model; recommend leaves seen items out by default)",
        ),
    ]
