"""LoRA for every model that gets it: the backbone MOR decoder and the CRAB fine-tune (one place for both).

Adapters go on the attention projections; ``export_merged`` saves a plain Hugging Face model with them merged, so
evaluation never needs ``peft``.
"""

from __future__ import annotations

import copy
import types
import warnings
from pathlib import Path

import torch

from crabrec.errors import CrabError

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj", "q", "k", "v", "o")  # Llama-style decoders', then T5's (TIGER)
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
    with warnings.catch_warnings():  # peft reads a property transformers deprecated: nothing a user can act on
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        model = get_peft_model(model, config)
    return fuse_lora_products(token_indices_on_the_device(keep_input_dtype_under_autocast(model)))


def token_indices_on_the_device(model):
    """``model`` with its trainable-token layers keeping their token indices as buffers, on the weights' device.

    peft builds the embedding (and the tied output layer) with the trainable rows at every forward pass, from a tensor
    it makes anew from a Python list and copies to the device each time. A recorded step (``cuda_graphs``) cannot
    copy from host memory, and an eager one waits for it. The indices are the same at every call: here they are made
    once, as a buffer of the layer (not saved: ``persistent=False``), which moves with the model. Made at the first
    call instead, they would change the layer between its first and second call, and ``torch.compile`` would compile
    the model a second time. The weights computed are the same."""
    from peft.tuners.trainable_tokens.layer import TrainableTokensLayer

    for layer in model.modules():
        if isinstance(layer, TrainableTokensLayer) and hasattr(layer, "get_merged_weights"):
            for name in layer.token_indices:
                _index_buffer(layer, name)
            layer.get_merged_weights = types.MethodType(_merged_weights, layer)
    return model


def _index_buffer(layer, adapter: str) -> torch.Tensor:
    """The layer's token indices of ``adapter`` as a buffer on its weights' device (registered on first use)."""
    key = "crabrec_token_index_" + adapter.replace(".", "_")
    index = layer._buffers.get(key)
    if index is None:  # an adapter added after the model was wrapped
        weight = layer.base_layer.weight
        index = torch.tensor(layer.token_indices[adapter], dtype=torch.long, device=weight.device)
        layer.register_buffer(key, index, persistent=False)
    return index


def _merged_weights(layer, active_adapters):
    weight = layer.base_layer.weight
    for name in active_adapters:
        delta = layer.trainable_tokens_delta[name].to(weight)
        weight = weight.index_copy(dim=0, index=_index_buffer(layer, name), source=delta)
    return weight


def keep_input_dtype_under_autocast(model):
    """``model`` with its LoRA branches taking their input as it comes while autocast is on.

    peft casts a branch's input to the adapter's dtype (float32) before the adapter's matrix product, which autocast
    then casts straight back to bfloat16. On a bfloat16 activation stream (``train.backbone_dtype: bfloat16``) that
    is two full-size copies each way per adapted projection, about an eighth of the bytes a step moves. Skipping them
    changes no value without LoRA dropout (MOR's adapter; bfloat16 -> float32 -> bfloat16 is exact); with dropout,
    only the random mask may be drawn differently on a GPU. Without autocast the cast stays: there it is what makes a
    bfloat16 input meet float32 adapter weights. A float32 stream (the default) has nothing to cast either way."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    for layer in model.modules():
        if isinstance(layer, BaseTunerLayer) and hasattr(layer, "_cast_input_dtype"):
            layer._cast_input_dtype = types.MethodType(_cast_outside_autocast, layer)
    return model


def _cast_outside_autocast(layer, x, dtype):
    skip = not getattr(layer, "cast_input_dtype_enabled", True)  # peft's own switch still holds
    if x is None or x.dtype == dtype or skip or torch.is_autocast_enabled(x.device.type):
        return x
    return x.to(dtype=dtype)


def fuse_lora_products(model):
    """``model`` with each LoRA branch added to its projection's output inside one matrix product.

    peft adds a branch as ``result + lora_B(lora_A(x)) * scaling``: a matrix product, then a scaling and an addition
    that each read and write the projection's whole output, and one more scaling backward. Here the second product
    takes the output as its addend and the scaling as its factor (``addmm``): on a GPU the addition happens as the
    product writes its result, and backward scales only the rank-``r`` intermediate. That is one operator and about 6
    output-sized reads or writes fewer per adapted projection (120 on SmolLM2-135M: 4 a layer). In float32 the values
    are peft's (bit for bit on the CPUs measured); under autocast the sum is rounded once instead of twice. peft's own
    forward still runs where this one does not apply (adapters off or merged, several or mixed adapters, DoRA and
    other variants, a bias on the branch, or tensors of different dtypes outside autocast)."""
    from peft.tuners.lora.layer import Linear

    for layer in model.modules():
        if type(layer) is Linear and not hasattr(layer, "peft_forward"):
            layer.peft_forward = layer.forward
            layer.forward = types.MethodType(_fused_lora_forward, layer)
    return model


def _fused_lora_forward(layer, x, *args, **kwargs):
    active = layer.active_adapters
    name = active[0] if len(active) == 1 else None
    if (
        args
        or kwargs
        or layer.disable_adapters
        or layer.merged
        or name not in layer.lora_A
        or name in layer.lora_variant
        or layer.lora_B[name].bias is not None
    ):
        return layer.peft_forward(x, *args, **kwargs)
    lora_a, lora_b = layer.lora_A[name], layer.lora_B[name]
    result = layer.base_layer(x)
    low = lora_a(layer.lora_dropout[name](layer._cast_input_dtype(x, lora_a.weight.dtype)))
    if not torch.is_autocast_enabled(x.device.type) and not result.dtype == low.dtype == lora_b.weight.dtype:
        return (result + lora_b(low) * layer.scaling[name]).to(result.dtype)  # peft's sum, of mixed dtypes
    flat, scaling = result.reshape(-1, result.shape[-1]), layer.scaling[name]
    out = torch.addmm(flat, low.reshape(-1, low.shape[-1]), lora_b.weight.t(), alpha=scaling)
    return out.view(result.shape).to(result.dtype)


def export_merged(model, path: Path) -> None:
    """Save a plain HF model (LoRA merged into the weights) at ``path``, in float32: a backbone trained with its
    frozen weights in bfloat16 is merged in float32 (exact: every bfloat16 value is one in float32)."""
    if hasattr(model, "merge_and_unload"):
        with warnings.catch_warnings():  # T5's config says tied whatever TIGER's head is; peft corrects it, loudly
            warnings.filterwarnings("ignore", "Input and output embeddings are no longer tied")
            model = copy.deepcopy(model).float().merge_and_unload()
    model.save_pretrained(path)
