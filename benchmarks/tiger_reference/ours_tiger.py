"""Train crabrec's TIGER at the settings ``cornac_tiger.py`` takes, on a copy of a run, and log it the same way.

    python benchmarks/tiger_reference/ours_tiger.py RUN_DIR OUT.json [--layers 4 ...] [--set tiger.user_bins=0 ...]

It runs ``crabrec run COPY --until tiger`` as a user would, on a copy of ``RUN_DIR``'s data and semantic IDs (so the
split, embeddings and SIDs are the ones the bundle holds), then ranks every test row (or the first
``--test-samples``) with the method's ranker (what ``crabrec evaluate`` and the API use), with every setting
translated to crabrec's keys (the seed to ``tiger.seed``, which leaves the run's semantic IDs as they are): the
same validation rows (the first ``--valid-samples``) after every epoch, beam, batch, learning rate and schedule, no
early stopping (cornac runs every epoch and keeps the best). ``--set`` passes further crabrec keys (one recipe
element at a time).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from settings import add_settings

UPSTREAM = ("config.yaml", "data", "embeddings.npy", "embeddings.items.json", "sid", "stages")


def crabrec_keys(a: argparse.Namespace) -> list[str]:
    keys = {
        "tiger.seed": a.seed, "tiger.layers": a.layers, "tiger.d_model": a.d_model, "tiger.heads": a.heads,
        "tiger.d_kv": a.d_kv, "tiger.ff": a.ff, "tiger.dropout": a.dropout, "tiger.lr": a.lr,
        "tiger.weight_decay": a.weight_decay, "tiger.batch_size": a.batch, "tiger.epochs": a.epochs,
        "tiger.patience": a.epochs, "tiger.valid_every": 1, "tiger.warmup_steps": a.warmup,
        "train.valid_samples": a.valid_samples, "train.valid_beam": a.beam, "evaluate.beam": a.beam,
        "evaluate.bootstrap": 0, "train.threads": a.threads,
        "tiger.init": "random",  # cornac starts its token embeddings from N(0, 1); --set tiger.init=auto for ours
    }  # fmt: skip
    if a.schedule == "constant":  # a plateau that never shrinks
        keys |= {"tiger.schedule": "plateau", "tiger.plateau_factor": 1.0}
    else:
        keys |= {"tiger.schedule": "cosine"}
    return [f"{k}={v}" for k, v in keys.items()] + a.set


def test_metrics(work: Path, samples: int, k: int = 10) -> dict[str, float]:
    """HR@k / NDCG@k of the trained TIGER on the first ``samples`` test rows (0: every one), ranked by its registered
    ranker (a colliding SID counts as a hit, as in crabrec's evaluation)."""
    from crabrec.config import load_config
    from crabrec.decode.rank import sid_members
    from crabrec.methods import get
    from crabrec.metrics import ranking_metrics
    from crabrec.runfiles import RunFiles, first_rows

    files = RunFiles(work)
    test = files.load_splits().test
    test = first_rows(test, samples) if samples else test
    ranker = get("tiger").ranker(files, load_config(str(work / "config.yaml")))
    items, _ = ranker.rank(test, progress=False)
    rep_of, _ = sid_members(ranker.trie, len(ranker.io.tokens))
    return ranking_metrics(items, rep_of[test.target], (k,))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=2024)
    add_settings(ap)
    ap.add_argument("--set", action="append", default=[], help="a further crabrec key=value (repeatable)")
    ap.add_argument("--work", type=Path, default=None, help="where the run copy goes (default: OUT without .json)")
    args = ap.parse_args()
    work = args.work or args.out.with_suffix("")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name in UPSTREAM:
        src = args.run / name
        if src.is_dir():
            shutil.copytree(src, work / name)
        elif src.exists():
            shutil.copy2(src, work / name)
    cmd = [sys.executable, "-m", "crabrec", "run", str(work), "--until", "tiger"]
    for key in crabrec_keys(args):
        cmd += ["--set", key]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=os.environ | {"TQDM_DISABLE": "1"})
    seconds = time.perf_counter() - start
    if (work / "sid" / "codebook.json").read_bytes() != (args.run / "sid" / "codebook.json").read_bytes():
        raise SystemExit(f"{work}: the semantic IDs were re-drawn; they would not be the bundle's")
    log = json.loads((work / "models" / "tiger" / "train_log.json").read_text())
    keep = {"epoch": "epoch", "loss": "loss", "valid_ndcg@10": "valid_ndcg@10", "train_seconds": "epoch_seconds"}
    epochs = [{k: e[v] for k, v in keep.items()} for e in log]
    best = max(epochs, key=lambda e: e["valid_ndcg@10"])
    test = test_metrics(work, args.test_samples)
    result = {
        "implementation": "crabrec",
        "settings": vars(args) | {"run": str(args.run), "out": str(args.out), "work": str(work)},
        "epochs": epochs,
        "best_epoch": best["epoch"],
        "fit_seconds": seconds,
        "test": test,
    }
    args.out.write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps(result["test"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
