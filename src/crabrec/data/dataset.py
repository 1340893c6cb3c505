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

    ``seen`` (``[N, S]``, ``PAD``-padded, or None): items a ranker must not return for the row (a user's whole
    history when recommending with exclude-seen; None in evaluation, which follows the paper's protocol)."""

    user: np.ndarray
    history: np.ndarray
    length: np.ndarray
    target: np.ndarray
    seen: np.ndarray | None = None

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
            seen=None if seen is None else padded(seen),
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


def padded(rows: list[list[int]]) -> np.ndarray:
    """Lists of item indices as one ``[N, max length]`` array, ``PAD``-padded (at least one column)."""
    out = np.full((len(rows), max([1, *map(len, rows)])), PAD, dtype=np.int64)
    for r, row in enumerate(rows):
        out[r, : len(row)] = row
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
