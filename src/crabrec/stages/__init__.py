"""The pipeline's stages, in run order: the shared ones (data -> embed -> tokenize), every registered method's own
stages (see :mod:`crabrec.methods`), then the report that reads them all."""

from __future__ import annotations

from typing import Any

from crabrec.errors import CrabError
from crabrec.pipeline import RunContext, Stage
from crabrec.stages.data import DATA_STAGE
from crabrec.stages.sid import EMBED_STAGE, TOKENIZE_STAGE


def run_report(ctx: RunContext) -> dict[str, Any]:
    from crabrec.report import write_report

    paths = write_report(ctx.run_dir, list(ctx.stages))
    return {"report": str(paths[-1])}


def registry() -> dict[str, Stage]:
    """Every stage by name, in the order ``crabrec run`` runs them."""
    from crabrec.methods import methods

    stages = [DATA_STAGE, EMBED_STAGE, TOKENIZE_STAGE]
    for method in methods():
        stages += method.stages
    report = Stage(
        name="report",
        fn=run_report,
        needs=tuple(m.evaluates for m in methods()),
        artifacts=("report.md", "report.html"),
        describe="Table 1, Figure 1, token popularity curves -> report.md / report.html",
    )
    return {s.name: s for s in [*stages, report]}


def preflight(ctx: RunContext) -> None:
    """Resource guards checked once the data is loaded, before any expensive stage starts."""
    cfg = ctx.config
    n_items = ctx.files.n_items()
    for key, value in (("evaluate.beam", cfg.evaluate.beam), ("train.valid_beam", cfg.train.valid_beam)):
        if value > n_items:
            raise CrabError(f"{key}={value} is larger than the catalogue ({n_items} items); use at most {n_items}")
    top = max(cfg.evaluate.ks + cfg.evaluate.fairness_ks)
    if top > cfg.evaluate.beam:
        raise CrabError(
            f"evaluate.ks/fairness_ks go up to {top} but evaluate.beam={cfg.evaluate.beam} ranks fewer items; "
            "raise evaluate.beam"
        )
    if cfg.train.backbone:
        from pathlib import Path

        from crabrec.models.backbone import is_backbone_dir

        if not is_backbone_dir(Path(cfg.train.backbone)):
            raise CrabError(
                f"train.backbone={cfg.train.backbone}: not a Hugging Face model folder (config.json + tokenizer "
                "expected); `crabrec backbone import-gguf` makes one from SmolLM2"
            )
