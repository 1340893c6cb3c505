"""Vectorized constrained beam search over SIDs (KV cache of the history reused), for causal LMs and T5.

Beam score = sum of log-probs (log-softmax over the full vocabulary, then the trie mask), no length penalty: the
same search as HF ``generate(num_beams=B, prefix_allowed_tokens_fn=..., length_penalty=0)``. The search core is
model-agnostic; a front-end supplies the first step's logits and a ``step`` that feeds the chosen tokens.
Llama-family decoders step with :class:`~crabrec.decode.shared_prefix.SharedPrefixDecoder` (one history cache per
user, not per beam); other models with HF forward calls over a per-beam, reordered cache.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence

import torch

from crabrec.decode.exclude import entering
from crabrec.decode.processors import LevelProcessor
from crabrec.decode.shared_prefix import SharedPrefixDecoder, supports
from crabrec.decode.trie import SidTrie
from crabrec.models.decoder import N_SPECIAL, positions

NEG = float("-inf")
Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (surviving beam rows, tokens [B*k, 1]) -> logits
Processors = Sequence[LevelProcessor]
Excluded = list[torch.Tensor] | None  # per level: [B, width] nodes each row may not enter (decode.exclude)


@functools.cache
def cache_name() -> str:
    """The name transformers gives the KV cache in forward arguments and outputs: ``cache`` in recent releases,
    ``past_key_values`` before (recent releases still take the old name, with a warning)."""
    from transformers import LlamaForCausalLM

    return "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"


@torch.no_grad()
def beam_search(
    model,
    trie: SidTrie,
    ids: torch.Tensor,
    mask: torch.Tensor,
    beam: int,
    base: int = N_SPECIAL,
    shared_prefix: bool = True,
    processors: Processors = (),
    exclude: Excluded = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal LM over left-padded histories: top-``beam`` distinct SIDs -> ``(sid [B, beam] (-1 = none), score)``.

    ``base`` = vocabulary id of the codebook's global token 0 (a pretrained backbone's first SID token);
    ``shared_prefix=False`` forces the generic HF-forward prefill and steps (the fast path's reference);
    ``processors`` change each level's scores (:mod:`crabrec.decode.processors`); ``exclude`` holds the trie nodes
    each row may not enter (:mod:`crabrec.decode.exclude`)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft: LoRA layers stay active
    if shared_prefix and supports(inner):
        decoder = SharedPrefixDecoder(inner)
        return constrained_search(decoder.prefill(ids, mask), decoder.step, trie, beam, base, processors, exclude)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask), use_cache=True, logits_to_keep=1)
    first = out.logits[:, -1]
    state = {"cache": out[cache_name()], "attn": mask, "pos": positions(mask)[:, -1:]}

    def step(origin: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        state["cache"].reorder_cache(origin)
        state["attn"] = torch.cat([state["attn"][origin], mask.new_ones(len(origin), 1)], 1)
        state["pos"] = state["pos"][origin] + 1
        nxt = model(
            input_ids=token,
            attention_mask=state["attn"],
            position_ids=state["pos"],
            use_cache=True,
            **{cache_name(): state["cache"]},
        )
        state["cache"] = nxt[cache_name()]
        return nxt.logits[:, -1]

    return constrained_search(first, step, trie, beam, base, processors, exclude)


@torch.no_grad()
def seq2seq_beam_search(
    model,
    trie: SidTrie,
    ids: torch.Tensor,
    mask: torch.Tensor,
    beam: int,
    processors: Processors = (),
    exclude: Excluded = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder-decoder (T5/TIGER): the encoder runs once; the decoder's self- and cross-attention caches are reused."""
    hidden = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
    start = torch.full((len(ids), 1), model.config.decoder_start_token_id, dtype=torch.long, device=ids.device)
    out = model(encoder_outputs=(hidden,), attention_mask=mask, decoder_input_ids=start, use_cache=True)
    state = {"cache": out[cache_name()], "hidden": hidden, "attn": mask}

    def step(origin: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        # a beam's origin is a beam of the same user, whose encoder output and cross-attention keys and values are
        # the same as its own: those are gathered only when the beams per user change in number (the first steps)
        if len(origin) == len(state["hidden"]):
            state["cache"].self_attention_cache.reorder_cache(origin)
        else:
            state["cache"].reorder_cache(origin)
            state["hidden"], state["attn"] = state["hidden"][origin], state["attn"][origin]
        nxt = model(
            encoder_outputs=(state["hidden"],),
            attention_mask=state["attn"],
            decoder_input_ids=token,
            use_cache=True,
            **{cache_name(): state["cache"]},
        )
        state["cache"] = nxt[cache_name()]
        return nxt.logits[:, -1]

    return constrained_search(out.logits[:, -1], step, trie, beam, processors=processors, exclude=exclude)


def constrained_search(
    logits: torch.Tensor,
    step: Step,
    trie: SidTrie,
    beam: int,
    base: int = N_SPECIAL,
    processors: Processors = (),
    exclude: Excluded = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Beam search over the trie's levels, vectorized over batch × beam; ``logits`` = first step's ``[B, V]``.

    Log-probs are normalised over the full vocabulary (as HF does), but only the level's slice is materialised.
    Each of ``processors`` maps ``(level, node, level log-probs)`` to the scores the beams are ranked and pruned by
    (the returned scores are their sums); the trie mask comes after them, and with it ``exclude[t]``: the nodes at
    depth ``t+1`` each row may not enter."""
    b, device = logits.shape[0], logits.device
    child, leaf_sid = trie.tables(device)
    node = torch.zeros(b, 1, dtype=torch.long, device=device)
    score = torch.zeros(b, 1, device=device)
    for t in range(trie.depth):
        start = base + int(trie.offsets[t])
        logits = logits.float()
        level = logits[:, start : start + trie.sizes[t]] - logits.logsumexp(-1, keepdim=True)  # [B*k, K_t]
        for process in processors:
            level = process(t, node.reshape(-1), level)
        k_prev = node.shape[1]
        nxt = child[t][node.reshape(-1)]  # [B*k, K_t]
        invalid = nxt < 0
        if exclude is not None:
            invalid |= entering(nxt, exclude[t])
        cand = score.reshape(-1, 1) + level.masked_fill(invalid, NEG)
        cand = cand.masked_fill(torch.isinf(score.reshape(-1, 1)), NEG)
        flat = cand.view(b, k_prev * trie.sizes[t])
        score, idx = flat.topk(min(beam, flat.shape[1]), dim=1)
        origin = idx // trie.sizes[t]
        code = idx % trie.sizes[t]
        node = _pick(nxt.view(b, k_prev, -1), origin, code)
        if t == trie.depth - 1:
            break
        flat_origin = (origin + torch.arange(b, device=device).unsqueeze(1) * k_prev).reshape(-1)
        logits = step(flat_origin, (code + start).reshape(-1, 1))
    valid = ~torch.isinf(score)
    sid = torch.where(valid, leaf_sid[node.clamp(min=0)], torch.full_like(node, -1))
    return sid, score


def _pick(table: torch.Tensor, origin: torch.Tensor, code: torch.Tensor) -> torch.Tensor:
    """``table[b, origin[b, j], code[b, j]]`` for every row ``b`` and beam ``j``."""
    rows = torch.arange(table.shape[0], device=table.device).unsqueeze(1).expand_as(origin)
    return table[rows, origin, code]
