"""Rank items for a set of samples with constrained beam search, and score the rankings."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from crabrec.data.dataset import Samples
from crabrec.decode.beam import Processors, beam_search, seq2seq_beam_search
from crabrec.decode.exclude import excluded_nodes
from crabrec.decode.trie import SidTrie
from crabrec.metrics import coverage, group_hit_rate, group_unfairness, popular_share, ranking_metrics
from crabrec.models.decoder import N_SPECIAL, Prompt, encode_rows
from crabrec.progress import progress as bar


def rank_samples(
    model,
    trie: SidTrie,
    samples: Samples,
    tokens: np.ndarray,
    beam: int,
    batch_size: int = 64,
    progress: bool = True,
    desc: str = "ranking",
    prompt: Prompt | None = None,
    base: int = N_SPECIAL,
    processors: Processors = (),
) -> tuple[np.ndarray, np.ndarray]:
    """``(items [N, beam], scores [N, beam])``: each slot is the first item of a generated SID (-1 = empty).

    Works for the causal decoder (``prompt``/``base`` for a pretrained backbone) and for TIGER
    (``config.is_encoder_decoder``); ``processors`` adjust the search's scores level by level. Rows with
    ``samples.seen`` items never get them back (:mod:`crabrec.decode.exclude`)."""
    seq2seq = bool(getattr(model.config, "is_encoder_decoder", False))
    rep = torch.from_numpy(trie.representative())
    device = next(model.parameters()).device
    items = np.full((len(samples), beam), -1, dtype=np.int64)
    scores = np.full((len(samples), beam), -np.inf, dtype=np.float32)
    model.eval()

    def excluded(rows: slice):
        return None if samples.seen is None else excluded_nodes(trie, samples.seen[rows], device)

    for start in bar(range(0, len(samples), batch_size), desc, show=progress):
        rows = slice(start, start + batch_size)
        if seq2seq:
            from crabrec.models.tiger import encode_inputs

            ids, mask = encode_inputs(
                model.config, samples.user[rows], samples.history[rows], samples.length[rows], tokens
            )
            sid, score = seq2seq_beam_search(
                model, trie, ids.to(device), mask.to(device), beam, processors, exclude=excluded(rows)
            )
        else:
            ids, mask, _ = encode_rows(samples.history[rows], samples.length[rows], None, tokens, prompt)
            sid, score = beam_search(
                model, trie, ids.to(device), mask.to(device), beam, base, processors=processors, exclude=excluded(rows)
            )
        sid, score = sid.cpu(), score.cpu()
        got = torch.where(sid >= 0, rep[sid.clamp(min=0)], torch.full_like(sid, -1)).numpy()
        items[rows, : got.shape[1]] = got
        scores[rows, : got.shape[1]] = score.numpy()
    return items, scores


def sid_members(trie: SidTrie, n_items: int) -> tuple[np.ndarray, list[np.ndarray] | None]:
    """``rep_of[i]`` (the ranked stand-in of item i) and, if SIDs collide, each stand-in's item group."""
    rep_of = np.empty(n_items, dtype=np.int64)
    members: list[np.ndarray] = [np.array([i]) for i in range(n_items)]
    collide = False
    for group in trie.members:
        rep_of[group] = group[0]
        members[group[0]] = group
        collide |= len(group) > 1
    return rep_of, members if collide else None


def score_rankings(
    items: np.ndarray,
    samples: Samples,
    group: np.ndarray,
    popular: np.ndarray,
    n_groups: int,
    trie: SidTrie | None,
    ks: list[int],
    fairness_ks: list[int],
) -> dict[str, Any]:
    """HR/NDCG (a colliding SID counts as a hit, as MiniOneRec matches by SID), MGU/DGU, popular-item share,
    catalogue coverage of the top 10 and HR@10 on the rows whose target is in the least popular group (``tail``).

    ``trie=None`` for item-level rankers (SASRec): every slot is one item."""
    if trie is None:
        rep_of, members = np.arange(len(group)), None
    else:
        rep_of, members = sid_members(trie, len(group))
    metrics: dict[str, Any] = ranking_metrics(items, rep_of[samples.target], tuple(ks))
    fair = group_unfairness(items, samples.history_items(), group, n_groups, tuple(fairness_ks), members)
    metrics.update({k: v for k, v in fair.items() if k.startswith(("MGU", "DGU"))})
    metrics["groups"] = {k: v for k, v in fair.items() if not k.startswith(("MGU", "DGU"))}
    metrics["popular_share@10"] = popular_share(items, popular, 10, members)
    metrics["coverage@10"] = coverage(items, len(group), 10, members)
    metrics["tail_HR@10"] = group_hit_rate(items, rep_of[samples.target], group[samples.target] == 0, 10)
    return metrics
