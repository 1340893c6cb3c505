"""MOR (MiniOneRec-style): a causal decoder generating the next item's SID, trained from scratch on the base
codebook (or LoRA on a pretrained backbone, ``train.backbone``). The base model CRAB and RR start from."""

from __future__ import annotations

from typing import Any

from crabrec.methods import Method
from crabrec.methods.common import eval_stage, ranker_validation, train_from_scratch, train_stage
from crabrec.pipeline import RunContext
from crabrec.rankers import generator_ranker

RANKER = generator_ranker("mor")  # its test evaluation, validation, API and server rank with it


def run_train(ctx: RunContext) -> dict[str, Any]:
    return train_from_scratch(ctx, "mor")


TRAIN = train_stage("train", "mor", run_train, ("train", "seed"), "MOR-style decoder trained on the base codebook")
EVALUATE = eval_stage("evaluate", "mor", ("data", "tokenize", "train"), RANKER)
METHOD = Method(
    name="mor",
    label="MOR (base)",
    stages=(TRAIN, EVALUATE),
    trains="train",
    evaluates="evaluate",
    cost=("train",),
    section="train",
    validate=ranker_validation("mor", RANKER),
    ranker=RANKER,
    backbone=True,
    describe="the generative backbone (causal decoder over SID tokens)",
)
