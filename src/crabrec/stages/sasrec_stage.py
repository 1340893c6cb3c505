"""Stage ``sasrec``: train SASRec on the training rows (early stopping on validation NDCG@10) and evaluate it."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from crabrec.io import load_npz, write_json
from crabrec.pipeline import RunContext, Stage
from crabrec.stages.model_stages import inference_device, test_rows, write_evaluation
from crabrec.stages.sid_stages import load_splits


def run_sasrec(ctx: RunContext) -> dict[str, Any]:
    from crabrec.metrics import ranking_metrics
    from crabrec.models.sasrec import SASRec, SASRecConfig, build_sasrec, rank_full, to_tensors
    from crabrec.train.loop import train

    s = ctx.cfg.sasrec
    splits = load_splits(ctx)
    n_items = len(load_npz(ctx.path("data", "popularity.npz"))["freq"])
    model = build_sasrec(
        SASRecConfig(
            n_items=n_items,
            max_len=ctx.cfg.data.max_history,
            hidden=s.hidden,
            blocks=s.blocks,
            heads=s.heads,
            dropout=s.dropout,
        ),
        ctx.cfg.seed,
    )
    train_rows = splits.train
    valid = splits.valid.take(np.arange(min(len(splits.valid), ctx.cfg.train.valid_samples)))

    def make(rows: np.ndarray) -> dict[str, Any]:
        h, n = to_tensors(train_rows.history[rows], train_rows.length[rows], n_items)
        return {"history": h, "length": n, "target": torch.from_numpy(train_rows.target[rows])}

    def loss(m, batch):
        return m(batch["history"], batch["length"], batch["target"], loss_type=s.loss)

    def validate(m) -> float:
        items = rank_full(m, valid.history, valid.length, 10)
        return ranking_metrics(items, valid.target, (10,))["NDCG@10"]

    cfg = ctx.cfg.train.model_copy(
        update={
            "epochs": s.epochs,
            "batch_size": s.batch_size,
            "lr": s.lr,
            "patience": s.patience,
            "weight_decay": 0.0,
            "warmup_steps": 0,
        }
    )
    out_dir = ctx.path("models", "sasrec")
    result = train(
        model,
        len(train_rows),
        make,
        loss,
        validate,
        cfg,
        out_dir,
        ctx.cfg.seed,
        **ctx.checkpoint_policy(),
    )
    best = SASRec.from_pretrained(out_dir / "model").to(inference_device())
    test = test_rows(ctx)
    start = time.perf_counter()
    items = rank_full(best, test.history, test.length, ctx.cfg.evaluate.beam)
    summary = write_evaluation(
        ctx, out_dir, items, np.zeros(items.shape, np.float32), test, time.perf_counter() - start, None
    )
    write_json(
        out_dir / "train_summary.json",
        {"epochs_run": result.epochs_run, "best_epoch": result.best_epoch, "train_seconds": round(result.seconds, 1)},
    )
    return {**summary, "epochs_run": result.epochs_run, "train_seconds": round(result.seconds, 1)}


SASREC_STAGE = Stage(
    name="sasrec",
    fn=run_sasrec,
    sections=("sasrec", "train", "evaluate"),  # train: validation sample, threads, accumulation
    needs=("data",),
    artifacts=("models/sasrec/metrics.json", "models/sasrec/rankings.parquet"),
    describe="SASRec baseline (full ranking over all items)",
)
