"""The loss plug-in shared by the re-weighting baselines: token cross-entropy times a per-token weight.

A weight function maps the ``(item, level)`` of every labelled token (``-1`` elsewhere) to a weight; the loss is
``Σ w·CE / #target tokens``, so all-ones weights give the plain recommendation loss exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from crabrec.models.decoder import batch_loss

WeightFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def weighted_loss(weight_fn: WeightFn):
    def loss(model, batch: dict[str, Any]) -> torch.Tensor:
        weight = weight_fn(batch["label_item"], batch["label_level"])
        return batch_loss(model, batch, token_weight=weight)

    return loss
