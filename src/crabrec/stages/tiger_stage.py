"""Stage ``tiger``: train TIGER (T5 encoder-decoder) on the base codebook; evaluate with the same beam search."""

from __future__ import annotations

from typing import Any

import numpy as np

from crabrec.io import write_json
from crabrec.pipeline import RunContext, Stage
from crabrec.stages.model_stages import evaluate_model, make_validator
from crabrec.stages.sid_stages import load_splits


def run_tiger(ctx: RunContext) -> dict[str, Any]:
    from crabrec.decode.trie import SidTrie
    from crabrec.models.decoder import item_tokens
    from crabrec.models.tiger import TigerSize, build_tiger, encode_inputs, make_labels, tiger_loss
    from crabrec.sid.codebook import Codebook
    from crabrec.train.loop import length_bucketed, train

    t = ctx.cfg.tiger
    codebook = Codebook.load(ctx.path("sid", "codebook.json"))
    tokens = item_tokens(codebook.token_ids())
    size = TigerSize(t.d_model, t.layers, t.heads, t.d_kv, t.ff, t.dropout, t.user_bins)
    model = build_tiger(codebook.vocab_size, size, seed=ctx.cfg.seed)
    splits = load_splits(ctx)
    rows = splits.train

    def make(index: np.ndarray) -> dict[str, Any]:
        ids, mask = encode_inputs(model.config, rows.user[index], rows.history[index], rows.length[index], tokens)
        return {"ids": ids, "mask": mask, "labels": make_labels(rows.target[index], tokens)}

    cfg = ctx.cfg.train.model_copy(
        update={
            "epochs": t.epochs,
            "batch_size": t.batch_size,
            "lr": t.lr,
            "weight_decay": t.weight_decay,
            "schedule": t.schedule,
            "plateau_factor": t.plateau_factor,
            "warmup_steps": t.warmup_steps,
            "patience": t.patience,
        }
    )
    lengths, ones = rows.length, np.ones(len(rows), np.int64)

    def plan(epoch: int) -> list[np.ndarray]:  # rows of similar history length together: little padding
        return length_bucketed(lengths, ones, cfg.batch_size, ctx.cfg.seed, epoch)

    out_dir = ctx.path("models", "tiger")
    validate = make_validator(ctx, SidTrie.build(codebook), tokens, splits.valid)
    result = train(
        model,
        len(rows),
        make,
        tiger_loss,
        validate,
        cfg,
        out_dir,
        ctx.cfg.seed,
        plan=plan,
        **ctx.checkpoint_policy(),
    )
    write_json(
        out_dir / "train_summary.json",
        {
            "epochs_run": result.epochs_run,
            "best_epoch": result.best_epoch,
            "best_valid_ndcg@10": round(result.best_score, 4),
            "train_seconds": round(result.seconds, 1),
        },
    )
    summary = evaluate_model(ctx, out_dir, codebook)
    return {**summary, "epochs_run": result.epochs_run, "train_seconds": round(result.seconds, 1)}


TIGER_STAGE = Stage(
    name="tiger",
    fn=run_tiger,
    sections=("tiger", "train", "evaluate"),
    needs=("data", "tokenize"),
    artifacts=("models/tiger/model/model.safetensors", "models/tiger/metrics.json", "models/tiger/rankings.parquet"),
    describe="TIGER baseline: T5 encoder-decoder from scratch, same SIDs and beam search",
)
