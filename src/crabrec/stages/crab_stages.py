"""Stage ``rebalance`` (CRAB stage 1): the run's codebook -> ``crab/codebook.json`` + token map + report."""

from __future__ import annotations

from typing import Any

from crabrec.errors import CrabError
from crabrec.io import write_json
from crabrec.pipeline import RunContext, Stage
from crabrec.stages.sid_stages import load_freq


def run_rebalance(ctx: RunContext) -> dict[str, Any]:
    from crabrec.crab.rebalance import RebalanceConfig, format_report, rebalance
    from crabrec.sid.codebook import Codebook

    c = ctx.cfg.crab
    cfg = RebalanceConfig(
        ratio=c.ratio,
        levels=c.levels,
        max_split=c.max_split,
        lam=c.lam,
        n_init=c.n_init,
        max_iter=c.max_iter,
        exact_limit=c.exact_limit,
        seed=ctx.cfg.seed,
    )
    base = Codebook.load(ctx.path("sid", "codebook.json"))
    vectors = "text embeddings"
    if base.residuals is None:  # ids-only data: cluster on the trained MOR model's token embeddings instead
        base.residuals, vectors = model_residuals(ctx, base), "MOR token embeddings (no item text)"
    out = rebalance(base, load_freq(ctx), cfg)
    out.codebook.save(ctx.path("crab", "codebook.json"))
    write_json(ctx.path("crab", "index.json"), out.codebook.to_index())
    write_json(ctx.path("crab", "token_map.json"), {"old_to_new": out.token_map, "parent": out.parent})
    write_json(ctx.path("crab", "report.json"), out.report)
    (ctx.path("crab", "report.txt")).write_text(format_report(out.report) + "\n")
    return {
        "split": sum(r["split"] for r in out.report),
        "created": sum(r["created"] for r in out.report),
        "collisions": out.codebook.collisions(),
        "vectors": vectors,
    }


def model_residuals(ctx: RunContext, codebook) -> list:
    """Residuals from the trained MOR decoder's SID token embeddings (see ``token_residuals``)."""
    from safetensors import safe_open

    from crabrec.crab.rebalance import token_residuals
    from crabrec.models.decoder import item_tokens

    weights = ctx.path("models", "mor", "model", "model.safetensors")
    if ctx.cfg.train.backbone or not weights.is_file():
        raise CrabError(
            f"{ctx.path('sid', 'codebook.json')}: no per-item residuals (the dataset has no item text) and no "
            "from-scratch MOR model to take token embeddings from; run `crabrec train` first"
        )
    with safe_open(str(weights), framework="np") as f:
        table = f.get_tensor("model.embed_tokens.weight")
    return token_residuals(item_tokens(codebook.token_ids()), table)


def needs_model_vectors(ctx: RunContext) -> tuple[str, ...]:
    """Stage 1 clusters on text residuals when the codebook has them, else on the trained MOR's embeddings.

    Decided from the codebook on disk, which ``ensure`` has built before it asks; before one exists, text is assumed.
    """
    codebook = ctx.path("sid", "codebook.json")
    without = codebook.is_file() and not ctx.path("sid", "codebook.residuals.npz").is_file()
    return ("train",) if without else ()


REBALANCE_STAGE = Stage(
    name="rebalance",
    fn=run_rebalance,
    sections=("crab",),
    needs=("data", "tokenize"),
    needs_if=needs_model_vectors,
    artifacts=("crab/codebook.json", "crab/token_map.json", "crab/report.json"),
    describe="CRAB stage 1: split over-popular tokens with balance-regularized K-means",
)


def run_finetune(ctx: RunContext) -> dict[str, Any]:
    """CRAB stage 2 on the trained MOR model, then the test evaluation on the rebalanced codebook."""
    import time

    from transformers import AutoModelForCausalLM

    from crabrec.crab.alignment import expand_embeddings, hierarchy
    from crabrec.crab.finetune import crab_loss, export_merged, prepare_trainable
    from crabrec.io import read_json
    from crabrec.models.decoder import add_dropout
    from crabrec.sid.codebook import Codebook
    from crabrec.stages.model_stages import evaluate_model, train_decoder

    c = ctx.cfg.crab
    if ctx.cfg.train.backbone:
        raise CrabError("CRAB fine-tuning with train.backbone: not implemented yet (the from-scratch decoder only)")
    old = Codebook.load(ctx.path("sid", "codebook.json"))
    new = Codebook.load(ctx.path("crab", "codebook.json"))
    parent = read_json(ctx.path("crab", "token_map.json"))["parent"]
    start = time.perf_counter()
    model = add_dropout(AutoModelForCausalLM.from_pretrained(ctx.path("models", "mor", "model")))
    expand_embeddings(model, old, new, parent, ctx.cfg.seed, c.init_noise)
    model, groups = prepare_trainable(model, c)
    cfg = ctx.cfg.train.model_copy(update={"epochs": c.epochs, "lr": c.lr, "weight_decay": c.weight_decay})
    out_dir = ctx.path("models", "crab")
    summary = train_decoder(
        ctx,
        new,
        out_dir,
        model=model,
        loss_fn=crab_loss(hierarchy(new), c.gamma, c.normalize_lt),
        param_groups=groups,
        cfg=cfg,
        export=export_merged,
    )
    stage2 = time.perf_counter() - start
    stage1 = read_json(ctx.state_path("rebalance")).get("seconds", 0.0)
    result = evaluate_model(ctx, out_dir, new)
    metrics = read_json(out_dir / "metrics.json")
    metrics["time"] = {
        "rebalance_seconds": stage1,
        "finetune_seconds": round(stage2, 1),
        "total_seconds": round(stage1 + stage2, 1),
    }
    write_json(out_dir / "metrics.json", metrics)
    return {**result, "epochs_run": summary["epochs_run"], "finetune_seconds": round(stage2, 1)}


FINETUNE_STAGE = Stage(
    name="finetune",
    fn=run_finetune,
    sections=("crab", "train", "evaluate"),
    needs=("data", "tokenize", "train", "rebalance"),
    artifacts=("models/crab/model/model.safetensors", "models/crab/metrics.json", "models/crab/rankings.parquet"),
    describe="CRAB stage 2: fine-tune with L_Rec + γ·L_T on the rebalanced codebook, then evaluate",
)
