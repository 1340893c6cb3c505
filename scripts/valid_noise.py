"""How noisy is per-epoch validation? The standard error of validation NDCG@10 on the first N validation users.

    python scripts/valid_noise.py RUN_DIR [--method mor] [--sizes 1000,2000,5000]

Ranks every validation row of RUN_DIR with the method's trained decoder (the run's ``train.valid_beam``), takes each
user's NDCG@10 and prints, for each N, the NDCG@10 of the first N users and its standard error (per-user standard
deviation / sqrt(N)). Compare the standard error with the epoch-to-epoch changes in the model's ``train_log.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path)
    ap.add_argument("--method", default="mor")
    ap.add_argument("--sizes", default="1000,2000,5000")
    args = ap.parse_args()
    from crabrec.config import load_config
    from crabrec.decode.rank import rank_samples, sid_members
    from crabrec.decode.trie import SidTrie
    from crabrec.metrics.ranking import hit_positions, ndcg_gains
    from crabrec.models.decoder import item_tokens
    from crabrec.rankers import load_generator
    from crabrec.runfiles import RunFiles

    cfg = load_config(str(args.run / "config.yaml"))
    files = RunFiles(args.run)
    codebook, valid = files.load_codebook(), files.load_splits().valid
    trie, tokens = SidTrie.build(codebook), item_tokens(codebook.token_ids())
    model = load_generator(files.model_dir(args.method) / "model", codebook)
    items, _ = rank_samples(model, trie, valid, tokens, cfg.train.valid_beam)
    rep_of, _ = sid_members(trie, len(tokens))
    per_user = ndcg_gains(hit_positions(items, rep_of[valid.target]), 10)
    log = json.loads((files.model_dir(args.method) / "train_log.json").read_text())
    steps = np.abs(np.diff([e["valid_ndcg@10"] for e in log]))
    print(f"{len(valid):,} validation users; median |change| between epochs in train_log.json: {np.median(steps):.4f}")
    print("| first N users | NDCG@10 | standard error | SE / NDCG |")
    print("|---|---|---|---|")
    for n in (min(int(s), len(valid)) for s in args.sizes.split(",")):
        x = per_user[:n]
        se = x.std(ddof=1) / np.sqrt(n)
        print(f"| {n:,} | {x.mean():.4f} | {se:.4f} | {se / max(x.mean(), 1e-12):.0%} |")


if __name__ == "__main__":
    main()
