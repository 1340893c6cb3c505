"""IFairLRS Reweighting (docs/METHOD.md, "Baselines"), per sample (not the reference code's batch-mean bug).

``W_G = GH_train(G) / GH_target(G)`` over the popularity groups (histories vs targets of the training rows; ``W_G = 1``
where ``GH_target(G) = 0``); every target token of a row gets ``W_{g(target)}``, so the loss is
``(1/B) Σ_i W_i · mean_t CE_{i,t}`` in row form.
"""

from __future__ import annotations

import numpy as np
import torch

from crabrec.data.dataset import Samples


def group_weights(train: Samples, group: np.ndarray, n_groups: int) -> np.ndarray:
    """``W_G`` for each of the ``n_groups`` popularity groups."""
    hist = np.bincount(group[train.history_items()], minlength=n_groups).astype(np.float64)
    tgt = np.bincount(group[train.target], minlength=n_groups).astype(np.float64)
    gh_tr = hist / max(hist.sum(), 1.0)
    gh_ta = tgt / max(tgt.sum(), 1.0)
    return np.where(gh_ta > 0, gh_tr / np.where(gh_ta > 0, gh_ta, 1.0), 1.0)


def token_weight_fn(weights: np.ndarray):
    table = torch.from_numpy(np.asarray(weights, dtype=np.float32))
    copies: dict[torch.device, torch.Tensor] = {}  # the table on each device, copied once

    def fn(item: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        on_device = copies.get(item.device)
        if on_device is None:
            on_device = copies[item.device] = table.to(item.device)
        return torch.where(
            item >= 0, on_device[item.clamp(min=0)], torch.zeros((), dtype=table.dtype, device=item.device)
        )

    return fn
