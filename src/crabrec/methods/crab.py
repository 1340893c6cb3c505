"""CRAB, post-hoc on the trained MOR model: stage 1 ``rebalance`` splits over-popular tokens of the base codebook,
stage 2 ``finetune`` adapts the model to the new codebook with L_Rec + γ·L_T, then ``crab-eval`` tests it."""

from __future__ import annotations

from typing import Any

from crabrec.errors import CrabError
from crabrec.io import write_json, write_text
from crabrec.methods import Method
from crabrec.methods.common import eval_stage, ranker_validation, train_stage
from crabrec.pipeline import RunContext, Stage
from crabrec.rankers import generator_ranker

RANKER = generator_ranker("crab", rebalanced=True)  # its test evaluation, validation, API and server rank with it

REBALANCE_READS = ("ratio", "levels", "max_split", "lam", "n_init", "max_iter", "exact_limit")
FINETUNE_READS = ("gamma", "normalize_lt", "params", "lora_r", "lora_alpha", "lora_dropout", "init_noise")
OWN_LOOP = ("epochs", "lr", "weight_decay", "keep")  # the fine-tune's own; the rest of its loop is the base model's
BASE_LOOP = (
    "batch_size",
    "grad_accum",
    "warmup_steps",
    "schedule",
    "plateau_factor",
    "patience",
    "valid_every",
    "max_minutes",
    "compile",
    "cuda_graphs",
)
GRID = (0.0, 0.01, 0.1, 1.0)  # the frontier's γ values
CONTROL = (("crab.ratio", 0),)  # no token split: what the fine-tune alone does
CONTROL_FREE = ("crab.levels",)
VALIDATION = ("valid_samples", "valid_beam", "valid_batch_size", "packing", "group_by_length", "backbone")


def run_rebalance(ctx: RunContext) -> dict[str, Any]:
    from crabrec.crab.rebalance import format_report, rebalance

    c, files = ctx.cfg.crab, ctx.files
    base = files.load_codebook()
    vectors = "the item vectors the SIDs quantize"
    if base.residuals is None:  # ids-only data: cluster on the trained MOR model's token embeddings instead
        base.residuals, vectors = model_residuals(ctx, base), "MOR token embeddings (no item text)"
    out = rebalance(base, files.load_popularity().freq, c, ctx.cfg.seed)
    out.codebook.save(files.codebook(rebalanced=True))
    write_json(files.sid_file("index.json", True), out.codebook.to_index())
    write_json(files.sid_file("token_map.json", True), {"old_to_new": out.token_map, "parent": out.parent})
    write_json(files.sid_file("report.json", True), out.report)
    write_text(files.sid_file("report.txt", True), format_report(out.report) + "\n")
    return {
        "split": sum(r["split"] for r in out.report),
        "created": sum(r["created"] for r in out.report),
        "collisions": out.codebook.collisions(),
        "vectors": vectors,
    }


def model_residuals(ctx: RunContext, codebook) -> list:
    """Residuals from the trained MOR model's SID token embeddings (see ``token_residuals``): the from-scratch
    decoder's or a backbone's (its tokenizer places the SID rows)."""
    from safetensors import safe_open

    from crabrec.crab.rebalance import token_residuals
    from crabrec.rankers import generator_io
    from crabrec.runfiles import load_checked

    model_dir = ctx.files.weights("mor")
    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        raise CrabError(
            f"{ctx.files.codebook()}: no per-item residuals (the dataset has no item text) and no trained MOR "
            "model to take token embeddings from; run `crabrec train` first"
        )

    def read_table():
        with safe_open(str(weights), framework="np") as f:
            return f.get_tensor("model.embed_tokens.weight")

    table = load_checked(weights, read_table)
    return token_residuals(generator_io(model_dir, codebook).tokens, table)


def needs_model_vectors(ctx: RunContext) -> tuple[str, ...]:
    """Stage 1 clusters on text residuals when the codebook has them, else on the trained MOR's embeddings.

    Decided from the codebook on disk, which ``ensure`` has built before it asks; before one exists, text is assumed.
    """
    codebook = ctx.files.codebook()
    without = codebook.is_file() and not codebook.with_name("codebook.residuals.npz").is_file()
    return ("train",) if without else ()


