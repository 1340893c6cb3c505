"""RR (Reranking, IFairLRS): α is tuned on validation rankings of the base model, then the base model's stored test
beams are re-ranked with a per-item penalty from the group unfairness U_G (docs/METHOD.md, "Baselines")."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from crabrec.errors import CrabError
from crabrec.io import write_json
from crabrec.methods import Method
from crabrec.metrics import HEADLINE as VALID_METRICS
from crabrec.pipeline import RunContext, Stage


def run_rr(ctx: RunContext) -> dict[str, Any]:
    from crabrec.baselines.rerank import choose_alpha, group_penalty, item_penalty, rerank
    from crabrec.decode.rank import score_rankings, sid_members
    from crabrec.decode.trie import SidTrie
    from crabrec.evaluation import test_rows, write_evaluation
    from crabrec.metrics import group_unfairness
    from crabrec.rankers import generator_ranker
    from crabrec.runfiles import first_rows

    b, ev, files = ctx.cfg.baselines, ctx.cfg.evaluate, ctx.files
    pop = files.load_popularity()
    codebook = files.load_codebook()
    trie = SidTrie.build(codebook)
    _, members = sid_members(trie, codebook.n_items)
    valid = first_rows(files.load_splits().valid, b.rr_valid_samples)
    start = time.perf_counter()
    v_items, v_scores = generator_ranker("mor")(files, ctx.cfg).rank(valid, desc="rr: validation")
    ks = tuple(b.rr_ks)
    fair = group_unfairness(v_items, valid.history_items(), pop.group, pop.n_groups, ks, members)
    u_group = group_penalty({k: np.asarray(fair[f"GU@{k}"]) for k in ks})
    penalty = item_penalty(u_group, pop.group, members)
    curve = []
    for alpha in sorted({*b.rr_alphas, *([b.rr_alpha] if b.rr_alpha is not None else [])}):
        items, _ = rerank(v_items, v_scores, penalty, alpha)
        m = score_rankings(items, valid, pop.group, pop.popular, pop.n_groups, trie, [10], [10])
        curve.append({"alpha": alpha, **{k: m[k] for k in VALID_METRICS}})
    alpha = choose_alpha(curve, b.rr_max_ndcg_drop) if b.rr_alpha is None else b.rr_alpha
    tune_seconds = time.perf_counter() - start
    base = files.load_rankings("mor")
    start = time.perf_counter()
    items, scores = rerank(np.stack(base["items"]), np.stack(base["scores"]), penalty, alpha)
    rerank_seconds = time.perf_counter() - start
    base_inference = (files.load_metrics("mor") or {}).get("inference_seconds", 0.0)
    test = test_rows(files, ev)
    seconds = base_inference + rerank_seconds
    summary = write_evaluation(files, "rr", items, scores, test, seconds, trie, ev, ctx.cfg.seed)
    write_json(
        files.model_dir("rr") / "rerank.json",
        {"alpha": alpha, "U_G": u_group.tolist(), "curve": curve, "tune_seconds": round(tune_seconds, 1)},
    )
    return {**summary, "alpha": alpha, "train_seconds": round(tune_seconds, 1)}


class RerankRanker:
    """MOR's beam search, then RR's re-ranking at the α and U_G that the ``rr`` stage chose on validation (the same
    re-ranking ``rr`` applied to MOR's stored test beams)."""

    def __init__(self, base, penalty: np.ndarray, alpha: float) -> None:
        self.base, self.penalty, self.alpha = base, penalty, alpha
        self.trie, self.width, self.block = base.trie, base.width, base.block

    def rank(self, rows, desc: str = "ranking", progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
        from crabrec.baselines.rerank import rerank

        items, scores = self.base.rank(rows, desc=desc, progress=progress)
        return rerank(items, scores, self.penalty, self.alpha)


def rr_ranker(files, cfg, beam: int | None = None) -> RerankRanker:
    """``Method.ranker`` of RR: MOR's ranker and ``models/rr/rerank.json``."""
    from crabrec.baselines.rerank import item_penalty
    from crabrec.decode.rank import sid_members
    from crabrec.rankers import generator_ranker
    from crabrec.runfiles import read_checked

    path = files.model_dir("rr") / "rerank.json"
    if not path.is_file():
        raise CrabError(f"{path}: missing; run `crabrec evaluate --method rr` first")
    info = read_checked(path, dict)
    pop = files.load_popularity()
    alpha, u_group = info.get("alpha"), info.get("U_G")
    numbers = isinstance(u_group, list) and all(isinstance(u, int | float) for u in u_group)
    if not isinstance(alpha, int | float) or not numbers or len(u_group) != pop.n_groups:
        raise CrabError(f"{path}: expected a number `alpha` and {pop.n_groups} numbers `U_G`; re-run `rr` with --force")
    base = generator_ranker("mor")(files, cfg, beam)
    _, members = sid_members(base.trie, len(pop.group))
    return RerankRanker(base, item_penalty(np.asarray(u_group, np.float64), pop.group, members), float(alpha))


def validate_rr(files, cfg, rows: int | None) -> dict[str, float]:
    """RR's validation metrics at its α: from the validation curve its stage wrote (ranked over ``rows`` rows, which
    the frontier sets as ``baselines.rr_valid_samples``)."""
    from crabrec.runfiles import read_checked

    rerank_file = files.model_dir("rr") / "rerank.json"
    info = read_checked(rerank_file, dict)
    point = next((c for c in info.get("curve", []) if c.get("alpha") == info.get("alpha")), None)
    if point is None or any(k not in point for k in VALID_METRICS):
        raise CrabError(f"{rerank_file}: no validation metrics at α={info.get('alpha')}; re-run `rr` with --force")
    return {k: point[k] for k in VALID_METRICS}


STAGE = Stage(
    name="rr",
    fn=run_rr,
    reads=(
        "evaluate",
        "seed",
        "baselines.rr_alphas",
        "baselines.rr_ks",
        "baselines.rr_max_ndcg_drop",
        "baselines.rr_alpha",
        "baselines.rr_valid_samples",
    ),
    needs=("data", "tokenize", "train", "evaluate"),
    artifacts=("models/rr/metrics.json", "models/rr/rankings.parquet", "models/rr/rerank.json"),
    describe="Reranking baseline: α tuned on validation, applied to the base model's test beams",
)
METHOD = Method(
    name="rr",
    label="RR",
    stages=(STAGE,),
    evaluates="rr",
    cost=("rr",),
    section="baselines",
    knob="baselines.rr_alpha",
    grid=(0.0, 0.02, 0.05, 0.1, 0.2, 0.5),
    validate=validate_rr,
    ranker=rr_ranker,
    backbone=True,
    describe="Reranking: post-hoc re-ranking of MOR's beams",
)
