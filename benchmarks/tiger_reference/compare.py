"""Side by side: crabrec's TIGER and cornac 3.0.1's on the same data, SIDs, size, recipe and budget.

    bash benchmarks/tiger_reference/setup.sh                       # once: the throw-away cornac environment
    python benchmarks/tiger_reference/compare.py RUN_DIR --seeds 2024 2025 --epochs 6 [--layers 4 ...]
    python benchmarks/tiger_reference/compare.py RUN_DIR --seeds 2026 --epochs 6 --side-by-side --threads 1
    python benchmarks/tiger_reference/compare.py --show LOG.json ...  # the table and plot of finished runs

``--side-by-side`` trains the two sides of each seed at once, so both see the same host load (one thread each on 2
cores). ``RUN_DIR`` is a crabrec run that has its data, embeddings and semantic IDs (``crabrec run --until tokenize``).
Every setting after the run goes to both sides; ``--ours-set key=value`` only to crabrec (one recipe element at a
time). Prints training loss (cross-entropy per SID token) and validation NDCG@10 per epoch, test HR@10 / NDCG@10 of
the best epoch, and writes ``curves.png`` next to the logs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from settings import add_settings, given

HERE = Path(__file__).resolve().parent


def run_pair(args: argparse.Namespace, shared: list[str]) -> list[Path]:
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    bundle = out / "bundle.npz"
    subprocess.run([sys.executable, HERE / "export.py", args.run, bundle], check=True)
    logs = []
    for seed in args.seeds:
        theirs, ours = out / f"cornac_s{seed}.json", out / f"crabrec_s{seed}.json"
        extra = [x for kv in args.ours_set for x in ("--set", kv)]
        commands = [
            [args.cornac_python, HERE / "cornac_tiger.py", bundle, theirs, "--seed", str(seed), *shared],
            [sys.executable, HERE / "ours_tiger.py", args.run, ours, "--seed", str(seed), *shared, *extra],
        ]
        if args.side_by_side:  # both at once (give --threads 1 on 2 cores): the same host load for both
            running = [subprocess.Popen(c) for c in commands]
            if any(p.wait() for p in running):
                raise SystemExit(f"seed {seed}: a side failed (its output is above)")
        else:
            for c in commands:
                subprocess.run(c, check=True)
        logs += [theirs, ours]
    return logs


def label(log: dict) -> str:
    s = log["settings"]
    extra = " ".join(s.get("set") or [])
    return f"{log['implementation']} s{s['seed']}" + (f" [{extra}]" if extra else "")


def show(paths: list[Path], plot: Path | None) -> None:
    logs = [json.loads(p.read_text()) for p in paths]
    epochs = max(len(log["epochs"]) for log in logs)
    print(
        "| run | "
        + " | ".join(f"ep {e}" for e in range(1, epochs + 1))
        + " | best | test HR@10 | test NDCG@10 | s/epoch |"
    )
    print("|---" * (epochs + 5) + "|")
    for log in logs:
        cells = [f"{e['loss']:.3f} / {e['valid_ndcg@10']:.4f}" for e in log["epochs"]]
        cells += [""] * (epochs - len(cells))
        per_epoch = sum(e["train_seconds"] for e in log["epochs"]) / max(1, len(log["epochs"]))
        t = log["test"]
        print(f"| {label(log)} | " + " | ".join(cells) + f" | {log['best_epoch']} | {t['HR@10']:.4f} | "
              f"{t['NDCG@10']:.4f} | {per_epoch:.0f} |")  # fmt: skip
    print("\ncells: training loss (cross-entropy per SID token) / validation NDCG@10; test at the best epoch")
    if plot is None:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for log in logs:
        x = [e["epoch"] for e in log["epochs"]]
        style = "-" if log["implementation"] == "crabrec" else "--"
        a.plot(x, [e["loss"] for e in log["epochs"]], style, label=label(log))
        b.plot(x, [e["valid_ndcg@10"] for e in log["epochs"]], style, label=label(log))
    a.set(xlabel="epoch", ylabel="training loss per SID token", title="training loss")
    b.set(xlabel="epoch", ylabel="validation NDCG@10", title="validation")
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(plot, dpi=120)
    print(f"plot: {plot}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, nargs="?")
    ap.add_argument("--show", type=Path, nargs="+", help="only print (and plot) these finished logs")
    ap.add_argument("--seeds", type=int, nargs="+", default=[2024, 2025])
    ap.add_argument("--out", type=Path, default=Path("runs/tiger_reference"))
    ap.add_argument("--cornac-python", default=".venv-cornac/bin/python")
    ap.add_argument("--ours-set", action="append", default=[], help="a crabrec-only key=value (repeatable)")
    ap.add_argument("--side-by-side", action="store_true", help="train both sides of a seed at once")
    add_settings(ap, defaults=False)
    args = ap.parse_args()
    if args.show:
        show(args.show, args.show[0].parent / "curves.png")
        return 0
    if args.run is None:
        ap.error("give RUN_DIR (or --show LOG.json ...)")
    shared = given(args)
    show(run_pair(args, shared), args.out / "curves.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
