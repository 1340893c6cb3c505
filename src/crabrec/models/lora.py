"""LoRA for every model that gets it: the backbone MOR decoder and the CRAB fine-tune (one place for both).

Adapters go on the attention projections; ``export_merged`` saves a plain Hugging Face model with them merged, so
evaluation never needs ``peft``.
"""

from __future__ import annotations

import copy
from pathlib import Path

from crabrec.errors import CrabError

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
BACKBONE_R, BACKBONE_ALPHA = 8, 16  # MiniOneRec's adapter on a pretrained backbone


def add_lora(model, r: int, alpha: int, dropout: float = 0.0, trainable_tokens: list[int] | None = None):
    """``model`` wrapped with LoRA (rank ``r``, scale ``alpha / r``) on its attention projections; the embedding
    rows ``trainable_tokens`` (if any) train in full."""
    from peft import LoraConfig, get_peft_model

    names = {n.split(".")[-1] for n, _ in model.named_modules()}
    targets = [t for t in ATTENTION if t in names]
    if not targets:
        raise CrabError(f"{type(model).__name__}: no attention projections named {list(ATTENTION)} to put LoRA on")
    extra = {"trainable_token_indices": {"embed_tokens": trainable_tokens}} if trainable_tokens else {}
    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets, **extra)
    return get_peft_model(model, config)


def export_merged(model, path: Path) -> None:
    """Save a plain HF model (LoRA merged into the weights) at ``path``, in float32: a backbone trained with its
    frozen weights in bfloat16 is merged in float32 (exact: every bfloat16 value is one in float32)."""
    if hasattr(model, "merge_and_unload"):
        model = copy.deepcopy(model).float().merge_and_unload()
    model.save_pretrained(path)
