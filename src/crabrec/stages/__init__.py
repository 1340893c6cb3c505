"""The stages of ``crabrec run``, in order; later capabilities register theirs here."""

from __future__ import annotations

from crabrec.pipeline import Stage
from crabrec.stages.baseline_stages import D2LR_STAGE, RR_STAGE, RW_STAGE
from crabrec.stages.crab_stages import FINETUNE_STAGE, REBALANCE_STAGE
from crabrec.stages.data_stage import DATA_STAGE
from crabrec.stages.model_stages import EVALUATE_STAGE, TRAIN_STAGE
from crabrec.stages.report_stage import REPORT_STAGE
from crabrec.stages.sasrec_stage import SASREC_STAGE
from crabrec.stages.sid_stages import EMBED_STAGE, TOKENIZE_STAGE
from crabrec.stages.tiger_stage import TIGER_STAGE

# Planned stages that are not implemented yet: `crabrec run` names them so users know what is missing.
PLANNED = (
    "data",
    "embed",
    "tokenize",
    "train",
    "evaluate",
    "tiger",
    "sasrec",
    "rw",
    "rr",
    "d2lr",
    "rebalance",
    "finetune",
    "report",
)


def registry() -> dict[str, Stage]:
    stages = [
        DATA_STAGE,
        EMBED_STAGE,
        TOKENIZE_STAGE,
        TRAIN_STAGE,
        EVALUATE_STAGE,
        TIGER_STAGE,
        SASREC_STAGE,
        RW_STAGE,
        RR_STAGE,
        D2LR_STAGE,
        REBALANCE_STAGE,
        FINETUNE_STAGE,
        REPORT_STAGE,
    ]
    return {s.name: s for s in stages}


def missing() -> list[str]:
    have = registry()
    return [name for name in PLANNED if name not in have]


def preflight(ctx) -> None:
    """Resource guards checked once the data is loaded, before any expensive stage starts."""
    from crabrec.errors import CrabError
    from crabrec.io import load_npz

    n_items = len(load_npz(ctx.path("data", "popularity.npz"))["freq"])
    cfg = ctx.cfg
    for key, value in (("evaluate.beam", cfg.evaluate.beam), ("train.valid_beam", cfg.train.valid_beam)):
        if value > n_items:
            raise CrabError(f"{key}={value} is larger than the catalogue ({n_items} items); use at most {n_items}")
    if max(cfg.evaluate.ks + cfg.evaluate.fairness_ks) > cfg.evaluate.beam:
        raise CrabError(
            f"evaluate.ks/fairness_ks go up to {max(cfg.evaluate.ks + cfg.evaluate.fairness_ks)} but evaluate.beam="
            f"{cfg.evaluate.beam} ranks fewer items; raise evaluate.beam"
        )
    if cfg.train.backbone:
        from pathlib import Path

        from crabrec.models.backbone import is_backbone_dir

        if not is_backbone_dir(Path(cfg.train.backbone)):
            raise CrabError(
                f"train.backbone={cfg.train.backbone}: not a Hugging Face model folder (config.json + tokenizer "
                "expected); `crabrec backbone import-gguf` makes one from SmolLM2"
            )
