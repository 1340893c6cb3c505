"""SASRec: the item-id sequential recommender (full ranking over all items), the accuracy reference."""

from __future__ import annotations

from typing import Any

import numpy as np

from crabrec.data.dataset import Samples
from crabrec.methods import Method
from crabrec.methods.common import eval_stage, train_stage
from crabrec.pipeline import RunContext


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


class SasrecRanker:
    """The saved SASRec: full ranking over the catalogue, the top ``width`` items with their logits."""

    trie = None  # ranks item ids, not SIDs
    block = 512  # top_full's batch

    def __init__(self, model_dir, width: int) -> None:
        from crabrec.models.sasrec import SASRec, SASRecConfig
        from crabrec.progress import library_bars_off
        from crabrec.rankers import inference_device, untrained
        from crabrec.runfiles import load_checked

        if not (model_dir / "config.json").is_file():
            raise untrained(model_dir)
        with library_bars_off():  # the config first, so that an error names the file at fault
            config = load_checked(model_dir / "config.json", lambda: SASRecConfig.from_pretrained(model_dir))
            model = load_checked(
                model_dir / "model.safetensors", lambda: SASRec.from_pretrained(model_dir, config=config)
            )
        self.model, self.width = model.to(inference_device()), min(width, model.config.n_items)
        self.unavailable = np.zeros(0, dtype=np.int64)

    def set_unavailable(self, items: np.ndarray) -> bool:
        self.unavailable = np.asarray(items, dtype=np.int64)
        return True

    def rank(self, rows: Samples, desc: str = "ranking", progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
        from crabrec.models.sasrec import top_full

        return top_full(self.model, rows.history, rows.length, self.width, seen=rows.seen, unavailable=self.unavailable)


def sasrec_ranker(files, cfg, beam: int | None = None) -> SasrecRanker:
    return SasrecRanker(files.weights("sasrec"), beam or cfg.evaluate.beam)


READS = ("sasrec", "train.valid_samples", "seed")
TRAIN = train_stage("sasrec", "sasrec", run_sasrec, READS, "SASRec (item ids, full ranking)", needs=("data",))
EVAL = eval_stage("sasrec-eval", "sasrec", ("data", "sasrec"), sasrec_ranker)
METHOD = Method(
    name="sasrec",
    label="SASRec",
    stages=(TRAIN, EVAL),
    trains="sasrec",
    evaluates="sasrec-eval",
    cost=("sasrec",),
    section="sasrec",
    ranker=sasrec_ranker,
    describe="SASRec: item-id transformer, the accuracy reference",
    sids="none",
)
