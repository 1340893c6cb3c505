"""RW (Reweighting): the MOR decoder retrained with each training row weighted by its target's popularity group,
W_G inversely proportional to the group's share of training targets (docs/METHOD.md, "Baselines")."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from crabrec.config import Strict
from crabrec.io import write_json
from crabrec.methods import Method
from crabrec.methods.common import eval_stage, ranker_validation, train_from_scratch, train_stage
from crabrec.pipeline import RunContext
from crabrec.rankers import generator_ranker

RANKER = generator_ranker("rw")  # its test evaluation, validation, API and server rank with it


class Settings(Strict):
    """RW (IFairLRS reweighting)."""

    beta: float = Field(1.0, ge=0, le=4, description="weights W_G^β (0 = unweighted, 1 = the paper's RW)")


def run_rw(ctx: RunContext) -> dict[str, Any]:
    from crabrec.baselines.reweight import group_weights, token_weight_fn
    from crabrec.baselines.weighted import weighted_loss

    pop = ctx.files.load_popularity()
    beta = ctx.cfg.rw.beta
    w_group = group_weights(ctx.files.load_splits().train, pop.group, pop.n_groups) ** beta
    write_json(ctx.files.model_dir("rw") / "group_weights.json", {"W_G": w_group.tolist(), "beta": beta})
    return train_from_scratch(ctx, "rw", weighted_loss(token_weight_fn(w_group[pop.group])))


READS = ("train", "seed", "rw.beta")
TRAIN = train_stage("rw", "rw", run_rw, READS, "Reweighting: decoder retrained with group weights")
METHOD = Method(
    name="rw",
    label="RW",
    stages=(TRAIN, eval_stage("rw-eval", "rw", ("data", "tokenize", "rw"), RANKER)),
    trains="rw",
    evaluates="rw-eval",
    cost=("rw",),
    section="rw",
    settings=Settings,
    knob="rw.beta",
    grid=(0.25, 0.5, 1.0),
    validate=ranker_validation("rw", RANKER),
    ranker=RANKER,
    backbone=True,
    describe="Reweighting: group-weighted retraining",
)
