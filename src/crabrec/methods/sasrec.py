"""SASRec: the item-id sequential recommender (full ranking over all items), the accuracy reference."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from crabrec.methods import Method
from crabrec.methods.common import EVAL_READS, eval_needs, train_stage
from crabrec.pipeline import RunContext, Stage


def run_sasrec(ctx: RunContext) -> dict[str, Any]:
    import torch

    from crabrec.metrics import ranking_metrics
    from crabrec.models.sasrec import SASRecConfig, build_sasrec, rank_full, to_tensors
    from crabrec.runfiles import first_rows
    from crabrec.train.loop import Rows, train, training_summary

    s, seed = ctx.cfg.sasrec, ctx.cfg.seed
    splits = ctx.files.load_splits()
    n_items = ctx.files.n_items()
    width = splits.train.history.shape[1]
    fields = {f: getattr(s, f) for f in ("hidden", "blocks", "heads", "dropout")}
    model = build_sasrec(SASRecConfig(n_items=n_items, max_len=width, **fields), seed)
    rows, valid = splits.train, first_rows(splits.valid, ctx.cfg.train.valid_samples)
    loss_type = s.loss

    def make(index: np.ndarray) -> dict[str, Any]:
        h, n = to_tensors(rows.history[index], rows.length[index], n_items)
        return {"history": h, "length": n, "target": torch.from_numpy(rows.target[index])}

    def loss(m, batch):
        return m(batch["history"], batch["length"], batch["target"], loss_type=loss_type)

    def validate(m) -> float:
        return ranking_metrics(rank_full(m, valid.history, valid.length, 10), valid.target, (10,))["NDCG@10"]

    out = ctx.files.model_dir("sasrec")
    result = train(model, Rows(len(rows), make), loss, validate, s, out, seed, **ctx.checkpoint_policy())
    return training_summary(result, out)


def run_eval(ctx: RunContext) -> dict[str, Any]:
    from crabrec.evaluation import inference_device, test_rows, write_evaluation
    from crabrec.models.sasrec import SASRec, rank_full
    from crabrec.runfiles import load_checked

    cfg = ctx.cfg.evaluate
    path = ctx.files.weights("sasrec")
    model = load_checked(path / "model.safetensors", lambda: SASRec.from_pretrained(path)).to(inference_device())
    test = test_rows(ctx.files, cfg)
    start = time.perf_counter()
    items = rank_full(model, test.history, test.length, cfg.beam)
    seconds = time.perf_counter() - start
    scores = np.zeros(items.shape, np.float32)
    return write_evaluation(ctx.files, "sasrec", items, scores, test, seconds, None, cfg, ctx.cfg.seed)


READS = ("sasrec", "train.valid_samples", "seed")
TRAIN = train_stage("sasrec", "sasrec", run_sasrec, READS, "SASRec (item ids, full ranking)", needs=("data",))
EVAL = Stage(
    name="sasrec-eval",
    fn=run_eval,
    reads=EVAL_READS,
    needs=eval_needs("sasrec", ("data", "sasrec")),
    artifacts=("models/sasrec/metrics.json", "models/sasrec/rankings.parquet"),
    describe="sasrec: full ranking of the test rows -> metrics.json, rankings.parquet",
)
METHOD = Method(
    name="sasrec",
    label="SASRec",
    stages=(TRAIN, EVAL),
    trains="sasrec",
    evaluates="sasrec-eval",
    cost=("sasrec",),
    section="sasrec",
    describe="SASRec: item-id transformer, the accuracy reference",
)
