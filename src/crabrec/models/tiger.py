"""TIGER (docs/METHOD.md, "Backbones"): a T5 encoder-decoder from a config that reads the history's SID tokens
(after an optional hashed user token) and generates the next item's SID tokens.

Vocabulary = the decoder's layout (``N_SPECIAL + codebook global id``) followed by ``user_bins`` user tokens; one
shared input embedding table. The decoder starts from ``PAD`` (T5's convention). Three output layers
(``tiger.head``):

* ``level`` (:class:`LevelT5`): an untied output projection whose softmax at decoder position ``l`` runs over SID
  level ``l``'s tokens only (one head per level, as in the published reproductions); every other logit is the
  dtype's minimum, so a search normalising over the whole row gets the level's own distribution.
* ``level-tied`` (:class:`TiedLevelT5`): the same per-level softmax over the input embeddings themselves (scaled by
  ``d_model^-0.5`` as T5's tied output is), so a token's input and output vectors are one (as in MOR's decoder).
* ``tied``: T5's own, the input embeddings reused (scaled by ``d_model^-0.5``) with a softmax over the whole
  vocabulary.

``config.crabrec_user_bins``, ``config.crabrec_user_offset``, ``config.crabrec_head``, ``config.crabrec_level_sizes``
and ``config.crabrec_init`` (where the SID embeddings started: ``codebook`` or ``random``) travel with the saved
model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from transformers import T5ForConditionalGeneration

from crabrec.config import TigerSection
from crabrec.errors import CrabError
from crabrec.models.decoder import IGNORE, N_SPECIAL, PAD


class LevelT5(T5ForConditionalGeneration):
    """T5 with an untied output projection and a per-level softmax: the logit of a token outside the SID level of
    its decoder position is the dtype's minimum (decoder position ``p`` predicts level ``p``)."""

    _tied_weights_keys = {  # the input embeddings stay shared; the output projection is its own
        "encoder.embed_tokens.weight": "shared.weight",
        "decoder.embed_tokens.weight": "shared.weight",
    }

    def outside_level(self, device: torch.device) -> torch.Tensor:
        """``[levels, vocab]``: True where a token is outside the level; built on first use on each device (not a
        buffer: ``from_pretrained`` builds the model on the meta device, where a buffer would hold no values)."""
        table = getattr(self, "_outside", None)
        if table is None or table.device != device:
            ends = np.cumsum([N_SPECIAL, *self.config.crabrec_level_sizes])
            vocab = torch.arange(self.config.vocab_size, device=device)
            table = torch.stack([(vocab < a) | (vocab >= b) for a, b in zip(ends[:-1], ends[1:])])
            self._outside = table
        return table

    def forward(self, *args, labels: torch.Tensor | None = None, per_level_loss: bool = False, **kwargs):
        """T5's forward with the per-level logits; ``per_level_loss=True`` returns :meth:`level_loss` instead (through
        ``forward``, so that a compiled model compiles it)."""
        if per_level_loss:
            return self.level_loss(kwargs["input_ids"], kwargs["attention_mask"], labels)
        cache = kwargs.get("cache") or kwargs.get("past_key_values")
        first = int(cache.get_seq_length()) if cache is not None else 0  # before the call extends it
        if labels is not None and kwargs.get("decoder_input_ids") is None:
            kwargs["decoder_input_ids"] = self._shift_right(labels)
        out = super().forward(*args, **kwargs)
        logits = out.logits
        outside = self.outside_level(logits.device)
        level = torch.arange(first, first + logits.shape[1], device=logits.device).clamp(max=len(outside) - 1)
        out.logits = logits.masked_fill(outside[level][None], torch.finfo(logits.dtype).min)
        if labels is not None:
            flat = out.logits.reshape(-1, out.logits.shape[-1]).float()
            out.loss = torch.nn.functional.cross_entropy(flat, labels.reshape(-1).to(flat.device), ignore_index=IGNORE)
        return out

    def level_loss(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """``forward(..., labels=labels).loss`` without the whole-vocabulary logits: decoder position ``l`` is projected
        on its level's rows of the output layer only (a quarter of the projection's arithmetic with 3 levels + dedup).
        Equal to the forward's loss up to float rounding (the masked logits add exactly 0 to its softmax sums)."""
        encoded = self.encoder(input_ids=input_ids, attention_mask=attention_mask)[0]
        hidden = self.decoder(
            input_ids=self._shift_right(labels),
            encoder_hidden_states=encoded,
            encoder_attention_mask=attention_mask,
            use_cache=False,
        )[0]
        if self.config.scale_decoder_outputs:
            hidden = hidden * self.model_dim**-0.5
        ends = np.cumsum([N_SPECIAL, *self.config.crabrec_level_sizes])
        labels = labels.to(hidden.device)
        total = count = hidden.new_zeros((), dtype=torch.float32)  # tensors: no host sync in the step
        for position in range(labels.shape[1]):
            level = min(position, len(ends) - 2)
            first, end = int(ends[level]), int(ends[level + 1])
            target = labels[:, position]
            keep = target != IGNORE
            logits = (hidden[:, position] @ self.lm_head.weight[first:end].T).float()
            local = torch.where(keep, target - first, IGNORE)
            total = total + torch.nn.functional.cross_entropy(logits, local, ignore_index=IGNORE, reduction="sum")
            count = count + keep.sum()
        return total / count.clamp(min=1)


class TiedLevelT5(LevelT5):
    """:class:`LevelT5` whose output projection is the input embedding table (T5's tying, with its ``d_model^-0.5``
    scaling of the decoder output)."""

    _tied_weights_keys = dict(T5ForConditionalGeneration._tied_weights_keys)


def build_tiger(
    level_sizes: Sequence[int],
    size: TigerSection,
    seed: int = 0,
    codewords: Sequence[np.ndarray] | None = None,
):
    """A TIGER model over a codebook with ``level_sizes`` tokens per level: ``size.layers`` encoder and decoder
    blocks (``size.ffn`` feed-forward), the ``size.head`` output layer; its dropout modules draw their masks with
    :mod:`crabrec.models.dropout`. The SID token embeddings start from ``codewords`` (one ``[size, dim]`` array per
    level, :func:`codebook_embeddings`) when :func:`initial_embeddings` says so."""
    from transformers import T5Config

    from crabrec.models.dropout import use_fast_dropout

    start = initial_embeddings(size.init, codewords)
    torch.manual_seed(seed)
    offset = N_SPECIAL + int(sum(level_sizes))
    level = size.head != "tied"
    tied = size.head != "level"
    config = T5Config(
        vocab_size=offset + size.user_bins,
        d_model=size.d_model,
        d_kv=size.d_kv,
        d_ff=size.ff,
        num_layers=size.layers,
        num_decoder_layers=size.layers,
        num_heads=size.heads,
        dropout_rate=size.dropout,
        feed_forward_proj=size.ffn,
        tie_word_embeddings=tied,  # T5's flag: False = no d_model^-0.5 scaling of the decoder output
        pad_token_id=PAD,
        eos_token_id=None,
        decoder_start_token_id=PAD,
        crabrec_user_bins=size.user_bins,
        crabrec_user_offset=offset,
        crabrec_head=size.head,
        crabrec_level_sizes=[int(s) for s in level_sizes],
        crabrec_init=start,
    )
    config.scale_decoder_outputs = tied  # what the flag above means, said outright: transformers 5.0 ignored it
    model = tiger_class(config)(config)
    with torch.no_grad():
        if level:
            start_layout(model, seed, head=not tied)
        if start == "codebook":
            table = codebook_embeddings(codewords, level_sizes, size.d_model, seed)
            rows = torch.from_numpy(table)
            known = torch.isfinite(rows[:, 0])  # levels without centroids (the dedup level) keep T5's draw
            model.shared.weight[N_SPECIAL : N_SPECIAL + len(rows)][known] = rows[known].to(model.shared.weight.dtype)
    return use_fast_dropout(model)


DECODER_START_STD = 0.02  # the decoder's start embedding: a small learned vector (cornac's and GRID's BOS)


def start_layout(model: LevelT5, seed: int, head: bool = True) -> None:
    """The per-level layout's own starting weights, drawn from ``seed + 1`` (apart from T5's draw): an untied output
    layer (``head``) as a linear layer starts, U(-d^-1/2, d^-1/2), and the decoder's start token (``PAD``, which the
    encoder masks) scaled to a standard deviation of :data:`DECODER_START_STD`, so that the first decoder position
    reads the history through attention rather than a unit-scale input of its own."""
    if head:
        bound = model.config.d_model**-0.5
        generator = torch.Generator().manual_seed(seed + 1)
        weight = model.lm_head.weight
        weight.copy_(torch.empty(weight.shape).uniform_(-bound, bound, generator=generator).to(weight.dtype))
    model.shared.weight[PAD].mul_(DECODER_START_STD)


def initial_embeddings(init: str, codewords: Sequence[np.ndarray] | None) -> str:
    """What ``tiger.init`` resolves to: ``codebook`` or ``random`` (``auto``: codebook when there are centroids)."""
    have = codewords is not None and any(np.ptp(np.asarray(c), axis=0).max(initial=0) > 0 for c in codewords)
    if init == "codebook" and not have:
        raise CrabError(
            "tiger.init=codebook: this codebook has no centroids (imported SIDs without item vectors); "
            "use tiger.init=random or auto"
        )
    return "codebook" if init == "codebook" or (init == "auto" and have) else "random"


def codebook_embeddings(codewords: Sequence[np.ndarray], level_sizes: Sequence[int], d_model: int, seed: int = 0):
    """``[sum(level_sizes), d_model]`` starting embeddings of the SID tokens from the quantizer's centroids.

    Each level's centroids are centred on their own mean and projected on the top ``d_model`` principal axes of all
    levels' centred centroids together (so the levels share one basis and keep their relative geometry); each level
    is then scaled so that its entries have standard deviation 1, T5's initial spread of an embedding. A level whose
    centroids are all equal (the dedup level, whose codes are not centroids) gets NaN rows: the caller keeps its
    random draw. When ``d_model`` exceeds the principal axes there are (the centroids' width, or their number in a
    small codebook) the missing axes are filled with N(0, 1) draws."""
    centred = []
    for level, size in enumerate(level_sizes):
        c = np.asarray(codewords[level], dtype=np.float64)
        if c.shape[0] != size:
            raise CrabError(f"tiger.init=codebook: level {level} has {c.shape[0]} centroids for {size} tokens")
        centred.append(c - c.mean(axis=0))
    stacked = np.concatenate(centred)
    _, _, vt = np.linalg.svd(stacked, full_matrices=False)  # min(rows, width) axes: fewer than width when few rows
    basis = vt[:d_model].T
    width = basis.shape[1]
    rng = np.random.default_rng(seed)
    out = []
    for c in centred:
        proj = c @ basis
        spread = proj.std()
        if spread < 1e-12:
            out.append(np.full((len(c), d_model), np.nan))
            continue
        proj = proj / spread
        if width < d_model:
            proj = np.concatenate([proj, rng.standard_normal((len(c), d_model - width))], axis=1)
        out.append(proj)
    return np.concatenate(out).astype(np.float32)


def rebalanced_tiger(model, old, new, parent: dict[str, str], seed: int, noise: float) -> None:
    """A trained TIGER grown from codebook ``old`` to CRAB's rebalanced ``new`` in place
    (:func:`crabrec.crab.alignment.expand_embeddings`): new SID rows start from their original token's, the user
    tokens move behind the larger SID block, and the saved config records the new level sizes."""
    from crabrec.crab.alignment import expand_embeddings

    config = model.config
    expand_embeddings(model, old, new, parent, seed, noise, N_SPECIAL, tail=int(config.crabrec_user_bins))
    config.crabrec_level_sizes = [int(s) for s in new.sizes]
    config.crabrec_user_offset = N_SPECIAL + new.vocab_size
    model._outside = None  # the per-level masks are rebuilt for the new sizes


def tiger_class(config):
    """The model class a saved TIGER config loads with (its output layer decides)."""
    head = getattr(config, "crabrec_head", "tied")
    return {"level": LevelT5, "level-tied": TiedLevelT5}.get(head, T5ForConditionalGeneration)


def encode_inputs(
    config, user: np.ndarray, history: np.ndarray, length: np.ndarray, tokens: np.ndarray, multiple: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``[user token] + history SID tokens`` -> ``(input_ids, attention_mask)``, as wide as the longest
    row rounded up to a ``multiple`` (fewer distinct shapes for recorded CUDA graphs; padding is masked out). Built
    with array operations (equal to :func:`crabrec.train.batch_reference.tiger_inputs_rows`)."""
    bins = int(config.crabrec_user_bins)
    lead = 1 if bins else 0
    rows, levels = history.shape[0], tokens.shape[1]
    n = lead + np.asarray(length, dtype=np.int64) * levels  # each row's tokens: its history is a prefix
    width = -(-int(n.max()) // multiple) * multiple
    ids = np.full((rows, max(width, lead + history.shape[1] * levels)), PAD, dtype=np.int64)
    if bins:
        ids[:, 0] = int(config.crabrec_user_offset) + np.asarray(user, dtype=np.int64) % bins
    ids[:, lead : lead + history.shape[1] * levels] = tokens[np.maximum(history, 0)].reshape(rows, -1)
    real = np.arange(width)[None, :] < n[:, None]
    return torch.from_numpy(np.where(real, ids[:, :width], PAD)), torch.from_numpy(real.astype(np.int64))


def tiger_loss(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Token cross-entropy over the target's SID tokens (T5 shifts the labels right internally); a per-level model
    computes it from its levels' logits only (:meth:`LevelT5.level_loss`), also when compiled (``_orig_mod``: the
    compiled wrapper is no LevelT5, and calling the method on the module inside would bypass the compilation) or
    wrapped with LoRA (``get_base_model``: CRAB's fine-tune; the wrapper hands the call on)."""
    inner = getattr(model, "_orig_mod", model)
    if isinstance(getattr(inner, "get_base_model", lambda: inner)(), LevelT5):
        return model(input_ids=batch["ids"], attention_mask=batch["mask"], labels=batch["labels"], per_level_loss=True)
    out = model(input_ids=batch["ids"], attention_mask=batch["mask"], labels=batch["labels"])
    return out.loss


def make_labels(target: np.ndarray, tokens: np.ndarray) -> torch.Tensor:
    labels = torch.from_numpy(tokens[target].astype(np.int64))
    return labels if labels.numel() else torch.full((0, tokens.shape[1]), IGNORE)
