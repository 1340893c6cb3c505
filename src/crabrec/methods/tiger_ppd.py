"""TIGER+PPD (ours over the other backbone): TIGER's trained encoder-decoder searched with PPD's popularity prior,
τ tuned on TIGER's validation rows as PPD's is on MOR's. Nothing is retrained: PPD acts on any generative model's
beam search over the codebook (docs/METHOD.md, "PPD")."""

from __future__ import annotations

from crabrec.methods import Method
from crabrec.methods.common import ranker_validation
from crabrec.methods.ppd import prior_ranker, prior_stage

RANKER = prior_ranker("tiger-ppd", "tiger")
METHOD = Method(
    name="tiger-ppd",
    label="TIGER+PPD (ours)",
    stages=(prior_stage("tiger-ppd", "tiger", ("data", "tokenize", "tiger", "tiger-eval")),),
    evaluates="tiger-ppd",
    cost=("tiger-ppd",),
    section="ppd",
    knob="ppd.tau",
    grid=(0.25, 0.5, 0.75, 1.0),  # τ = 0 is TIGER's own search, the frontier's reference point
    validate=ranker_validation("tiger-ppd", RANKER),
    ranker=RANKER,
    describe="TIGER+PPD (ours): TIGER's beam search with the codebook's popularity prior divided out",
    base="tiger",
)
