"""Stages ``rw``, ``d2lr`` (re-weighted retraining of the decoder) and ``rr`` (re-ranking of the base model's beams)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

from crabrec.errors import CrabError
from crabrec.io import load_npz, read_json, write_json
from crabrec.pipeline import RunContext, Stage
from crabrec.stages.model_stages import evaluate_model, load_generator, test_rows, train_decoder, write_evaluation
from crabrec.stages.sid_stages import load_splits


def _train_weighted(ctx: RunContext, name: str, weight_fn) -> dict[str, Any]:
    """Train the decoder from scratch with a weighted loss, evaluate it, record its time."""
    from crabrec.baselines.weighted import weighted_loss
    from crabrec.sid.codebook import Codebook

    if ctx.cfg.train.backbone:
        raise CrabError(f"{name} with train.backbone: not implemented (the weighted losses assume bare SID rows)")
    codebook = Codebook.load(ctx.path("sid", "codebook.json"))
    out_dir = ctx.path("models", name)
    summary = train_decoder(ctx, codebook, out_dir, loss_fn=weighted_loss(weight_fn(codebook)))
    result = evaluate_model(ctx, out_dir, codebook)
    return {**result, "epochs_run": summary["epochs_run"], "train_seconds": summary["train_seconds"]}


def run_rw(ctx: RunContext) -> dict[str, Any]:
    from crabrec.baselines.reweight import group_weights, token_weight_fn

    pop = load_npz(ctx.path("data", "popularity.npz"))
    train = load_splits(ctx).train
    w_group = group_weights(train, pop["group"], ctx.cfg.data.n_groups)
    write_json(ctx.path("models", "rw", "group_weights.json"), {"W_G": w_group.tolist()})
    return _train_weighted(ctx, "rw", lambda cb: token_weight_fn(w_group[pop["group"]]))


def run_d2lr(ctx: RunContext) -> dict[str, Any]:
    from crabrec.baselines.d2lr import token_weight_fn

    b = ctx.cfg.baselines
    freq = load_npz(ctx.path("data", "popularity.npz"))["freq"]
    return _train_weighted(ctx, "d2lr", lambda cb: token_weight_fn(freq, cb.n_levels, b.d2lr_alpha, b.d2lr_clip))


def run_rr(ctx: RunContext) -> dict[str, Any]:
    """Tune α on validation rankings of the base model, then re-rank its stored test beams."""
    from crabrec.baselines.rerank import choose_alpha, group_penalty, item_penalty, rerank
    from crabrec.decode.rank import rank_samples, score_rankings, sid_members
    from crabrec.decode.trie import SidTrie
    from crabrec.metrics import group_unfairness
    from crabrec.sid.codebook import Codebook
    from crabrec.stages.model_stages import generator_io

    b, ev = ctx.cfg.baselines, ctx.cfg.evaluate
    pop = load_npz(ctx.path("data", "popularity.npz"))
    codebook = Codebook.load(ctx.path("sid", "codebook.json"))
    trie = SidTrie.build(codebook)
    _, members = sid_members(trie, codebook.n_items)
    valid = load_splits(ctx).valid
    if b.rr_valid_samples:
        valid = valid.take(np.arange(min(len(valid), b.rr_valid_samples)))
    start = time.perf_counter()
    model = load_generator(ctx.path("models", "mor", "model"), codebook)
    io = generator_io(ctx.path("models", "mor", "model"), codebook)
    v_items, v_scores = rank_samples(
        model,
        trie,
        valid,
        io.tokens,
        ev.beam,
        ev.batch_size,
        desc="rr: validation",
        prompt=io.test_prompt,
        base=io.base,
    )
    fair = group_unfairness(
        v_items, valid.history_items(), pop["group"], ctx.cfg.data.n_groups, tuple(b.rr_ks), members
    )
    u_group = group_penalty({k: np.asarray(fair[f"GU@{k}"]) for k in b.rr_ks})
    penalty = item_penalty(u_group, pop["group"], members)
    curve = []
    for alpha in b.rr_alphas:
        items, _ = rerank(v_items, v_scores, penalty, alpha)
        m = score_rankings(items, valid, pop["group"], pop["popular"], ctx.cfg.data.n_groups, trie, [10], [10])
        curve.append({"alpha": alpha, "NDCG@10": m["NDCG@10"], "HR@10": m["HR@10"], "DGU@10": m["DGU@10"]})
    alpha = choose_alpha(curve, b.rr_max_ndcg_drop)
    tune_seconds = time.perf_counter() - start
    base = pd.read_parquet(ctx.path("models", "mor", "rankings.parquet"))
    test = test_rows(ctx)
    start = time.perf_counter()
    items, scores = rerank(np.stack(base["items"]), np.stack(base["scores"]), penalty, alpha)
    rerank_seconds = time.perf_counter() - start
    base_inference = read_json(ctx.path("models", "mor", "metrics.json"))["inference_seconds"]
    out_dir = ctx.path("models", "rr")
    summary = write_evaluation(ctx, out_dir, items, scores, test, base_inference + rerank_seconds, trie)
    write_json(
        out_dir / "rerank.json",
        {"alpha": alpha, "U_G": u_group.tolist(), "curve": curve, "tune_seconds": round(tune_seconds, 1)},
    )
    return {**summary, "alpha": alpha, "tune_seconds": round(tune_seconds, 1)}


RW_STAGE = Stage(
    name="rw",
    fn=run_rw,
    sections=("train", "evaluate"),
    needs=("data", "tokenize"),
    artifacts=("models/rw/metrics.json", "models/rw/rankings.parquet"),
    describe="Reweighting baseline: decoder retrained with per-sample group weights",
)
D2LR_STAGE = Stage(
    name="d2lr",
    fn=run_d2lr,
    sections=("train", "evaluate", "baselines"),
    needs=("data", "tokenize"),
    artifacts=("models/d2lr/metrics.json", "models/d2lr/rankings.parquet"),
    describe="D²LR baseline (reconstruction): decoder retrained with token-level IPS weights",
)
RR_STAGE = Stage(
    name="rr",
    fn=run_rr,
    sections=("evaluate", "baselines"),
    needs=("data", "tokenize", "train", "evaluate"),
    artifacts=("models/rr/metrics.json", "models/rr/rankings.parquet", "models/rr/rerank.json"),
    describe="Reranking baseline: α tuned on validation, applied to the base model's test beams",
)
