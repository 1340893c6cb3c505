"""D²LR, training-stage debiasing (docs/METHOD.md, "Baselines"; a RECONSTRUCTION: no official code exists).

Token-level inverse-propensity weights with position decay on the target's SID tokens:
``p_y = max(f_y, 1) / max_j f_j``, ``ρ_{y,t} = max(p_y (1 − α t/T), 1e-6)`` for ``t = 1..T``,
``w = min(1/ρ, clip)``, then normalised to mean 1 over the target tokens of each batch.
The optional inference-time SASRec re-scoring of the third-party version is not implemented.
"""

from __future__ import annotations

import numpy as np
import torch


def token_weights(freq: np.ndarray, item: np.ndarray, level: np.ndarray, n_levels: int, alpha: float, clip: float):
    """Un-normalised IPS weight of token ``level`` (0-based) of item ``item``."""
    p = np.maximum(freq[item], 1) / max(int(freq.max()), 1)
    rho = np.maximum(p * (1.0 - alpha * (level + 1) / n_levels), 1e-6)
    return np.minimum(1.0 / rho, clip)


def token_weight_fn(freq: np.ndarray, n_levels: int, alpha: float = 0.5, clip: float = 50.0):
    """Weight function for :func:`crabrec.baselines.weighted.weighted_loss` (batch mean of weights = 1): a lookup in
    the ``[items, levels]`` table of :func:`token_weights`."""
    items, levels = np.arange(len(freq))[:, None], np.arange(n_levels)[None, :]
    table = torch.from_numpy(token_weights(freq, items, levels, n_levels, alpha, clip)).float()
    copies: dict[torch.device, torch.Tensor] = {}  # the table on each device, copied once

    def fn(item: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        on = item >= 0
        on_device = copies.get(item.device)
        if on_device is None:
            on_device = copies[item.device] = table.to(item.device)
        w = on_device[item.clamp(min=0), level.clamp(min=0, max=n_levels - 1)]
        w = torch.where(on, w, torch.zeros((), device=item.device))
        count = on.sum()  # the labelled tokens' mean, without reading anything back to the host
        return w / torch.where(count > 0, w.sum() / count.clamp(min=1), torch.ones((), device=item.device))

    return fn
