"""IFairLRS Reranking (docs/METHOD.md, "Baselines"), adapted to beam search: inference only.

``U_G = Σ_K γ_K GU@K(G)`` on the validation rankings of the base model (``γ_K = K / Σ K'``), ``Û_G = U_G / max|U|``,
``Û_i`` = mean of ``Û`` over the items of candidate ``i``'s SID; the candidates' distances ``D_i = −score_i`` are
rescaled to ``(1 + α Û_i) D_i`` and re-sorted ascending. ``α`` is chosen on validation: the one with the lowest
DGU@10 whose NDCG@10 stays within ``max_ndcg_drop`` (relative) of ``α = 0``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def group_penalty(gu: dict[int, np.ndarray]) -> np.ndarray:
    """``Û_G`` from ``{K: GU@K per group}``."""
    ks = sorted(gu)
    total = float(sum(ks))
    u = sum((k / total) * np.asarray(gu[k], dtype=np.float64) for k in ks)
    scale = float(np.abs(u).max())
    return u / scale if scale > 0 else np.zeros_like(u)


def item_penalty(u_group: np.ndarray, group: np.ndarray, members: list[np.ndarray] | None) -> np.ndarray:
    """``Û_i`` for every ranked stand-in item (a SID shared by several items averages their groups)."""
    pen = u_group[group].astype(np.float64)
    if members is not None:
        for rep, grp in enumerate(members):
            if len(grp) > 1:
                pen[rep] = u_group[group[grp]].mean()
    return pen


def rerank(items: np.ndarray, scores: np.ndarray, penalty: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Re-sort each row's candidates by ``(1 + α Û_i)·(−score_i)`` ascending; empty slots (-1) stay last."""
    if alpha == 0:
        return items, scores
    dist = -scores.astype(np.float64)
    pen = np.where(items >= 0, penalty[np.clip(items, 0, None)], 0.0)
    new = np.where(items >= 0, (1.0 + alpha * pen) * dist, np.inf)
    order = np.argsort(new, axis=1, kind="stable")
    rows = np.arange(len(items))[:, None]
    return items[rows, order], -new[rows, order]


def choose_alpha(curve: list[dict[str, Any]], max_ndcg_drop: float, knob: str = "alpha") -> float:
    """Lowest validation DGU@10 among the α whose NDCG@10 ≥ (1 − drop) × NDCG@10 at α = 0 (ties: the smaller α).
    ``knob``: the curve's key of the setting (PPD picks its τ by the same rule)."""
    base = next(c for c in curve if c[knob] == 0)["NDCG@10"]
    ok = [c for c in curve if c["NDCG@10"] >= (1.0 - max_ndcg_drop) * base]
    return min(ok, key=lambda c: (c["DGU@10"], c[knob]))[knob]
