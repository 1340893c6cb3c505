"""TIGER: a T5 encoder-decoder from scratch that reads the history's SIDs (after a hashed user token) and generates
the next item's SID; same codebook, beam search and metrics as MOR."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from crabrec.methods import Method
from crabrec.methods.common import eval_stage, ranker_validation, train_stage
from crabrec.pipeline import RunContext
from crabrec.rankers import generator_ranker

log = logging.getLogger("crabrec")
RANKER = generator_ranker("tiger")  # its test evaluation, validation, API and server rank with it
GRAPH_WIDTH = 16  # tiger.cuda_graphs: training inputs padded to a multiple of this many tokens


def run_tiger(ctx: RunContext) -> dict[str, Any]:
    from crabrec.models.tiger import build_tiger, tiger_loss
    from crabrec.train.loop import train, training_summary

    t = ctx.cfg.tiger
    seed = ctx.cfg.seed if t.seed is None else t.seed
    codebook = ctx.files.load_codebook()
    model = build_tiger(codebook.sizes, t, seed=seed, codewords=codebook.codewords)
    log.info(
        "TIGER: SID token embeddings start from %s",
        "the codebook's centroids" if model.config.crabrec_init == "codebook" else "a random draw",
    )
    rows, validate = tiger_data(model.config, codebook, ctx.files.load_splits(), ctx.cfg, seed)
    out = ctx.files.model_dir("tiger")
    result = train(model, rows, tiger_loss, validate, t, out, seed, **ctx.checkpoint_policy())
    return training_summary(result, out)


def tiger_data(config, codebook, splits, cfg, seed: int):
    """``(rows, validate)``: TIGER's training batches over ``codebook``'s SIDs (rows of similar history length
    together) and its validation (``train.valid_*``), for a model with ``config``; shared by TIGER's training and
    CRAB's fine-tune of it."""
    from crabrec.decode.trie import SidTrie
    from crabrec.models.decoder import item_tokens
    from crabrec.models.tiger import encode_inputs, make_labels
    from crabrec.train.decoder import sid_validator
    from crabrec.train.loop import Rows, by_length

    tokens = item_tokens(codebook.token_ids())
    rows = splits.train
    multiple = GRAPH_WIDTH if cfg.tiger.cuda_graphs else 1  # a recorded graph per input width: few widths

    def make(index: np.ndarray) -> dict[str, Any]:
        user, history, length = rows.user[index], rows.history[index], rows.length[index]
        ids, mask = encode_inputs(config, user, history, length, tokens, multiple)
        return {"ids": ids, "mask": mask, "labels": make_labels(rows.target[index], tokens)}

    validate = sid_validator(SidTrie.build(codebook), tokens, splits.valid, cfg.train)
    plan = by_length(rows.length, cfg.tiger.batch_size, seed)  # rows of similar history length together: little padding
    return Rows(len(rows), make, plan), validate


READS = ("tiger", "train.valid_samples", "train.valid_beam", "train.valid_batch_size", "seed")
# Revision 1: the per-level output layer's and the decoder start's starting weights (models/tiger.py, start_layout).
TRAIN = train_stage(
    "tiger", "tiger", run_tiger, READS, "TIGER: T5 encoder-decoder from scratch on the base codebook", revision=1
)
METHOD = Method(
    name="tiger",
    label="TIGER",
    stages=(TRAIN, eval_stage("tiger-eval", "tiger", ("data", "tokenize", "tiger"), RANKER)),
    trains="tiger",
    evaluates="tiger-eval",
    cost=("tiger",),
    section="tiger",
    ranker=RANKER,
    validate=ranker_validation("tiger", RANKER),  # the reference point of the frontier's methods over TIGER
    describe="TIGER: encoder-decoder generative retrieval",
)
