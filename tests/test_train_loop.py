"""The shared training loop: resuming a checkpoint only under the configuration that wrote it, never when forced."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from crabrec.config import TrainConfig
from crabrec.models.decoder import N_SPECIAL, build_decoder, encode_rows, item_tokens, target_loss
from crabrec.train.loop import Rows, train


def _tiny_problem(dropout: float = 0.0) -> tuple[object, Rows]:
    """A tiny decoder and 32 random training rows over 10 items, the same at every call."""
    rng = np.random.default_rng(0)
    tokens = item_tokens(np.arange(30).reshape(10, 3))
    model = build_decoder(N_SPECIAL + 30, TrainConfig(hidden=16, layers=1, heads=2, ff=32, dropout=dropout), seed=0)
    hist, length, target = rng.integers(0, 10, (32, 4)), rng.integers(1, 5, 32), rng.integers(0, 10, 32)

    def make(rows):
        ids, mask, labels = encode_rows(hist[rows], length[rows], target[rows], tokens)
        return {"ids": ids, "mask": mask, "labels": labels}

    return model, Rows(32, make)


def _run(tmp_path, epochs: int, fingerprint: str, fresh: bool = False) -> tuple[int, list[dict]]:
    model, rows = _tiny_problem()
    steps = []

    def loss(m, batch):
        steps.append(1)
        return target_loss(m, batch["ids"], batch["mask"], batch["labels"])

    cfg = TrainConfig(epochs=epochs, batch_size=16, patience=5, warmup_steps=0)
    result = train(
        model, rows, loss, lambda m: float(len(steps)), cfg, tmp_path, 0, fingerprint=fingerprint, fresh=fresh
    )
    return len(steps), result.history


def test_checkpoint_resumes_only_under_the_same_fingerprint(tmp_path):
    assert _run(tmp_path, 1, "config-a")[0] == 2  # 32 rows / 16 = 2 steps per epoch
    steps, history = _run(tmp_path, 2, "config-a")  # same configuration: epoch 1 is not redone
    assert steps == 2 and [h["epoch"] for h in history] == [1, 2]
    steps, history = _run(tmp_path, 2, "config-b")  # another configuration: its checkpoint is not reused
    assert steps == 4 and [h["epoch"] for h in history] == [1, 2]


_VALIDATIONS: dict = {}


def _budgeted(out, **loop) -> tuple[list[float], bytes]:
    """Train the tiny problem under ``loop`` with one configuration but for its budget: (each epoch's loss, the kept
    model's bytes). The validation score is the number of validations in ``out`` so far (a resumed run goes on
    counting), so every epoch improves and the kept model is the last epoch's."""
    model, rows = _tiny_problem(dropout=0.1)
    cfg = TrainConfig(batch_size=16, warmup_steps=0, patience=5, dropout=0.1, **loop)
    loss = lambda m, b: target_loss(m, b["ids"], b["mask"], b["labels"])  # noqa: E731

    def validate(m) -> float:
        _VALIDATIONS[out] = _VALIDATIONS.get(out, 0) + 1
        return float(_VALIDATIONS[out])

    result = train(model, rows, loss, validate, cfg, out, 0, fingerprint=repr(loop), budget_free="all but the budget")
    return [h["loss"] for h in result.history], (out / "model" / "model.safetensors").read_bytes()


@pytest.mark.parametrize("schedule", ["plateau", "inverse_sqrt"])
def test_more_epochs_train_on_from_a_checkpoint_and_equal_one_longer_run(tmp_path, schedule, caplog):
    """A schedule that does not depend on the number of epochs: 2 epochs, then 4 under a new fingerprint that differs
    only in the budget, train epochs 3 and 4 on the checkpoint, and give exactly what 4 epochs at once give (losses
    and the kept model, with dropout on)."""
    import logging

    _budgeted(tmp_path / "a", schedule=schedule, epochs=2, plateau_factor=0.5)
    with caplog.at_level(logging.INFO, logger="crabrec"):
        extended = _budgeted(tmp_path / "a", schedule=schedule, epochs=4, plateau_factor=0.5)
    assert "trained 2 epochs under a smaller budget; training on from there" in caplog.text
    assert extended == _budgeted(tmp_path / "b", schedule=schedule, epochs=4, plateau_factor=0.5)


def test_a_checkpoint_validated_only_as_the_last_epoch_is_not_trained_on(tmp_path, caplog):
    """valid_every=2: a 3-epoch run validated epoch 3 because it was its last; a 4-epoch run would not have (its kept
    model and plateau rate follow validations), so 4 epochs train from scratch. A 2-epoch checkpoint is trained on."""
    import logging

    _budgeted(tmp_path / "a", schedule="plateau", epochs=3, valid_every=2)
    with caplog.at_level(logging.INFO, logger="crabrec"):
        _budgeted(tmp_path / "a", schedule="plateau", epochs=4, valid_every=2)
    assert "training from scratch" in caplog.text and "smaller budget" not in caplog.text
    _budgeted(tmp_path / "b", schedule="plateau", epochs=2, valid_every=2)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="crabrec"):
        _budgeted(tmp_path / "b", schedule="plateau", epochs=4, valid_every=2)
    assert "trained 2 epochs under a smaller budget" in caplog.text


