"""D²LR (reconstruction): the MOR decoder retrained with token-level inverse-propensity weights, the propensity of
a SID token decaying with its position by ``d2lr.alpha`` and the weights clipped at ``d2lr.clip``
(docs/METHOD.md, "Baselines")."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from crabrec.config import Strict
from crabrec.methods import Method
from crabrec.methods.common import eval_stage, ranker_validation, train_from_scratch, train_stage
from crabrec.pipeline import RunContext
from crabrec.rankers import generator_ranker

RANKER = generator_ranker("d2lr")  # its test evaluation, validation, API and server rank with it


class Settings(Strict):
    """D²LR (a reconstruction): token-level inverse-propensity weights."""

    alpha: float = Field(0.5, ge=0, lt=1, description="position decay α of the token propensities")
    clip: float = Field(50.0, gt=0, description="upper clip of the IPS weights")


def run_d2lr(ctx: RunContext) -> dict[str, Any]:
    from crabrec.baselines.d2lr import token_weight_fn
    from crabrec.baselines.weighted import weighted_loss

    b = ctx.cfg.d2lr
    levels = ctx.files.load_codebook().n_levels
    weights = token_weight_fn(ctx.files.load_popularity().freq, levels, b.alpha, b.clip)
    return train_from_scratch(ctx, "d2lr", weighted_loss(weights))


READS = ("train", "seed", "d2lr.alpha", "d2lr.clip")
TRAIN = train_stage("d2lr", "d2lr", run_d2lr, READS, "D²LR (reconstruction): decoder retrained with token IPS weights")
METHOD = Method(
    name="d2lr",
    label="D²LR (reconstruction)",
    stages=(TRAIN, eval_stage("d2lr-eval", "d2lr", ("data", "tokenize", "d2lr"), RANKER)),
    trains="d2lr",
    evaluates="d2lr-eval",
    cost=("d2lr",),
    section="d2lr",
    settings=Settings,
    knob="d2lr.alpha",
    grid=(0.2, 0.5, 0.8),
    validate=ranker_validation("d2lr", RANKER),
    ranker=RANKER,
    backbone=True,
    describe="D²LR: token-level inverse-propensity retraining",
)
