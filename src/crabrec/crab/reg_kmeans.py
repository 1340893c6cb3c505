"""Balance-regularized K-means over weighted units (CRAB Eq. kmeans; docs/METHOD.md, "CRAB stage 1").

Scale-free objective over assignments ``z`` (centres are the exact n-weighted means):

    F(z) = SSE(z) / SSE_0  +  λ · Σ_m (P_m / P − 1/M)²

with ``SSE(z) = Σ_j n_j ‖r̄_j − μ_{z_j}‖²``, ``SSE_0`` the one-cluster scatter, ``P_m`` the popularity of cluster m.
Solved exactly by enumeration when ``M^J`` is small, else by Lloyd-style alternation (centre step, then exact
coordinate-descent assignment) from several seeded starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Units:
    """``J`` units to cluster: mean residual ``r [J, d]``, size ``n [J]``, popularity ``p [J]``."""

    r: np.ndarray
    n: np.ndarray
    p: np.ndarray

    def __post_init__(self) -> None:
        self.r = np.asarray(self.r, np.float64)
        self.n = np.asarray(self.n, np.float64)
        self.p = np.asarray(self.p, np.float64)
        mean = (self.n[:, None] * self.r).sum(0) / self.n.sum()
        self.sse0 = float((self.n * ((self.r - mean) ** 2).sum(1)).sum())
        self.total_p = float(self.p.sum())


def objective(units: Units, z: np.ndarray, m: int, lam: float) -> float:
    """``F(z)`` for one assignment (empty clusters are not allowed by the callers)."""
    sse = 0.0
    balance = 0.0
    for c in range(m):
        idx = z == c
        w = units.n[idx]
        if w.sum() > 0:
            mu = (w[:, None] * units.r[idx]).sum(0) / w.sum()
            sse += float((w * ((units.r[idx] - mu) ** 2).sum(1)).sum())
        if units.total_p > 0:
            balance += (units.p[idx].sum() / units.total_p - 1.0 / m) ** 2
    first = sse / units.sse0 if units.sse0 > 1e-12 else 0.0
    return first + lam * balance


def enumerate_best(units: Units, m: int, lam: float, chunk: int = 50_000) -> np.ndarray:
    """Exact minimiser over all assignments with no empty cluster (first of the ties in lexicographic order). Label
    permutations of one partition tie, and the first of them in that order is the one whose labels appear in order,
    so only those are scored (about M! times fewer).

    Uses ``SSE = Σ n‖r‖² − Σ_m ‖S_m‖²/N_m`` with ``‖S_m‖² = x_mᵀ G x_m`` (``G`` the n-weighted Gram matrix).
    """
    j = len(units.n)
    wr = units.n[:, None] * units.r
    gram = wr @ wr.T
    const = float((units.n * (units.r**2).sum(1)).sum())
    best_val, best = np.inf, None
    total = m ** (j - 1)  # the first unit in cluster 0: every partition keeps its lexicographically first labelling
    powers = m ** np.arange(j - 1, -1, -1, dtype=np.int64)
    levels = np.arange(m)[None, :, None]
    for start in range(0, total, chunk):
        codes = np.arange(start, min(start + chunk, total), dtype=np.int64)
        block = (codes[:, None] // powers[None, :]) % m  # lexicographic order, like itertools.product
        seen = np.maximum.accumulate(block, axis=1)  # first labellings only: each new label is the next unused one
        block = block[(block[:, 1:] <= seen[:, :-1] + 1).all(1) & (seen[:, -1] == m - 1)]  # ... and none is empty
        if not len(block):
            continue
        member = (block[:, None, :] == levels).astype(np.float64)  # [A, M, J]: x_m of every assignment
        counts = member @ units.n
        quad = ((member.reshape(-1, j) @ gram).reshape(member.shape) * member).sum(2)  # x_mᵀ G x_m (BLAS)
        sse = const - (quad / np.maximum(counts, 1e-300)).sum(1)
        first = sse / units.sse0 if units.sse0 > 1e-12 else np.zeros(len(block))
        share = member @ units.p / units.total_p if units.total_p > 0 else np.full((len(block), m), 1.0 / m)
        val = first + lam * ((share - 1.0 / m) ** 2).sum(1)
        i = int(np.argmin(val))
        if val[i] < best_val - 1e-12:
            best_val, best = float(val[i]), block[i].copy()
    assert best is not None
    return best


def lpt_init(units: Units, m: int) -> np.ndarray:
    """Longest-processing-time greedy on p: biggest unit first into the currently lightest cluster."""
    z = np.empty(len(units.p), dtype=np.int64)
    load = np.zeros(m)
    for j in np.lexsort((np.arange(len(units.p)), -units.p)):
        c = int(np.argmin(load))
        z[j] = c
        load[c] += units.p[j]
    return _fill_empty(z, m)


def kmeanspp_init(units: Units, m: int, rng: np.random.Generator) -> np.ndarray:
    """n-weighted k-means++ seeding on r̄, then nearest-centre assignment."""
    j = len(units.n)
    centres = [int(rng.choice(j, p=units.n / units.n.sum()))]
    for _ in range(1, m):
        d = ((units.r[:, None, :] - units.r[centres][None]) ** 2).sum(-1).min(1) * units.n
        if d.sum() <= 0:
            rest = [k for k in range(j) if k not in centres]
            centres.append(int(rng.choice(rest)))
        else:
            centres.append(int(rng.choice(j, p=d / d.sum())))
    d = ((units.r[:, None, :] - units.r[centres][None]) ** 2).sum(-1)
    z = d.argmin(1)
    z[centres] = np.arange(m)
    return _fill_empty(z, m)


def _fill_empty(z: np.ndarray, m: int) -> np.ndarray:
    z = z.copy()
    for c in range(m):
        if not (z == c).any():
            sizes = np.bincount(z, minlength=m)
            donor = int(np.argmax(sizes))
            z[np.flatnonzero(z == donor)[-1]] = c
    return z


def lloyd(units: Units, z: np.ndarray, m: int, lam: float, rng: np.random.Generator, max_iter: int = 100) -> np.ndarray:
    """Alternate exact centre means and coordinate-descent reassignment; F never increases. Each sweep visits the
    units in a random order, one at a time as :func:`lloyd_reference` does, and finds the next one that moves with
    array operations over the units after it (the cluster loads change only when one moves): the same assignment,
    bit for bit, without a Python step per unit in the sweeps where few units move."""
    z = z.copy()
    for dist, load, sizes, norm, pbar in _iterations(units, z, m, lam, max_iter):
        order = rng.permutation(len(z))
        changed, at, width = False, 0, 16
        while at < len(order):
            part = order[at : at + width]
            cur, pj = z[part], units.p[part]
            without = np.repeat(load[None], len(part), axis=0)
            without[np.arange(len(part)), cur] -= pj  # each unit's cluster without it
            delta = dist[part] + norm * (pj[:, None] * (2.0 * (without - pbar) + pj[:, None]))
            best = delta.argmin(1)
            rows = np.arange(len(part))
            moves = np.flatnonzero((sizes[cur] > 1) & (delta[rows, best] < delta[rows, cur] - 1e-12))
            if not len(moves):  # none of these moves: look further ahead at once
                at, width = at + len(part), min(2 * width, 4096)
                continue
            k = int(moves[0])
            old, new = int(cur[k]), int(best[k])
            z[part[k]] = new
            load[old], load[new] = without[k, old], without[k, new] + pj[k]
            sizes[old] -= 1
            sizes[new] += 1
            changed, at, width = True, at + k + 1, max(16, width // 2)
        if not changed:
            break
    return z


def lloyd_reference(
    units: Units, z: np.ndarray, m: int, lam: float, rng: np.random.Generator, max_iter: int = 100
) -> np.ndarray:
    """:func:`lloyd` with a Python step per unit of each sweep (the reference it is checked equal to)."""
    z = z.copy()
    p = units.p.tolist()
    for dist, load, sizes, norm, pbar in _iterations(units, z, m, lam, max_iter):
        dist, load, sizes = dist.tolist(), load.tolist(), sizes.tolist()
        changed = False
        for j in rng.permutation(len(z)).tolist():
            cur = int(z[j])
            if sizes[cur] == 1:
                continue
            pj = p[j]
            without = [load[c] - pj if c == cur else load[c] for c in range(m)]
            delta = [dist[j][c] + norm * (pj * (2.0 * (without[c] - pbar) + pj)) for c in range(m)]
            best = min(range(m), key=delta.__getitem__)
            if delta[best] < delta[cur] - 1e-12:
                z[j] = best
                load = without
                load[best] += pj
                sizes[cur] -= 1
                sizes[best] += 1
                changed = True
        if not changed:
            break
    return z


def _iterations(units: Units, z: np.ndarray, m: int, lam: float, max_iter: int):
    """Per Lloyd iteration over ``z`` (changed in place between them): each unit's scaled distance to every centre
    (the centres stay fixed during the sweep, so the distance part of every move is known up front), the clusters'
    loads and sizes, and the balance term's weight and target load. A move of ``p_j`` from a cluster of load ``w +
    p_j`` to one of load ``w'`` changes the balance term by ``norm·p_j·(2(w' − p̄) + p_j) − norm·p_j·(2(w − p̄) +
    p_j)``, the difference of squares ``(w + p_j − p̄)² − (w − p̄)²`` factored."""
    scale = 1.0 / units.sse0 if units.sse0 > 1e-12 else 0.0
    pbar = units.total_p / m
    norm = lam / units.total_p**2 if units.total_p > 0 else 0.0
    weighted = units.n[:, None] * units.r
    for _ in range(max_iter):
        onehot = np.zeros((len(z), m))
        onehot[np.arange(len(z)), z] = 1.0
        counts = onehot.T @ units.n
        mu = (onehot.T @ weighted) / np.maximum(counts, 1e-300)[:, None]
        squared = np.empty((len(z), m))
        for c in range(m):  # a centre at a time: no [J, M, d] array (the same sums as one over it)
            diff = units.r - mu[c]
            squared[:, c] = np.square(diff, out=diff).sum(-1)
        yield units.n[:, None] * squared * scale, onehot.T @ units.p, np.bincount(z, minlength=m), norm, pbar


def reg_kmeans(
    units: Units,
    m: int,
    lam: float = 1.0,
    seed: int = 0,
    n_init: int = 10,
    max_iter: int = 100,
    exact_limit: float = 1e6,
) -> np.ndarray:
    """Best assignment ``z ∈ {0..M-1}^J`` of the regularized objective (exact when ``M^J ≤ exact_limit``)."""
    j = len(units.n)
    if m >= j:
        return np.arange(j) % m
    if m**j <= exact_limit:
        return enumerate_best(units, m, lam)
    rng = np.random.default_rng(seed)
    best, best_val = None, np.inf
    for restart in range(n_init):
        z0 = lpt_init(units, m) if restart == 0 else kmeanspp_init(units, m, rng)
        z = lloyd(units, z0, m, lam, rng, max_iter)
        val = objective(units, z, m, lam)
        if val < best_val - 1e-12:
            best, best_val = z, val
    assert best is not None
    return best
