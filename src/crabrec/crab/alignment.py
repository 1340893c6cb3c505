"""CRAB stage 2 pieces: grow the decoder's vocabulary for the rebalanced codebook, and the hierarchical semantic
alignment regularizer L_T (docs/METHOD.md, "CRAB stage 2").

    L_T = Σ_{parents k} (1/|Ch(k)|) Σ_{c ∈ Ch(k)} ‖e(c) − ē_k‖²,   ē_k = mean_{c ∈ Ch(k)} e(c)

over parents at every semantic level but the last, children taken from the new SIDs (a child under several
parents enters each parent's term). Gradients flow through ē too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from crabrec.models.decoder import N_SPECIAL
from crabrec.sid.codebook import TOKEN_RE, Codebook


@dataclass
class Hierarchy:
    parent_slot: torch.Tensor  # [P] parent index of each (parent, child) pair
    child_id: torch.Tensor  # [P] vocabulary id of the child token
    n_parents: int


def hierarchy(codebook: Codebook) -> Hierarchy:
    slots, children = [], []
    n = 0
    for level in range(codebook.semantic_levels - 1):
        offset = N_SPECIAL + int(codebook.offsets[level + 1])
        for _, kids in sorted(codebook.children(level).items()):
            if len(kids) < 2:
                continue  # a single child contributes 0
            slots += [n] * len(kids)
            children += [offset + k for k in kids]
            n += 1
    return Hierarchy(torch.tensor(slots, dtype=torch.long), torch.tensor(children, dtype=torch.long), n)


def alignment_loss(weight: torch.Tensor, h: Hierarchy, normalize: bool = False) -> torch.Tensor:
    """L_T (a literal sum over parents; divided by their number when ``normalize``), vectorized with index_add."""
    if h.n_parents == 0:
        return weight.sum() * 0.0
    slot, dev = h.parent_slot.to(weight.device), weight.device
    e = weight[h.child_id.to(dev)]
    counts = torch.zeros(h.n_parents, dtype=e.dtype, device=dev).index_add_(
        0, slot, torch.ones_like(slot, dtype=e.dtype)
    )
    means = torch.zeros(h.n_parents, e.shape[1], dtype=e.dtype, device=dev).index_add(0, slot, e) / counts[:, None]
    sq = ((e - means[slot]) ** 2).sum(1)
    per_parent = torch.zeros(h.n_parents, dtype=e.dtype, device=dev).index_add(0, slot, sq) / counts
    total = per_parent.sum()
    return total / h.n_parents if normalize else total


def parent_codes(parent: dict[str, str]) -> dict[tuple[str, int], int]:
    """``{(prefix, new code): original code}`` from the rebalance parent map of token names."""
    out = {}
    for new, old in parent.items():
        a, b = TOKEN_RE.fullmatch(new), TOKEN_RE.fullmatch(old)
        assert a is not None and b is not None
        out[(a.group(1), int(a.group(2)))] = int(b.group(2))
    return out


def expand_embeddings(
    model, old: Codebook, new: Codebook, parent: dict[str, str], seed: int, noise: float = 1e-3
) -> None:
    """Resize to the new vocabulary: old tokens keep their rows (at their new ids), each new token starts as a copy
    of its original token plus ``N(0, (noise·σ_SID)²)``. Tied input/output embeddings stay tied."""
    old_w = model.get_input_embeddings().weight.detach().clone()
    sigma = old_w[N_SPECIAL:].std(0)
    gen = torch.Generator().manual_seed(seed)
    new_w = torch.empty(N_SPECIAL + new.vocab_size, old_w.shape[1])
    new_w[:N_SPECIAL] = old_w[:N_SPECIAL]
    parents = parent_codes(parent)
    for level in range(new.n_levels):
        o_off, n_off = N_SPECIAL + int(old.offsets[level]), N_SPECIAL + int(new.offsets[level])
        keep = old.sizes[level]
        new_w[n_off : n_off + keep] = old_w[o_off : o_off + keep]
        for code in range(keep, new.sizes[level]):
            src = parents.get((new.prefixes[level], code))
            base = old_w[o_off + src] if src is not None else old_w[o_off : o_off + keep].mean(0)
            new_w[n_off + code] = base + noise * sigma * torch.randn(old_w.shape[1], generator=gen)
    model.resize_token_embeddings(new_w.shape[0], mean_resizing=False)
    model.get_input_embeddings().weight.data.copy_(new_w)
    if model.config.tie_word_embeddings:
        model.tie_weights()
