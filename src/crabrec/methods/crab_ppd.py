"""CRAB+PPD (ours, a combination): CRAB's fine-tuned model searched over its rebalanced codebook with PPD's
popularity prior (counted on the rebalanced codebook). Nothing is trained beyond CRAB's own stages."""

from __future__ import annotations

from crabrec.methods import Method
from crabrec.methods.common import eval_stage, ranker_validation
from crabrec.methods.ppd import READS, prior_processors
from crabrec.rankers import generator_ranker

RANKER = generator_ranker("crab", rebalanced=True, processors=prior_processors)
METHOD = Method(
    name="crab-ppd",
    label="CRAB+PPD (ours)",
    stages=(eval_stage("crab-ppd", "crab-ppd", ("data", "tokenize", "finetune"), RANKER, READS),),
    evaluates="crab-ppd",
    cost=("rebalance", "finetune"),
    section="ppd",
    knob="ppd.tau",
    grid=(0.25, 0.5, 0.75),
    # CRAB at the point the frontier picks on the converged Office MOR: no L_T, the first level, half its tokens split
    axes=(("crab.gamma", (0.0,)), ("crab.levels", ([0],)), ("crab.ratio", (0.5,))),
    validate=ranker_validation("crab-ppd", RANKER),
    ranker=RANKER,
    backbone=True,
    describe="CRAB+PPD (ours): CRAB's model and codebook searched with PPD's prior",
    sids="rebalanced",
)
