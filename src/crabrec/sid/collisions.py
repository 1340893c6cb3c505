"""Full-SID collisions and the TIGER/GRID-style extra dedup level."""

from __future__ import annotations

import numpy as np


def collision_count(codes: np.ndarray) -> int:
    """Items beyond the first that share a full SID with another item."""
    return int(len(codes) - len(np.unique(codes, axis=0)))


def dedup_level(codes: np.ndarray) -> np.ndarray:
    """Ordinal of each item inside its group of identical SIDs (0 for unique SIDs; item order breaks ties)."""
    _, inverse = np.unique(codes, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    ordinal = np.empty(len(codes), dtype=np.int64)
    sorted_groups = inverse[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_groups)) + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    ordinal[order] = np.arange(len(order)) - group_start
    return ordinal
