"""Where a training step's time goes: a profile the shared training loop records when a benchmark asks for one.

Inside ``with profile_training(steps) as prof:`` the next training run (any method: the loop is shared) times its
first ``steps`` optimizer steps phase by phase (building the batch, forward, backward, optimizer), with the device
synchronised at each phase's edges so that GPU time lands in its phase, counts the model arithmetic of the first
step with :class:`torch.utils.flop_counter.FlopCounterMode` (that step is the warm-up and is not timed), then
validates once (timed) and stops by raising :class:`ProfileDone` before anything is saved. Outside such a block the
loop's phases are no-ops.

A compiled model (``compile=true``) is measured compiled: a call under the FLOP counter (a dispatch mode) makes
torch.compile leave the model's frames eager for good, so the dynamo caches are reset after the counted step, and
the next ``COMPILE_WARMUP`` steps, where the model is compiled (again for new batch shapes), are not timed either.

With ``trace_steps`` it then runs that many more steps (not timed) under :mod:`torch.profiler` and keeps, per step,
the operator calls, the kernel launches, how busy the device was and the operators that took the most time
(:func:`trace_summary`): what a step is bound by on a GPU, where the phases alone cannot tell.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

PHASES = ("batch", "forward", "backward", "optimizer")
COMPILE_WARMUP = 3  # untimed steps of a compiled model: its compilation, and again with dynamic shapes, and a spare


class ProfileDone(Exception):
    """Raised by the training loop once the profile is complete (nothing of that run is saved)."""


@dataclass
class Profile:
    """What one profiled run measured. Seconds are sums over the ``timed`` steps (the warm-up step excluded)."""

    steps: int
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    step_wall: float = 0.0  # wall time of the timed steps, phases and the loop's own work between them
    timed: int = 0
    rows: int = 0  # training rows in the timed steps
    tokens: int = 0  # input tokens in the timed steps, padding left out (0: the batches carry no ids)
    positions: int = 0  # input positions the timed steps computed, padding included
    flops: float = 0.0  # forward + backward arithmetic of the warm-up step, padding included
    flop_rows: int = 0  # training rows of that step
    flop_positions: int = 0  # and its input positions
    validation: float = 0.0
    page_faults: int = 0  # minor page faults of this process in the timed steps (0 where the OS does not say)
    trace_steps: int = 0  # steps traced with torch.profiler after the timed ones (0: none)
    top_ops: int = 15  # operators kept in the trace summary
    traced: int = 0
    ops: dict[str, Any] = field(default_factory=dict)  # the trace summary (trace_summary)
    steps_per_epoch: int = 0
    rows_per_epoch: int = 0
    device: str = ""
    graphs: dict[str, int] = field(default_factory=dict)  # cuda_graphs: recorded, replayed, eager (empty: off)
    replayed: int = 0  # timed steps replayed from a recorded graph (cuda_graphs)
    replayed_wall: float = 0.0  # their wall time
    replayed_rows: int = 0  # and their training rows
    warm: bool = False  # the warm-up step (FLOPs counted, not timed) is done
    compiled: bool = False  # the model trains under torch.compile (set by the loop)
    untimed: int = 0  # steps after the counted one not timed so far (a compiled model's compilation steps)
    compilations: int = 0  # graphs torch.compile made during the timed steps (each a recompilation; 0 is the goal)
    _graphs_at_start: int = 0
    _step_start: float = 0.0
    _step_faults: int = 0
    _counter: Any = None
    _tracer: Any = None

    @property
    def compiling(self) -> bool:
        """A compiled model's step that is still compiling (after the counted one; not timed)."""
        return self.compiled and self.untimed < COMPILE_WARMUP

    def summary(self) -> dict[str, float]:
        """Per-step means, throughput and the projected epoch (mean step x the epoch's steps + one validation).

        The model's arithmetic is the counted step's per input position times the timed steps' tokens: padding
        computes but is not the model's work, so it counts in ``padding`` (positions per token), not in the FLOPs
        (rows stand in for tokens when the batches carry no ids)."""
        n = max(self.timed, 1)
        step = self.step_wall / n
        phases = {k: v / n for k, v in self.seconds.items()}
        per_token = self.flop_positions > 0 and self.tokens > 0
        flops = self.flops * (self.tokens / self.flop_positions if per_token else self.rows / max(self.flop_rows, 1))
        return {
            "step_s": step,
            **{f"{k}_s": v for k, v in phases.items()},
            "other_s": max(step - sum(phases.values()), 0.0),
            "rows_per_s": self.rows / max(self.step_wall, 1e-12),
            "tokens_per_s": self.tokens / max(self.step_wall, 1e-12),
            "padding": self.positions / self.tokens if self.tokens else 1.0,
            "flop_per_s": flops / max(self.step_wall, 1e-12),
            "fwd_bwd_flop_per_s": flops / max(self.seconds["forward"] + self.seconds["backward"], 1e-12),
            "validation_s": self.validation,
            "page_faults_per_step": self.page_faults / n,
            "epoch_s": step * self.steps_per_epoch + self.validation,
            "timed_steps": self.timed,
            # cuda_graphs: the steps replayed from a graph alone (the rest ran eagerly or were recorded)
            "replayed_steps": self.replayed,
            "replayed_step_s": self.replayed_wall / max(self.replayed, 1),
            "replayed_rows_per_s": self.replayed_rows / max(self.replayed_wall, 1e-12),
            "compiled": self.compiled,
            "compile_warmup_steps": self.untimed,
            "compilations_in_timed_steps": self.compilations,
        }


