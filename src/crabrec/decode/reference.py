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
    model, ids: torch.Tensor, mask: torch.Tensor, beam: int, allowed: dict[tuple, list[int]], n_levels: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens [B, beam, n_levels], scores [B, beam])`` from HF ``generate``."""
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
    )
    return out.sequences[:, skip:].view(len(ids), beam, n_levels), out.sequences_scores.view(len(ids), beam)
