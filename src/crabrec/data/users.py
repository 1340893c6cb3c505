"""Each user's id in the dataset and whole known sequence, kept by the ``data`` stage (``data/users.npz``), so that
a trained run recommends for a user by the id the data gave them (``crabrec recommend RUN --user-id ID``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crabrec.data.dataset import Dataset
from crabrec.data.ids import Spellings
from crabrec.errors import CrabError, clip
from crabrec.io import load_npz, write_npz


@dataclass
class UserHistories:
    """By user index (the ``user`` of the run's samples): the user's id and item indices, oldest first, every
    interaction the filtered dataset holds (train, validation and test)."""

    ids: list[str]
    offsets: np.ndarray  # [users + 1]: user u's items are items[offsets[u]:offsets[u + 1]]
    items: np.ndarray
    index: dict[str, int] = field(init=False, repr=False)
    spellings: Spellings = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = {u: i for i, u in enumerate(self.ids)}
        self.spellings = Spellings(self.ids)

    @classmethod
    def from_dataset(cls, ds: Dataset) -> UserHistories:
        lengths = np.fromiter((len(s) for s in ds.sequences), dtype=np.int64, count=len(ds.sequences))
        items = np.concatenate(ds.sequences).astype(np.int64) if len(lengths) else np.zeros(0, np.int64)
        return cls([str(u) for u in ds.users], np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), items)

    def save(self, path: str | Path) -> None:
        write_npz(path, ids=np.asarray(self.ids, dtype=str), offsets=self.offsets, items=self.items)

    @classmethod
    def load(cls, path: str | Path, n_items: int) -> UserHistories:
        """The users of ``path``, checked against a catalogue of ``n_items`` items."""
        a = load_npz(path)
        ids, offsets, items = a.get("ids"), a.get("offsets"), a.get("items")
        ok = ids is not None and offsets is not None and items is not None and ids.ndim == offsets.ndim == 1
        ok = ok and len(offsets) == len(ids) + 1 and offsets[0] == 0 and offsets[-1] == len(items)
        ok = (
            ok
            and bool(np.all(np.diff(offsets) >= 0))
            and (len(items) == 0 or 0 <= items.min() <= items.max() < n_items)
        )
        if not ok:
            raise CrabError(f"{path}: expected arrays ids, offsets and items of one catalogue; re-run `data` (--force)")
        return cls([str(u) for u in ids.tolist()], offsets.astype(np.int64), items.astype(np.int64))

    def __len__(self) -> int:
        return len(self.ids)

    def user(self, user_id: object, where: str = "user_id") -> int:
        """The index of the user the data called ``user_id`` (an integer is read as its decimal string)."""
        if isinstance(user_id, bool) or not isinstance(user_id, str | int | np.integer):
            raise CrabError(f"{where}: expected a user id (a string), got {clip(repr(user_id), 40)}")
        found = self.index.get(str(user_id))
        if found is None:
            meant = self.spellings.meant(str(user_id))
            example = f", e.g. {clip(self.ids[0], 40)!r}" if self.ids else ""
            hint = f"; the data writes it {clip(meant, 40)!r}" if meant is not None else ""
            raise CrabError(
                f"{where} {clip(repr(str(user_id)), 40)}: not a user of this run ({len(self.ids)} users, ids as in "
                f"the data{example}){hint}"
            )
        return found

    def sequence(self, index: int) -> list[int]:
        """Item indices of user ``index``, oldest first."""
        return self.items[self.offsets[index] : self.offsets[index + 1]].tolist()
