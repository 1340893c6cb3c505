"""Training steps replayed as CUDA graphs (``cuda_graphs: true`` in a training section).

On a GPU the small from-scratch models' steps are bound by the host issuing thousands of kernels, not by the
arithmetic (docs/results/gpu.md). A CUDA graph records one whole step (forward, backward and the optimizer update)
once and replays it with a single launch. A graph is bound to the shapes it was recorded with, so :class:`StepGraphs`
keeps one graph per batch shape: a shape's first step runs eagerly, its second records the graph, and every later
batch of that shape is copied into the graph's input tensors and replayed. Shapes seen once (the last, short batch of
a pool) stay eager. The graphs share one memory pool: nothing a step leaves behind is read outside its own replay
except its loss, which is kept.

What a replay needs, and what this module sees to:

* the optimizer's state exists before the first recording (:func:`prime_optimizer`: a step of zero gradients at a
  learning rate of 0, its step counters reset, so that nothing changes) and it updates on the device
  (``capturable``); its learning rate is a device tensor the scheduler fills in place (:func:`set_lr`);
* gradients are unset before each eager step and each recording, so that a backward pass assigns them;
* autocast runs without its weight cache (the trainer's ``AutocastKwargs(cache_enabled=False)``);
* the loss reads nothing back to the host and keeps nothing outside tensors: a replay runs no Python (CRAB's loss
  keeps its running sums in tensors updated in place; RW's and D²LR's weight tables go to the device once; a row-form
  batch carries its answer width as a number, part of the graph's key). A loss that reads back fails its recording
  (graphs off, said once).

The recording itself is :func:`cuda_recorder`; tests substitute one that replays by calling the step again, which runs
everything above on the CPU.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

log = logging.getLogger("crabrec")

Batch = dict[str, Any]
Step = Callable[..., torch.Tensor]  # step(batch, update=True) -> loss
Replay = Callable[[], None]
# (the engine, its static inputs) -> (replay, the loss tensor each replay writes)
Recorder = Callable[["StepGraphs", Batch], tuple[Replay, torch.Tensor]]


def cuda_recorder(engine: StepGraphs, static: Batch) -> tuple[Replay, torch.Tensor]:
    """Record ``engine.step(static)`` as a CUDA graph in the engine's shared pool, after one warm-up forward and
    backward on a side stream (what the recording must not be the first to do: library handles, workspaces)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        engine.step(static, update=False)
    torch.cuda.current_stream().wait_stream(side)
    engine.unset_grads()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=engine.pool):
        loss = engine.step(static)
    engine.pool = graph.pool()
    return graph.replay, loss


def set_lr(group: dict[str, Any], value: float) -> None:
    """Set a parameter group's learning rate: in place when it is a tensor (a recorded step reads that tensor)."""
    if isinstance(group["lr"], torch.Tensor):
        group["lr"].fill_(value)
    else:
        group["lr"] = value


def lr_tensors(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Make every parameter group's learning rate a tensor on ``device`` (also after loading a checkpoint, which
    replaces it with the saved value)."""
    for group in optimizer.param_groups:
        group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)


def prime_optimizer(optimizer: torch.optim.Optimizer) -> None:
    """Create the optimizer's state for every parameter that has none yet, as a fresh optimizer would on its first
    step (zero moments, step 0), without moving any parameter: one update of zero gradients at a learning rate of 0
    and no weight decay, then the step counters reset. A recorded step must find its state tensors in place: one it
    created itself would be zeroed again at every replay."""
    fresh = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad and not optimizer.state.get(p)]
    if not fresh:
        return
    saved = [(group["lr"], group["weight_decay"]) for group in optimizer.param_groups]
    grads = {p: p.grad for group in optimizer.param_groups for p in group["params"]}
    marked = set(map(id, fresh))
    try:
        for group in optimizer.param_groups:
            lr = group["lr"]
            group["lr"] = torch.zeros_like(lr) if isinstance(lr, torch.Tensor) else 0.0
            group["weight_decay"] = 0.0
            for p in group["params"]:
                p.grad = torch.zeros_like(p) if id(p) in marked else None
        optimizer.step()
    finally:  # the very tensors back (a recorded step reads the learning rate's tensor)
        for group, (lr, decay) in zip(optimizer.param_groups, saved):
            group["lr"], group["weight_decay"] = lr, decay
        for p, grad in grads.items():
            p.grad = grad
    for p in fresh:
        step = optimizer.state[p].get("step")
        if isinstance(step, torch.Tensor):
            step.zero_()
        elif step is not None:
            optimizer.state[p]["step"] = 0


def batch_shape(batch: Batch) -> tuple | None:
    """What a recorded graph is bound to: each tensor's name, shape, dtype and device, and each number's value (the
    row form's answer width: a step reads it as a constant); None when the batch carries anything else (such a batch
    always runs eagerly)."""
    key = []
    for name, value in sorted(batch.items()):
        if isinstance(value, torch.Tensor):
            key.append((name, tuple(value.shape), value.dtype, str(value.device)))
        elif type(value) is int:
            key.append((name, value))
        else:
            return None
    return tuple(key)


class StepGraphs:
    """One training step per call, replayed from a recorded graph once its batch shape has been seen ``after`` times.

    ``step(batch, update=True)`` runs forward, backward and (when ``update``) the optimizer update, and returns the
    loss; gradients must be unset when it starts (this class sees to it). A recording that fails turns the graphs off
    for the rest of the run (logged once): training goes on eagerly."""

    def __init__(
        self,
        step: Step,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        after: int = 2,
        recorder: Recorder = cuda_recorder,
    ) -> None:
        self.step, self.model, self.optimizer, self.after, self.recorder = step, model, optimizer, after, recorder
        self.seen: Counter = Counter()
        self.graphs: dict[tuple, tuple[Batch, Replay, torch.Tensor]] = {}
        self.pool: Any = None
        self.enabled = True
        self.replays = self.eager = 0
        self.replayed = False  # whether the last step was a replay

    def unset_grads(self) -> None:
        for p in self.model.parameters():
            p.grad = None

    def __call__(self, batch: Batch) -> torch.Tensor:
        key = batch_shape(batch) if self.enabled else None
        if key is not None and key in self.graphs:
            static, replay, loss = self.graphs[key]
            for name, value in batch.items():
                if isinstance(value, torch.Tensor):  # a number is part of the key: the same as recorded
                    static[name].copy_(value, non_blocking=True)
            replay()
            self.replays, self.replayed = self.replays + 1, True
            return loss.clone()
        if key is not None:
            self.seen[key] += 1
            if self.seen[key] >= self.after and self._record(key, batch):
                return self(batch)
        self.unset_grads()
        self.eager, self.replayed = self.eager + 1, False
        return self.step(batch).detach()

    def _record(self, key: tuple, batch: Batch) -> bool:
        static = {name: value.clone() if isinstance(value, torch.Tensor) else value for name, value in batch.items()}
        try:
            prime_optimizer(self.optimizer)
            self.unset_grads()
            replay, loss = self.recorder(self, static)
        except Exception as exc:  # noqa: BLE001  (any failure to record: train on eagerly, say why once)
            self.enabled = False
            self.unset_grads()
            log.warning("cuda_graphs: recording a training step failed (%s); training on without graphs", exc)
            return False
        self.graphs[key] = (static, replay, loss)
        return True

    def summary(self) -> dict[str, int]:
        """How the steps ran: graphs recorded, steps replayed, steps run eagerly."""
        return {"graphs": len(self.graphs), "replayed": self.replays, "eager": self.eager}
