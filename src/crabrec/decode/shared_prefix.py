"""Beam-search forward passes for Llama-family decoders that share each user's history cache across its beams.

HF's beam search (and a generic step over its cache) gives every beam row its own copy of the history's keys and
values: each step copies a ``[B*beams, heads, S, d]`` cache and reads it ``beams`` times over. Here the history
cache stays ``[B, kv_heads, S, d]`` and only the few generated tokens' keys/values are kept per beam; attention
scores against the shared history and against the beam's own tokens are normalised together, which is the same
softmax over the same keys. The prefill also skips work whose result is never read: norms, projections and MLPs
run on the real tokens only, not on the left padding, and in the last layer only the final position needs a query,
an MLP and logits (every position still gets its keys/values).

The layers' own modules (norms, projections, rotary embedding, MLP) are called, so the weights are the model's;
only the attention arithmetic is written out. Supported: ``Qwen2ForCausalLM`` and ``LlamaForCausalLM`` (the default
MOR decoder and SmolLM2) without sliding windows (:func:`supports`); other models take the generic HF-forward path.
"""

from __future__ import annotations

import torch

from crabrec.models.decoder import positions

SUPPORTED = ("qwen2", "llama")


def supports(model) -> bool:
    """Whether :class:`SharedPrefixDecoder` reproduces ``model``'s forward pass."""
    cfg = model.config
    return (
        getattr(cfg, "model_type", None) in SUPPORTED
        and not getattr(cfg, "use_sliding_window", False)
        and hasattr(model, "lm_head")
        and hasattr(getattr(model, "model", None), "rotary_emb")
    )


def _padded(x: torch.Tensor, real: torch.Tensor, dense: bool) -> torch.Tensor:
    """Real-token rows ``x [N, ...]`` back in the padded layout ``[B, S, ...]`` (zeros where ``real`` is False)."""
    if dense:
        return x.unflatten(0, real.shape)
    out = x.new_zeros(*real.shape, *x.shape[1:])
    out[real] = x
    return out


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


