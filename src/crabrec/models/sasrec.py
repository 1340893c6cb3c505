"""SASRec (docs/METHOD.md, "Backbones"): causal self-attention over item-id histories, full-softmax cross-entropy
over all items (the BCE variant with one sampled negative as an option), full ranking at evaluation.

A ``transformers.PreTrainedModel`` so it saves and loads with ``save_pretrained`` / ``from_pretrained``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel


class SASRecConfig(PretrainedConfig):
    model_type = "crabrec-sasrec"

    def __init__(
        self,
        n_items: int = 1,
        max_len: int = 10,
        hidden: int = 64,
        blocks: int = 2,
        heads: int = 1,
        dropout: float = 0.2,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.n_items, self.max_len, self.hidden = n_items, max_len, hidden
        self.blocks, self.heads, self.dropout = blocks, heads, dropout


class SASRec(PreTrainedModel):
    config_class = SASRecConfig
    base_model_prefix = "sasrec"

    def __init__(self, config: SASRecConfig):
        super().__init__(config)
        h = config.hidden
        self.items = nn.Embedding(config.n_items + 1, h, padding_idx=config.n_items)  # last row = padding
        self.pos = nn.Embedding(config.max_len, h)
        self.drop = nn.Dropout(config.dropout)
        layer = nn.TransformerEncoderLayer(
            h, config.heads, 4 * h, config.dropout, activation="gelu", batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, config.blocks, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(h)
        nn.init.normal_(self.items.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """Weights are initialised in ``__init__``; nothing to do for ``from_pretrained``."""

    def user_state(self, history: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        """Hidden state at the last real position of right-padded ``history`` (pad = ``n_items``)."""
        t = history.shape[1]
        x = self.items(history) * (self.config.hidden**0.5) + self.pos(torch.arange(t, device=history.device))[None]
        x = self.drop(x)
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=history.device), 1)
        pad = history == self.config.n_items
        # is_causal: the mask is causal, said rather than checked (PyTorch would compare it on the host each call)
        x = self.blocks(x, mask=causal, src_key_padding_mask=pad, is_causal=True)
        x = self.norm(x)
        return x[torch.arange(len(history), device=history.device), (length - 1).clamp(min=0)]

    def scores(self, history: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        """``[B, n_items]`` logits: dot products with the shared item embeddings."""
        return self.user_state(history, length) @ self.items.weight[:-1].T

    def forward(
        self, history: torch.Tensor, length: torch.Tensor, target: torch.Tensor | None = None, loss_type: str = "ce"
    ) -> torch.Tensor:
        logits = self.scores(history, length)
        if target is None:
            return logits
        if loss_type == "ce":
            return nn.functional.cross_entropy(logits, target)
        neg = torch.randint(0, self.config.n_items - 1, target.shape, device=target.device)
        neg = neg + (neg >= target).long()  # a uniform negative different from the target
        pos_s = logits.gather(1, target[:, None])
        neg_s = logits.gather(1, neg[:, None])
        return nn.functional.softplus(-pos_s).mean() + nn.functional.softplus(neg_s).mean()


def build_sasrec(config: SASRecConfig, seed: int) -> SASRec:
    """A freshly initialised SASRec; the same seed gives the same weights."""
    torch.manual_seed(seed)
    return SASRec(config)


def to_tensors(history: np.ndarray, length: np.ndarray, n_items: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Our ``PAD=-1`` end-padded histories -> SASRec's padding id."""
    h = torch.from_numpy(np.where(history < 0, n_items, history).astype(np.int64, copy=False))
    return h, torch.from_numpy(length)


@torch.no_grad()
def rank_full(model: SASRec, history: np.ndarray, length: np.ndarray, k: int, batch_size: int = 512) -> np.ndarray:
    """Top-``k`` items per row by full ranking over the catalogue."""
    return top_full(model, history, length, k, batch_size)[0]


@torch.no_grad()
def top_full(
    model: SASRec,
    history: np.ndarray,
    length: np.ndarray,
    k: int,
    batch_size: int = 512,
    seen: np.ndarray | None = None,
    unavailable: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(items [N, k], scores [N, k])``: each row's top-``k`` items by full ranking, with their logits; a row's
    ``seen`` items (``[N, S]``, -1 padded) and every row's ``unavailable`` ones are left out (-1 slots where fewer
    than ``k`` items remain)."""
    model.eval()
    device = model.items.weight.device
    items, scores = [], []
    for s in range(0, len(history), batch_size):
        h, n = to_tensors(history[s : s + batch_size], length[s : s + batch_size], model.config.n_items)
        logits = model.scores(h.to(device), n.to(device))
        if unavailable is not None and len(unavailable):
            logits[:, torch.from_numpy(unavailable).to(device)] = float("-inf")
        if seen is not None:
            block = torch.from_numpy(seen[s : s + batch_size]).to(device)
            rows, cols = torch.nonzero((block >= 0) & (block < logits.shape[1]), as_tuple=True)
            logits[rows, block[rows, cols]] = float("-inf")
        top = logits.topk(k, dim=1)
        got = top.indices.cpu().numpy()
        got[~np.isfinite(top.values.float().cpu().numpy())] = -1
        items.append(got)
        scores.append(top.values.float().cpu().numpy())
    if not items:
        return np.zeros((0, k), np.int64), np.zeros((0, k), np.float32)
    return np.concatenate(items), np.concatenate(scores)
