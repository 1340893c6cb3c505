"""Stages ``train`` (MOR-style decoder on the base codebook) and ``evaluate`` (test rankings + metrics)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crabrec.data.dataset import Samples
from crabrec.io import atomic_path, load_npz, write_json
from crabrec.pipeline import RunContext, Stage
from crabrec.stages.sid_stages import load_splits

METRIC_DEFINITIONS = {
    "HR@K": "mean over test rows of 1[target's SID is among the top-K generated SIDs]",
    "NDCG@K": "mean of 1[pos < K] / log2(pos + 2), pos = 0-based rank of the target's SID",
    "GP@K(G)": "share of all top-K slots whose item is in popularity group G (a SID of m items gives each 1/m)",
    "GH(G)": "share of all history entries of the test rows whose item is in G",
    "MGU@K": "mean over groups of |GP@K(G) - GH(G)|",
    "DGU@K": "max over groups of GU@K(G) - min over groups of GU@K(G)",
    "groups": "5 equal-size item groups by training frequency f_i (targets of training rows), group 0 least popular",
    "popular_share@10": "share of top-10 slots going to the top-20% most frequent items",
}


def decoder_loss(model, batch: dict[str, Any]):
    from crabrec.models.decoder import target_loss

    return target_loss(model, batch["ids"], batch["mask"], batch["labels"], position_ids=batch.get("positions"))


def make_batcher(samples: Samples, tokens: np.ndarray, prompt=None):
    from crabrec.models.decoder import encode_rows, label_targets

    def make(rows: np.ndarray) -> dict[str, Any]:
        h, n, t = samples.history[rows], samples.length[rows], samples.target[rows]
        ids, mask, labels = encode_rows(h, n, t, tokens, prompt)
        item, level = label_targets(labels, samples.target[rows])
        return {"ids": ids, "mask": mask, "labels": labels, "label_item": item, "label_level": level}

    return make


def packed_batcher(samples: Samples, tokens: np.ndarray, max_history: int, cfg, seed: int):
    """Chains of users instead of rows, in length-bucketed batches of about ``batch_size`` rows each."""
    from crabrec.errors import CrabError
    from crabrec.models.packing import build_chains, pack_batch
    from crabrec.train.loop import length_bucketed

    chains = build_chains(samples, max_history)
    if len(chains.leftover):
        raise CrabError(f"train.packing=packed: {len(chains.leftover)} training rows have an empty history")
    lengths = np.array([len(c) for c in chains.items])
    rows = np.array([int(t.sum()) for t in chains.is_target])

    def make(index: np.ndarray) -> dict[str, Any]:
        return pack_batch(chains, index, tokens, max_history)

    def plan(epoch: int) -> list[np.ndarray]:
        return length_bucketed(lengths, rows, cfg.batch_size, seed, epoch)

    return len(chains.items), make, plan


def make_validator(ctx: RunContext, trie, tokens: np.ndarray, samples: Samples, io=None):
    from crabrec.decode.rank import rank_samples, sid_members
    from crabrec.metrics import ranking_metrics

    cfg = ctx.cfg.train
    subset = samples.take(np.arange(min(len(samples), cfg.valid_samples)))
    rep_of, _ = sid_members(trie, len(tokens))

    def validate(model) -> float:
        extra = {"prompt": io.test_prompt, "base": io.base} if io is not None else {}
        items, _ = rank_samples(model, trie, subset, tokens, cfg.valid_beam, progress=False, **extra)
        return ranking_metrics(items, rep_of[subset.target], (10,))["NDCG@10"]

    return validate


def train_decoder(
    ctx: RunContext, codebook, out_dir: Path, model=None, loss_fn=None, param_groups=None, cfg=None, export=None
):
    """Train (or fine-tune) a decoder on ``codebook`` into ``out_dir``; returns the training summary."""
    from crabrec.decode.trie import SidTrie
    from crabrec.models.backbone import decoder_io, export_backbone, load_backbone
    from crabrec.models.decoder import N_SPECIAL, DecoderSize, build_decoder
    from crabrec.train.loop import train

    cfg = cfg or ctx.cfg.train
    splits = load_splits(ctx)
    io = decoder_io(codebook)
    if model is None and cfg.backbone:
        model, tokenizer, _ = load_backbone(Path(cfg.backbone), list(codebook.sizes), ctx.cfg.seed)
        io, export = decoder_io(codebook, tokenizer), export or export_backbone(tokenizer)
    elif model is None:
        fields = ("hidden", "layers", "heads", "ff", "dropout", "attention_dropout", "label_smoothing")
        size = DecoderSize(**{f: getattr(cfg, f) for f in fields})
        model = build_decoder(N_SPECIAL + codebook.vocab_size, size, seed=ctx.cfg.seed)
    tokens = io.tokens
    trie = SidTrie.build(codebook)
    n_rows, batcher, plan = len(splits.train), make_batcher(splits.train, tokens, io.train_prompt), None
    if cfg.packing == "packed" and io.train_prompt is None:  # a backbone's prompt rows are trained row by row
        n_rows, batcher, plan = packed_batcher(splits.train, tokens, ctx.cfg.data.max_history, cfg, ctx.cfg.seed)
    result = train(
        model,
        n_rows,
        batcher,
        loss_fn or decoder_loss,
        make_validator(ctx, trie, tokens, splits.valid, io),
        cfg,
        out_dir,
        ctx.cfg.seed,
        param_groups,
        export,
        plan,
        **ctx.checkpoint_policy(),
    )
    summary = {
        "epochs_run": result.epochs_run,
        "best_epoch": result.best_epoch,
        "best_valid_ndcg@10": round(result.best_score, 4),
        "train_seconds": round(result.seconds, 1),
        "seconds_per_epoch": round(float(np.mean([h["epoch_seconds"] for h in result.history])), 1)
        if result.history
        else 0.0,
    }
    write_json(out_dir / "train_summary.json", summary)
    return summary


def run_train(ctx: RunContext) -> dict[str, Any]:
    from crabrec.sid.codebook import Codebook

    return train_decoder(ctx, Codebook.load(ctx.path("sid", "codebook.json")), ctx.path("models", "mor"))


def test_rows(ctx: RunContext) -> Samples:
    cfg = ctx.cfg.evaluate
    test = load_splits(ctx).test
    return test if cfg.max_samples is None else test.take(np.arange(min(cfg.max_samples, len(test))))


def write_evaluation(
    ctx: RunContext, model_dir: Path, items: np.ndarray, scores: np.ndarray, test: Samples, seconds: float, trie
) -> dict[str, Any]:
    """Score ``items`` (``[N, K]`` rankings of the test rows) and write ``metrics.json`` + ``rankings.parquet``."""
    from crabrec.decode.rank import score_rankings

    cfg = ctx.cfg.evaluate
    pop = load_npz(ctx.path("data", "popularity.npz"))
    metrics = score_rankings(
        items, test, pop["group"], pop["popular"], ctx.cfg.data.n_groups, trie, cfg.ks, cfg.fairness_ks
    )
    metrics.update(
        inference_seconds=round(seconds, 2),
        users_per_s=round(len(test) / max(seconds, 1e-9), 1),
        test_rows=len(test),
        definitions=METRIC_DEFINITIONS,
        ks=cfg.ks,
    )
    write_json(model_dir / "metrics.json", metrics)
    frame = pd.DataFrame(
        {
            "row": np.arange(len(test)),
            "user": test.user,
            "target": test.target,
            "items": list(items),
            "scores": list(scores),
        }
    )
    with atomic_path(model_dir / "rankings.parquet") as tmp:
        frame.to_parquet(tmp)
    return {k: round(metrics[k], 4) for k in ("HR@10", "NDCG@10", "MGU@10", "DGU@10")}


def load_generator(model_dir: Path, codebook):
    """A saved decoder or TIGER model, checked against ``codebook`` (a model from another codebook is an error)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    from crabrec.errors import CrabError
    from crabrec.models.backbone import is_backbone_dir
    from crabrec.models.decoder import N_SPECIAL

    if not (model_dir / "config.json").is_file():
        raise CrabError(f"{model_dir}: no trained model here (expected config.json + model.safetensors)")
    config = AutoConfig.from_pretrained(model_dir)
    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    sid_vocab = (config.crabrec_user_offset if seq2seq else config.vocab_size) - N_SPECIAL
    if is_backbone_dir(model_dir):  # a pretrained backbone: its tokenizer's SID tokens are checked by generator_io
        sid_vocab = codebook.vocab_size
    if sid_vocab != codebook.vocab_size:
        raise CrabError(
            f"{model_dir}: model has {sid_vocab} SID tokens but the codebook has {codebook.vocab_size}; "
            "it was trained on another codebook"
        )
    model = (AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM).from_pretrained(model_dir)
    return model.to(inference_device())


