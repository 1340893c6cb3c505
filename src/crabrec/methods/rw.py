"""RW (Reweighting): the MOR decoder retrained with each training row weighted by its target's popularity group,
W_G inversely proportional to the group's share of training targets (docs/METHOD.md, "Baselines")."""

from __future__ import annotations

from typing import Any

from crabrec.errors import CrabError
from crabrec.io import write_json
from crabrec.methods import Method
from crabrec.methods.common import eval_stage, train_from_scratch, train_stage
from crabrec.pipeline import RunContext


def run_rw(ctx: RunContext) -> dict[str, Any]:
    from crabrec.baselines.reweight import group_weights, token_weight_fn
    from crabrec.baselines.weighted import weighted_loss

    if ctx.cfg.train.backbone:
        raise CrabError("rw with train.backbone: not implemented (the weighted losses assume bare SID rows)")
    pop = ctx.files.load_popularity()
    w_group = group_weights(ctx.files.load_splits().train, pop.group, pop.n_groups)
    write_json(ctx.files.model_dir("rw") / "group_weights.json", {"W_G": w_group.tolist()})
    return train_from_scratch(ctx, "rw", weighted_loss(token_weight_fn(w_group[pop.group])))


TRAIN = train_stage("rw", "rw", run_rw, ("train", "seed"), "Reweighting: decoder retrained with group weights")
METHOD = Method(
    name="rw",
    label="RW",
    stages=(TRAIN, eval_stage("rw-eval", "rw", needs=("data", "tokenize", "rw"))),
    trains="rw",
    evaluates="rw-eval",
    cost=("rw",),
    section="train",
    describe="Reweighting: group-weighted retraining",
)