def test_a_budget_that_changes_the_training_trains_from_scratch(tmp_path, caplog):
    """Under linear decay over `epochs`, 2 more epochs change every step's learning rate: not resumed. A time budget
    the checkpoint already used up would have stopped the run sooner: not resumed either. A larger one is."""
    import logging

    _budgeted(tmp_path / "a", epochs=2)
    with caplog.at_level(logging.INFO, logger="crabrec"):
        assert _budgeted(tmp_path / "a", epochs=4) == _budgeted(tmp_path / "b", epochs=4)
    assert "saved by another configuration; training from scratch" in caplog.text
    assert "smaller budget" not in caplog.text
    caplog.clear()
    stopped = _budgeted(tmp_path / "c", epochs=4, max_minutes=1e-9)  # stops after the first step
    assert len(stopped[0]) == 1
    with caplog.at_level(logging.INFO, logger="crabrec"):
        assert _budgeted(tmp_path / "c", epochs=4, max_minutes=2e-9)[0] == stopped[0]  # used up: from scratch again
        assert "training from scratch" in caplog.text
        caplog.clear()
        assert _budgeted(tmp_path / "c", epochs=4, max_minutes=10.0) == _budgeted(tmp_path / "b", epochs=4)
    assert "trained 1 step of epoch 1 under a smaller budget; training on from there" in caplog.text


def test_forced_rerun_trains_from_scratch(tmp_path):
    _run(tmp_path, 2, "config-a")
    steps, history = _run(tmp_path, 2, "config-a", fresh=True)  # same configuration, but `--force`: all epochs again
    assert steps == 4 and [h["epoch"] for h in history] == [1, 2]
    assert _run(tmp_path, 2, "config-a")[0] == 0  # the forced run's own checkpoint is resumed as usual


def test_keep_last_never_validates_and_keeps_the_last_epoch(tmp_path):
    """keep=last (CRAB's fine-tune, as the paper): every epoch runs, none is validated, the last one is the model;
    keep=best under a validation that only worsens stops early and keeps epoch 1."""
    import torch

    from crabrec.train.loop import training_summary

    def run(keep: str, out):
        model, rows = _tiny_problem()
        calls = []

        def validate(m):
            calls.append(1)
            return 1.0 / len(calls)  # worse every epoch

        from crabrec.config import CrabConfig, Overlay

        loop = TrainConfig(batch_size=16, patience=2, warmup_steps=0)
        cfg = Overlay(loop, CrabConfig(epochs=4, lr=1e-3, keep=keep), ("epochs", "lr", "keep"))
        loss = lambda m, b: target_loss(m, b["ids"], b["mask"], b["labels"])  # noqa: E731
        result = train(model, rows, loss, validate, cfg, out, 0)
        return model, result, calls

    model, result, calls = run("last", tmp_path / "last")
    assert calls == [] and [h["epoch"] for h in result.history] == [1, 2, 3, 4]
    assert all(h["valid_ndcg@10"] is None for h in result.history)
    summary = training_summary(result, tmp_path / "last")
    assert summary["best_epoch"] == 4 and summary["best_valid_ndcg@10"] is None
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "last" / "model")
    for name, p in model.state_dict().items():
        assert torch.equal(saved.state_dict()[name], p), name  # the model after the last epoch
    _, best, calls = run("best", tmp_path / "best")
    assert len(calls) == 3 and best.best_epoch == 1  # two bad epochs after the first: stopped after epoch 3


def _scripted(tmp_path, scores: list[float], **loop) -> tuple[object, list[dict], list[int]]:
    """Train the tiny decoder with ``validate`` returning ``scores`` in turn; -> (result, history, validated epochs)."""
    import torch

    model, rows = _tiny_problem()
    weights = []

    def validate(m):
        weights.append({k: v.clone() for k, v in m.state_dict().items()})
        return scores[len(weights) - 1]

    cfg = TrainConfig(batch_size=16, warmup_steps=0, **loop)
    loss = lambda m, b: target_loss(m, b["ids"], b["mask"], b["labels"])  # noqa: E731
    result = train(model, rows, loss, validate, cfg, tmp_path, 0)
    validated = [h["epoch"] for h in result.history if h["valid_ndcg@10"] is not None]
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "model").state_dict()
    kept = [i for i, w in enumerate(weights) if all(torch.equal(saved[k], w[k]) for k in w)]
    return result, validated, kept


def test_valid_every_validates_every_kth_and_the_last_epoch(tmp_path):
    """valid_every=3 over 7 epochs validates epochs 3, 6 and 7; the kept model is the best validated one (epoch 6,
    the second validation), and the training itself is the one that validates every epoch."""
    result, validated, kept = _scripted(tmp_path / "k3", [0.1, 0.3, 0.2], epochs=7, valid_every=3, patience=5)
    assert validated == [3, 6, 7] and result.best_epoch == 6 and kept == [1]
    every, _, _ = _scripted(tmp_path / "k1", [0.1 * e for e in range(1, 8)], epochs=7, patience=5)
    assert [h["loss"] for h in every.history] == [h["loss"] for h in result.history]


def test_valid_every_counts_patience_in_validations(tmp_path):
    """patience=2 with valid_every=2: two validations without improvement (epochs 4 and 6) stop training after epoch
    6, not after two epochs; the model kept is epoch 2's."""
    result, validated, kept = _scripted(tmp_path, [0.5, 0.4, 0.3, 0.9], epochs=10, valid_every=2, patience=2)
    assert validated == [2, 4, 6] and result.epochs_run == 6 and result.best_epoch == 2 and kept == [0]


