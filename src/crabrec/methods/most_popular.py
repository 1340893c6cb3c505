"""MostPop: the catalogue's most frequent training items for everyone, the accuracy floor of Table 1 (and the most
popularity-biased list there is)."""

from __future__ import annotations

from crabrec.methods import Method
from crabrec.methods.common import eval_stage


def most_popular_ranker(files, cfg, beam: int | None = None):
    from crabrec.baselines.floors import MostPopularRanker

    return MostPopularRanker(files.load_popularity().freq, beam or cfg.evaluate.beam)


EVAL = eval_stage("pop-eval", "pop", ("data",), most_popular_ranker)
METHOD = Method(
    name="pop",
    label="MostPop",
    stages=(EVAL,),
    evaluates="pop-eval",
    ranker=most_popular_ranker,
    describe="the most popular training items for every user (a floor; nothing trained)",
    sids="none",
)