class SharedPrefixDecoder:
    """``prefill(ids, mask)`` -> first logits, then ``step(origin, token)`` -> next logits, for
    :func:`crabrec.decode.beam.constrained_search`."""

    def __init__(self, model):
        self.model = model
        cfg = model.config
        self.layers = model.model.layers[: cfg.num_hidden_layers]
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads

    def _qkv(self, layer, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, query: bool = True):
        """Rotated ``(q [.., heads, d] or None, k, v [.., kv_heads, d])`` of ``x [.., hidden]``."""
        attn, d = layer.self_attn, self.head_dim
        h = layer.input_layernorm(x)
        q = _rotate(attn.q_proj(h).unflatten(-1, (self.heads, d)), cos, sin) if query else None
        k = _rotate(attn.k_proj(h).unflatten(-1, (self.kv_heads, d)), cos, sin)
        return q, k, attn.v_proj(h).unflatten(-1, (self.kv_heads, d))

    def _finish(self, layer, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Output projection, residuals and MLP after attention output ``out [.., heads * d]``."""
        x = x + layer.self_attn.o_proj(out)
        return x + layer.mlp(layer.post_attention_layernorm(x))

    @torch.no_grad()
    def prefill(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Left-padded histories ``[B, S]`` -> next-token logits ``[B, V]``; keeps the history cache.

        Norms, projections and MLPs run on the real tokens only (a batch of histories of mixed lengths is about a
        third padding); attention runs on the padded ``[B, S]`` layout, where padded keys are zero and masked."""
        inner, s = self.model.model, ids.shape[1]
        r, d = self.heads // self.kv_heads, self.head_dim
        real = mask.bool()
        pos = positions(mask)
        dense = bool(real.all())  # no padding (one history, or equal lengths): plain reshapes
        x = inner.embed_tokens(ids.flatten() if dense else ids[real])  # [N, hidden], N = real tokens, row by row
        pos_real = pos.flatten() if dense else pos[real]
        cos, sin = (c[0, :, None] for c in inner.rotary_emb(x[None], pos_real[None]))  # [N, 1, d]
        last_token = real.sum(1).cumsum(0) - 1  # each row's final (always real) token among the N
        self.bias = torch.zeros(mask.shape, dtype=x.dtype, device=x.device).masked_fill(~real, float("-inf"))
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        # padding positions attend to themselves only, so their (never read) outputs stay finite
        allowed = (causal & real[:, None, :]) | torch.eye(s, dtype=torch.bool, device=x.device)
        self.keys, self.values = [], []
        for i, layer in enumerate(self.layers):
            last = i == len(self.layers) - 1
            q, k, v = self._qkv(layer, x, cos, sin, query=not last)
            self.keys.append(_padded(k, real, dense).transpose(1, 2))  # [B, kv_heads, S, d]
            self.values.append(_padded(v, real, dense).transpose(1, 2))
            if last:  # only the final position's output is ever read
                x, cos, sin = x[last_token], cos[last_token], sin[last_token]
                q = _rotate(layer.self_attn.q_proj(layer.input_layernorm(x)).unflatten(-1, (self.heads, d)), cos, sin)
                query, allowed = q[:, None], allowed[:, -1:]  # [B, 1, heads, d]
            else:
                query = _padded(q, real, dense)  # [B, S, heads, d]
            out = torch.nn.functional.scaled_dot_product_attention(
                query.transpose(1, 2),
                self.keys[i].repeat_interleave(r, 1),
                self.values[i].repeat_interleave(r, 1),
                attn_mask=allowed[:, None],
                scale=layer.self_attn.scaling,
            ).transpose(1, 2)  # [B, S or 1, heads, d]
            out = out[:, 0] if last else out.flatten(0, 1) if dense else out[real]
            x = self._finish(layer, x, out.flatten(1))
        self.gen_keys: list[torch.Tensor | None] = [None] * len(self.layers)
        self.gen_values: list[torch.Tensor | None] = [None] * len(self.layers)
        self.pos = pos[:, -1:]
        return self.model.lm_head(inner.norm(x))

    @torch.no_grad()
    def step(self, origin: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        """Feed one token per surviving beam row (``origin`` indexes the previous step's rows) -> next logits."""
        inner = self.model.model
        b = self.keys[0].shape[0]
        k = token.shape[0] // b
        g, r, d = self.kv_heads, self.heads // self.kv_heads, self.head_dim
        self.pos = self.pos + 1
        x = inner.embed_tokens(token.view(b, k))
        cos, sin = (c[:, :, None] for c in inner.rotary_emb(x, self.pos))  # every beam of a user: same position
        bias = self.bias[:, None, None, None, :]  # broadcast over beams, kv heads, query groups
        for i, layer in enumerate(self.layers):
            q, key, value = self._qkv(layer, x, cos, sin)
            key, value = key.reshape(b * k, g, 1, d), value.reshape(b * k, g, 1, d)
            if self.gen_keys[i] is not None:
                key = torch.cat([self.gen_keys[i][origin], key], 2)
                value = torch.cat([self.gen_values[i][origin], value], 2)
            self.gen_keys[i], self.gen_values[i] = key, value
            t = key.shape[2]
            q = q.view(b, k, g, r, d) * layer.self_attn.scaling
            own_k, own_v = key.view(b, k, g, t, d), value.view(b, k, g, t, d)
            scores = torch.cat(
                [
                    torch.einsum("bkgrd,bgsd->bkgrs", q, self.keys[i]) + bias,
                    torch.einsum("bkgrd,bkgtd->bkgrt", q, own_k),
                ],
                -1,
            )
            p = torch.softmax(scores.float(), -1).to(q.dtype)
            s = self.keys[i].shape[2]
            out = torch.einsum("bkgrs,bgsd->bkgrd", p[..., :s], self.values[i])
            out = out + torch.einsum("bkgrt,bkgtd->bkgrd", p[..., s:], own_v)
            x = self._finish(layer, x, out.reshape(b, k, g * r * d))
        return self.model.lm_head(inner.norm(x)).view(b * k, -1)
