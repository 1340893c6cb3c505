"""The paper's CRAB analyses on an existing run: sweeps of the splitting ratio, of which level is split, of γ and
of LoRA on/off (Fig. 3, Fig. 4), and the token-popularity analysis (docs/METHOD.md, "Token groups").

Each setting is a sibling run under ``<run>/analysis/<sweep>/<setting>/`` that links the base run's data, embeddings,
codebook and trained MOR model (their cached stage states are reused, nothing is retrained) and runs only
CRAB's stages with its overrides. Results: ``<sweep>.csv``, ``<sweep>.md`` and ``<sweep>.png``.
Choose settings on validation (``best_valid_ndcg@10`` column), not on the test metrics shown next to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from crabrec.config import RunConfig
from crabrec.io import atomic_path, write_text
from crabrec.runfiles import RunFiles, link_base, read_checked


def sweeps(levels: int) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Settings of each analysis: (label, crab overrides)."""
    return {
        "ratio": [(f"{int(r * 100)}%", {"ratio": r}) for r in (0.05, 0.10, 0.15, 0.20)],
        "levels": [(f"level {chr(97 + lv)}", {"levels": [lv], "ratio": 0.05}) for lv in range(levels)],
        "gamma": [(f"γ={g}", {"gamma": g}) for g in (0.0, 0.1, 0.2, 0.5, 1.0)],
        "lora": [("LoRA", {"params": "lora"}), ("full fine-tune", {"params": "full"})],
    }


def run_sweep(cfg: RunConfig, sweep: str) -> pd.DataFrame:
    """Run every setting of ``sweep`` (cached per setting) and collect validation + test metrics."""
    from crabrec.methods import get
    from crabrec.pipeline import RunContext
    from crabrec.report import method_seconds
    from crabrec.stages import preflight, registry

    base, crab_method = cfg.run_dir, get("crab")
    n_levels = RunFiles(base).load_codebook().semantic_levels
    rows = []
    base_metrics = RunFiles(base).load_metrics("mor") or {}
    rows.append({"setting": "MOR (base)", **_pick(base_metrics), "best_valid_ndcg@10": None})
    for label, crab in sweeps(n_levels)[sweep]:
        tag = label.replace("%", "pct").replace(" ", "_").replace("=", "").replace("γ", "gamma")
        sub = cfg.model_copy(
            update={
                "runs_dir": str(base / "analysis" / sweep),
                "name": tag,
                "crab": cfg.crab.model_copy(update=crab),
            }
        )
        link_base(base, sub.run_dir)
        ctx = RunContext(config=sub, stages=registry())
        preflight(ctx)
        ctx.ensure(crab_method.evaluates)
        files = RunFiles(sub.run_dir)
        m = files.load_metrics("crab") or {}
        summary = read_checked(files.train_summary("crab"), dict)
        split = read_checked(files.sid_file("report.json", rebalanced=True), list)
        rows.append(
            {
                "setting": label,
                **_pick(m),
                "best_valid_ndcg@10": _valid_ndcg(summary, crab_method, files, ctx.config),
                "tokens_split": sum(r["split"] for r in split),
                "time_s": method_seconds(files, crab_method),
            }
        )
    return pd.DataFrame(rows)


def _valid_ndcg(summary: dict[str, Any], method, files: RunFiles, cfg) -> float:
    """The fine-tune's own validation score, or (``crab.keep=last`` validates nothing) the frontier's: the method's
    ranker on the first ``rr.valid_samples`` validation rows."""
    if summary.get("best_valid_ndcg@10") is not None:
        return summary["best_valid_ndcg@10"]
    return round(method.validate(files, cfg, cfg.rr.valid_samples)["NDCG@10"], 4)


def _pick(m: dict[str, Any]) -> dict[str, float]:
    return {k: round(m[k], 4) for k in ("HR@10", "NDCG@10", "MGU@10", "DGU@10")}


def write_sweep(frame: pd.DataFrame, out: Path, title: str) -> list[Path]:
    """The sweep beside ``out`` as CSV, Markdown and a PNG of its accuracy and popularity-bias metrics."""
    from crabrec import plots

    out.mkdir(parents=True, exist_ok=True)
    csv, md, png = out.with_suffix(".csv"), out.with_suffix(".md"), out.with_suffix(".png")
    frame = whole_counts(frame)
    write_text(csv, frame.to_csv(index=False))
    write_text(md, f"# {title}\n\n" + markdown(frame) + "\n")
    with plots.drawing(figsize=(9, 3.2)) as fig:
        axes = fig.subplots(1, 2)
        x = range(len(frame))
        for ax, keys in zip(axes, (("HR@10", "NDCG@10"), ("MGU@10", "DGU@10"))):
            for k in keys:
                ax.plot(x, frame[k], marker="o", label=k)
            ax.set_xticks(list(x), frame["setting"], rotation=20, fontsize=8)
            ax.legend(frameon=False)
        axes[0].set_title("accuracy (higher is better)")
        axes[1].set_title("popularity bias (lower is better)")
        fig.suptitle(title)
        with atomic_path(png) as tmp:
            plots.png(fig, tmp)
    return [csv, md, png]


def whole_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Count columns (``tokens_split``) as integers: the base row's empty cell made them floats (``13.0``)."""
    out = frame.copy()
    for col in out.columns:
        values = out[col].dropna()
        if "@" not in str(col) and out[col].dtype.kind == "f" and len(values) and (values % 1 == 0).all():
            out[col] = out[col].astype("Int64")
    return out


def markdown(frame: pd.DataFrame) -> str:
    cells = [[("" if pd.isna(v) else str(v)) for v in row] for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells])


def token_table(run: Path) -> pd.DataFrame:
    """GU@10 of the items under T_pop / T_neu / T_unp tokens per level, MOR vs CRAB."""
    from crabrec.report import token_group_analysis

    rows = []
    for model, levels in token_group_analysis(run).items():
        for row in levels:
            rows.append(
                {
                    "model": model,
                    "level": row["level"],
                    **{f"GU {g}": round(row[g]["GU"], 4) for g in ("pop", "neu", "unp")},
                    "pop-unp gap": round(row["gap"], 4),
                }
            )
    return pd.DataFrame(rows)
