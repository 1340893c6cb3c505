"""PPD (popularity-prior decoding, ours): the trained MOR model searched with logit adjustment. At every SID level the
beam search subtracts ``τ·log P̂(token | prefix)``, the codebook's smoothed training prior, from the model's
log-probabilities, so long-tail prefixes survive the pruning that a post-hoc reranker comes too late for. Nothing is
retrained; any codebook and any generative backbone take it (docs/METHOD.md, "PPD").

τ is tuned on validation by RR's rule unless ``ppd.tau`` fixes it: each τ of ``ppd.taus`` searches the validation
rows, and the lowest validation DGU@10 among those within ``ppd.max_ndcg_drop`` of τ=0's NDCG@10 wins. The stage
writes the τ it used to ``models/<method>/prior.json``, which the method's ranker (``crabrec recommend``, the API,
``serve``) reads."""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field, field_validator

from crabrec.config import Strict, keyed_when_set
from crabrec.errors import CrabError
from crabrec.methods import Method
from crabrec.methods.common import (
    EVAL_ARTIFACTS,
    EVAL_READS,
    eval_needs,
    ranker_validation,
    validation_metrics,
    versus_of,
)
from crabrec.pipeline import RunContext, Stage
from crabrec.rankers import generator_ranker

READS = ("ppd.tau", "ppd.smoothing")  # what a PPD ranker reads (PPD+RR's stage ranks through PPD's)
TUNE_READS = ("ppd.taus", "ppd.max_ndcg_drop", "ppd.valid_samples")  # and what the tuning reads
PRIOR_FILE = "prior.json"


class Settings(Strict):
    """PPD (popularity-prior decoding, ours): logit adjustment by the codebook's training prior inside the beam search
    (docs/METHOD.md, "PPD"), its strength τ tuned on validation."""

    tau: float | None = Field(
        None,
        ge=0,
        le=4,
        description="a fixed strength τ (each level's log-prob minus τ·log P̂(token | prefix)) instead of the one "
        "tuned on validation",
    )
    # the tuning's settings are keyed only when changed: a run cached at a fixed τ (the only kind before) stays cached
    taus: list[float] = keyed_when_set(
        [0.0, 0.25, 0.5, 0.75, 1.0],
        description="τ grid tuned on validation: the lowest validation DGU@10 among the τ whose NDCG@10 stays within "
        "max_ndcg_drop of τ=0's (RR's rule); each τ is one beam search over the validation rows",
    )
    max_ndcg_drop: float = keyed_when_set(
        0.05, ge=0, le=1, description="keep validation NDCG@10 within this share of τ=0's"
    )
    valid_samples: int | None = keyed_when_set(None, ge=1, description="validation rows the tuning ranks (None = all)")
    smoothing: float = Field(1.0, gt=0, description="additive smoothing of the prefix counts behind P̂")

    @field_validator("taus")
    @classmethod
    def _has_zero(cls, v: list[float]) -> list[float]:
        if 0.0 not in v or any(t < 0 or t > 4 for t in v):
            raise ValueError("must lie in [0, 4] and contain 0 (the unadjusted search, the tuning's reference)")
        return sorted(set(v))


def set_prior(ranker, files, cfg, tau: float):
    """``ranker`` (a :class:`~crabrec.rankers.GeneratorRanker`) searching with the popularity prior at ``tau``."""
    from crabrec.decode.processors import PopularityPrior

    ranker.processors = (PopularityPrior(ranker.trie, files.load_popularity().freq, tau, cfg.ppd.smoothing),)
    return ranker


