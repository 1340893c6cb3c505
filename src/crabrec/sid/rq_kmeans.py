"""Residual K-means quantization (faiss, k-means++ init) and its balanced (capacity-constrained) variant."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from crabrec.sid.residuals import Residuals, less_codewords


@dataclass
class Quantized:
    """Codes ``[N, L]``, codewords per level ``[K, d]``, and each item's residual at the input of every level."""

    codes: np.ndarray
    codewords: list[np.ndarray] | None
    residuals: Sequence[np.ndarray] | None


def kmeans(x: np.ndarray, k: int, seed: int, iters: int = 25, init: str = "kmeans++") -> tuple[np.ndarray, np.ndarray]:
    """faiss K-means (single-threaded, so results are bit-reproducible) -> ``(centroids [k, d], assignment [n])``."""
    import faiss

    seed %= 2**31  # faiss takes a 32-bit signed seed (and every seed below 2^31 stays what it was)
    x = np.ascontiguousarray(x, dtype=np.float32)
    n, d = x.shape
    init_centroids = None
    if init == "kmeans++":
        from sklearn.cluster import kmeans_plusplus

        init_centroids, _ = kmeans_plusplus(x, k, random_state=seed)
        init_centroids = np.ascontiguousarray(init_centroids, dtype=np.float32)
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        km = faiss.Kmeans(
            d, k, niter=iters, seed=seed, verbose=False, min_points_per_centroid=1, max_points_per_centroid=max(256, n)
        )
        km.train(x, init_centroids=init_centroids)
        _, assign = km.index.search(x, 1)
    finally:
        faiss.omp_set_num_threads(threads)
    return km.centroids.copy(), assign[:, 0].astype(np.int64)


def balanced_assign(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Assign each point to its nearest centroid that still has room; capacities ``n//k`` (+1 for ``n % k``).

    Points are placed in order of their distance to the nearest centroid (closest first), which keeps confident
    assignments and moves the ambiguous ones.
    """
    n, k = len(x), len(centroids)
    dist = ((x[:, None, :] - centroids[None, :, :]) ** 2).sum(-1) if n * k <= 4_000_000 else _sq_dist(x, centroids)
    capacity = np.full(k, n // k, dtype=np.int64)
    capacity[: n % k] += 1
    assign = np.empty(n, dtype=np.int64)
    for i in np.lexsort((np.arange(n), dist.min(1))):
        for c in np.argsort(dist[i], kind="stable"):
            if capacity[c] > 0:
                capacity[c] -= 1
                assign[i] = c
                break
    return assign


def _sq_dist(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    return (x**2).sum(1)[:, None] + (c**2).sum(1)[None, :] - 2 * x @ c.T


def balanced_kmeans(
    x: np.ndarray, k: int, seed: int, iters: int = 25, rounds: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    """K-means, then alternate capacity-constrained assignment and centroid means (equal-size clusters)."""
    centroids, _ = kmeans(x, k, seed, iters)
    assign = balanced_assign(x, centroids)
    for _ in range(rounds):
        centroids = np.stack([x[assign == c].mean(0) if (assign == c).any() else centroids[c] for c in range(k)])
        new = balanced_assign(x, centroids)
        if np.array_equal(new, assign):
            break
        assign = new
    return centroids.astype(np.float32), assign


def residual_quantize(
    x: np.ndarray, levels: int, k: int, seed: int, iters: int = 25, init: str = "kmeans++", balanced: bool = False
) -> Quantized:
    """Greedy RQ: at each level cluster the current residuals, then subtract the chosen codeword. The residuals are
    kept as the first level (a copy of ``x``), from which the others follow."""
    first = np.array(x, dtype=np.float32, order="C")
    residual = first
    codes, codewords = [], []
    for level in range(levels):
        if balanced:
            centroids, assign = balanced_kmeans(residual, k, seed + level, iters)
        else:
            centroids, assign = kmeans(residual, k, seed + level, iters, init)
        codes.append(assign)
        codewords.append(centroids)
        if level + 1 < levels:  # a new array after the first level (kept), then in place
            residual = less_codewords(residual, centroids, assign, np.empty_like(first) if level == 0 else residual)
    stacked = np.stack(codes, 1)
    return Quantized(codes=stacked, codewords=codewords, residuals=Residuals(first, codewords, stacked, levels))
