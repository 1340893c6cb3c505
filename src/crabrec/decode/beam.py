"""Vectorized constrained beam search over SIDs for HF causal LMs (KV cache of the history reused).

Beam score = sum of log-probs (log-softmax over the full vocabulary, then the trie mask), no length penalty: the
same search as HF ``generate(num_beams=B, prefix_allowed_tokens_fn=..., length_penalty=0)``.
"""

from __future__ import annotations

import torch

from crabrec.decode.trie import SidTrie
from crabrec.models.decoder import N_SPECIAL, positions

NEG = float("-inf")


@torch.no_grad()
def beam_search(
    model, trie: SidTrie, ids: torch.Tensor, mask: torch.Tensor, beam: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-``beam`` distinct SIDs per row -> ``(sid index [B, beam] (-1 = none), score [B, beam])``, best first."""
    b = ids.shape[0]
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask), use_cache=True)
    cache = out.past_key_values
    logp = torch.log_softmax(out.logits[:, -1].float(), -1)  # [B, V]
    node = torch.zeros(b, 1, dtype=torch.long)
    score = torch.zeros(b, 1)
    pos = positions(mask)[:, -1:]
    attn = mask
    for t in range(trie.depth):
        start = N_SPECIAL + int(trie.offsets[t])
        level = logp[:, start : start + trie.sizes[t]]  # [B*k, K_t]
        k_prev = node.shape[1]
        nxt = trie.child[t][node.reshape(-1)]  # [B*k, K_t]
        cand = score.reshape(-1, 1) + level.masked_fill(nxt < 0, NEG)
        cand = cand.masked_fill(torch.isinf(score.reshape(-1, 1)), NEG)
        flat = cand.view(b, k_prev * trie.sizes[t])
        width = min(beam, flat.shape[1])
        score, idx = flat.topk(width, dim=1)
        origin = idx // trie.sizes[t]
        code = idx % trie.sizes[t]
        node = _pick(nxt.view(b, k_prev, -1), origin, code)
        if t == trie.depth - 1:
            break
        # reorder the cache to the surviving beams and feed the chosen tokens
        flat_origin = (origin + torch.arange(b).unsqueeze(1) * k_prev).reshape(-1)
        cache.reorder_cache(flat_origin)
        attn = torch.cat([attn[flat_origin], torch.ones(b * width, 1, dtype=attn.dtype)], 1)
        pos = pos.reshape(-1, 1)[flat_origin] + 1
        token = (code + start).reshape(-1, 1)
        out = model(input_ids=token, attention_mask=attn, position_ids=pos, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        logp = torch.log_softmax(out.logits[:, -1].float(), -1)
    valid = ~torch.isinf(score)
    sid = torch.where(valid, trie.leaf_sid[node.clamp(min=0)], torch.full_like(node, -1))
    return sid, score


def _pick(table: torch.Tensor, origin: torch.Tensor, code: torch.Tensor) -> torch.Tensor:
    """``table[b, origin[b, j], code[b, j]]`` for every row ``b`` and beam ``j``."""
    rows = torch.arange(table.shape[0]).unsqueeze(1).expand_as(origin)
    return table[rows, origin, code]
