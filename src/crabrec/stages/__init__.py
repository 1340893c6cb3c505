"""The pipeline's stages, in run order: the shared ones (data -> embed -> tokenize), every registered method's own
stages (see :mod:`crabrec.methods`), then the report that reads them all."""

from __future__ import annotations

import logging
from typing import Any

from crabrec.errors import CrabError
from crabrec.pipeline import RunContext, Stage
from crabrec.stages.data import DATA_STAGE
from crabrec.stages.sid import EMBED_STAGE, TOKENIZE_STAGE

log = logging.getLogger("crabrec")


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
        checked_outputs=False,
        describe="Table 1, Figure 1, token popularity curves -> report.md / report.html",
    )
    return {s.name: s for s in [*stages, report]}


def fit_catalogue(cfg: Any, n_items: int) -> Any:
    """``cfg`` with the ranking sizes fitted to a catalogue of ``n_items``: a beam wider than the catalogue ranks the
    whole catalogue, and cut-offs K beyond it are dropped (10 stays: a catalogue under 10 items is an error)."""
    if n_items < 10:
        raise CrabError(f"the catalogue has {n_items} items; HR@10/NDCG@10 need at least 10 (lower data.kcore?)")
    if cfg.data.n_groups > n_items:
        raise CrabError(
            f"data.n_groups={cfg.data.n_groups}: more popularity groups than the {n_items} items of the catalogue "
            "(empty groups would make MGU/DGU meaningless)"
        )
    ev, tr, rr = cfg.evaluate, cfg.train, cfg.rr
    beam, valid_beam = min(ev.beam, n_items), min(tr.valid_beam, n_items)

    def fit(key: str, ks: list[int]) -> list[int]:
        kept = [k for k in ks if k <= n_items]
        if not kept:
            raise CrabError(f"{key}={ks}: every K is beyond the catalogue of {n_items} items; give one ≤ {n_items}")
        if kept != ks:
            log.warning(
                "%s: K=%s beyond the catalogue of %d items; dropped", key, [k for k in ks if k > n_items], n_items
            )
        return kept

    if (beam, valid_beam) != (ev.beam, tr.valid_beam):
        log.warning("the catalogue has %d items: beams of %d/%d ranked over all of it", n_items, ev.beam, tr.valid_beam)
    return cfg.model_copy(
        update={
            "evaluate": ev.model_copy(
                update={
                    "beam": beam,
                    "ks": fit("evaluate.ks", ev.ks),
                    "fairness_ks": fit("evaluate.fairness_ks", ev.fairness_ks),
                }
            ),
            "train": tr.model_copy(update={"valid_beam": valid_beam}),
            "rr": rr.model_copy(update={"ks": fit("rr.ks", rr.ks)}),
        }
    )


def preflight(ctx: RunContext) -> None:
    """Checks once the data is loaded, before any expensive stage starts; fits ranking sizes to the catalogue."""
    ctx.config = checked_config(ctx.config, ctx.files.n_items())


def checked_config(cfg: Any, n_items: int) -> Any:
    """``cfg`` fitted to a catalogue of ``n_items`` and checked against it (a one-line error when it cannot work)."""
    cfg = fit_catalogue(cfg, n_items)
    top = max(cfg.evaluate.ks + cfg.evaluate.fairness_ks)
    if top > cfg.evaluate.beam:
        raise CrabError(
            f"evaluate.ks/fairness_ks go up to {top} but evaluate.beam={cfg.evaluate.beam} ranks fewer items; "
            "raise evaluate.beam"
        )
    if any(getattr(getattr(cfg, name), "compile", False) is True for name in type(cfg).model_fields):
        from crabrec.train.loop import compile_backend

        compile_backend()  # CRABREC_COMPILE_BACKEND checked before any stage runs, not when training starts
    if cfg.train.backbone:
        from pathlib import Path

        from crabrec.models.backbone import is_backbone_dir

        folder = Path(cfg.train.backbone)
        if not is_backbone_dir(folder):
            where = "" if folder.is_absolute() else f" ({folder.resolve()})"
            what = "not found"
            if folder.exists():
                what = "not a Hugging Face model folder (config.json + tokenizer expected)"
            raise CrabError(
                f"train.backbone={cfg.train.backbone}{where}: {what}; `crabrec backbone import-gguf --out "
                f"{cfg.train.backbone}` makes SmolLM2's there (`make backbone` does it from the project's folder)"
            )
    return cfg