def test_time_budget_validates_the_epoch_it_stops_after(tmp_path):
    """A run stopped by max_minutes keeps a validated model even when the epoch it stops after is not a k-th one."""
    result, validated, kept = _scripted(tmp_path, [0.2], epochs=10, valid_every=5, max_minutes=1e-9)
    assert validated == [1] and result.epochs_run == 1 and kept == [0]


def test_a_profile_times_its_steps_then_traces_more_without_timing_them(tmp_path):
    """profile_training(2, trace_steps=3): a warm-up step, 2 timed steps, 3 traced steps, then the loop stops; the
    timed figures hold the timed steps' rows alone, and the trace counts operators per traced step."""
    import contextlib

    from crabrec.train.profile import ProfileDone, profile_training

    model, rows = _tiny_problem()
    calls = []

    def loss(m, batch):
        calls.append(len(batch["ids"]))
        return target_loss(m, batch["ids"], batch["mask"], batch["labels"])

    cfg = TrainConfig(epochs=1, batch_size=4, warmup_steps=0)  # 8 steps an epoch
    with profile_training(2, trace_steps=3) as prof, contextlib.suppress(ProfileDone):
        train(model, rows, loss, lambda m: 0.0, cfg, tmp_path, 0)
    assert len(calls) == 1 + 2 + 3 and (prof.timed, prof.traced, prof.rows) == (2, 3, 8)
    assert prof.summary()["page_faults_per_step"] == prof.page_faults / 2 >= 0  # the timed steps' own
    ops = prof.ops
    assert ops["traced_steps"] == 3 and ops["device_busy_ms"] == 0.0 and ops["kernel_launches"] == 0  # the CPU
    names = [op["name"] for op in ops["top"]]
    assert {"aten::mm", "aten::addmm"} & set(names) and all(n.startswith("aten::") for n in names)
    assert ops["aten_calls"] >= sum(op["calls"] for op in ops["top"]) > 0


def test_a_profiles_model_flops_leave_padding_out():
    """Model FLOPs = the counted step's arithmetic per input position x the timed steps' tokens: a packed batch's
    tokens are its ids that are not PAD (its mask is additive), a row batch's its 0/1 mask's ones."""
    from crabrec.models.decoder import PAD
    from crabrec.train.profile import Profile, input_tokens

    ids = torch.tensor([[5, 6, 7, PAD], [8, PAD, PAD, PAD]])
    assert input_tokens({"ids": ids, "mask": torch.zeros(2, 1, 4, 4)}) == (8, 4)  # packed: additive mask
    assert input_tokens({"ids": ids, "mask": torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])}) == (8, 6)  # rows
    assert input_tokens({"x": ids}) == (0, 0)
    # counted: 1,000 FLOPs over 100 positions; timed: 60 tokens in 80 positions, in 2 s
    prof = Profile(steps=1, flops=1000.0, flop_positions=100, tokens=60, positions=80, step_wall=2.0, timed=1)
    summary = prof.summary()
    assert summary["flop_per_s"] == 1000.0 * 60 / 100 / 2 and summary["padding"] == 80 / 60


def test_a_profile_of_a_compiled_model_measures_it_compiled_and_times_no_compilation(tmp_path, monkeypatch):
    """Under the profile, ``compile=true`` really compiles: the FLOP-counted step runs under a dispatch mode, after
    which torch.compile would leave the model eager for good unless its caches are reset. The steps that compile are
    not timed: a counted step, COMPILE_WARMUP compiling steps, then the timed ones. (Dynamo's ``eager`` backend
    stands in for inductor: whether dynamo captures the model is the question, not inductor's code.)"""
    import contextlib

    monkeypatch.setenv("CRABREC_COMPILE_BACKEND", "eager")

    from torch._dynamo.utils import counters

    from crabrec.train.profile import COMPILE_WARMUP, ProfileDone, profile_training

    model, rows = _tiny_problem()
    calls = []

    def loss(m, batch):
        calls.append(len(batch["ids"]))
        return target_loss(m, batch["ids"], batch["mask"], batch["labels"])

    compiled_before = counters["frames"]["ok"]
    cfg = TrainConfig(epochs=1, batch_size=4, warmup_steps=0, compile=True)  # 8 steps an epoch
    with profile_training(2) as prof, contextlib.suppress(ProfileDone):
        train(model, rows, loss, lambda m: 0.0, cfg, tmp_path, 0)
    assert counters["frames"]["ok"] > compiled_before  # the model was compiled, not left eager
    assert len(calls) == 1 + COMPILE_WARMUP + 2 and (prof.timed, prof.rows) == (2, 8)
    summary = prof.summary()
    assert summary["compiled"] and summary["compilations_in_timed_steps"] >= 0
    assert prof.flops > 0  # counted on the eager first step


def test_the_compile_backend_is_inductor_unless_the_environment_names_another(monkeypatch):
    from crabrec.errors import CrabError
    from crabrec.train.loop import compile_backend

    monkeypatch.delenv("CRABREC_COMPILE_BACKEND", raising=False)
    assert compile_backend() == "inductor"
    monkeypatch.setenv("CRABREC_COMPILE_BACKEND", " Eager ")
    assert compile_backend() == "eager"
    monkeypatch.setenv("CRABREC_COMPILE_BACKEND", "tensorrt")
    with pytest.raises(CrabError, match="CRABREC_COMPILE_BACKEND='tensorrt': expected one of inductor, aot_eager"):
        compile_backend()


