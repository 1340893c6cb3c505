"""Packed training for the decoder: one sequence per user instead of one per (history -> target) row.

Row ``(items[i-H..i-1] -> items[i])`` becomes a slice of the user's chain ``items[0..n)``. Position ``p`` is an
"owner" of target item ``i`` when it predicts one of item ``i``'s tokens (the last token of item ``i-1`` and the
first ``L-1`` tokens of item ``i``); it may attend to key ``q`` iff ``q <= p`` and ``item(q) >= i - H``. RoPE is
relative, so for a one-layer model every row's loss and gradient equal the row form's exactly (tested). With more
layers, history tokens themselves see up to ``H`` items further back than inside a single row, so the packed model
is a sliding-window-attention variant of the row model: cheaper (about 7x fewer tokens per epoch on Office), not
identical. ``benchmarks/bench_packing.py`` compares both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from crabrec.data.dataset import Samples
from crabrec.models.decoder import IGNORE, PAD


@dataclass
class Chains:
    """Per user: the item chain and which chain positions are training targets."""

    items: list[np.ndarray]
    is_target: list[np.ndarray]
    leftover: np.ndarray  # row indices that could not be chained (trained in row form)


def build_chains(samples: Samples, max_history: int) -> Chains:
    """Rebuild each user's chain from consecutive windows (a row whose history is not the chain's last
    ``min(len, H)`` items starts a new chain). Rows with an empty history cannot be packed and are left over."""
    chains: list[list[int]] = []
    targets: list[list[bool]] = []
    leftover: list[int] = []
    current: dict[int, int] = {}
    for r in np.lexsort((np.arange(len(samples)), samples.user)).tolist():
        u = int(samples.user[r])
        hist = samples.history[r, : samples.length[r]].tolist()
        if not hist:
            leftover.append(r)
            continue
        c = current.get(u)
        if c is not None and len(hist) == min(len(chains[c]), max_history) and chains[c][-len(hist) :] == hist:
            chains[c].append(int(samples.target[r]))
            targets[c].append(True)
        else:
            current[u] = len(chains)
            chains.append([*hist, int(samples.target[r])])
            targets.append([False] * len(hist) + [True])
    return Chains([np.asarray(c) for c in chains], [np.asarray(t) for t in targets], np.asarray(leftover, np.int64))


def pack_batch(
    chains: Chains, index: np.ndarray, tokens: np.ndarray, max_history: int, multiple: tuple[int, int] = (1, 1)
) -> dict[str, torch.Tensor]:
    """Right-padded token chains with the window mask (4-D additive), positions and labels. ``multiple`` = (rows,
    tokens): the batch is padded to a multiple of that many chains and tokens (fewer distinct shapes for recorded
    CUDA graphs); an added chain is all padding and labels nothing."""
    width = tokens.shape[1]
    seqs = [tokens[chains.items[c]].reshape(-1) for c in index]
    t_max = -(-max(len(s) for s in seqs) // multiple[1]) * multiple[1]
    b = -(-len(seqs) // multiple[0]) * multiple[0]
    ids = torch.full((b, t_max), PAD, dtype=torch.long)
    labels = torch.full((b, t_max), IGNORE, dtype=torch.long)
    label_item = torch.full((b, t_max), -1, dtype=torch.long)
    allowed = torch.zeros((b, t_max, t_max), dtype=torch.bool)
    pos = torch.arange(t_max)
    item_of = pos // width
    owner = item_of + (pos % width == width - 1).long()
    window = (pos[None, :] <= pos[:, None]) & (item_of[None, :] >= owner[:, None] - max_history)
    for r, (c, s) in enumerate(zip(index, seqs)):
        n = len(s)
        ids[r, :n] = torch.from_numpy(s)
        allowed[r, :n, :n] = window[:n, :n]
        allowed[r, n:, 0] = True  # padding rows attend somewhere (their outputs are ignored)
        is_t = np.repeat(chains.is_target[c], width)
        lab = torch.from_numpy(np.where(is_t, s, IGNORE))
        labels[r, :n] = lab
        label_item[r, :n] = torch.from_numpy(np.where(is_t, np.repeat(chains.items[c], width), -1))
    allowed[len(seqs) :, :, 0] = True  # added chains: all padding
    mask = torch.zeros((b, 1, t_max, t_max))
    mask.masked_fill_(~allowed[:, None], float("-inf"))
    level = torch.where(label_item >= 0, pos % width, -1)
    return {
        "ids": ids,
        "mask": mask,
        "labels": labels,
        "positions": pos.expand(b, -1).clone(),
        "label_item": label_item,
        "label_level": level,
    }
