"""Print one markdown table row per trained model under the given run directories (from their JSON artifacts).

python scripts/collect_runs.py runs/beauty-* [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def rows(run_dirs: list[Path]) -> list[dict]:
    out = []
    for run in run_dirs:
        for model in sorted((run / "models").glob("*")):
            metrics, log = model / "metrics.json", model / "train_log.json"
            if not metrics.is_file():
                continue
            m = json.loads(metrics.read_text())
            hist = json.loads(log.read_text()) if log.is_file() else []
            best = max(hist, key=lambda h: h["valid_ndcg@10"]) if hist else {}
            out.append(
                {
                    "run": run.name,
                    "model": model.name,
                    "epochs": len(hist),
                    "best_epoch": best.get("epoch"),
                    "s_per_epoch": round(sum(h["epoch_seconds"] for h in hist) / max(len(hist), 1), 1),
                    "best_valid_ndcg@10": round(best.get("valid_ndcg@10", float("nan")), 4),
                    **{k: round(m[k], 4) for k in ("HR@5", "NDCG@5", "HR@10", "NDCG@10", "MGU@10", "DGU@10")},
                }
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    table = rows(args.runs)
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))
    if table:
        keys = list(table[0])
        print("| " + " | ".join(keys) + " |")
        print("|" + "---|" * len(keys))
        for r in table:
            print("| " + " | ".join(str(r[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
