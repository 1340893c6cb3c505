"""In-memory containers: a catalogue with chronological user sequences, and (history -> target) samples."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crabrec.io import load_npz, write_npz

PAD = -1
HISTORY = np.int32  # a history's item indices: half the memory of int64 (the histories are most of the data's)


@dataclass
class Samples:
    """(history -> target) rows; ``history`` is ``[N, H]`` item indices (32-bit), oldest first, ``PAD``-padded at
    the end.

    ``seen`` (``[N, S]``, ``PAD``-padded, or a :class:`Ragged` read as one, or None): items a ranker must not
    return for the row (a user's whole history when recommending with exclude-seen; None in evaluation, which
    follows the paper's protocol)."""

    user: np.ndarray
    history: np.ndarray
    length: np.ndarray
    target: np.ndarray
    seen: np.ndarray | Ragged | None = None

    def __len__(self) -> int:
        return int(self.target.shape[0])

    @classmethod
    def from_rows(
        cls,
        users: list[int],
        histories: list[list[int]],
        targets: list[int],
        max_history: int,
        seen: list[list[int]] | None = None,
    ) -> Samples:
        n = len(targets)
        hist = np.full((n, max_history), PAD, dtype=HISTORY)
        length = np.zeros(n, dtype=np.int64)
        for r, h in enumerate(histories):
            h = h[-max_history:]
            hist[r, : len(h)] = h
            length[r] = len(h)
        return cls(
            user=np.asarray(users, dtype=np.int64).reshape(n),
            history=hist,
            length=length,
            target=np.asarray(targets, dtype=np.int64).reshape(n),
            seen=None if seen is None else Ragged(seen),
        )

    def take(self, index: np.ndarray) -> Samples:
        seen = None if self.seen is None else self.seen[index]
        return Samples(self.user[index], self.history[index], self.length[index], self.target[index], seen)

    def history_items(self) -> np.ndarray:
        """All history entries of all rows, flattened (repeats across rows count)."""
        mask = np.arange(self.history.shape[1])[None, :] < self.length[:, None]
        return self.history[mask]

    def rows(self) -> list[list[int]]:
        return [self.history[r, : self.length[r]].tolist() for r in range(len(self))]


class Ragged:
    """Rows of item indices of different lengths (each user's whole history), kept flat, read as a ``PAD``-padded
    array one batch at a time: ``x[r]`` is row ``r``'s items, ``x[rows]`` (indices, a slice or a mask) the rows'
    items padded to the longest of them (at least one column). Held padded to the longest row of all, a few users of
    thousands of items among many of ten would cost a row of thousands for every user."""

    def __init__(self, rows: list[list[int]] | list[np.ndarray]) -> None:
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        flat = [np.asarray(r, dtype=np.int64).reshape(-1) for r in rows]
        self.flat = np.concatenate(flat) if flat else np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __iter__(self):
        return (self[r] for r in range(len(self)))

    def __getitem__(self, index) -> np.ndarray:
        if isinstance(index, int | np.integer):
            r = range(len(self))[index]
            return self.flat[self.offsets[r] : self.offsets[r + 1]]
        if isinstance(index, slice):
            rows = np.arange(*index.indices(len(self)))
        else:  # row numbers or a mask, read without an array of every row number (a batch of a million rows)
            rows = np.asarray(index)
            rows = np.flatnonzero(rows) if rows.dtype == bool else np.where(rows < 0, rows + len(self), rows)
        start, length = self.offsets[rows], self.offsets[rows + 1] - self.offsets[rows]
        width = max(1, int(length.max()) if len(rows) else 1)
        cols = np.arange(width)
        inside = cols[None, :] < length[:, None]
        out = np.full((len(rows), width), PAD, dtype=np.int64)
        out[inside] = self.flat[(start[:, None] + cols[None, :])[inside]]
        return out


@dataclass
class Splits:
    """The train, validation and test samples of a dataset, and the split that made them (``kind``)."""

    train: Samples
    valid: Samples
    test: Samples
    kind: str

    def save(self, path: str | Path) -> None:
        arrays: dict[str, np.ndarray] = {}
        for name in ("train", "valid", "test"):
            s: Samples = getattr(self, name)
            for key in ("user", "history", "length", "target"):
                arrays[f"{name}_{key}"] = getattr(s, key)
        arrays["kind"] = np.array(self.kind)
        write_npz(path, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> Splits:
        a = load_npz(path)
        parts = {
            name: Samples(*(a[f"{name}_{k}"] for k in ("user", "history", "length", "target")))
            for name in ("train", "valid", "test")
        }
        return cls(kind=str(a["kind"]), **parts)


@dataclass
class Dataset:
    """A catalogue (item index -> raw id and text) and chronological user sequences of item indices."""

    name: str
    source: str
    item_ids: list[str]
    item_text: list[dict[str, str]]
    users: list[str]
    sequences: list[np.ndarray]
    timestamps: list[np.ndarray] | None = None
    given: dict[str, tuple[list[int], list[list[int]], list[int]]] | None = None
    notes: list[str] = field(default_factory=list)
    has_text: bool = True  # False: an ids-only catalogue (no item text to embed)
    split_hint: str | None = None  # the split its preparation recipe prescribes (data.split=auto uses it)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def n_users(self) -> int:
        return len(self.users)

    @property
    def n_interactions(self) -> int:
        return int(sum(len(s) for s in self.sequences))