def test_a_bad_compile_backend_stops_a_run_before_any_stage_after_the_data(office_slice, tmp_path, capsys, monkeypatch):
    from tests.conftest import cli

    monkeypatch.setenv("CRABREC_COMPILE_BACKEND", "tvm")
    args = ["run", "--data", str(office_slice), "--set", f"runs_dir={tmp_path}", "--set", "tiger.compile=true"]
    assert cli(args)[0] == 2
    err = capsys.readouterr().err
    assert "crabrec: error: CRABREC_COMPILE_BACKEND='tvm': expected one of inductor, aot_eager, eager" in err
    assert "[embed]" not in err  # nothing after the data stage ran


def test_a_trace_summary_is_per_step_and_ranks_operators_by_device_then_host_time():
    from types import SimpleNamespace

    from crabrec.train.profile import trace_summary

    def event(key, count, cpu_us, device_us=0.0, device="DeviceType.CPU"):
        return SimpleNamespace(key=key, count=count, self_cpu_time_total=cpu_us, self_device_time_total=device_us,
                               device_type=device)  # fmt: skip

    events = [
        event("aten::mm", 20, 4000.0, 6000.0),
        event("aten::mul", 40, 8000.0, 2000.0),
        event("aten::view", 100, 1000.0),
        event("cudaLaunchKernel", 60, 3000.0),
        event("sm90_gemm_kernel", 20, 0.0, 6000.0, "DeviceType.CUDA"),
        event("elementwise_kernel", 40, 0.0, 2000.0, "DeviceType.CUDA"),
    ]
    t = trace_summary(events, steps=2, top=2)
    assert t["aten_calls"] == 80 and t["kernel_launches"] == 30
    assert t["device_busy_ms"] == 4.0  # (6000 + 2000) us of kernels over 2 steps; the operators' share not again
    assert t["host_ms"] == 8.0
    assert t["top"] == [
        {"name": "aten::mm", "calls": 10, "host_ms": 2.0, "device_ms": 3.0},
        {"name": "aten::mul", "calls": 20, "host_ms": 4.0, "device_ms": 1.0},
    ]


def test_rows_grouped_by_length_cover_each_row_once_with_less_padding():
    """group_by_length: every row once an epoch, in batches of at most batch_size, seeded by (seed, epoch), padded
    to far fewer history slots than shuffled batches of the same size."""
    from crabrec.data.dataset import Samples
    from crabrec.train.decoder import length_plan
    from crabrec.train.loop import batches as shuffled

    rng = np.random.default_rng(0)
    n = 2000
    length = rng.integers(1, 21, n)
    samples = Samples(user=np.arange(n), history=np.zeros((n, 20), np.int64), length=length, target=np.zeros(n))
    assert length_plan(samples, TrainConfig(batch_size=64), 0) is None  # off: the loop's shuffled batches
    plan = length_plan(samples, TrainConfig(batch_size=64, group_by_length=True), 0)
    batches = plan(1)
    assert sorted(np.concatenate(batches).tolist()) == list(range(n)) and max(map(len, batches)) <= 64
    assert [b.tolist() for b in plan(1)] == [b.tolist() for b in batches] != [b.tolist() for b in plan(2)]

    def padded(bs):
        return sum(len(b) * length[b].max() for b in bs)

    assert padded(batches) < 0.7 * padded(list(shuffled(n, 64, 0, 1)))


def test_flop_count_of_grouped_query_attention_counts_key_value_heads_as_repeated():
    """SmolLM2 attends with 9 query heads over 3 key/value heads; torch's own formula asserts equal heads. Forward:
    QK^T and AV, 2·b·h·s·s·d FLOPs each; backward: five such products (QK^T again, then the gradients of V, of the
    scores, of Q and of K)."""
    from crabrec.train.profile import _gqa_attention_flops

    b, h, s, d = 2, 9, 16, 64
    q, kv = (b, h, s, d), (b, 3, s, d)
    mapping = _gqa_attention_flops()
    forward = mapping[torch.ops.aten._scaled_dot_product_efficient_attention]
    backward = mapping[torch.ops.aten._scaled_dot_product_efficient_attention_backward]
    assert forward(q, kv, kv) == 2 * (2 * b * h * s * s * d)
    assert backward(q, q, kv, kv) == 5 * (2 * b * h * s * s * d)
    assert forward(q, q, q) == forward(q, kv, kv)  # equal heads: unchanged


def test_cuda_runs_keep_attention_off_cudnn(monkeypatch):
    """cuDNN plans each new shape anew and crabrec's batches change shape every step: a CUDA run turns it off."""
    from crabrec.models.attention import skip_cudnn_attention

    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        skip_cudnn_attention()
        assert torch.backends.cuda.cudnn_sdp_enabled()  # the CPU: nothing changes
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        for value in ("1", "true", " Yes "):  # asked for: left allowed
            monkeypatch.setenv("CRABREC_CUDNN_ATTENTION", value)
            skip_cudnn_attention()
            assert torch.backends.cuda.cudnn_sdp_enabled(), value
        monkeypatch.setenv("CRABREC_CUDNN_ATTENTION", "0")
        skip_cudnn_attention()
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)


