"""CRAB stage 2: fine-tune the trained decoder on the rebalanced codebook with L_Rec + γ·L_T.

Trainable (docs/METHOD.md, "CRAB stage 2"): LoRA (``crab.lora_r``/``lora_alpha``/``lora_dropout``) on q/k/v/o plus
every SID embedding row (tied output rows train with them, untied ones alongside; the rows outside the SID block are
masked), embeddings without weight decay; or every parameter (``crab.params=full``). The same for the MOR decoder, a
backbone and TIGER. The best model is exported with the LoRA weights merged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from crabrec.config import CrabConfig
from crabrec.crab.alignment import Hierarchy, alignment_loss
from crabrec.models.decoder import N_SPECIAL, batch_loss


class CrabLoss:
    """Loss plug-in: ``L_Rec + γ·L_T``, ``L_Rec`` being the model's own loss (``rec``: the decoder's or TIGER's).
    The loop divides by the accumulation steps, so each optimizer step gets exactly ``γ·L_T`` in total. It also sums
    both terms on the device, and :meth:`epoch_terms` hands the training loop their means over the epoch's batches
    (this process's), so the training log shows which term dominates."""

    def __init__(self, h: Hierarchy, gamma: float, normalize: bool, rec: Callable[..., torch.Tensor] = batch_loss):
        self.h, self.gamma, self.normalize, self.rec = h, gamma, normalize, rec
        # L_Rec's and L_T's running sums and the batch count, made at the first call and then updated in place on
        # the device: no host sync per step, and a step replayed from a CUDA graph (which runs no Python) counts too
        self._sums: dict[str, torch.Tensor] = {}

    def __call__(self, model, batch: dict[str, Any]) -> torch.Tensor:
        rec = self.rec(model, batch)
        if self.gamma == 0:
            return rec
        inner = getattr(model, "module", model)  # under several processes the loop hands over the DDP wrapper
        align = alignment_loss(inner.get_input_embeddings().weight, self.h, self.normalize)
        if not self._sums:
            self._sums = {name: rec.new_zeros((), dtype=torch.float64) for name in ("rec", "alignment", "batches")}
        self._sums["rec"].add_(rec.detach().double())
        self._sums["alignment"].add_(align.detach().double())
        self._sums["batches"].add_(1)
        return rec + self.gamma * align

    def epoch_terms(self) -> dict[str, float]:
        """The mean L_Rec and L_T (unweighted by γ) per batch since the last call; empty at γ = 0. Resets."""
        if not self._sums or not float(self._sums["batches"]):
            return {}
        batches = float(self._sums["batches"])
        out = {name: float(self._sums[name]) / batches for name in ("rec", "alignment")}
        for total in self._sums.values():
            total.zero_()
        return out


def crab_loss(h: Hierarchy, gamma: float, normalize: bool, rec: Callable[..., torch.Tensor] = batch_loss) -> CrabLoss:
    """CRAB's fine-tuning loss (:class:`CrabLoss`) over the rebalanced codebook's hierarchy ``h``."""
    return CrabLoss(h, gamma, normalize, rec)


def prepare_trainable(
    model, cfg: CrabConfig, first_sid: int = N_SPECIAL, end: int | None = None
) -> tuple[Any, list[dict[str, Any]]]:
    """Wrap with LoRA (or not) and return the model and its AdamW parameter groups. Only the SID rows
    ``first_sid:end`` of the embedding table (and of an untied output layer, whose rows must move with them for a
    split token's children to be told apart) get a gradient: not the special tokens, a backbone's own vocabulary or
    TIGER's user tokens after the block (``end``; None: none)."""
    tables = [model.get_input_embeddings()]
    head = model.get_output_embeddings()
    if head is not None and head.weight is not tables[0].weight:
        tables.append(head)
    if cfg.params == "lora":
        from crabrec.models.lora import add_lora

        model = add_lora(model, cfg.lora_r, cfg.lora_alpha, cfg.lora_dropout)
    weights = [t.weight for t in tables]
    row_mask = torch.zeros(weights[0].shape[0], 1, device=weights[0].device)
    row_mask[first_sid:end] = 1.0
    for weight in weights:
        weight.requires_grad_(True)
        weight.register_hook(lambda g: g * row_mask.to(g.device))
    others = [p for p in model.parameters() if p.requires_grad and all(p is not w for w in weights)]
    groups = [{"params": others}, {"params": weights, "weight_decay": 0.0}]
    return model, groups
