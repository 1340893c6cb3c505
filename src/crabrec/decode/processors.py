"""Level processors: the constrained beam search's hook for changing next-token scores while it searches.

A processor is called once per SID level with the level index ``t``, the trie node each beam row stands on
(``node [rows]``, depth ``t``) and that level's log-probabilities ``scores [rows, K_t]``, and returns the scores the
search ranks and prunes by (HF's ``LogitsProcessor(input_ids, scores)``, with the trie node in place of the token
ids). The trie mask is applied afterwards, so a processor never revives an invalid token. Every generative backbone
(MOR, a pretrained LLM, TIGER) searches through :func:`crabrec.decode.beam.constrained_search` and so takes them.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from crabrec.decode.trie import SidTrie


class LevelProcessor(Protocol):
    def __call__(self, level: int, node: torch.Tensor, scores: torch.Tensor) -> torch.Tensor: ...


def prefix_counts(trie: SidTrie, freq: np.ndarray) -> list[np.ndarray]:
    """``counts[t][node, code]``: training interactions whose target's SID passes through ``node`` (depth ``t``) and
    then ``code``; a SID shared by several items counts them all."""
    per_sid = np.array([freq[m].sum() for m in trie.members], dtype=np.float64)
    node = np.zeros(len(trie.sids), dtype=np.int64)
    counts = []
    for t, child in enumerate(trie.child):
        table = np.zeros(tuple(child.shape), dtype=np.float64)
        np.add.at(table, (node, trie.sids[:, t]), per_sid)
        counts.append(table)
        node = child.numpy()[node, trie.sids[:, t]]
    return counts


def log_prefix_prior(trie: SidTrie, freq: np.ndarray, smoothing: float) -> list[np.ndarray]:
    """``log P̂(c | prefix)`` per level as ``[n_nodes_t, K_t]`` tables (0 where ``c`` is no child of the node):
    ``P̂(c | n) = (N(n·c) + s) / (N(n) + s·children(n))`` from training interaction counts ``N``, smoothed by ``s``
    so that a token no training target passes through still has a finite prior. Summed along an item's path it is
    the log of the item's smoothed share of the training interactions."""
    out = []
    for child, count in zip(trie.child, prefix_counts(trie, freq), strict=True):
        valid = child.numpy() >= 0
        smoothed = np.where(valid, count + smoothing, 0.0)
        total = smoothed.sum(1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(np.where(valid, np.log(smoothed / np.where(total > 0, total, 1.0)), 0.0))
    return out


class PopularityPrior:
    """Logit adjustment inside the search: each level's log-probability minus ``tau · log P̂(c | prefix)``.

    An item's final score is ``log p(item | history) − tau · log P̂(item)``: at ``tau = 0`` the unadjusted search, at
    ``tau = 1`` the model's posterior divided by the training prior (the balanced posterior of logit adjustment).
    Applied at every level, it keeps long-tail prefixes in the beam that a post-hoc reranker would never see."""

    def __init__(self, trie: SidTrie, freq: np.ndarray, tau: float, smoothing: float = 1.0) -> None:
        if smoothing <= 0:
            raise ValueError("smoothing must be positive (a zero count would give an infinite adjustment)")
        self.tau = float(tau)
        self.tables = [torch.from_numpy(-self.tau * t).float() for t in log_prefix_prior(trie, freq, smoothing)]
        self._on: dict[torch.device, list[torch.Tensor]] = {}

    def __call__(self, level: int, node: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.tau == 0:
            return scores
        device = scores.device
        if device not in self._on:
            self._on[device] = [t.to(device) for t in self.tables]
        return scores + self._on[device][level][node]