def test_compiled_training_matches_eager_and_saves_the_plain_model(tmp_path):
    """``compile=true`` trains the same model as eager (to float rounding: inductor fuses the elementwise work), and
    what it saves is the plain model (no compiled wrapper's key prefixes)."""
    from safetensors.torch import load_file

    runs = {}
    for compiled in (False, True):
        model, rows = _tiny_problem()
        loss = lambda m, b: target_loss(m, b["ids"], b["mask"], b["labels"])  # noqa: E731
        cfg = TrainConfig(epochs=2, batch_size=16, patience=5, warmup_steps=0, compile=compiled)
        out = tmp_path / str(compiled)
        result = train(model, rows, loss, lambda m: 0.0, cfg, out, 0)
        runs[compiled] = ([h["loss"] for h in result.history], load_file(out / "model" / "model.safetensors"))
    (eager_loss, eager_w), (compiled_loss, compiled_w) = runs[False], runs[True]
    np.testing.assert_allclose(compiled_loss, eager_loss, rtol=1e-4)
    assert sorted(compiled_w) == sorted(eager_w)
    for name in eager_w:
        torch.testing.assert_close(compiled_w[name], eager_w[name], rtol=1e-3, atol=1e-5)


def test_fast_dropout_compiles():
    """Under torch.compile the CPU's numpy-drawn mask (host code) gives way to torch's own dropout."""
    from crabrec.models.dropout import FastDropout

    torch.manual_seed(0)
    x = torch.ones(64, 64)
    y = torch.compile(FastDropout(0.5))(x)
    kept = y != 0
    assert 0.4 < kept.float().mean() < 0.6
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 2.0))


def test_the_loss_runs_under_autocast_whatever_part_of_the_model_it_calls(tmp_path, monkeypatch):
    """A loss that calls a submodule rather than the model's (autocast-wrapped) forward, as TIGER's does, still runs
    in the trainer's mixed precision (here bf16 forced on the CPU)."""
    import crabrec.train.loop as loop

    monkeypatch.setattr(loop, "mixed_precision", lambda cuda: "bf16")
    model, rows = _tiny_problem()
    seen = []

    def loss(m, batch):
        seen.append(torch.is_autocast_enabled("cpu"))
        return target_loss(m, batch["ids"], batch["mask"], batch["labels"])

    train(model, rows, loss, lambda m: 0.0, TrainConfig(epochs=1, batch_size=16, warmup_steps=0), tmp_path, 0)
    assert seen == [True, True]


class NoHostTraffic(TorchDispatchMode):
    """What a CUDA graph cannot record, caught on the CPU: a value read back to the host (``.item()``, ``int(t)``)
    and a tensor made from Python data (on a GPU, a copy from host memory; an empty one copies nothing)."""

    paused = 0  # inside the optimizer's update: the CPU's AdamW reads its step back, CUDA's capturable one does not

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if self.paused:
            return out
        if name == "_local_scalar_dense" or (name in ("lift_fresh", "lift_fresh_copy") and out.numel()):
            raise AssertionError(f"a recorded step calls {func}: it would read from or copy to the host")
        return out


def _record_on_the_cpu(log: dict):
    """A CUDA graph recorder for the CPU: a replay calls the step again on the recorded inputs. It checks what a real
    graph relies on: the learning rates are tensors, filled in place (the same tensors at every replay), the
    optimizer's state exists at recording and stays the same tensors (a real replay reads the addresses it recorded),
    and the recorded step reads nothing back to the host nor copies from it (:class:`NoHostTraffic`)."""

    def tensors(opt):
        return [t for g in opt.param_groups for p in g["params"] for t in opt.state[p].values() if torch.is_tensor(t)]

    def record(engine, static):
        engine.step(static, update=False)  # the warm-up, as on the GPU
        engine.unset_grads()
        opt = engine.optimizer
        lrs = [g["lr"] for g in opt.param_groups]
        assert all(torch.is_tensor(lr) for lr in lrs)
        assert all(opt.state.get(p) for g in opt.param_groups for p in g["params"])  # primed before recording
        state = tensors(opt)
        out = torch.zeros(())
        check = NoHostTraffic()
        update = opt.step

        def unchecked_update(*args, **kwargs):
            check.paused += 1
            try:
                return update(*args, **kwargs)
            finally:
                check.paused -= 1

        opt.step = unchecked_update
        log["recorded"] = log.get("recorded", 0) + 1

        def replay():
            assert all(a is b for a, b in zip(lrs, [g["lr"] for g in opt.param_groups], strict=True))
            assert all(a is b for a, b in zip(state, tensors(opt), strict=True))
            engine.unset_grads()  # a recorded backward assigns the gradients
            # the step as torch.cuda.graph records it, where libraries are told that the stream is being recorded
            with check, mock.patch("torch.cuda.is_current_stream_capturing", return_value=True):
                out.copy_(engine.step(static).detach())
            log["replayed"] = log.get("replayed", 0) + 1

        return replay, out

    return record


def _same_shapes_problem(n: int = 48):
    """A tiny decoder and ``n`` rows whose histories all have 4 items: every full batch has one shape."""
    rng = np.random.default_rng(1)
    tokens = item_tokens(np.arange(30).reshape(10, 3))
    model = build_decoder(N_SPECIAL + 30, TrainConfig(hidden=16, layers=1, heads=2, ff=32), seed=0)
    hist, target = rng.integers(0, 10, (n, 4)), rng.integers(0, 10, n)

    def make(rows):
        ids, mask, labels = encode_rows(hist[rows], np.full(len(rows), 4), target[rows], tokens)
        return {"ids": ids, "mask": mask, "labels": labels, "answer_width": 3}

    return model, Rows(n, make)


