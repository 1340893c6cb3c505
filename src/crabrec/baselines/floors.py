"""The floors every number in Table 1 is read against: the most popular items, and items drawn at random.

Neither is trained. Both rank item ids (no SIDs), over the whole catalogue, and leave out a row's ``seen`` items
when asked (:class:`~crabrec.data.dataset.Samples`), as the other rankers do.
"""

from __future__ import annotations

import hashlib

import numpy as np

from crabrec.data.dataset import Samples


class MostPopularRanker:
    """Every row gets the catalogue's items by training frequency (ties: lower item index first); the score is the
    item's number of training interactions."""

    trie = None
    block = 4096

    def __init__(self, freq: np.ndarray, width: int) -> None:
        self.freq = np.asarray(freq, dtype=np.float64)
        self.by_frequency = np.lexsort((np.arange(len(self.freq)), -self.freq))
        self.width = min(width, len(self.freq))
        self._order(self.by_frequency)

    def _order(self, order: np.ndarray) -> None:
        """Rank ``order`` (the items that may be recommended, most frequent first)."""
        self.order = order
        self.place = np.full(len(self.freq) + 1, len(order), dtype=np.int64)  # an item's place in it; the last: PAD's
        self.place[order] = np.arange(len(order))

    def set_unavailable(self, items: np.ndarray) -> bool:
        self._order(self.by_frequency[~np.isin(self.by_frequency, items)])
        return True

    def rank(self, rows: Samples, desc: str = "ranking", progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
        items = np.full((len(rows), self.width), -1, dtype=np.int64)
        if rows.seen is None:
            items[:, : min(self.width, len(self.order))] = self.order[: self.width]
        else:
            for a in range(0, len(rows), self.block):
                self._fill(items[a : a + self.block], rows.seen[a : a + self.block])
        scores = np.where(items >= 0, self.freq[np.maximum(items, 0)], -np.inf).astype(np.float32)
        return items, scores

    def _fill(self, items: np.ndarray, seen: np.ndarray) -> None:
        """Each row of ``items``: the order without the row's ``seen`` items (padded with PAD, -1, which ``place``
        puts past every item), by array operations over the block, not a pass over the catalogue per row."""
        head = self.order[: self.width + seen.shape[1]]  # a row's list lies in these: it leaves out at most S
        taken = np.zeros((len(seen), len(head) + 1), dtype=bool)
        taken[np.arange(len(seen))[:, None], np.minimum(self.place[seen], len(head))] = True
        keep = ~taken[:, :-1]
        slot = np.cumsum(keep, axis=1) - 1  # each kept item's place in its row's list
        r, c = np.nonzero(keep & (slot < self.width))
        items[r, slot[r, c]] = head[c]


class RandomRanker:
    """Every row gets ``width`` distinct items drawn uniformly; a row's draw depends only on the seed and the row's
    history, so it is the same whatever batch the row is ranked in. Scores are 0."""

    trie = None
    block = 4096

    def __init__(self, n_items: int, width: int, seed: int) -> None:
        self.n_items, self.width, self.seed = n_items, min(width, n_items), seed
        self.pool = np.arange(n_items)

    def set_unavailable(self, items: np.ndarray) -> bool:
        self.pool = np.setdiff1d(np.arange(self.n_items), items)
        return True

    def rank(self, rows: Samples, desc: str = "ranking", progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
        items = np.full((len(rows), self.width), -1, dtype=np.int64)
        for r in range(len(rows)):
            history = rows.history[r, : rows.length[r]]
            digest = hashlib.sha256(np.ascontiguousarray(history, dtype=np.int64).tobytes()).digest()
            rng = np.random.default_rng([self.seed, int.from_bytes(digest[:8], "little")])
            pool = self.pool
            if rows.seen is not None:
                pool = pool[~np.isin(pool, rows.seen[r])]
            got = rng.permutation(pool)[: self.width]
            items[r, : len(got)] = got
        scores = np.where(items >= 0, 0.0, -np.inf).astype(np.float32)
        return items, scores
