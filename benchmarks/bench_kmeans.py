"""faiss RQ-KMeans vs scikit-learn KMeans on the same item embeddings (time ratio and residual error).

    python benchmarks/bench_kmeans.py [--embeddings runs/office-quick/embeddings.npy]

Without --embeddings the embedded Office items are encoded with the hashing encoder (no model needed).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def sklearn_rq(x: np.ndarray, levels: int, k: int, seed: int) -> tuple[np.ndarray, float]:
    from sklearn.cluster import KMeans

    r = x.copy()
    codes = []
    for level in range(levels):
        km = KMeans(k, n_init=1, random_state=seed + level, max_iter=100).fit(r)
        codes.append(km.labels_)
        r = r - km.cluster_centers_[km.labels_]
    return np.stack(codes, 1), float((r**2).sum(1).mean())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embeddings")
    ap.add_argument("--levels", type=int, default=3)
    ap.add_argument("--k", type=int, default=256)
    args = ap.parse_args()
    from crabrec.sid.collisions import collision_count
    from crabrec.sid.rq_kmeans import residual_quantize

    if args.embeddings:
        x = np.load(args.embeddings).astype(np.float32)
        source = args.embeddings
    else:
        from crabrec.config import DataConfig, EmbedConfig
        from crabrec.data import load_dataset
        from crabrec.embed import encode, item_texts

        ds = load_dataset(DataConfig())
        x = encode(item_texts(ds.item_text, EmbedConfig()), EmbedConfig(encoder="hashing-bow"))
        source = "Office, hashing-bow encoder"
    rows = []
    for name, fn in [
        ("faiss k-means++ init", lambda: residual_quantize(x, args.levels, args.k, 0, init="kmeans++")),
        ("faiss random init", lambda: residual_quantize(x, args.levels, args.k, 0, init="random")),
    ]:
        t = time.perf_counter()
        q = fn()
        sec = time.perf_counter() - t
        final = q.residuals[-1] - q.codewords[-1][q.codes[:, -1]]
        rows.append((name, sec, float((final**2).sum(1).mean()), collision_count(q.codes)))
    t = time.perf_counter()
    codes, mse = sklearn_rq(x, args.levels, args.k, 0)
    rows.append(("sklearn KMeans (reference)", time.perf_counter() - t, mse, collision_count(codes)))
    ref = rows[-1][1]
    print(f"data: {source}  shape={x.shape}  levels={args.levels}  k={args.k}")
    print("| method | seconds | time / sklearn | final residual MSE | colliding items |")
    print("|---|---|---|---|---|")
    for name, sec, mse, coll in rows:
        print(f"| {name} | {sec:.2f} | {sec / ref:.2f} | {mse:.4f} | {coll} |")


if __name__ == "__main__":
    main()
