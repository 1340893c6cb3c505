"""PPD (popularity-prior decoding, ours): the trained MOR model searched with logit adjustment. At every SID level the
beam search subtracts ``τ·log P̂(token | prefix)``, the codebook's smoothed training prior, from the model's
log-probabilities, so long-tail prefixes survive the pruning that a post-hoc reranker comes too late for. Nothing is
retrained; any codebook and any generative backbone take it (docs/METHOD.md, "PPD")."""

from __future__ import annotations

from pydantic import Field

from crabrec.config import Strict
from crabrec.methods import Method
from crabrec.methods.common import eval_stage, ranker_validation
from crabrec.rankers import generator_ranker

READS = ("ppd.tau", "ppd.smoothing")


class Settings(Strict):
    """PPD (popularity-prior decoding, ours): logit adjustment by the codebook's training prior inside the beam search
    (docs/METHOD.md, "PPD")."""

    tau: float = Field(0.5, ge=0, le=4, description="strength τ: each level's log-prob minus τ·log P̂(token | prefix)")
    smoothing: float = Field(1.0, gt=0, description="additive smoothing of the prefix counts behind P̂")


def prior_processors(files, cfg):
    """``processors(trie)`` for :class:`~crabrec.rankers.GeneratorRanker`: the popularity prior at ``cfg.ppd``."""
    from crabrec.decode.processors import PopularityPrior

    freq = files.load_popularity().freq
    return lambda trie: [PopularityPrior(trie, freq, cfg.ppd.tau, cfg.ppd.smoothing)]


RANKER = generator_ranker("mor", processors=prior_processors)  # MOR's model and codebook, searched with the prior
METHOD = Method(
    name="ppd",
    label="PPD (ours)",
    stages=(eval_stage("ppd", "ppd", ("data", "tokenize", "train"), RANKER, READS),),
    evaluates="ppd",
    section="ppd",
    settings=Settings,
    knob="ppd.tau",
    grid=(0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0),
    validate=ranker_validation("ppd", RANKER),
    ranker=RANKER,
    backbone=True,
    describe="PPD (ours): MOR's beam search with the codebook's popularity prior divided out, level by level",
)