def _train_twice(tmp_path, recorder, **settings):
    """The same problem trained eagerly and with ``cuda_graphs`` (recorded by ``recorder``): losses and weights."""
    from safetensors.torch import load_file

    out = {}
    for graphs in (False, True):
        model, rows = _same_shapes_problem()
        loss = lambda m, b: target_loss(m, b["ids"], b["mask"], b["labels"], width=b["answer_width"])  # noqa: E731
        cfg = TrainConfig(epochs=3, batch_size=16, patience=5, cuda_graphs=graphs, **settings)
        folder = tmp_path / str(graphs)
        result = train(model, rows, loss, lambda m: 0.0, cfg, folder, 0, recorder=recorder if graphs else None)
        out[graphs] = ([h["loss"] for h in result.history], load_file(folder / "model" / "model.safetensors"))
    return out


def test_recorded_steps_train_the_same_model_as_eager_steps(tmp_path):
    """cuda_graphs: a shape's first step runs eagerly, its second is recorded, the rest replay; with the learning
    rate a tensor the schedule fills in place (warm-up, then linear decay) and the optimizer primed before the first
    recording, the model trained is the eager one (to the rounding of a tensor learning rate)."""
    log = {}
    out = _train_twice(tmp_path, _record_on_the_cpu(log), warmup_steps=2, weight_decay=0.1)
    assert log == {"recorded": 1, "replayed": 8}  # 3 epochs x 3 batches of one shape: 1 eager, then recorded, 8 replays
    (eager_loss, eager_w), (graph_loss, graph_w) = out[False], out[True]
    np.testing.assert_allclose(graph_loss, eager_loss, rtol=1e-5)
    for name in eager_w:
        torch.testing.assert_close(graph_w[name], eager_w[name], rtol=1e-5, atol=1e-6)


