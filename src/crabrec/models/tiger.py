"""TIGER (docs/METHOD.md, "Backbones"): a T5 encoder-decoder from a config that reads the history's SID tokens
(after one hashed user token) and generates the next item's SID tokens.

Vocabulary = the decoder's layout (``N_SPECIAL + codebook global id``) followed by ``user_bins`` user tokens; one
shared, tied embedding table. The decoder starts from ``PAD`` (T5's convention). ``config.crabrec_user_bins`` and
``config.crabrec_user_offset`` travel with the saved model.
"""

from __future__ import annotations

import numpy as np
import torch

from crabrec.config import TigerSection
from crabrec.models.decoder import IGNORE, N_SPECIAL, PAD


def build_tiger(sid_vocab: int, size: TigerSection, seed: int = 0):
    """``T5ForConditionalGeneration`` with ``size.layers`` encoder and decoder blocks (ReLU FFN, tied embeddings);
    its dropout modules draw their masks with :mod:`crabrec.models.dropout`."""
    from transformers import T5Config, T5ForConditionalGeneration

    from crabrec.models.dropout import use_fast_dropout

    torch.manual_seed(seed)
    offset = N_SPECIAL + sid_vocab
    config = T5Config(
        vocab_size=offset + size.user_bins,
        d_model=size.d_model,
        d_kv=size.d_kv,
        d_ff=size.ff,
        num_layers=size.layers,
        num_decoder_layers=size.layers,
        num_heads=size.heads,
        dropout_rate=size.dropout,
        feed_forward_proj="relu",
        tie_word_embeddings=True,
        pad_token_id=PAD,
        eos_token_id=None,
        decoder_start_token_id=PAD,
        crabrec_user_bins=size.user_bins,
        crabrec_user_offset=offset,
    )
    return use_fast_dropout(T5ForConditionalGeneration(config))


def encode_inputs(
    config, user: np.ndarray, history: np.ndarray, length: np.ndarray, tokens: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``[user token] + history SID tokens`` -> ``(input_ids, attention_mask)``."""
    bins = int(config.crabrec_user_bins)
    seqs = []
    for r in range(len(history)):
        body = tokens[history[r, : length[r]]].reshape(-1).tolist()
        seqs.append(([int(config.crabrec_user_offset) + int(user[r]) % bins] if bins else []) + body)
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), PAD, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, s in enumerate(seqs):
        ids[r, : len(s)] = torch.tensor(s)
        mask[r, : len(s)] = 1
    return ids, mask


def tiger_loss(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Token cross-entropy over the target's SID tokens (T5 shifts the labels right internally)."""
    out = model(input_ids=batch["ids"], attention_mask=batch["mask"], labels=batch["labels"])
    return out.loss


def make_labels(target: np.ndarray, tokens: np.ndarray) -> torch.Tensor:
    labels = torch.from_numpy(tokens[target].astype(np.int64))
    return labels if labels.numel() else torch.full((0, tokens.shape[1]), IGNORE)
