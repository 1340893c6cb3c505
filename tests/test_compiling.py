"""``compile=true`` compiles a model's repeated blocks, once for all of them, and never again for a second step of
the same shape. Dynamo's ``eager`` backend stands in for inductor: what is traced and when is the question here, not
the generated code (``tests/test_train_loop.py`` trains through inductor)."""

from __future__ import annotations

import functools

import torch
from torch._dynamo.utils import counters

from crabrec.models.backbone import load_backbone
from crabrec.models.decoder import target_loss
from crabrec.train.compiling import compile_blocks, eager, repeated_blocks, uncompile

from .test_backbone import small_codebook, tiny_llm
from .test_tiger import build_small


def graphs() -> int:
    return int(counters["stats"]["unique_graphs"])


@functools.cache
def bench_compile():
    """benchmarks/bench_compile.py as a module."""
    import importlib.util

    from .test_backbone import ROOT

    spec = importlib.util.spec_from_file_location("bench_compile", ROOT / "benchmarks" / "bench_compile.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def step(model, base: int, length: int) -> torch.Tensor:
    loss = target_loss(model, *bench_compile().prompt_rows(base, length, 4), width=3)
    loss.backward()
    return loss.detach()


def backbone(tmp_path):
    model, _, base = load_backbone(tiny_llm(tmp_path / "llm"), list(small_codebook().sizes), seed=0)
    return model.train(), base


def test_the_blocks_are_a_transformers_layers_and_not_a_list_of_output_layers(tmp_path):
    model, _ = backbone(tmp_path)
    layers = model.base_model.model.model.layers  # under peft's wrappers
    assert repeated_blocks(model) == list(layers) and len(layers) == 2
    tiger = build_small(layers=2)
    blocks = repeated_blocks(tiger)
    assert blocks == [*tiger.encoder.block, *tiger.decoder.block]  # the per-level heads (bare Linears) are not blocks
    assert repeated_blocks(torch.nn.Sequential(torch.nn.Linear(2, 2))) == []


def test_compiled_blocks_train_as_the_eager_model_and_compile_once_per_shape(tmp_path, monkeypatch):
    """The two layers share one graph; a second step of the same shape compiles nothing (the trainable-token
    indices exist before the first call), a new length compiles once more; inside ``eager`` nothing is traced;
    ``uncompile`` leaves the plain model."""
    torch._dynamo.reset()
    eager_model, base = backbone(tmp_path)
    expected = [step(eager_model, base, n) for n in (12, 12, 16)]
    model, _ = backbone(tmp_path)
    compiled = compile_blocks(model, "eager")
    assert compiled == repeated_blocks(model)
    start = graphs()
    got = [step(model, base, 12)]
    first = graphs() - start
    got.append(step(model, base, 12))
    assert first >= 1 and graphs() - start == first  # the second layer and the second step: no new graph
    got.append(step(model, base, 16))
    torch.testing.assert_close(torch.stack(got), torch.stack(expected))
    before = graphs()
    with eager(compiled):
        step(model, base, 20)
    assert graphs() == before and all(m._compiled_call_impl is not None for m in compiled)
    uncompile(compiled)
    assert all(m._compiled_call_impl is None for m in compiled)


def test_a_whole_compiled_backbone_is_not_compiled_again_at_its_second_step(tmp_path):
    """The trainable-token layers' indices are buffers made with the model: made at the first call, they changed the
    layer between its first and second call, and a whole-model compilation ran twice for one shape."""
    torch._dynamo.reset()
    model, base = backbone(tmp_path)
    whole = torch.compile(model, backend="eager")
    step(whole, base, 12)
    after_first = graphs()
    step(whole, base, 12)
    assert graphs() == after_first
    assert not any("token_index" in key for key in model.state_dict())  # not saved with the weights


def test_a_compiled_tiger_compiles_its_blocks_for_every_length_and_batch_size(monkeypatch):
    """TIGER's blocks come in four kinds (the first of each stack computes the position bias, encoder and decoder
    differ), each compiled for its first shape, then for dynamic lengths and batch sizes (an epoch's last batch is
    smaller): more variants of the one shared frame than dynamo keeps by default (8), none left to run eagerly."""
    from crabrec.models.decoder import N_SPECIAL
    from crabrec.models.tiger import tiger_loss

    from .test_tiger import SIZES

    torch._dynamo.reset()
    reference, model = build_small(layers=3, dropout=0.0), build_small(layers=3, dropout=0.0)
    compiled = compile_blocks(model, "eager")
    assert len(compiled) == 6
    start, frames = graphs(), dict(counters["frames"])
    for length, n in ((6, 4), (6, 4), (8, 4), (10, 3), (7, 2), (9, 4)):
        g = torch.Generator().manual_seed(length)
        ids = torch.randint(N_SPECIAL, N_SPECIAL + sum(SIZES), (n, length), generator=g)
        codes = torch.stack([torch.randint(0, s, (n,), generator=g) for s in SIZES], 1)
        labels = codes + N_SPECIAL + torch.tensor([0, SIZES[0], SIZES[0] + SIZES[1]])
        data = {"ids": ids, "mask": torch.ones_like(ids), "labels": labels}
        torch.testing.assert_close(tiger_loss(model, data), tiger_loss(reference, data))
    made = {k: counters["frames"][k] - frames.get(k, 0) for k in ("total", "ok")}
    assert graphs() > start and made["total"] == made["ok"] > 8  # every frame compiled, none given up on


def test_the_compile_benchmark_times_each_variant_against_the_eager_losses(tmp_path):
    """benchmarks/bench_compile.py's steps and table on the tiny Llama (in this process, dynamo's eager backend)."""
    bench = bench_compile()
    path = tiny_llm(tmp_path / "llm")
    torch._dynamo.reset()
    results = {v: bench.child(path, v, rows=4, backend="eager") for v in ("eager", "blocks")}
    assert [s["length"] for s in results["blocks"]["steps"]] == list(bench.LENGTHS)
    assert results["eager"]["graphs"] == 0 < results["blocks"]["graphs"]
    text = bench.table(results)
    assert "| eager (no compilation) |" in text and "crabrec's `compile: true`" in text
    assert text.splitlines()[-1].endswith("| 0.0e+00 |")  # the same losses as eager
