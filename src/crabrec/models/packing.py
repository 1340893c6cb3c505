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
    CUDA graphs); an added chain is all padding and labels nothing. Built with array operations, no loop over the
    chains (equal to :func:`crabrec.train.batch_reference.pack_batch_rows`)."""
    width = tokens.shape[1]
    items = [chains.items[c] for c in index]
    counts = np.array([len(c) for c in items])
    n = counts * width  # each chain's tokens
    t_max = -(-int(n.max()) // multiple[1]) * multiple[1]
    b = -(-len(items) // multiple[0]) * multiple[0]
    # the chains' items side by side, -1 after each chain's end
    rows = np.repeat(np.arange(len(items)), counts)
    cols = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    grid = np.full((b, max(int(counts.max()), -(-t_max // width))), -1, dtype=np.int64)
    grid[rows, cols] = np.concatenate(items)
    target = np.zeros(grid.shape, dtype=bool)
    target[rows, cols] = np.concatenate([chains.is_target[c] for c in index])
    span = grid.shape[1] * width
    item = np.repeat(grid, width, axis=1)[:, :t_max]  # each token position's item (-1: padding)
    seq = tokens[np.maximum(grid, 0)].reshape(b, span)[:, :t_max].astype(np.int64, copy=False)
    real = np.arange(t_max)[None, :] < np.append(n, np.zeros(b - len(items), dtype=n.dtype))[:, None]
    labelled = real & np.repeat(target, width, axis=1)[:, :t_max]
    pos = torch.arange(t_max)
    item_of = pos // width
    owner = item_of + (pos % width == width - 1).long()
    window = (pos[None, :] <= pos[:, None]) & (item_of[None, :] >= owner[:, None] - max_history)
    inside = torch.from_numpy(real)
    allowed = window[None] & inside[:, None, :] & inside[:, :, None]
    allowed[:, :, 0] |= ~inside  # padding positions attend somewhere (their outputs are ignored)
    mask = torch.zeros((b, 1, t_max, t_max))
    mask.masked_fill_(~allowed[:, None], float("-inf"))
    label_item = torch.from_numpy(np.where(labelled, item, -1))
    return {
        "ids": torch.from_numpy(np.where(real, seq, PAD)),
        "mask": mask,
        "labels": torch.from_numpy(np.where(labelled, seq, IGNORE)),
        "positions": pos.expand(b, -1).clone(),
        "label_item": label_item,
        "label_level": torch.where(label_item >= 0, pos % width, -1),
    }
