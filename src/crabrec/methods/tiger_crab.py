"""TIGER+CRAB: CRAB's stage 2 on TIGER's trained encoder-decoder. Stage 1 is CRAB's own ``rebalance`` (one
rebalanced codebook per run, whichever model is fine-tuned on it); ``tiger-finetune`` grows TIGER's SID rows for the
new tokens and fine-tunes it with TIGER's loss + γ·L_T (LoRA on its attention, SID rows of the embedding table and
of the per-level output layer trainable), then ``tiger-crab-eval`` tests it."""

from __future__ import annotations

from typing import Any

from crabrec.methods import Method
from crabrec.methods.common import eval_stage, ranker_validation, train_stage
from crabrec.methods.crab import BASE_LOOP, CONTROL, CONTROL_FREE, FINETUNE_READS, GRID, OWN_LOOP
from crabrec.pipeline import RunContext
from crabrec.rankers import generator_ranker

RANKER = generator_ranker("tiger-crab", rebalanced=True)


def run_tiger_finetune(ctx: RunContext) -> dict[str, Any]:
    """CRAB stage 2 on the trained TIGER, on the rebalanced codebook; the loop is TIGER's with CRAB's epochs, learning
    rate, weight decay and ``keep``."""
    from crabrec.config import Overlay
    from crabrec.crab.alignment import hierarchy
    from crabrec.crab.finetune import crab_loss, prepare_trainable
    from crabrec.methods.tiger import tiger_data
    from crabrec.models.decoder import N_SPECIAL
    from crabrec.models.dropout import use_fast_dropout
    from crabrec.models.lora import export_merged
    from crabrec.models.tiger import rebalanced_tiger, tiger_loss
    from crabrec.rankers import load_generator
    from crabrec.runfiles import read_checked
    from crabrec.train.loop import train, training_summary

    c, files, seed = ctx.cfg.crab, ctx.files, ctx.cfg.seed
    old, new = files.load_codebook(), files.load_codebook(rebalanced=True)
    parent = read_checked(files.sid_file("token_map.json", True), dict)["parent"]
    model = load_generator(files.weights("tiger"), old).cpu()
    rebalanced_tiger(model, old, new, parent, seed, c.init_noise)
    rows, validate = tiger_data(model.config, new, files.load_splits(), ctx.cfg, seed)
    model, groups = prepare_trainable(use_fast_dropout(model), c, N_SPECIAL, N_SPECIAL + new.vocab_size)
    loss = crab_loss(hierarchy(new), c.gamma, c.normalize_lt, rec=tiger_loss)
    out = files.model_dir("tiger-crab")
    loop = Overlay(ctx.cfg.tiger, c, OWN_LOOP)
    result = train(
        model, rows, loss, validate, loop, out, seed, param_groups=groups, export=export_merged,
        **ctx.checkpoint_policy(),
    )  # fmt: skip
    return training_summary(result, out)


TIGER_READS = (*(f"tiger.{k}" for k in BASE_LOOP), "train.valid_samples", "train.valid_beam", "train.valid_batch_size")
FINETUNE = train_stage(
    "tiger-finetune",
    "tiger-crab",
    run_tiger_finetune,
    (*(f"crab.{k}" for k in FINETUNE_READS + OWN_LOOP), *TIGER_READS, "seed"),
    "TIGER+CRAB: fine-tune TIGER with its loss + γ·L_T on the rebalanced codebook",
    needs=("data", "tokenize", "tiger", "rebalance"),
)
METHOD = Method(
    name="tiger-crab",
    label="TIGER+CRAB",
    stages=(
        FINETUNE,
        eval_stage("tiger-crab-eval", "tiger-crab", ("data", "tokenize", "tiger-eval", "tiger-finetune"), RANKER),
    ),
    trains="tiger-finetune",
    evaluates="tiger-crab-eval",
    cost=("rebalance", "tiger-finetune"),
    section="crab",
    knob="crab.gamma",
    grid=GRID,
    validate=ranker_validation("tiger-crab", RANKER),
    ranker=RANKER,
    describe="CRAB on TIGER: codebook rebalancing + hierarchical alignment fine-tune of TIGER's model",
    sids="rebalanced",
    base="tiger",
    control=CONTROL,
    control_free=CONTROL_FREE,
)
