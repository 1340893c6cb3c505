"""HR@K and NDCG@K with a single relevant item (IDCG = 1), as MiniOneRec's calc.py."""

from __future__ import annotations

import numpy as np

DEFAULT_KS = (1, 3, 5, 10, 20)


def hit_positions(rankings: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """0-based position of the first slot equal to the target, or -1 (``rankings`` is ``[N, K]``, -1 = empty)."""
    hits = rankings == targets[:, None]
    return np.where(hits.any(1), hits.argmax(1), -1)


def ndcg_gains(pos: np.ndarray, k: int) -> np.ndarray:
    """Each row's NDCG@k part ``1[0 <= pos < k] / log2(pos + 2)`` from :func:`hit_positions`."""
    return np.where((pos >= 0) & (pos < k), 1.0 / np.log2(np.maximum(pos, 0) + 2.0), 0.0)


def ranking_metrics(rankings: np.ndarray, targets: np.ndarray, ks: tuple[int, ...] = DEFAULT_KS) -> dict[str, float]:
    """``HR@K = mean[pos < K]``, ``NDCG@K = mean[1[pos < K] / log2(pos + 2)]``."""
    pos = hit_positions(rankings, targets)
    out: dict[str, float] = {}
    for k in ks:
        out[f"HR@{k}"] = float(((pos >= 0) & (pos < k)).mean()) if len(pos) else 0.0
        out[f"NDCG@{k}"] = float(ndcg_gains(pos, k).mean()) if len(pos) else 0.0
    return out


def group_hit_rate(rankings: np.ndarray, targets: np.ndarray, rows: np.ndarray, k: int) -> float:
    """HR@K over the rows selected by the boolean mask ``rows`` (0 when none is selected)."""
    pos = hit_positions(rankings[rows], targets[rows])
    return float(((pos >= 0) & (pos < k)).mean()) if len(pos) else 0.0
