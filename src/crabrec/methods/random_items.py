"""Random: items drawn uniformly for each user, the floor every accuracy and bias number is read against."""

from __future__ import annotations

from crabrec.methods import Method
from crabrec.methods.common import eval_stage


def random_ranker(files, cfg, beam: int | None = None):
    from crabrec.baselines.floors import RandomRanker

    return RandomRanker(files.n_items(), beam or cfg.evaluate.beam, cfg.seed)


EVAL = eval_stage("random-eval", "random", ("data",), random_ranker)  # EVAL_READS holds the seed
METHOD = Method(
    name="random",
    label="Random",
    stages=(EVAL,),
    evaluates="random-eval",
    ranker=random_ranker,
    describe="items drawn uniformly at random for every user (a floor; nothing trained)",
    sids="none",
)
