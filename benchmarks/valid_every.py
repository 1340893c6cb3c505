"""What validating every k-th epoch would have picked, replayed from finished runs' per-epoch validation logs.

    python benchmarks/valid_every.py RUN [RUN ...] [--every 1,2,3]

Under a schedule that does not look at validation (linear or cosine decay, the quick preset's), training does not
depend on when it is validated (tests/test_train_loop.py checks the losses are equal), so a run validated after
every epoch shows exactly what ``valid_every=k`` would pick: the best of epochs k, 2k, ... and the last, with early
stopping after ``patience`` validations without improvement. The same pick means the same model and test metrics.
Runs under the plateau schedule (whose learning rate follows validation) are listed but not replayed. A replay that
would train past the epochs the log holds (early stopping later than the logged run) says so.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

SECTION = {"mor": "train", "rw": "train", "d2lr": "train", "tiger": "tiger", "sasrec": "sasrec"}


def replay(scores: list[float], every: int, patience: int, epochs: int) -> tuple[int, float, int] | None:
    """-> (picked epoch, its validation score, validations run); None when the replay needs unlogged epochs."""
    best, best_epoch, bad, runs = -1.0, 0, 0, 0
    for epoch in range(1, epochs + 1):
        if bad >= patience:
            return best_epoch, best, runs
        if epoch > len(scores):
            return None
        if epoch % every and epoch != epochs:
            continue
        runs += 1
        if scores[epoch - 1] > best:
            best, best_epoch, bad = scores[epoch - 1], epoch, 0
        else:
            bad += 1
    return best_epoch, best, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--every", default="1,2,3")
    args = parser.parse_args()
    ks = [int(k) for k in args.every.split(",")]
    head = " | ".join(f"k={k}: epoch (valid), validations" for k in ks)
    print(f"| run | model | schedule | {head} |")
    print("|---|---|---|" + "---|" * len(ks))
    for run in args.runs:
        config = yaml.safe_load((run / "config.yaml").read_text())
        for model, section in SECTION.items():
            log_file = run / "models" / model / "train_log.json"
            if not log_file.is_file():
                continue
            loop = config[section]
            scores = [h["valid_ndcg@10"] for h in json.loads(log_file.read_text())]
            if loop["schedule"] == "plateau" or any(s is None for s in scores):
                print(f"| {run.name} | {model} | {loop['schedule']} |" + " not replayed |" * len(ks))
                continue
            cells = []
            for k in ks:
                out = replay(scores, k, loop["patience"], loop["epochs"])
                cells.append("needs unlogged epochs" if out is None else f"{out[0]} ({out[1]:.4f}), {out[2]}")
            print(f"| {run.name} | {model} | {loop['schedule']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