def stored_tau(files, method: str) -> float:
    """The τ ``method``'s stage tuned (``models/<method>/prior.json``)."""
    from crabrec.runfiles import read_checked

    path = files.model_dir(method) / PRIOR_FILE
    if not path.is_file():
        raise CrabError(
            f"{path}: missing: {method}'s τ is tuned on validation when it is evaluated; run `crabrec evaluate "
            f"{files.root} --method {method}` first (or fix τ with ppd.tau in the run's config.yaml)"
        )
    tau = read_checked(path, dict).get("tau")
    if not isinstance(tau, int | float) or isinstance(tau, bool) or not 0 <= tau <= 4:
        raise CrabError(f"{path}: expected a number `tau` in [0, 4]; re-run `{method}` with --force")
    return float(tau)


def prior_ranker(method: str, model: str, rebalanced: bool = False):
    """``Method.ranker`` of a PPD method: ``model``'s search with the prior at ``ppd.tau``, or at the τ that
    ``method``'s stage tuned."""
    base = generator_ranker(model, rebalanced)

    def build(files, cfg, beam: int | None = None):
        tau = cfg.ppd.tau if cfg.ppd.tau is not None else stored_tau(files, method)
        return set_prior(base(files, cfg, beam), files, cfg, tau)

    return build


def tune_tau(files, cfg, method: str, ranker) -> tuple[float, list[dict[str, Any]]]:
    """Search the validation rows at each τ of ``ppd.taus`` with ``ranker``; the τ RR's rule picks, and the curve."""
    from crabrec.baselines.rerank import choose_alpha

    p, curve = cfg.ppd, []
    for tau in p.taus:
        at = set_prior(ranker, files, cfg, tau)
        curve.append(
            {"tau": tau, **validation_metrics(files, at, p.valid_samples, f"{method}: validation at τ={tau:g}")}
        )
    return choose_alpha(curve, p.max_ndcg_drop, knob="tau"), curve


def prior_stage(method: str, model: str, needs: tuple[str, ...], rebalanced: bool = False) -> Stage:
    """Stage ``method``: τ tuned on validation (unless ``ppd.tau`` is set), then ``model``'s search with the prior
    at that τ ranks the test rows -> metrics.json, rankings.parquet, prior.json."""

    def run(ctx: RunContext) -> dict[str, Any]:
        from crabrec import distributed
        from crabrec.evaluation import evaluate_ranker
        from crabrec.io import write_json

        files, cfg = ctx.files, ctx.cfg
        ranker = generator_ranker(model, rebalanced)(files, cfg)
        start = time.perf_counter()
        tau, curve = (cfg.ppd.tau, []) if cfg.ppd.tau is not None else tune_tau(files, cfg, method, ranker)
        tune_seconds = round(time.perf_counter() - start, 1)
        searched = set_prior(ranker, files, cfg, tau)
        summary = evaluate_ranker(files, method, searched, cfg.evaluate, cfg.seed, versus_of(method))
        if distributed.is_main():
            prior = {"tau": tau, "tuned": cfg.ppd.tau is None, "curve": curve, "tune_seconds": tune_seconds}
            write_json(files.model_dir(method) / PRIOR_FILE, prior)
        return {**summary, "tau": tau, "train_seconds": tune_seconds}

    return Stage(
        name=method,
        fn=run,
        reads=(*EVAL_READS, *READS, *TUNE_READS),
        needs=eval_needs(method, needs),
        artifacts=tuple(f"models/{method}/{a}" for a in (*EVAL_ARTIFACTS, PRIOR_FILE)),
        describe=f"{method}: τ tuned on validation, then rank the test rows -> metrics.json, rankings.parquet",
        distributed=True,
    )


RANKER = prior_ranker("ppd", "mor")  # MOR's model and codebook, searched with the prior
METHOD = Method(
    name="ppd",
    label="PPD (ours)",
    stages=(prior_stage("ppd", "mor", ("data", "tokenize", "train")),),
    evaluates="ppd",
    cost=("ppd",),
    section="ppd",
    settings=Settings,
    knob="ppd.tau",
    grid=(0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0),
    validate=ranker_validation("ppd", RANKER),
    ranker=RANKER,
    backbone=True,
    describe="PPD (ours): MOR's beam search with the codebook's popularity prior divided out, level by level",
)