def inference_device():
    """Where saved models are evaluated: the GPU when there is one (fp32 weights, as trained), else the CPU."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def generator_io(model_dir: Path, codebook):
    """How the saved model at ``model_dir`` reads SIDs (a backbone folder carries its tokenizer and prompts)."""
    from crabrec.models.backbone import decoder_io, is_backbone_dir, load_tokenizer

    return decoder_io(codebook, load_tokenizer(model_dir) if is_backbone_dir(model_dir) else None)


def evaluate_model(ctx: RunContext, model_dir: Path, codebook) -> dict[str, Any]:
    """Rank the test rows with constrained beam search; write ``metrics.json`` and ``rankings.parquet``."""
    from crabrec.decode.rank import rank_samples
    from crabrec.decode.trie import SidTrie

    cfg = ctx.cfg.evaluate
    test = test_rows(ctx)
    model = load_generator(model_dir / "model", codebook)
    io = generator_io(model_dir / "model", codebook)
    trie = SidTrie.build(codebook)
    start = time.perf_counter()
    desc = f"evaluate {model_dir.name}"
    items, scores = rank_samples(
        model, trie, test, io.tokens, cfg.beam, cfg.batch_size, desc=desc, prompt=io.test_prompt, base=io.base
    )
    return write_evaluation(ctx, model_dir, items, scores, test, time.perf_counter() - start, trie)


def run_evaluate(ctx: RunContext) -> dict[str, Any]:
    from crabrec.sid.codebook import Codebook

    return evaluate_model(ctx, ctx.path("models", "mor"), Codebook.load(ctx.path("sid", "codebook.json")))


TRAIN_STAGE = Stage(
    name="train",
    fn=run_train,
    sections=("train",),
    needs=("data", "tokenize"),
    artifacts=("models/mor/model/model.safetensors", "models/mor/train_summary.json"),
    describe="MOR-style decoder trained from scratch on the base codebook",
)
EVALUATE_STAGE = Stage(
    name="evaluate",
    fn=run_evaluate,
    sections=("evaluate",),
    needs=("data", "tokenize", "train"),
    artifacts=("models/mor/metrics.json", "models/mor/rankings.parquet"),
    describe="constrained beam search on the test rows -> metrics.json, rankings.parquet",
)