def run_finetune(ctx: RunContext) -> dict[str, Any]:
    """CRAB stage 2 on the trained MOR model (from-scratch decoder or backbone), on the rebalanced codebook."""
    from crabrec.config import Overlay
    from crabrec.crab.alignment import expand_embeddings, hierarchy
    from crabrec.crab.finetune import crab_loss, prepare_trainable
    from crabrec.models.backbone import decoder_io, export_backbone
    from crabrec.models.lora import export_merged
    from crabrec.runfiles import read_checked
    from crabrec.train.decoder import train_decoder

    c, files, seed = ctx.cfg.crab, ctx.files, ctx.cfg.seed
    old, new = files.load_codebook(), files.load_codebook(rebalanced=True)
    parent = read_checked(files.sid_file("token_map.json", True), dict)["parent"]
    model, tokenizer, base = mor_model(ctx, old, new)
    expand_embeddings(model, old, new, parent, seed, c.init_noise, base)
    model, groups = prepare_trainable(model, c, base)
    loop = Overlay(ctx.cfg.train, c, OWN_LOOP)
    loss = crab_loss(hierarchy(new, base), c.gamma, c.normalize_lt)
    export = export_merged if tokenizer is None else export_backbone(tokenizer)
    out = files.model_dir("crab")
    policy = ctx.checkpoint_policy()
    return train_decoder(
        model, decoder_io(new, tokenizer), new, files.load_splits(), loop, out, seed, loss,
        param_groups=groups, export=export, **policy,
    )  # fmt: skip


def mor_model(ctx: RunContext, old, new):
    """``(model, tokenizer, base)``: the trained MOR model to fine-tune. A backbone comes with its own tokenizer
    plus the new codebook's SID tokens (``None`` for the from-scratch decoder); ``base`` = the SID block's first row."""
    from pathlib import Path

    from transformers import AutoModelForCausalLM

    from crabrec.models.backbone import fuse_rms_norms, rebalanced_tokenizer
    from crabrec.models.decoder import N_SPECIAL, add_dropout
    from crabrec.rankers import generator_io
    from crabrec.runfiles import load_checked

    mor = ctx.files.weights("mor")
    model = load_checked(mor / "model.safetensors", lambda: AutoModelForCausalLM.from_pretrained(mor))
    if not ctx.cfg.train.backbone:
        return add_dropout(model), None, N_SPECIAL
    base = generator_io(mor, old).base
    fuse_rms_norms(model)  # as MOR trained on it (the same values on the CPU)
    return model, rebalanced_tokenizer(Path(ctx.cfg.train.backbone), base, list(new.sizes)), base


def check_rebalance(ctx: RunContext) -> None:
    """The split settings fit the run's codebook (when the tokenize stage has run)."""
    from crabrec.crab.rebalance import check_levels

    if ctx.files.codebook().is_file():
        check_levels(ctx.config.crab, ctx.files.load_codebook().semantic_levels)


REBALANCE = Stage(
    name="rebalance",
    fn=run_rebalance,
    check=check_rebalance,
    reads=(*(f"crab.{k}" for k in REBALANCE_READS), "seed"),  # without text it also reads MOR's weights (needs_if)
    needs=("data", "tokenize"),
    needs_if=needs_model_vectors,
    artifacts=("crab/codebook.json", "crab/token_map.json", "crab/report.json"),
    describe="CRAB stage 1: split over-popular tokens with balance-regularized K-means",
)
FINETUNE = train_stage(
    "finetune",
    "crab",
    run_finetune,
    (*(f"crab.{k}" for k in FINETUNE_READS + OWN_LOOP), *(f"train.{k}" for k in BASE_LOOP + VALIDATION), "seed"),
    "CRAB stage 2: fine-tune with L_Rec + γ·L_T on the rebalanced codebook",
    needs=("data", "tokenize", "train", "rebalance"),
)
METHOD = Method(
    name="crab",
    label="CRAB",
    stages=(REBALANCE, FINETUNE, eval_stage("crab-eval", "crab", ("data", "tokenize", "finetune"), RANKER)),
    trains="finetune",
    evaluates="crab-eval",
    cost=("rebalance", "finetune"),
    section="crab",
    knob="crab.gamma",
    grid=GRID,
    axes=(("crab.levels", (None, [0])), ("crab.ratio", (0.1, 0.5))),  # every level or the first; share split
    validate=ranker_validation("crab", RANKER),
    ranker=RANKER,
    backbone=True,
    describe="CRAB: codebook rebalancing + hierarchical alignment fine-tune",
    sids="rebalanced",
    control=CONTROL,
    control_free=CONTROL_FREE,
)
