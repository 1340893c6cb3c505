"""RR (Reranking, IFairLRS): α is tuned on validation rankings of the base model, then the base model's stored test
beams are re-ranked with a per-item penalty from the group unfairness U_G (docs/METHOD.md, "Baselines").
:func:`reranking` builds it over any method's beams: RR over MOR's, PPD+RR over PPD's."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from pydantic import Field, PositiveInt, field_validator

from crabrec.config import Strict
from crabrec.errors import CrabError
from crabrec.io import write_json
from crabrec.methods import Method
from crabrec.metrics import HEADLINE as VALID_METRICS
from crabrec.pipeline import RunContext, Stage


class Settings(Strict):
    """RR (IFairLRS reranking): the α grid tuned on validation and what the tuning reads."""

    alphas: list[float] = Field(
        default_factory=lambda: [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.2, 0.5, 1.0],
        description="α grid tuned on validation",
    )
    ks: list[PositiveInt] = Field(default_factory=lambda: [1, 5, 10, 20], description="K set of U_G")
    max_ndcg_drop: float = Field(0.05, ge=0, le=1, description="keep validation NDCG@10 within this share")
    alpha: float | None = Field(None, ge=0, le=100, description="a fixed α instead of the one tuned on validation")
    valid_samples: int | None = Field(
        None, ge=1, description="validation rows ranked for the tuning and for every frontier point (None = all)"
    )

    @field_validator("alphas")
    @classmethod
    def _has_zero(cls, v: list[float]) -> list[float]:
        if 0.0 not in v or any(a < 0 for a in v):
            raise ValueError("must be non-negative and contain 0 (the un-reranked reference)")
        return sorted(set(v))


def run_rerank(ctx: RunContext, name: str, over: str) -> dict[str, Any]:
    """Tune α on ``over``'s validation beams, then re-rank its stored test beams into ``models/<name>/``."""
    from crabrec.baselines.rerank import choose_alpha, group_penalty, item_penalty, rerank
    from crabrec.decode.rank import score_rankings, sid_members
    from crabrec.decode.trie import SidTrie
    from crabrec.evaluation import test_rows, write_evaluation
    from crabrec.methods import get
    from crabrec.methods.common import versus_of
    from crabrec.metrics import group_unfairness
    from crabrec.runfiles import first_rows

    b, ev, files = ctx.cfg.rr, ctx.cfg.evaluate, ctx.files
    pop = files.load_popularity()
    codebook = files.load_codebook()
    trie = SidTrie.build(codebook)
    _, members = sid_members(trie, codebook.n_items)
    valid = first_rows(files.load_splits().valid, b.valid_samples)
    start = time.perf_counter()
    v_items, v_scores = get(over).ranker(files, ctx.cfg).rank(valid, desc=f"{name}: validation")
    ks = tuple(b.ks)
    fair = group_unfairness(v_items, valid.history_items(), pop.group, pop.n_groups, ks, members)
    u_group = group_penalty({k: np.asarray(fair[f"GU@{k}"]) for k in ks})
    penalty = item_penalty(u_group, pop.group, members)
    curve = []
    for alpha in sorted({*b.alphas, *([b.alpha] if b.alpha is not None else [])}):
        items, _ = rerank(v_items, v_scores, penalty, alpha)
        m = score_rankings(items, valid, pop.group, pop.popular, pop.n_groups, trie, [10], [10])
        curve.append({"alpha": alpha, **{k: m[k] for k in VALID_METRICS}})
    alpha = choose_alpha(curve, b.max_ndcg_drop) if b.alpha is None else b.alpha
    tune_seconds = time.perf_counter() - start
    base = files.load_rankings(over)
    start = time.perf_counter()
    items, scores = rerank(np.stack(base["items"]), np.stack(base["scores"]), penalty, alpha)
    rerank_seconds = time.perf_counter() - start
    base_inference = (files.load_metrics(over) or {}).get("inference_seconds", 0.0)
    test = test_rows(files, ev)
    seconds = base_inference + rerank_seconds
    summary = write_evaluation(files, name, items, scores, test, seconds, trie, ev, ctx.cfg.seed, versus_of(name))
    write_json(
        files.model_dir(name) / "rerank.json",
        {"alpha": alpha, "U_G": u_group.tolist(), "curve": curve, "tune_seconds": round(tune_seconds, 1)},
    )
    return {**summary, "alpha": alpha, "train_seconds": round(tune_seconds, 1)}


