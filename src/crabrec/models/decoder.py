"""MiniOneRec-style decoder: a Hugging Face causal LM whose vocabulary holds one token per SID token.

Row form: sequence = SID tokens of the history (oldest first) + SID tokens of the target (no BOS: every sample has
a history, so the first target token is predicted from the last history token); the loss is token cross-entropy on
the target tokens only. Vocabulary id = ``N_SPECIAL + codebook global id``.

Packed form (:mod:`crabrec.models.packing`) computes the same per-row loss from one sequence per user.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass

import numpy as np
import torch

from crabrec.config import TrainConfig

PAD, BOS = 0, 1
N_SPECIAL = 2
IGNORE = -100


@dataclass(frozen=True)
class Prompt:
    """Token ids around the SIDs for a pretrained backbone (:mod:`crabrec.models.backbone`); empty = bare SIDs."""

    head: tuple[int, ...] = ()  # before the first history item
    sep: tuple[int, ...] = ()  # between history items
    tail: tuple[int, ...] = ()  # after the history, where the answer starts
    answer_end: tuple[int, ...] = ()  # after the target SID (training only)


def build_decoder(vocab_size: int, size: TrainConfig, max_positions: int = 1024, seed: int = 0):
    """A small ``Qwen2ForCausalLM`` (tied input/output embeddings), seeded, sized by ``size``'s hidden, layers, heads,
    ff, dropout, attention_dropout and label_smoothing."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=size.hidden,
        intermediate_size=size.ff,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        attention_dropout=size.attention_dropout,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=None,
        use_cache=True,
        crabrec_dropout=size.dropout,
        crabrec_label_smoothing=size.label_smoothing,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = PAD
    return add_dropout(model)


def add_dropout(model):
    """Dropout ``config.crabrec_dropout`` on the token embeddings and on every residual branch (the attention and MLP
    outputs), as forward hooks (Qwen2/Llama modules have attention dropout only; masks from
    :mod:`crabrec.models.dropout`). Active in training mode only, so decoding and the saved weights are unchanged;
    call again after ``from_pretrained`` (the hooks are not saved)."""
    p = float(getattr(model.config, "crabrec_dropout", 0.0) or 0.0)
    base = getattr(model, "model", None)
    if p <= 0 or base is None or getattr(model, "_crabrec_dropout", False):
        return model

    from crabrec.models.dropout import dropout

    def hook(module, args, output):
        return dropout(output, p, module.training)

    base.embed_tokens.register_forward_hook(hook)
    for layer in base.layers:
        layer.self_attn.o_proj.register_forward_hook(hook)
        layer.mlp.register_forward_hook(hook)
    model._crabrec_dropout = True
    return model


def label_smoothing(model) -> float:
    """The training label smoothing a decoder was built with (0 when evaluating or for foreign models)."""
    if not model.training:
        return 0.0
    return float(getattr(getattr(model, "config", None), "crabrec_label_smoothing", 0.0) or 0.0)


def item_tokens(token_ids: np.ndarray) -> np.ndarray:
    """``[n_items, L]`` codebook global ids -> model vocabulary ids."""
    return token_ids + N_SPECIAL


