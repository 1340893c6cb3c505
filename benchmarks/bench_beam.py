"""Constrained beam search: crabrec's vectorized search vs HF generate(prefix_allowed_tokens_fn), same model/inputs.

    python benchmarks/bench_beam.py [--users 200] [--run runs/office-quick]

Uses the run's trained decoder and codebook when --run is given, else a randomly initialised default-size decoder
over a 3 x 256 codebook of 2,420 random SIDs. Prints users/s for both and the speed-up, and checks the top-K match.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--run")
    ap.add_argument("--beams", default="20,50")
    ap.add_argument("--batch", type=int, default=64, help="users per search call, both paths (evaluate uses 64)")
    args = ap.parse_args()
    from crabrec.decode.beam import beam_search
    from crabrec.decode.reference import allowed_prefixes, hf_constrained_beams
    from crabrec.decode.trie import SidTrie
    from crabrec.models.decoder import N_SPECIAL, DecoderSize, build_decoder, encode_rows, item_tokens
    from crabrec.sid.codebook import Codebook

    rng = np.random.default_rng(0)
    if args.run:
        from transformers import AutoModelForCausalLM

        from crabrec.data.dataset import Splits

        cb = Codebook.load(Path(args.run) / "sid" / "codebook.json")
        model = AutoModelForCausalLM.from_pretrained(Path(args.run) / "models" / "mor" / "model")
        test = Splits.load(Path(args.run) / "data" / "splits.npz").test
        hist, length = test.history[: args.users], test.length[: args.users]
        source = args.run
    else:
        codes = np.unique(rng.integers(0, 256, (2420, 3)), axis=0)
        cb = Codebook(codes=codes, sizes=[256] * 3, item_ids=[str(i) for i in range(len(codes))])
        model = build_decoder(N_SPECIAL + cb.vocab_size, DecoderSize(), seed=0)
        hist = rng.integers(0, cb.n_items, (args.users, 10))
        length = rng.integers(1, 11, args.users)
        source = "random default-size decoder, 3 x 256 codebook"
    model.eval()
    trie = SidTrie.build(cb)
    tokens = item_tokens(cb.token_ids())
    allowed = allowed_prefixes(tokens)
    print(f"model: {source}; users: {len(hist)}, {args.batch} per call; torch threads: {torch.get_num_threads()}")
    print("| beam | ours users/s | HF generate users/s | speed-up | identical top-K |")
    print("|---|---|---|---|---|")
    for beam in [int(b) for b in args.beams.split(",")]:
        batch = args.batch
        t = time.perf_counter()
        ours = []
        for s in range(0, len(hist), batch):
            ids, mask, _ = encode_rows(hist[s : s + batch], length[s : s + batch], None, tokens)
            ours.append(beam_search(model, trie, ids, mask, beam)[0])
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        same = True
        for i, s in enumerate(range(0, len(hist), batch)):
            ids, mask, _ = encode_rows(hist[s : s + batch], length[s : s + batch], None, tokens)
            theirs, _ = hf_constrained_beams(model, ids, mask, beam, allowed, cb.n_levels)
            mine = torch.from_numpy(tokens[trie.representative()])[ours[i]]
            same &= bool(torch.equal(theirs, mine))
        t_hf = time.perf_counter() - t
        print(f"| {beam} | {len(hist) / t_ours:.1f} | {len(hist) / t_hf:.1f} | {t_hf / t_ours:.1f}x | {same} |")


if __name__ == "__main__":
    main()
