"""Constrained beam search: crabrec's vectorized search vs HF generate(prefix_allowed_tokens_fn), same model/inputs.

    python benchmarks/bench_beam.py [--users 200] [--run runs/office-quick]

Uses the run's trained decoder and codebook when --run is given, else a randomly initialised default-size decoder
over a 3 x 256 codebook of 2,420 random SIDs. Prints users/s for ours (shared-history steps), ours with the generic
per-beam-cache steps, and HF, the speed-up over HF, and checks that all three give the same top-K.
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
    from crabrec.config import TrainConfig
    from crabrec.decode.beam import beam_search
    from crabrec.decode.reference import allowed_prefixes, hf_constrained_beams
    from crabrec.decode.trie import SidTrie
    from crabrec.models.decoder import N_SPECIAL, build_decoder, encode_rows, item_tokens
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
        model = build_decoder(N_SPECIAL + cb.vocab_size, TrainConfig(), seed=0)
        hist = rng.integers(0, cb.n_items, (args.users, 10))
        length = rng.integers(1, 11, args.users)
        source = "random default-size decoder, 3 x 256 codebook"
    model.eval()
    trie = SidTrie.build(cb)
    tokens = item_tokens(cb.token_ids())
    allowed = allowed_prefixes(tokens)
    print(f"model: {source}; users: {len(hist)}, {args.batch} per call; torch threads: {torch.get_num_threads()}")
    print("| beam | ours users/s | ours, per-beam cache users/s | HF generate users/s | speed-up vs HF | same top-K |")
    print("|---|---|---|---|---|---|")
    sid_tokens = torch.from_numpy(tokens[trie.representative()])
    batches = [
        encode_rows(hist[s : s + args.batch], length[s : s + args.batch], None, tokens)[:2]
        for s in range(0, len(hist), args.batch)
    ]
    for beam in [int(b) for b in args.beams.split(",")]:
        paths = {
            "ours": lambda ids, mask, beam=beam: _as_tokens(beam_search(model, trie, ids, mask, beam), sid_tokens),
            "generic": lambda ids, mask, beam=beam: _as_tokens(
                beam_search(model, trie, ids, mask, beam, shared_prefix=False), sid_tokens
            ),
            "hf": lambda ids, mask, beam=beam: hf_constrained_beams(model, ids, mask, beam, allowed, cb.n_levels),
        }
        rate, got = {}, {}
        for name, search in paths.items():
            t = time.perf_counter()
            out = [search(ids, mask) for ids, mask in batches]
            rate[name] = len(hist) / (time.perf_counter() - t)
            got[name] = (torch.cat([o[0] for o in out]), torch.cat([o[1] for o in out]))
        same = [_agreement(got["ours"], got[other]) for other in ("generic", "hf")]
        print(
            f"| {beam} | {rate['ours']:.1f} | {rate['generic']:.1f} | {rate['hf']:.1f} "
            f"| {rate['ours'] / rate['hf']:.1f}x | vs per-beam: {same[0]}; vs HF: {same[1]} |"
        )


def _as_tokens(
    result: tuple[torch.Tensor, torch.Tensor], sid_tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return sid_tokens[result[0]], result[1]


def _agreement(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor], tol: float = 1e-5) -> str:
    """Rows with identical top-K; the others must differ only by swaps of beams whose scores tie within ``tol``."""
    identical = (a[0] == b[0]).flatten(1).all(1)
    close = torch.isclose(a[1], b[1], atol=tol, rtol=0).all(1)
    ties = int((~identical & close).sum())
    if bool((~identical & ~close).any()):
        return f"NO ({int((~identical & ~close).sum())} rows differ)"
    return f"{int(identical.sum())}/{len(identical)} identical" + (f", {ties} near-tie swaps" if ties else "")


if __name__ == "__main__":
    main()