class RerankRanker:
    """The base method's beam search, then the re-ranking at the α and U_G that the stage chose on validation (the
    same re-ranking it applied to the base method's stored test beams)."""

    def __init__(self, base, penalty: np.ndarray, alpha: float) -> None:
        self.base, self.penalty, self.alpha = base, penalty, alpha
        self.trie, self.width, self.block = base.trie, base.width, base.block

    def set_unavailable(self, items: np.ndarray) -> bool:
        return self.base.set_unavailable(items)

    def rank(self, rows, desc: str = "ranking", progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
        from crabrec.baselines.rerank import rerank

        items, scores = self.base.rank(rows, desc=desc, progress=progress)
        return rerank(items, scores, self.penalty, self.alpha)


def rerank_ranker(name: str, over: str):
    """``Method.ranker`` of a re-ranking method: ``over``'s ranker and ``models/<name>/rerank.json``."""

    def build(files, cfg, beam: int | None = None) -> RerankRanker:
        from crabrec.baselines.rerank import item_penalty
        from crabrec.decode.rank import sid_members
        from crabrec.methods import get
        from crabrec.runfiles import read_checked

        path = files.model_dir(name) / "rerank.json"
        if not path.is_file():
            raise CrabError(f"{path}: missing; run `crabrec evaluate {files.root} --method {name}` first")
        info = read_checked(path, dict)
        pop = files.load_popularity()
        alpha, u_group = info.get("alpha"), info.get("U_G")
        numbers = isinstance(u_group, list) and all(isinstance(u, int | float) for u in u_group)
        if not isinstance(alpha, int | float) or not numbers or len(u_group) != pop.n_groups:
            raise CrabError(
                f"{path}: expected a number `alpha` and {pop.n_groups} numbers `U_G`; re-run `{name}` with --force"
            )
        base = get(over).ranker(files, cfg, beam)
        _, members = sid_members(base.trie, len(pop.group))
        return RerankRanker(base, item_penalty(np.asarray(u_group, np.float64), pop.group, members), float(alpha))

    return build


def rerank_validation(name: str):
    """``Method.validate`` of a re-ranking method: its validation metrics at its α, from the validation curve its
    stage wrote (ranked over ``rows`` rows, which the frontier sets as ``rr.valid_samples``)."""

    def validate(files, cfg, rows: int | None) -> dict[str, float]:
        from crabrec.runfiles import read_checked

        rerank_file = files.model_dir(name) / "rerank.json"
        info = read_checked(rerank_file, dict)
        point = next((c for c in info.get("curve", []) if c.get("alpha") == info.get("alpha")), None)
        if point is None or any(k not in point for k in VALID_METRICS):
            raise CrabError(
                f"{rerank_file}: no validation metrics at α={info.get('alpha')}; re-run `{name}` with --force"
            )
        return {k: point[k] for k in VALID_METRICS}

    return validate


RR_READS = (
    "evaluate",
    "seed",
    "rr.alphas",
    "rr.ks",
    "rr.max_ndcg_drop",
    "rr.alpha",
    "rr.valid_samples",
)


def reranking(
    name: str, label: str, over: str, needs: tuple[str, ...], reads: tuple[str, ...] = (), **method: Any
) -> Method:
    """A method that re-ranks the beams of method ``over`` (its evaluation stage among ``needs``) with RR's penalty;
    ``reads``: the further settings ``over``'s ranker reads. ``method``: the rest of the :class:`Method`."""
    stage = Stage(
        name=name,
        fn=lambda ctx: run_rerank(ctx, name, over),
        reads=(*RR_READS, *reads),
        needs=needs,
        artifacts=tuple(f"models/{name}/{a}" for a in ("metrics.json", "rankings.parquet", "rerank.json")),
        describe=f"{label}: α tuned on validation, applied to {over}'s test beams",
    )
    return Method(
        name=name,
        label=label,
        stages=(stage,),
        evaluates=name,
        cost=(name,),
        validate=rerank_validation(name),
        ranker=rerank_ranker(name, over),
        **method,
    )


METHOD = reranking(
    "rr",
    "RR",
    "mor",
    ("data", "tokenize", "train", "evaluate"),
    section="rr",
    settings=Settings,
    knob="rr.alpha",
    grid=(0.0, 0.02, 0.05, 0.1, 0.2, 0.5),
    backbone=True,
    describe="Reranking: post-hoc re-ranking of MOR's beams",
)