_ACTIVE: list[Profile] = []


@contextlib.contextmanager
def profile_training(steps: int, trace_steps: int = 0, top_ops: int = 15) -> Iterator[Profile]:
    """Profile the next training run's first ``steps`` timed steps (plus one warm-up step and one validation), then
    trace ``trace_steps`` more with :mod:`torch.profiler`."""
    prof = Profile(steps=steps, trace_steps=trace_steps, top_ops=top_ops)
    _ACTIVE.append(prof)
    try:
        yield prof
    finally:
        _ACTIVE.remove(prof)
        _stop_trace(prof)  # the epoch ended before every traced step ran: keep what was traced


def active() -> Profile | None:
    """The profile a training run should record into, if a benchmark asked for one."""
    return _ACTIVE[-1] if _ACTIVE else None


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@contextlib.contextmanager
def phase(prof: Profile | None, name: str) -> Iterator[None]:
    """Time one phase of a step (a no-op when nothing is profiled). The warm-up step counts FLOPs instead: forward
    and backward run under one FLOP counter."""
    if prof is None:
        yield
        return
    warmup = not prof.warm
    if warmup and name == "forward":
        from torch.utils.flop_counter import FlopCounterMode

        prof._counter = FlopCounterMode(display=False, custom_mapping=_gqa_attention_flops())
        prof._counter.__enter__()
    _sync(prof.device)
    start = time.perf_counter()
    try:
        yield
    finally:
        _sync(prof.device)
        if warmup and name == "backward" and prof._counter is not None:
            prof._counter.__exit__(None, None, None)
            prof.flops = float(prof._counter.get_total_flops())
        elif not warmup and prof._tracer is None and not prof.compiling:
            prof.seconds[name] += time.perf_counter() - start


