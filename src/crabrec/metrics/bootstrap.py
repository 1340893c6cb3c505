"""Paired bootstrap over test users: confidence intervals for a method's change against a base method.

Every metric of Table 1 is a function of per-user quantities, so a resample of users (with replacement, the same
resample for both methods: *paired*) recomputes it exactly from sums:
HR@K and NDCG@K are means of per-user hits and gains; GP@K(G) is the share of the resampled users' top-K slot mass
in group G, GH(G) the share of their history entries in G, and MGU/DGU follow from GU = GP − GH as in
:mod:`crabrec.metrics.fairness`. docs/METHOD.md, "Confidence intervals".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crabrec.metrics import HEADLINE as METRICS
from crabrec.metrics.ranking import hit_positions, ndcg_gains


@dataclass
class PerUser:
    """Per-test-row parts of the @k metrics: hit (0/1), gain, top-k slot mass per group, history entries per group."""

    hit: np.ndarray  # [n]
    gain: np.ndarray  # [n]
    slots: np.ndarray  # [n, G]
    history: np.ndarray  # [n, G]


def item_group_mass(group: np.ndarray, n_groups: int, members: list[np.ndarray] | None) -> np.ndarray:
    """``[n_items, G]``: how one slot holding item i spreads over groups (a SID of m items gives each 1/m)."""
    n = len(group)
    if members is None:
        return np.eye(n_groups)[group]
    out = np.zeros((n, n_groups))
    for rep, items in enumerate(members):
        np.add.at(out[rep], group[items], 1.0 / len(items))
    return out


def per_user(
    rankings: np.ndarray,
    targets: np.ndarray,
    history: list[np.ndarray],
    group: np.ndarray,
    n_groups: int,
    members: list[np.ndarray] | None = None,
    k: int = 10,
) -> PerUser:
    """Per-row parts of HR@k, NDCG@k and the group shares; ``targets`` are the ranked stand-ins of the targets."""
    pos = hit_positions(rankings[:, :k], targets)
    hit = (pos >= 0).astype(np.float64)
    gain = ndcg_gains(pos, k)
    mass = item_group_mass(group, n_groups, members)
    top = rankings[:, :k]
    slots = np.where((top >= 0)[..., None], mass[np.maximum(top, 0)], 0.0).sum(1)
    hist = np.zeros((len(history), n_groups))
    for row, items in enumerate(history):
        hist[row] = np.bincount(group[items], minlength=n_groups)
    return PerUser(hit, gain, slots, hist)


def _metrics(weights: np.ndarray, u: PerUser) -> dict[str, np.ndarray]:
    """The four metrics under user weights ``[B, n]`` (a row of ones = the full sample)."""
    n = weights.sum(1)
    slots, hist = weights @ u.slots, weights @ u.history
    gu = slots / np.maximum(slots.sum(1, keepdims=True), 1e-300) - hist / np.maximum(hist.sum(1, keepdims=True), 1e-300)
    return {
        "HR@10": weights @ u.hit / n,
        "NDCG@10": weights @ u.gain / n,
        "MGU@10": np.abs(gu).mean(1),
        "DGU@10": gu.max(1) - gu.min(1),
    }


def paired_bootstrap(
    base: PerUser, other: PerUser, samples: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, dict[str, object]]:
    """Change of ``other`` against ``base`` per metric: the full-sample difference, its relative size, and percentile
    intervals of both over ``samples`` paired resamples of the users (seeded by ``seed``)."""
    n = len(base.hit)
    if len(other.hit) != n:
        raise ValueError(f"paired bootstrap needs the same test rows ({n} vs {len(other.hit)})")
    full = np.ones((1, n))
    b0, o0 = _metrics(full, base), _metrics(full, other)
    rng = np.random.default_rng(seed)
    lo_q, hi_q = 100 * (1 - level) / 2, 100 * (1 + level) / 2
    deltas: dict[str, list[np.ndarray]] = {m: [] for m in METRICS}
    rels: dict[str, list[np.ndarray]] = {m: [] for m in METRICS}
    for start in range(0, samples, 200):  # chunks bound the [B, n] weight matrix
        size = min(200, samples - start)
        draws = rng.integers(0, n, size=(size, n))
        weights = np.stack([np.bincount(row, minlength=n) for row in draws]).astype(np.float64)
        b, o = _metrics(weights, base), _metrics(weights, other)
        for m in METRICS:
            deltas[m].append(o[m] - b[m])
            rels[m].append(np.where(b[m] != 0, (o[m] - b[m]) / np.where(b[m] != 0, b[m], 1.0), np.nan))
    out: dict[str, dict[str, object]] = {}
    for m in METRICS:
        d, r = np.concatenate(deltas[m]), np.concatenate(rels[m])
        delta = float(o0[m][0] - b0[m][0])
        base_value = float(b0[m][0])
        out[m] = {
            "base": base_value,
            "value": float(o0[m][0]),
            "delta": delta,
            "rel": delta / base_value if base_value else None,
            "ci": [float(np.percentile(d, lo_q)), float(np.percentile(d, hi_q))],
            "rel_ci": [float(np.nanpercentile(r, lo_q)), float(np.nanpercentile(r, hi_q))] if base_value else None,
        }
    return out
