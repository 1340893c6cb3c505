"""A large catalogue's codebook: quantizing and saving it, then loading it and building the trie of SIDs, as crabrec
does (residuals kept as one level plus the rows that differ, read when first used; each item's SID kept) against
the reference (every level of residuals held and written, every level read at load, each SID's items found by a
scan of every item), in one process.

    python benchmarks/bench_catalogue.py [--items 100000] [--dim 384] [--levels 3] [--codes 256]

Random Gaussian item vectors (few items share a SID, as in a real catalogue). Both sides quantize with the same
K-means; every level of residuals and each SID's items are checked equal. Prints seconds and the peak of new memory
(tracemalloc: NumPy's arrays, not faiss's own) of each step, and the size of the residuals file.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np


def measured(step):
    """``(result, seconds, peak new MB)`` of ``step()``: timed in one call, its memory traced in another (tracing
    slows Python's own allocations, as a JSON file's parsing makes them)."""
    start = time.perf_counter()
    step()
    seconds = time.perf_counter() - start
    tracemalloc.start()
    out = step()
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return out, seconds, peak


def reference_quantize(x: np.ndarray, levels: int, k: int, folder: Path):
    """Every level's residuals held (a copy each) and written; an [n, d] array of chosen codewords per level."""
    from crabrec.sid.rq_kmeans import kmeans

    residual = np.ascontiguousarray(x, dtype=np.float32)
    codes, codewords, residuals = [], [], []
    for level in range(levels):
        residuals.append(residual.copy())
        centroids, assign = kmeans(residual, k, level, iters=10, init="random")
        codes.append(assign)
        codewords.append(centroids)
        residual = residual - centroids[assign]
    np.savez(folder / "reference.residuals.npz", **{f"level{i}": r for i, r in enumerate(residuals)})
    return np.stack(codes, 1), codewords, residuals


def ours_quantize(x: np.ndarray, levels: int, k: int, folder: Path):
    from crabrec.sid.codebook import Codebook
    from crabrec.sid.rq_kmeans import residual_quantize

    q = residual_quantize(x, levels, k, seed=0, iters=10, init="random")
    ids = [str(i) for i in range(len(x))]
    Codebook(codes=q.codes, sizes=[k] * levels, item_ids=ids, codewords=q.codewords, residuals=q.residuals).save(
        folder / "codebook.json"
    )
    return q


def reference_load(folder: Path):
    """The codebook, every level of residuals read; each SID's items by a scan of every item."""
    from crabrec.sid.codebook import Codebook

    codes = Codebook.load(folder / "codebook.json").codes
    with np.load(folder / "reference.residuals.npz") as data:
        levels = [data[f"level{i}"] for i in range(len(data.files))]
    sids, inverse = np.unique(codes, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    members = [np.flatnonzero(inverse == s) for s in range(len(sids))]
    return levels, members


def ours_load(folder: Path):
    from crabrec.decode.trie import SidTrie
    from crabrec.sid.codebook import Codebook

    codebook = Codebook.load(folder / "codebook.json")
    trie = SidTrie.build(codebook)
    trie.representative()
    return codebook, trie


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--levels", type=int, default=3)
    ap.add_argument("--codes", type=int, default=256)
    args = ap.parse_args()
    x = np.random.default_rng(0).normal(size=(args.items, args.dim)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (codes, _, ref_levels), ref_q_s, ref_q_mb = measured(
            lambda: reference_quantize(x, args.levels, args.codes, folder)
        )
        q, our_q_s, our_q_mb = measured(lambda: ours_quantize(x, args.levels, args.codes, folder))
        assert np.array_equal(q.codes, codes), "the codes differ"
        assert all(np.array_equal(a, b) for a, b in zip(q.residuals, ref_levels, strict=True)), "residuals differ"
        ref_file = (folder / "reference.residuals.npz").stat().st_size / 1e6
        our_file = (folder / "codebook.residuals.npz").stat().st_size / 1e6
        del q, ref_levels
        (_, members), ref_l_s, ref_l_mb = measured(lambda: reference_load(folder))
        (codebook, trie), our_l_s, our_l_mb = measured(lambda: ours_load(folder))
        assert all(np.array_equal(a, b) for a, b in zip(trie.members, members, strict=True)), "members differ"
        assert all(np.array_equal(a, b) for a, b in zip(codebook.residuals, reference_levels(folder), strict=True))
    print(f"{args.items:,} items of {args.dim} dimensions, {args.levels} levels of {args.codes} codes")
    print("| step | reference s | crabrec s | speed-up | reference peak MB | crabrec peak MB |")
    print("|---|---|---|---|---|---|")
    for name, (ref_s, ref_mb), (our_s, our_mb) in (
        ("quantize + save", (ref_q_s, ref_q_mb), (our_q_s, our_q_mb)),
        ("load + trie", (ref_l_s, ref_l_mb), (our_l_s, our_l_mb)),
    ):
        print(f"| {name} | {ref_s:.2f} | {our_s:.2f} | {ref_s / our_s:.2f}x | {ref_mb:,.0f} | {our_mb:,.0f} |")
    print(f"residuals file: {ref_file:,.0f} MB (every level) -> {our_file:,.0f} MB; every level and SID checked equal")


def reference_levels(folder: Path):
    with np.load(folder / "reference.residuals.npz") as data:
        for i in range(len(data.files)):
            yield data[f"level{i}"]


if __name__ == "__main__":
    main()
