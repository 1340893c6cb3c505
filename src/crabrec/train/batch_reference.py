"""The per-row batch builders the vectorized ones are checked and benchmarked against (``tests/test_batches.py``,
``benchmarks/bench_batches.py``): TIGER's encoder inputs, the packed decoder batch and the row form with its prompt
(an LLM backbone's), built one row at a time in Python, as they were first written. Not used in training."""

from __future__ import annotations

import numpy as np
import torch

from crabrec.models.decoder import IGNORE, PAD, Prompt
from crabrec.models.packing import Chains


def tiger_inputs_rows(
    config, user: np.ndarray, history: np.ndarray, length: np.ndarray, tokens: np.ndarray, multiple: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`crabrec.models.tiger.encode_inputs`, row by row."""
    bins = int(config.crabrec_user_bins)
    seqs = []
    for r in range(len(history)):
        body = tokens[history[r, : length[r]]].reshape(-1).tolist()
        seqs.append(([int(config.crabrec_user_offset) + int(user[r]) % bins] if bins else []) + body)
    width = -(-max(len(s) for s in seqs) // multiple) * multiple
    ids = torch.full((len(seqs), width), PAD, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, s in enumerate(seqs):
        ids[r, : len(s)] = torch.tensor(s)
        mask[r, : len(s)] = 1
    return ids, mask


def pack_batch_rows(
    chains: Chains, index: np.ndarray, tokens: np.ndarray, max_history: int, multiple: tuple[int, int] = (1, 1)
) -> dict[str, torch.Tensor]:
    """:func:`crabrec.models.packing.pack_batch`, chain by chain."""
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
        labels[r, :n] = torch.from_numpy(np.where(is_t, s, IGNORE))
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


def encode_rows_rows(
    history: np.ndarray,
    length: np.ndarray,
    target: np.ndarray | None,
    tokens: np.ndarray,
    prompt: Prompt | None = None,
    multiple: int = 1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """:func:`crabrec.models.decoder.encode_rows`, row by row."""
    n, _ = history.shape
    prompt = prompt or Prompt()
    seqs, answer = [], 0
    for r in range(n):
        body = list(prompt.head)
        for j, h in enumerate(history[r, : length[r]]):
            body += (list(prompt.sep) if j else []) + tokens[h].tolist()
        body += prompt.tail
        if target is not None:
            tail = tokens[target[r]].tolist() + list(prompt.answer_end)
            answer = len(tail)
            body += tail
        seqs.append(body)
    max_len = -(-max(len(s) for s in seqs) // multiple) * multiple
    ids = torch.full((n, max_len), PAD, dtype=torch.long)
    mask = torch.zeros((n, max_len), dtype=torch.long)
    labels = torch.full((n, max_len), IGNORE, dtype=torch.long) if target is not None else None
    for r, s in enumerate(seqs):
        ids[r, max_len - len(s) :] = torch.tensor(s)
        mask[r, max_len - len(s) :] = 1
        if labels is not None:
            labels[r, max_len - answer :] = ids[r, max_len - answer :]
    return ids, mask, labels