def test_compiled_blocks_are_recorded_and_train_the_eager_model(tmp_path, monkeypatch):
    """compile and cuda_graphs together: the compiled blocks run inside the recorded step (the warm-up before the
    recording compiles them, so nothing compiles while it is recorded), and the model trained is the eager one."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv("CRABREC_COMPILE_BACKEND", "aot_eager")  # dynamo and AOT autograd, without inductor's codegen
    torch._dynamo.reset()
    counters.clear()
    log = {}
    out = _train_twice(tmp_path / "compiled", _record_on_the_cpu(log), warmup_steps=2, weight_decay=0.1, compile=True)
    assert log == {"recorded": 1, "replayed": 8}
    assert counters["stats"]["unique_graphs"] >= 1  # the blocks were compiled
    eager_loss, eager_w = _train_twice(tmp_path / "eager", None, warmup_steps=2, weight_decay=0.1)[False]
    graph_loss, graph_w = out[True]  # compiled and replayed, against neither compiled nor replayed
    np.testing.assert_allclose(graph_loss, eager_loss, rtol=1e-5)
    for name in eager_w:
        torch.testing.assert_close(graph_w[name], eager_w[name], rtol=1e-5, atol=1e-5)


def test_a_failed_recording_trains_on_eagerly(tmp_path, caplog):
    """A step that cannot be recorded (here: the recorder raises) turns the graphs off with one warning; the run
    trains the eager model."""

    def broken(engine, static):
        raise RuntimeError("operation not permitted when stream is capturing")

    with caplog.at_level("WARNING", logger="crabrec"):
        out = _train_twice(tmp_path, broken)
    assert sum("recording a training step failed" in r.getMessage() for r in caplog.records) == 1
    np.testing.assert_allclose(out[True][0], out[False][0], rtol=1e-6)


def test_priming_the_optimizer_changes_nothing_a_first_step_would_not():
    """prime_optimizer creates zero moments and step 0 without moving a parameter; the next real update is the one a
    fresh optimizer would make."""
    from crabrec.train.graphs import prime_optimizer

    torch.manual_seed(0)
    fresh, primed = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    primed.load_state_dict(fresh.state_dict())
    opts = [torch.optim.AdamW(m.parameters(), lr=0.1, weight_decay=0.5) for m in (fresh, primed)]
    before = [p.detach().clone() for p in primed.parameters()]
    prime_optimizer(opts[1])
    assert all(torch.equal(a, b) for a, b in zip(before, primed.parameters()))
    for p in primed.parameters():
        state = opts[1].state[p]
        assert int(state["step"]) == 0 and not state["exp_avg"].any() and not state["exp_avg_sq"].any()
        assert p.grad is None
    x = torch.randn(5, 4)
    for model, opt in zip((fresh, primed), opts):
        model(x).square().sum().backward()
        opt.step()
    for a, b in zip(fresh.parameters(), primed.parameters()):
        assert torch.equal(a, b)


def test_cuda_graphs_need_whole_steps():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="grad_accum=1"):
        TrainConfig(cuda_graphs=True, grad_accum=2)


@pytest.mark.parametrize("packing", ["packed", "rows"])
def test_decoder_training_records_packed_and_row_form_steps(tiny_run, tmp_path, caplog, packing):
    """MOR's packed batches and its row-form batches are recorded (cuda_graphs): a row-form batch carries its answer
    width as a number and is padded to a multiple of 32 tokens, so its loss reads nothing back."""
    from types import SimpleNamespace

    from crabrec.config import Overlay, load_config
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry
    from crabrec.train.decoder import initial_decoder, train_decoder

    files = RunContext(config=load_config(str(tiny_run / "config.yaml")), stages=registry()).files
    codebook, splits = files.load_codebook(), files.load_splits()
    cfg = TrainConfig(hidden=16, layers=1, heads=2, ff=32, epochs=2, batch_size=64, valid_samples=20, valid_beam=5,
                      packing=packing, cuda_graphs=True)  # fmt: skip
    model, io, _ = initial_decoder(codebook, cfg, 0)
    loop = Overlay(cfg, SimpleNamespace(epochs=1), ("epochs",))  # as CRAB's fine-tune reads its own epochs over MOR's
    log = {}
    with caplog.at_level("INFO", logger="crabrec"):
        summary = train_decoder(model, io, codebook, splits, loop, tmp_path, 0, recorder=_record_on_the_cpu(log))
    assert summary["epochs_run"] == 1  # the overlay's own setting stands
    assert log.get("recorded", 0) >= 1 and log.get("replayed", 0) >= 1
    assert not [r for r in caplog.records if "recording a training step failed" in r.getMessage()]


def test_the_validation_batch_size_changes_nothing_but_speed(tiny_run):
    """train.valid_batch_size (speed only: larger on a GPU) ranks the same validation rows to the same NDCG@10."""
    from crabrec.config import load_config
    from crabrec.decode.trie import SidTrie
    from crabrec.pipeline import RunContext
    from crabrec.rankers import generator_io, load_generator
    from crabrec.stages import registry
    from crabrec.train.decoder import sid_validator

    files = RunContext(config=load_config(str(tiny_run / "config.yaml")), stages=registry()).files
    codebook, valid = files.load_codebook(), files.load_splits().valid
    folder = tiny_run / "models" / "mor" / "model"
    model, io = load_generator(folder, codebook), generator_io(folder, codebook)
    scores = [
        sid_validator(
            SidTrie.build(codebook),
            io.tokens,
            valid,
            TrainConfig(valid_samples=200, valid_beam=10, valid_batch_size=size),
            io,
        )(model)  # fmt: skip
        for size in (7, 64, 200)
    ]
    assert scores[0] > 0 and scores == pytest.approx([scores[0]] * 3, abs=1e-12)


def test_a_run_stopped_by_its_budget_trains_on_when_the_budget_grows(tiny_run, tmp_path, capsys):
    """Through the pipeline: TIGER on a constant learning rate (plateau), 1 epoch, then `crabrec train --set
    tiger.epochs=2` on the same run trains epoch 2 on its checkpoint, and gives the model 2 epochs at once give."""
    import shutil

    from tests.conftest import cli

    runs = {}
    for name in ("grown", "direct"):
        runs[name] = tmp_path / name
        shutil.copytree(tiny_run, runs[name])
    plateau = ["--set", "tiger.schedule=plateau", "--set", "tiger.plateau_factor=1", "--set", "tiger.valid_every=1"]
    assert cli(["train", str(runs["grown"]), "--method", "tiger", *plateau, "--set", "tiger.epochs=1"])[0] == 0
    capsys.readouterr()
    assert cli(["train", str(runs["grown"]), "--method", "tiger", *plateau, "--set", "tiger.epochs=2"])[0] == 0
    assert "trained 1 epoch under a smaller budget; training on from there" in capsys.readouterr().err
    assert cli(["train", str(runs["direct"]), "--method", "tiger", *plateau, "--set", "tiger.epochs=2"])[0] == 0
    weights = [(runs[n] / "models" / "tiger" / "model" / "model.safetensors").read_bytes() for n in runs]
    assert weights[0] == weights[1]


def _cut_at(monkeypatch, calls: set[int]) -> None:
    """The time budget stops training at the n-th inside-epoch check for each n in ``calls`` (a check every step)."""
    import crabrec.train.loop as loop

    seen = []

    def inside_epoch(cfg, start, saved, prof, whole_step):
        seen.append(1)
        return cfg.max_minutes is not None and len(seen) in calls, False

    monkeypatch.setattr(loop, "CHECK_EVERY", 1)
    monkeypatch.setattr(loop, "inside_epoch", inside_epoch)


def _scored(out, scores: list[float], **loop) -> tuple[object, bytes]:
    """The tiny problem (2 steps an epoch, dropout on) with ``validate`` returning ``scores`` in turn (and drawing a
    random number), under one configuration but for its budget: (the result, the kept model's bytes)."""
    model, rows = _tiny_problem(dropout=0.1)
    cfg = TrainConfig(batch_size=16, warmup_steps=0, patience=5, dropout=0.1, schedule="plateau", **loop)
    loss = lambda m, b: target_loss(m, b["ids"], b["mask"], b["labels"])  # noqa: E731
    scores = list(scores)

    def validate(m) -> float:
        torch.rand(1)  # a validation that draws from the generator training draws from
        return scores.pop(0)

    result = train(model, rows, loss, validate, cfg, out, 0, fingerprint=repr(loop), budget_free="b")
    return result, (out / "model" / "model.safetensors").read_bytes()


def test_a_time_budget_stops_inside_an_epoch_and_keeps_the_model_there(tmp_path, monkeypatch, caplog):
    """Checked every CHECK_EVERY steps: the budget stops epoch 1 after its first step; that point is validated and
    kept, and the epoch's loss is its first step's."""
    import logging

    _cut_at(monkeypatch, {1})
    with caplog.at_level(logging.INFO, logger="crabrec"):
        result, kept = _scored(tmp_path, [0.3], epochs=4, max_minutes=5.0)
    assert "epoch 1 (the time budget stopped it after 1 of 2 steps)" in caplog.text
    assert [h["steps"] for h in result.history] == [[1, 2]] and result.best_epoch == 1 and result.epochs_run == 1
    from crabrec.train.loop import training_summary

    per_epoch = training_summary(result, tmp_path)["seconds_per_epoch"]  # the stopped epoch scaled to its 2 steps
    assert per_epoch == round(result.history[0]["epoch_seconds"] * 2, 1)
    _cut_at(monkeypatch, {1})
    again = _scored(tmp_path / "again", [0.3], epochs=1, max_minutes=5.0)  # another number of epochs: the same stop
    assert again[1] == kept and again[0].history[0]["loss"] == result.history[0]["loss"]


def test_training_on_from_inside_an_epoch_equals_one_longer_run(tmp_path, monkeypatch, caplog):
    """Stopped by the budget at step 1 of epoch 2 (validated there at 0.9, the best so far: kept), then trained on
    under a larger budget: the longer run goes on from that step, without that validation, and gives what one run
    gives: the same losses, and the same kept model (epoch 1's, scored 0.5 against 0.1 and 0.2 later; the model
    kept at the stop is set aside)."""
    import logging

    _cut_at(monkeypatch, {2})
    stopped, at_stop = _scored(tmp_path / "a", [0.5, 0.9], epochs=3, max_minutes=5.0)
    assert stopped.best_epoch == 2 and stopped.history[-1]["steps"] == [1, 2]
    with caplog.at_level(logging.INFO, logger="crabrec"):
        grown, kept = _scored(tmp_path / "a", [0.1, 0.2], epochs=3, max_minutes=10.0)
    assert "trained 1 step of epoch 2 under a smaller budget; training on from there" in caplog.text
    _cut_at(monkeypatch, set())
    direct, direct_kept = _scored(tmp_path / "b", [0.5, 0.1, 0.2], epochs=3, max_minutes=10.0)
    assert [h["loss"] for h in grown.history] == [h["loss"] for h in direct.history]
    assert "steps" not in grown.history[1] and grown.best_epoch == direct.best_epoch == 1
    assert kept == direct_kept != at_stop
    ckpt = [(tmp_path / x / "checkpoint" / "weights.safetensors").read_bytes() for x in "ab"]
    assert ckpt[0] == ckpt[1]  # the same weights after the last epoch: the stop changed nothing in the training


def test_an_interrupted_epoch_resumes_from_its_last_checkpoint_inside_it(tmp_path, monkeypatch, caplog):
    """Inside a long epoch a checkpoint is saved every SAVE_EVERY seconds (0 here: at every check, every step but an
    epoch's last). Ctrl-C in the second step of epoch 2, and the same command again, resumes at step 1 of epoch 2 and
    trains what one uninterrupted run trains: the same losses, kept model and last weights (dropout on)."""
    import logging

    import crabrec.train.loop as loop

    monkeypatch.setattr(loop, "CHECK_EVERY", 1)
    monkeypatch.setattr(loop, "SAVE_EVERY", 0.0)
    cfg = TrainConfig(batch_size=16, warmup_steps=0, patience=5, epochs=3)
    steps, stop_at = [], {4}  # the 4th step: epoch 2's second

    def loss(m, b):
        steps.append(1)
        if len(steps) in stop_at:
            stop_at.clear()
            raise KeyboardInterrupt
        return target_loss(m, b["ids"], b["mask"], b["labels"])

    def run(out):
        model, rows = _tiny_problem(dropout=0.1)
        return train(model, rows, loss, lambda m: float(len(steps)), cfg, out, 0, fingerprint="f")

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "a")
    with caplog.at_level(logging.INFO, logger="crabrec"):
        resumed = run(tmp_path / "a")
    assert "at step 1 of epoch 2" in caplog.text
    steps.clear()
    whole = run(tmp_path / "b")
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in whole.history]
    files = ("model/model.safetensors", "checkpoint/weights.safetensors")
    assert [(tmp_path / "a" / f).read_bytes() for f in files] == [(tmp_path / "b" / f).read_bytes() for f in files]


def test_graph_shapes_counts_steps_as_training_replays_them():
    """benchmarks/graph_shapes.py's count: batch shapes A B A A B C in one epoch are eager at a shape's first sight,
    recorded (and replayed) at its second, replayed after: 2 graphs, 3 steps replayed (A twice, B once), 3 eager;
    over two epochs the second replays all six. Padding: positions per non-PAD id."""
    import importlib.util

    from .test_backbone import ROOT

    spec = importlib.util.spec_from_file_location("graph_shapes", ROOT / "benchmarks" / "graph_shapes.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    widths = {"A": 2, "B": 3, "C": 4}
    order = [np.array([i]) for i in range(6)]
    shape = "ABAABC"

    def make(index):
        width = widths[shape[int(index[0])]]
        ids = torch.ones(1, width, dtype=torch.long)
        ids[0, -1] = 0  # one padding position
        return {"ids": ids, "labels": ids.clone()}

    rows = Rows(6, make, lambda epoch: order)
    assert bench.count(rows, 1) == (2, 3, 3, 16 / 10)  # 16 positions, 10 of them not PAD
    assert bench.count(rows, 2)[:3] == (3, 9, 3)  # C is recorded at its second sight, in the second epoch
