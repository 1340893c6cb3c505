"""Item popularity ``f_i`` and the equal-size popularity groups (docs/METHOD.md, "Data and popularity")."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crabrec.data.dataset import Samples


@dataclass
class Popularity:
    """``freq[i]`` = training samples whose target is ``i``; ``group[i]`` in 0..G-1 (G-1 most popular)."""

    freq: np.ndarray
    group: np.ndarray
    popular: np.ndarray
    n_groups: int

    def top_share(self, share: float = 0.2) -> float:
        """Share of all interactions that fall on the top ``share`` of items."""
        total = self.freq.sum()
        if total == 0:
            return 0.0
        k = max(1, math.ceil(share * len(self.freq)))
        return float(np.sort(self.freq)[::-1][:k].sum() / total)


def popularity_rank(freq: np.ndarray) -> np.ndarray:
    """Position of each item when sorted ascending by ``(f_i, item index)``."""
    order = np.lexsort((np.arange(len(freq)), freq))
    rank = np.empty(len(freq), dtype=np.int64)
    rank[order] = np.arange(len(freq))
    return rank


def compute_popularity(train: Samples, n_items: int, n_groups: int = 5, popular_share: float = 0.2) -> Popularity:
    """Frequencies from training targets; ``g(i) = min(G-1, floor(rank_i * G / N))``; top-share popular flag."""
    freq = np.bincount(train.target, minlength=n_items).astype(np.int64)
    rank = popularity_rank(freq)
    group = np.minimum(n_groups - 1, (rank * n_groups) // n_items).astype(np.int64)
    popular = rank >= math.ceil((1.0 - popular_share) * n_items)
    return Popularity(freq=freq, group=group, popular=popular, n_groups=n_groups)
