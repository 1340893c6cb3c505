"""CRAB+PPD (ours, a combination): CRAB's fine-tuned model searched over its rebalanced codebook with PPD's
popularity prior (counted on the rebalanced codebook), τ tuned on validation over CRAB's model as PPD's is over MOR's.
Nothing is trained beyond CRAB's own stages."""

from __future__ import annotations

from crabrec.methods import Method
from crabrec.methods.common import ranker_validation
from crabrec.methods.ppd import prior_ranker, prior_stage

RANKER = prior_ranker("crab-ppd", "crab", rebalanced=True)
METHOD = Method(
    name="crab-ppd",
    label="CRAB+PPD (ours)",
    stages=(prior_stage("crab-ppd", "crab", ("data", "tokenize", "finetune"), rebalanced=True),),
    evaluates="crab-ppd",
    cost=("rebalance", "finetune", "crab-ppd"),
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
