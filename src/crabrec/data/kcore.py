"""Iterative k-core filtering of user sequences."""

from __future__ import annotations

import numpy as np


def kcore(
    sequences: list[np.ndarray], n_items: int, k: int, timestamps: list[np.ndarray] | None = None
) -> tuple[list[int], list[np.ndarray], list[np.ndarray] | None]:
    """Repeatedly drop users and items with fewer than ``k`` interactions until none is left.

    Returns the indices of the kept users, their filtered sequences and timestamps (item indices unchanged).
    """
    keep_users = list(range(len(sequences)))
    seqs = list(sequences)
    times = list(timestamps) if timestamps is not None else None
    if k <= 1:
        return keep_users, seqs, times
    while True:
        counts = np.bincount(np.concatenate(seqs) if seqs else np.zeros(0, np.int64), minlength=n_items)
        item_ok = counts >= k
        changed = False
        new_users, new_seqs, new_times = [], [], []
        for j, (u, s) in enumerate(zip(keep_users, seqs)):
            mask = item_ok[s]
            if not mask.all():
                changed = True
                s = s[mask]
            if len(s) < k:
                changed = True
                continue
            new_users.append(u)
            new_seqs.append(s)
            if times is not None:
                new_times.append(times[j][mask] if not mask.all() else times[j])
        keep_users, seqs = new_users, new_seqs
        times = new_times if times is not None else None
        if not changed:
            return keep_users, seqs, times