def _gqa_attention_flops() -> dict[Any, Any]:
    """FLOP formulas for fused attention that accept grouped-query attention (fewer key/value heads than query heads,
    as in SmolLM2 under ``enable_gqa``): torch's own formulas assert equal heads. Key and value count as if repeated
    to the query's heads, which is the work the kernel does."""
    from torch.utils import flop_counter as fc

    aten = torch.ops.aten

    def widen(q: Any, kv: Any) -> tuple[int, ...]:
        return (kv[0], q[1], *kv[2:]) if len(q) == 4 and len(kv) == 4 and kv[1] != q[1] else tuple(kv)

    def forward(q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        return fc.sdpa_flop_count(q, widen(q, k), widen(q, v))

    def backward(g: Any, q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        return fc.sdpa_backward_flop_count(g, q, widen(q, k), widen(q, v))

    mapping: dict[Any, Any] = {}
    for name in ("efficient", "flash", "cudnn"):
        fwd = getattr(aten, f"_scaled_dot_product_{name}_attention", None)
        bwd = getattr(aten, f"_scaled_dot_product_{name}_attention_backward", None)
        if fwd is not None:
            mapping[fwd] = forward
        if bwd is not None:
            mapping[bwd] = backward
    return mapping


def start_step(prof: Profile | None) -> None:
    if prof is not None and prof.warm:
        _sync(prof.device)
        prof._step_start = time.perf_counter()
        prof._step_faults = _minor_faults()


def _minor_faults() -> int:
    """This process's minor page faults so far (a fresh page touched for the first time); 0 off Unix."""
    try:
        import resource
    except ImportError:
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def input_tokens(batch: dict[str, Any]) -> tuple[int, int]:
    """``(positions, tokens)`` of a batch's ``ids``: every position, and those that are not padding: the attention
    mask's ones where it is a 0/1 mask over ``ids``, else the ids that are not ``PAD`` (a packed batch's mask is an
    additive block mask, and its chains are padded, to 1.7 positions per token where ``cuda_graphs`` pads them:
    ``benchmarks/graph_shapes.py``); ``(0, 0)`` without ``ids``."""
    from crabrec.models.decoder import PAD

    ids, mask = batch.get("ids"), batch.get("mask")
    if not isinstance(ids, torch.Tensor):
        return 0, 0
    if isinstance(mask, torch.Tensor) and mask.shape == ids.shape and not mask.is_floating_point():
        return ids.numel(), int(mask.sum())
    return ids.numel(), int((ids != PAD).sum())


def end_step(prof: Profile | None, rows: int, batch: dict[str, Any], replayed: bool = False) -> bool:
    """Close a step (``replayed``: from a recorded CUDA graph); True once the profile has all its timed steps (the
    loop then validates and stops)."""
    if prof is None:
        return False
    positions, tokens = input_tokens(batch)
    if not prof.warm:
        prof.warm, prof.flop_rows, prof.flop_positions = True, rows, positions
        if prof.compiled:  # the counted step left the compiled frames eager: compile from the next step on
            torch._dynamo.reset()
        return False
    if prof.compiling:  # not timed
        prof.untimed += 1
        prof._graphs_at_start = _compiled_graphs()
        return False
    _sync(prof.device)
    if prof._tracer is not None:  # a traced step, after the timed ones
        prof.traced += 1
        if prof.traced < prof.trace_steps:
            return False
        _stop_trace(prof)
        return True
    wall = time.perf_counter() - prof._step_start
    prof.step_wall += wall
    if replayed:
        prof.replayed += 1
        prof.replayed_wall += wall
        prof.replayed_rows += rows
    prof.page_faults += _minor_faults() - prof._step_faults
    prof.timed += 1
    prof.rows += rows
    prof.tokens += tokens
    prof.positions += positions
    if prof.compiled:
        prof.compilations = _compiled_graphs() - prof._graphs_at_start
    if prof.timed < prof.steps:
        return False
    if prof.trace_steps:
        _start_trace(prof)
        return False
    return True


def _compiled_graphs() -> int:
    """Graphs torch.compile has made in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _start_trace(prof: Profile) -> None:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if prof.device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    prof._tracer = profile(activities=activities)
    prof._tracer.__enter__()


def _stop_trace(prof: Profile) -> None:
    if prof._tracer is None:
        return
    tracer, prof._tracer = prof._tracer, None
    tracer.__exit__(None, None, None)
    if prof.traced:
        prof.ops = trace_summary(tracer.key_averages(), prof.traced, prof.top_ops)


LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")


def trace_summary(events: Any, steps: int, top: int = 15) -> dict[str, Any]:
    """Per step, from a profiler's ``key_averages()``: operator calls (``aten::*``, nested ones included), kernel
    launches, the device's busy time (the sum of every kernel's own time) and the ``top`` operators by device time,
    then by host time (milliseconds per step)."""

    def device_us(e: Any) -> float:  # the attribute was renamed in torch 2.4
        return float(getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0)) or 0.0)

    def on_device(e: Any) -> bool:  # a kernel or copy on the GPU (its time is nobody's but its own)
        return str(getattr(e, "device_type", "")).upper().endswith("CUDA")

    rows = [
        {
            "name": e.key,
            "calls": e.count / steps,
            "host_ms": e.self_cpu_time_total / 1000 / steps,
            "device_ms": device_us(e) / 1000 / steps,
            "kernel": on_device(e),
        }
        for e in events
    ]
    ops = [r for r in rows if r["name"].startswith("aten::")]
    ranked = sorted(ops, key=lambda r: (r["device_ms"], r["host_ms"]), reverse=True)
    return {
        "traced_steps": steps,
        "aten_calls": sum(r["calls"] for r in ops),
        "kernel_launches": sum(r["calls"] for r in rows if r["name"] in LAUNCHES),
        "device_busy_ms": sum(r["device_ms"] for r in rows if r["kernel"]),
        "host_ms": sum(r["host_ms"] for r in rows),
        "top": [{k: v for k, v in r.items() if k != "kernel"} for r in ranked[:top]],
    }