def encode_rows(
    history: np.ndarray,
    length: np.ndarray,
    target: np.ndarray | None,
    tokens: np.ndarray,
    prompt: Prompt | None = None,
    multiple: int = 1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Left-padded ``[prompt] history SIDs [prompt] (+ target SID [+ answer end])`` -> ``(ids, mask, labels)``.

    Labels cover the answer (target SID and ``prompt.answer_end``), which always ends the row. The width is the
    longest row's, rounded up to a ``multiple`` (few batch shapes for recorded steps). Built without a loop over
    rows: every row is laid out with all its history slots, then the slots past its length are moved to the left
    as padding (the same batch as :func:`crabrec.train.batch_reference.encode_rows_rows`)."""
    n, slots = history.shape
    prompt = prompt or Prompt()
    head, sep, tail, end = (np.asarray(part, dtype=np.int64) for part in astuple(prompt))
    used = np.arange(slots) < np.asarray(length)[:, None]  # [n, slots]
    sids = tokens[np.where(used, history, 0)].astype(np.int64)  # [n, slots, levels]; unused slots masked below
    blocks = np.concatenate([np.broadcast_to(sep, (n, slots, len(sep))), sids], axis=2)
    keep = np.broadcast_to(used[:, :, None], blocks.shape).copy()
    keep[:, 0, : len(sep)] = False  # no separator before the first item
    parts = [np.broadcast_to(head, (n, len(head))), blocks.reshape(n, -1), np.broadcast_to(tail, (n, len(tail)))]
    kept = [np.ones((n, len(head)), bool), keep.reshape(n, -1), np.ones((n, len(tail)), bool)]
    answer = 0
    if target is not None:
        answer = tokens.shape[1] + len(end)
        parts.append(np.concatenate([tokens[target].astype(np.int64), np.broadcast_to(end, (n, len(end)))], axis=1))
        kept.append(np.ones((n, answer), bool))
    full, valid = np.concatenate(parts, axis=1), np.concatenate(kept, axis=1)
    order = np.argsort(valid, axis=1, kind="stable")  # each row's padding first, its tokens after in their order
    full, valid = np.take_along_axis(full, order, axis=1), np.take_along_axis(valid, order, axis=1)
    max_len = -(-int(valid.sum(axis=1).max()) // multiple) * multiple
    extra = max_len - full.shape[1]
    if extra > 0:
        full = np.pad(full, ((0, 0), (extra, 0)))
        valid = np.pad(valid, ((0, 0), (extra, 0)))
    full, valid = full[:, full.shape[1] - max_len :], valid[:, valid.shape[1] - max_len :]
    ids = torch.from_numpy(np.where(valid, full, PAD))
    mask = torch.from_numpy(valid.astype(np.int64))
    labels = None
    if target is not None:
        labels = torch.full((n, max_len), IGNORE, dtype=torch.long)
        labels[:, max_len - answer :] = ids[:, max_len - answer :]
    return ids, mask, labels


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that start at 0 on the first real token of each left-padded row."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def target_loss(
    model,
    ids: torch.Tensor,
    mask: torch.Tensor,
    labels: torch.Tensor,
    reduction: str = "mean",
    position_ids: torch.Tensor | None = None,
    token_weight: torch.Tensor | None = None,
    width: int | None = None,
):
    """Token cross-entropy on the labelled tokens (``reduction='none'`` gives ``[B, L]`` in row form).

    ``mask`` is a 2-D padding mask (row form) or a 4-D additive mask (packed form, with ``position_ids``).
    ``token_weight`` (aligned with ``labels``) gives ``Σ w·CE / #labelled tokens`` (baselines' weighted losses).
    ``width`` is the row form's answer width, when known (the row batcher's ``answer_width``): otherwise it is read
    back from ``labels``, which a recorded step cannot do. No key/value cache is built (a training step reads none).
    """
    if position_ids is None:  # row form: the answer ends every row, so only its logits are needed
        width = answer_width(labels) if width is None else width
        out = model(
            input_ids=ids, attention_mask=mask, position_ids=positions(mask), logits_to_keep=width + 1, use_cache=False
        )
        labels = labels[:, -width - 1 :]
        token_weight = None if token_weight is None else token_weight[:, -width - 1 :]
    else:
        out = model(input_ids=ids, attention_mask=mask, position_ids=position_ids, use_cache=False)
    logits = out.logits[:, :-1].float()
    gold = labels[:, 1:]
    ce = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        gold.reshape(-1),
        ignore_index=IGNORE,
        reduction="none",
        label_smoothing=label_smoothing(model),
    ).view(gold.shape)
    if reduction == "none":
        width = answer_width(labels) if width is None else width
        return ce[:, -width:]
    valid = (gold != IGNORE).sum()
    if token_weight is not None:
        ce = ce * token_weight[:, 1:].to(ce.dtype)
    return ce.sum() / valid.clamp(min=1)


def batch_loss(model, batch: dict, **kwargs):
    """:func:`target_loss` of a training batch, row form or packed (its ``positions``), with the row form's answer
    width as the batch carries it; ``kwargs`` go to :func:`target_loss` (``token_weight``)."""
    return target_loss(
        model,
        batch["ids"],
        batch["mask"],
        batch["labels"],
        position_ids=batch.get("positions"),
        width=batch.get("answer_width"),
        **kwargs,
    )


def answer_width(labels: torch.Tensor) -> int:
    """The row form's answer width: the labelled tokens of a row (every row has the same)."""
    return int((labels[0] != IGNORE).sum()) if len(labels) else 0


def label_targets(labels: torch.Tensor, target: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Row form: ``(item, level)`` of every labelled token (-1 elsewhere); the target SID is the row's tail."""
    width = answer_width(labels)
    item = torch.full_like(labels, -1)
    level = torch.full_like(labels, -1)
    if width:
        item[:, -width:] = torch.as_tensor(np.asarray(target, dtype=np.int64), device=labels.device)[:, None]
        level[:, -width:] = torch.arange(width, device=labels.device)
    return item, level
