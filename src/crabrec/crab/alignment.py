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


def hierarchy(codebook: Codebook, base: int = N_SPECIAL) -> Hierarchy:
    """Parent/child pairs of ``codebook``; ``base`` = vocabulary id of its global token 0 (a backbone's first SID)."""
    slots, children = [], []
    n = 0
    for level in range(codebook.semantic_levels - 1):
        offset = base + int(codebook.offsets[level + 1])
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
    model,
    old: Codebook,
    new: Codebook,
    parent: dict[str, str],
    seed: int,
    noise: float = 1e-3,
    base: int = N_SPECIAL,
    tail: int = 0,
) -> None:
    """Resize to the new vocabulary: rows below ``base`` (special tokens, a backbone's own vocabulary) stay, the SID
    block is rewritten in the new codebook's order: old tokens keep their rows (at their new ids), each new token
    starts as a copy of its original token plus ``N(0, (noise·σ_SID)²)``; the ``tail`` rows after the old SID block
    (TIGER's user tokens) follow the new one unchanged. Tied input/output embeddings stay tied; untied output rows
    are grown the same way (same noise)."""
    sources = _row_sources(old, new, parent, base)
    gen = torch.Generator().manual_seed(seed)
    dim = model.get_input_embeddings().weight.shape[1]
    eps = {j: torch.randn(dim, generator=gen) for j, (_, _, fresh) in enumerate(sources) if fresh}
    # tied = one tensor, not the config's flag: T5's config says tied whatever TIGER's per-level head is
    head = model.get_output_embeddings()
    tied = head is None or head.weight is model.get_input_embeddings().weight
    tables = [model.get_input_embeddings().weight.detach().clone()]
    if not tied:
        tables.append(head.weight.detach().clone())
    end = base + old.vocab_size
    grown = [torch.cat([_grow(w, sources, eps, noise, base, old.vocab_size), w[end : end + tail]]) for w in tables]
    model.resize_token_embeddings(base + new.vocab_size + tail, mean_resizing=False)
    model.get_input_embeddings().weight.data.copy_(grown[0])
    if len(grown) > 1:
        model.get_output_embeddings().weight.data.copy_(grown[1])
    if tied:
        model.tie_weights()


def _row_sources(old: Codebook, new: Codebook, parent: dict[str, str], base: int) -> list[tuple[int, int, bool]]:
    """For each SID token of ``new`` in order: the old rows it starts as the mean of (``start, stop``: its own
    row, its original token's, or its level's mean when it has no recorded parent) and whether it is new."""
    parents = parent_codes(parent)
    out = []
    for level in range(new.n_levels):
        o_off, keep = base + int(old.offsets[level]), old.sizes[level]
        out += [(o_off + code, o_off + code + 1, False) for code in range(keep)]
        for code in range(keep, new.sizes[level]):
            src = parents.get((new.prefixes[level], code))
            out.append((o_off + src, o_off + src + 1, True) if src is not None else (o_off, o_off + keep, True))
    return out


def _grow(w: torch.Tensor, sources, eps: dict[int, torch.Tensor], noise: float, base: int, old_sids: int):
    sigma = w[base : base + old_sids].std(0)
    out = torch.empty(base + len(sources), w.shape[1], dtype=w.dtype)
    out[:base] = w[:base]
    for j, (start, stop, _) in enumerate(sources):
        row = w[start:stop].mean(0)
        out[base + j] = row + noise * sigma * eps[j] if j in eps else row
    return out
