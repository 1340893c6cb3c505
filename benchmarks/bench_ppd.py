"""PPD's decoding cost: MOR's constrained beam search with and without the popularity prior, same model and users.

    python benchmarks/bench_ppd.py --run runs/office-quick [--users 1000] [--beam 20] [--tau 0.5] [--rounds 3]

Uses the run's trained MOR decoder, codebook, training popularity and test histories. The two searches alternate
round by round (so drift of the machine hits both alike); prints users/s of each, the cost ratio, and how many of
the ranked lists PPD changed.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--beam", type=int, default=20)
    ap.add_argument("--tau", type=float, default=0.5)
    ap.add_argument("--batch", type=int, default=64, help="users per search call (evaluate uses 64)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from crabrec.decode.processors import PopularityPrior
    from crabrec.decode.rank import rank_samples
    from crabrec.rankers import GeneratorRanker
    from crabrec.runfiles import RunFiles, first_rows

    files = RunFiles(Path(args.run))
    ranker = GeneratorRanker(files.weights("mor"), files.load_codebook(), args.beam, args.batch)
    rows = first_rows(files.load_splits().test, args.users)
    prior = [PopularityPrior(ranker.trie, files.load_popularity().freq, args.tau)]
    io = ranker.io

    def search(processors) -> tuple[float, object]:
        start = time.perf_counter()
        with torch.inference_mode():
            items, _ = rank_samples(
                ranker.model, ranker.trie, rows, io.tokens, args.beam, args.batch, progress=False,
                prompt=io.test_prompt, base=io.base, processors=processors,
            )  # fmt: skip
        return time.perf_counter() - start, items

    times: dict[str, list[float]] = {"mor": [], "ppd": []}
    search(())  # warm-up
    for _ in range(args.rounds):
        for name, processors in (("mor", ()), ("ppd", prior)):
            seconds, items = search(processors)
            times[name].append(seconds)
            if name == "mor":
                plain = items
            else:
                changed = int((items != plain).any(1).sum())
    best = {name: min(t) for name, t in times.items()}
    print(f"run: {args.run}; {len(rows)} test users, beam {args.beam}, τ={args.tau}, torch threads "
          f"{torch.get_num_threads()}, best of {args.rounds} rounds")  # fmt: skip
    print("| search | users/s | cost vs MOR |")
    print("|---|---|---|")
    for name in ("mor", "ppd"):
        print(f"| {name.upper()} | {len(rows) / best[name]:,.0f} | {best[name] / best['mor']:.2f}x |")
    print(f"PPD changed {changed} of {len(rows)} ranked lists")


if __name__ == "__main__":
    main()
