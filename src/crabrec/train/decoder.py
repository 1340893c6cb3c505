"""Training a causal SID decoder (MOR, RW, D²LR, the CRAB fine-tune): batches, validation, the model to start from.

Everything here takes plain arguments (a codebook, samples, a config section); the stages decide which artifacts to
feed it. Validation ranks the first ``valid_samples`` validation rows with a ``valid_beam`` constrained beam search
and scores NDCG@10 on the target's SID.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from crabrec.config import TrainConfig
from crabrec.data.dataset import Samples, Splits
from crabrec.errors import CrabError
from crabrec.runfiles import first_rows
from crabrec.train.loop import LossFn, Rows, by_length, length_bucketed, train, training_summary

log = logging.getLogger("crabrec")


def decoder_loss(model, batch: dict[str, Any]):
    """Token cross-entropy on the target SID (the recommendation loss)."""
    from crabrec.models.decoder import batch_loss

    return batch_loss(model, batch)


def row_batcher(samples: Samples, tokens: np.ndarray, prompt=None, multiple: int = 1):
    """``make(rows)``: one sequence per (history -> target) row, left-padded to a ``multiple`` of tokens. The batch
    carries its answer width as a number (``answer_width``), so that the loss need not read it back from the
    device."""
    from crabrec.models.decoder import answer_width, encode_rows, label_targets

    def make(rows: np.ndarray) -> dict[str, Any]:
        h, n, t = samples.history[rows], samples.length[rows], samples.target[rows]
        ids, mask, labels = encode_rows(h, n, t, tokens, prompt, multiple)
        item, level = label_targets(labels, samples.target[rows])
        batch = {"ids": ids, "mask": mask, "labels": labels, "label_item": item, "label_level": level}
        return {**batch, "answer_width": answer_width(labels)}

    return make


# cuda_graphs (and compile, for rows): packed batches padded to a multiple of 8 chains and 32 tokens, rows to 32 tokens
GRAPH_PAD = (8, 32)


def packed_batcher(samples: Samples, tokens: np.ndarray, batch_size: int, seed: int, multiple=(1, 1)):
    """``(n chains, make, plan, size)``: chains of users instead of rows, in length-bucketed batches of about
    ``batch_size`` rows each (``size(index)``: the training rows those chains hold), padded to ``multiple`` (chains,
    tokens); the window is the samples' history width."""
    from crabrec.models.packing import build_chains, pack_batch

    max_history = samples.history.shape[1]
    chains = build_chains(samples, max_history)
    if len(chains.leftover):
        raise CrabError(f"train.packing=packed: {len(chains.leftover)} training rows have an empty history")
    lengths = np.array([len(c) for c in chains.items])
    rows = np.array([int(t.sum()) for t in chains.is_target])

    def make(index: np.ndarray) -> dict[str, Any]:
        return pack_batch(chains, index, tokens, max_history, multiple)

    def plan(epoch: int) -> list[np.ndarray]:
        return length_bucketed(lengths, rows, batch_size, seed, epoch)

    def size(index: np.ndarray) -> int:
        return int(rows[index].sum())

    return len(chains.items), make, plan, size


def length_plan(samples: Samples, cfg: TrainConfig, seed: int):
    """``plan(epoch)`` of row batches grouped by history length (``cfg.group_by_length``), else None (shuffled)."""
    return by_length(samples.length, cfg.batch_size, seed) if cfg.group_by_length else None


def sid_validator(trie, tokens: np.ndarray, samples: Samples, cfg: TrainConfig, io=None):
    """``validate(model)`` = NDCG@10 of the first ``cfg.valid_samples`` rows under a ``cfg.valid_beam`` beam."""
    from crabrec.decode.rank import rank_samples, sid_members
    from crabrec.metrics import ranking_metrics

    subset = first_rows(samples, cfg.valid_samples)
    beam = cfg.valid_beam
    rep_of, _ = sid_members(trie, len(tokens))

    def validate(model) -> float:
        extra = {"prompt": io.test_prompt, "base": io.base} if io is not None else {}
        items, _ = rank_samples(model, trie, subset, tokens, beam, cfg.valid_batch_size, progress=False, **extra)
        return ranking_metrics(items, rep_of[subset.target], (10,))["NDCG@10"]

    return validate


def initial_decoder(codebook, cfg: TrainConfig, seed: int):
    """``(model, io, export)``: a from-scratch decoder, or ``cfg.backbone`` with SID tokens and LoRA."""
    from crabrec.models.backbone import decoder_io, export_backbone, load_backbone
    from crabrec.models.decoder import N_SPECIAL, build_decoder

    backbone = cfg.backbone
    if backbone:
        if cfg.backbone_dtype == "bfloat16" and not torch.cuda.is_available():
            log.warning(
                "train.backbone_dtype=bfloat16 without a GPU: the frozen weights compute in bfloat16 here, which a "
                "CPU without bf16 units does several times slower than float32"
            )
        model, tokenizer, _ = load_backbone(Path(backbone), list(codebook.sizes), seed, cfg.backbone_dtype)
        return model, decoder_io(codebook, tokenizer), export_backbone(tokenizer)
    return build_decoder(N_SPECIAL + codebook.vocab_size, cfg, seed=seed), decoder_io(codebook), None


def train_decoder(
    model,
    io,
    codebook,
    splits: Splits,
    cfg: TrainConfig,
    out_dir: Path,
    seed: int,
    loss_fn: LossFn | None = None,
    **loop: Any,
) -> dict[str, Any]:
    """Train (or fine-tune) ``model`` on ``codebook``'s SIDs into ``out_dir``; writes and returns the summary.

    ``loop`` goes to :func:`crabrec.train.loop.train` (parameter groups, export, checkpoint policy)."""
    from crabrec.decode.trie import SidTrie

    tokens = io.tokens
    graphs = getattr(cfg, "cuda_graphs", False)
    few_shapes = graphs or getattr(cfg, "compile", False)  # a graph or a compiled kernel per batch shape
    batcher = row_batcher(splits.train, tokens, io.train_prompt, GRAPH_PAD[1] if few_shapes else 1)
    rows = Rows(len(splits.train), batcher, length_plan(splits.train, cfg, seed))
    if cfg.packing == "packed" and io.train_prompt is None:  # a backbone's prompt rows are trained row by row
        rows = Rows(*packed_batcher(splits.train, tokens, cfg.batch_size, seed, GRAPH_PAD if graphs else (1, 1)))
    validate = sid_validator(SidTrie.build(codebook), tokens, splits.valid, cfg, io)
    result = train(model, rows, loss_fn or decoder_loss, validate, cfg, out_dir, seed, **loop)
    return training_summary(result, out_dir)
