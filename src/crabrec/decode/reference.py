"""The reference our beam search is checked and benchmarked against: HF ``generate`` with
``prefix_allowed_tokens_fn`` over the same trie, no length penalty (decoder-only and encoder-decoder models)."""

from __future__ import annotations

import numpy as np
import torch


def allowed_prefixes(tokens: np.ndarray) -> dict[tuple, list[int]]:
    """Every SID prefix (model vocabulary ids) -> the sorted tokens that may follow it."""
    allowed: dict[tuple, set[int]] = {}
    for row in tokens:
        for t in range(tokens.shape[1]):
            allowed.setdefault(tuple(row[:t].tolist()), set()).add(int(row[t]))
    return {k: sorted(v) for k, v in allowed.items()}


@torch.no_grad()
def hf_constrained_beams(
    model,
    ids: torch.Tensor,
    mask: torch.Tensor,
    beam: int,
    allowed: dict[tuple, list[int]],
    n_levels: int,
    bonus: dict[tuple, dict[int, float]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens [B, beam, n_levels], scores [B, beam])`` from HF ``generate``; ``bonus[prefix][token]`` is added to
    the token's log-probability after that prefix by an HF ``LogitsProcessor`` (a decoding-time adjustment)."""
    from transformers import LogitsProcessorList

    skip = 1 if getattr(model.config, "is_encoder_decoder", False) else ids.shape[1]  # decoder start / prompt
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        num_beams=beam,
        num_return_sequences=beam,
        max_new_tokens=n_levels,
        length_penalty=0.0,
        do_sample=False,
        return_dict_in_generate=True,
        output_scores=True,
        prefix_allowed_tokens_fn=lambda b, x: allowed.get(tuple(x[skip:].tolist()), []),
        logits_processor=LogitsProcessorList([PrefixBonus(bonus, skip)] if bonus else []),
    )
    return out.sequences[:, skip:].view(len(ids), beam, n_levels), out.sequences_scores.view(len(ids), beam)


class PrefixBonus:
    """An HF ``LogitsProcessor``: adds ``bonus[prefix][token]`` to each row's scores, the prefix read off the row's
    generated tokens (HF beam search applies it to the log-softmax scores, before summing along the beam)."""

    def __init__(self, bonus: dict[tuple, dict[int, float]], skip: int) -> None:
        self.bonus, self.skip = bonus, skip

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        scores = scores.clone()
        for row, seq in enumerate(input_ids):
            for token, value in self.bonus.get(tuple(seq[self.skip :].tolist()), {}).items():
                scores[row, token] += value
        return scores
