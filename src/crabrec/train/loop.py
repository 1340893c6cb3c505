"""The training loop every method shares: AdamW, warm-up + linear decay, gradient accumulation, validation NDCG@10
each epoch (or every ``valid_every`` epochs and the last) with early stopping, a checkpoint every epoch (resumable),
and a JSON log. Losses are plug-ins.
Built on ``accelerate``: on a CUDA machine the model and every batch go to the GPU and run in bf16 mixed precision;
``accelerate launch`` spreads it over several GPUs.

A checkpoint is a folder written to ``<dir>.tmp`` and renamed, holding ``save_pretrained`` weights (safetensors),
the optimizer/scheduler state (plain tensors, loaded with ``weights_only=True``) and ``state.json`` last. The best
model so far is staged in ``model.next`` and becomes ``model`` only when training completes, so an interrupted
retraining never replaces a finished model. A non-finite loss stops training with an error.

The loss is computed under the trainer's autocast whatever the loss function calls (a method's own loss may call a
part of the model, e.g. TIGER's encoder and decoder, rather than its wrapped ``forward``). With ``cuda_graphs`` on a
GPU the steps are replayed as CUDA graphs (:mod:`crabrec.train.graphs`).
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from crabrec import distributed
from crabrec.config import LoopConfig
from crabrec.errors import CrabError, reason
from crabrec.io import write_folder, write_json
from crabrec.models.attention import skip_cudnn_attention
from crabrec.progress import progress
from crabrec.train import profile as profiling
from crabrec.train.compiling import compile_blocks, eager, uncompile
from crabrec.train.graphs import StepGraphs, cuda_recorder, lr_tensors, set_lr

log = logging.getLogger("crabrec")

Batch = dict[str, Any]
STAGED = "model.next"  # the best model so far, while training runs
LossFn = Callable[[Any, Batch], torch.Tensor]
CHECK_EVERY = 50  # steps between the host's reads of the running loss (divergence check, progress bar)
SAVE_EVERY = 600.0  # seconds: inside a long epoch, a checkpoint this often (what an interruption loses at most)


@dataclass
class TrainResult:
    epochs_run: int
    best_epoch: int
    best_score: float
    seconds: float
    history: list[dict[str, float]] = field(default_factory=list)


def batches(n: int, batch_size: int, seed: int, epoch: int) -> Iterator[np.ndarray]:
    order = np.random.default_rng([seed, epoch]).permutation(n)
    for start in range(0, n, batch_size):
        yield order[start : start + batch_size]


def length_bucketed(
    lengths: np.ndarray, rows: np.ndarray, budget: int, seed: int, epoch: int, pool: int = 50
) -> list[np.ndarray]:
    """Batches of sequences of similar length holding about ``budget`` training rows each (so every row keeps the
    same weight as in row-form batches): shuffle, sort pools of ~``pool`` batches by length, cut greedily by rows,
    shuffle the batches. Seeded by ``(seed, epoch)``."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    span = max(1, int(pool * budget / max(float(np.mean(rows)), 1e-9)))
    out: list[np.ndarray] = []
    for start in range(0, len(order), span):
        chunk = order[start : start + span]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        cut = np.searchsorted(np.cumsum(rows[chunk]), np.arange(budget, int(rows[chunk].sum()), budget), "left") + 1
        out += [b for b in np.split(chunk, np.unique(np.clip(cut, 1, len(chunk)))) if len(b)]
    return [out[i] for i in rng.permutation(len(out))]


def by_length(length: np.ndarray, batch_size: int, seed: int) -> Callable[[int], list[np.ndarray]]:
    """``plan(epoch)``: batches of ``batch_size`` rows of similar ``length`` (one row each), as
    :func:`length_bucketed` cuts them: little padding, seeded by ``(seed, epoch)``."""
    ones = np.ones(len(length), np.int64)
    return lambda epoch: length_bucketed(length, ones, batch_size, seed, epoch)


def save_checkpoint(
    folder: Path,
    model,
    optimizer,
    scheduler,
    state: dict[str, Any],
    rng: dict[str, Any] | None = None,
    best: Path | None = None,
) -> None:
    """Write ``folder`` (whole or not at all): the weights, the optimizer's and scheduler's states, the random
    generators' (``rng``, default: now) and ``state``; ``best``, a kept model, is copied in as ``best/``."""

    def fill(tmp: Path) -> None:
        tmp.mkdir(parents=True)
        save_weights(model, tmp / "weights.safetensors")
        extra = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rng or rng_state()}
        torch.save(extra, tmp / "optim.pt")
        if best is not None:
            shutil.copytree(best, tmp / BEST)
        (tmp / "state.json").write_text(json.dumps(state))

    write_folder(folder, fill)


BEST = "best"  # in a checkpoint saved where a budget stopped an epoch: the kept model from before that point


def best_so_far(out_dir: Path, best_epoch: int) -> Path | None:
    """The model kept so far: staged by this training, else published by the one it trains on from (None: no
    validated epoch yet)."""
    for folder in (out_dir / STAGED, out_dir / "model"):
        if best_epoch and folder.is_dir():
            return folder
    return None


def restore_best(out_dir: Path, ckpt: Path) -> None:
    """Training on from a checkpoint saved where a budget stopped an epoch: the model kept before that point is
    staged again, so that what the stopped epoch's validation kept is not kept by the longer run."""
    if (ckpt / BEST).is_dir():
        write_folder(out_dir / STAGED, lambda tmp: shutil.copytree(ckpt / BEST, tmp))


def rng_state() -> dict[str, Any]:
    """Every random generator training draws from (dropout's included), as plain tensors and numbers: a checkpoint
    carries them, so that a resumed run draws what the uninterrupted one would have drawn."""
    import random

    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
        "python": random.getstate(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` saved (a CUDA state only where it was saved on CUDA)."""
    import random

    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    random.setstate(state["python"])


def checkpoint_state(folder: Path) -> dict[str, Any] | None:
    """The state a checkpoint was saved with: its configuration's fingerprint, epochs, seconds (None: no readable
    checkpoint)."""
    try:
        state = json.loads((folder / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


EPOCH_FREE = ("plateau", "inverse_sqrt")  # schedules whose learning rate does not depend on the number of epochs


def at_step(
    state: dict[str, Any], epoch: int, step: int, loss: list[float], seconds: float, in_epoch: float
) -> dict[str, Any]:
    """The checkpoint state of training stopped after ``step`` of ``epoch``: ``state`` as it is (no validation of
    this point in it), where the epoch is, and its loss sum and row count so far (every process's) and seconds, from
    which a resumed run goes on."""
    here = dict(state, epoch=epoch, seconds=seconds, history=list(state["history"]), cut={"step": step})
    here["cut_sums"] = [float(loss[0]), int(loss[1]), in_epoch]
    return here


def inside_epoch(cfg: LoopConfig, start: float, saved: float, prof: Any, whole_step: bool) -> tuple[bool, bool]:
    """At a step inside an epoch: (whether the time budget stops training here, whether a checkpoint is due:
    ``SAVE_EVERY`` seconds since ``saved``). Only after a whole optimizer step, never in a benchmark's profile;
    decided by the main process for all."""
    if prof is not None or not whole_step:
        return False, False
    now = time.perf_counter()
    stop = cfg.max_minutes is not None and now - start >= 60 * cfg.max_minutes
    return tuple(distributed.broadcast((stop, not stop and now - saved >= SAVE_EVERY)))  # type: ignore[return-value]


def extends(saved: dict[str, Any], budget_free: str, cfg: LoopConfig) -> bool:
    """Whether a checkpoint saved under another budget is where a run of ``cfg`` would be after the same epochs: the
    same configuration but for the budget, a learning-rate schedule that the number of epochs does not change (or the
    same number), a budget that would not have stopped the run before the checkpoint's last epoch, and the same
    validations: a run validates its last epoch whatever ``valid_every`` says, and the longer run would not have
    validated it (the kept model, early stopping and the plateau schedule follow validations). A checkpoint saved
    where the budget stopped an epoch holds the state from before that stop's validation."""
    if saved.get("budget_free") != budget_free:
        return False
    epoch, planned = saved.get("epoch"), saved.get("planned_epochs")
    if not isinstance(epoch, int) or epoch > cfg.epochs:
        return False
    if cfg.schedule not in EPOCH_FREE and planned != cfg.epochs:
        return False
    cut = saved.get("cut")  # stopped inside this epoch: its validation there is not one of the longer run's
    if not cut and getattr(cfg, "keep", "best") == "best" and epoch % cfg.valid_every and epoch < cfg.epochs:
        return False
    seconds = saved.get("seconds")
    return cfg.max_minutes is None or (isinstance(seconds, (int, float)) and seconds < 60 * cfg.max_minutes)


STATE_KEYS = ("epoch", "best_score", "best_epoch", "bad_epochs", "history", "seconds")


def save_weights(model, path: Path) -> None:
    """The model's weights as safetensors, each tied tensor once under its first name in sorted order (as safetensors'
    ``save_model`` keeps it, and its ``load_model`` reads it back). The names left out are listed in one metadata
    entry: safetensors writes a metadata map of several entries in a random order, so a model with tied weights gave
    different bytes from one process to the next for the same weights."""
    from safetensors.torch import save_file, save_model

    state = model.state_dict()
    first: dict[tuple, str] = {}
    aliases: dict[str, str] = {}
    for name in sorted(state):
        tensor = state[name]
        key = (
            tensor.device,
            tensor.untyped_storage().data_ptr(),
            tensor.storage_offset(),
            tuple(tensor.shape),
            tensor.stride(),
            tensor.dtype,
        )
        if key in first and tensor.numel():  # empty tensors all start at 0 without sharing anything
            aliases[name] = first[key]
        else:
            first[key] = name
    kept = {name: tensor.contiguous() for name, tensor in state.items() if name not in aliases}
    try:
        save_file(kept, str(path), metadata={"aliases": json.dumps(aliases, sort_keys=True)} if aliases else None)
    except (RuntimeError, ValueError):  # tensors that overlap without being the same view: safetensors' own way
        save_model(model, str(path))


def load_checkpoint(folder: Path, model, optimizer, scheduler) -> dict[str, Any] | None:
    if not (folder / "state.json").is_file() or not (folder / "weights.safetensors").is_file():
        return None
    from safetensors.torch import load_model

    try:
        state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        if not isinstance(state, dict) or any(k not in state for k in STATE_KEYS):
            raise ValueError(f"state.json lacks {', '.join(STATE_KEYS)}")
        load_model(model, str(folder / "weights.safetensors"))
        opt = torch.load(folder / "optim.pt", weights_only=True)  # tensors and plain containers only, never code
        optimizer.load_state_dict(opt["optimizer"])
        scheduler.load_state_dict(opt["scheduler"])
        if "rng" in opt:  # a checkpoint saved without generator states resumes without them
            set_rng_state(opt["rng"])
    except Exception as exc:  # a foreign, truncated or tampered checkpoint: refuse with the reason
        raise CrabError(f"{folder}: unusable checkpoint ({reason(exc)}); delete it to train from scratch") from None
    return state


@dataclass
class Rows:
    """The training data as the loop sees it: ``n`` rows, ``make(indices)`` builds a batch, ``plan(epoch)`` (optional)
    gives an epoch's batches of indices (e.g. :func:`length_bucketed`; default: shuffled ``batch_size`` rows), and
    ``size(indices)`` (optional) the number of training rows they hold, the weight of their mean loss (default: one
    per index; a packed chain holds several)."""

    n: int
    make: Callable[[np.ndarray], Batch]
    plan: Callable[[int], list[np.ndarray]] | None = None
    size: Callable[[np.ndarray], int] = len


COMPILE_BACKENDS = ("inductor", "aot_eager", "eager")


def compile_backend() -> str:
    """The torch.compile backend of ``compile=true``: inductor, or ``CRABREC_COMPILE_BACKEND`` (``aot_eager`` or
    ``eager``: dynamo captures the model without inductor's code generation, to tell a capture problem from a
    code-generation one, or to check the capture quickly)."""
    import os

    name = os.environ.get("CRABREC_COMPILE_BACKEND", "").strip().lower() or "inductor"
    if name not in COMPILE_BACKENDS:
        raise CrabError(f"CRABREC_COMPILE_BACKEND={name!r}: expected one of {', '.join(COMPILE_BACKENDS)}")
    return name


def mixed_precision(cuda: bool) -> str:
    """The trainer's precision: bf16 autocast on a GPU that has it, full precision elsewhere."""
    return "bf16" if cuda and torch.cuda.is_bf16_supported() else "no"


def train(
    model,
    rows: Rows,
    loss_fn: LossFn,
    validate: Callable[[Any], float],
    cfg: LoopConfig,
    out_dir: Path,
    seed: int,
    *,
    param_groups: list[dict[str, Any]] | None = None,
    export: Callable[[Any, Path], None] | None = None,
    fingerprint: str = "",
    fresh: bool = False,
    budget_free: str = "",
    recorder: Any = None,
) -> TrainResult:
    """Train ``model`` on ``rows``; keep the best epoch by ``validate`` in ``out_dir/model``. A ``cfg`` with
    ``keep="last"`` (CRAB's fine-tune) validates nothing: every epoch runs and the last is kept (plateau keeps its
    rate).

    ``fingerprint`` identifies the configuration: a checkpoint saved under another one is not resumed, unless it
    only differs in its budget (``budget_free``, the fingerprint without ``epochs`` and ``max_minutes``) and the run
    asked for now would have trained past it (:func:`extends`); ``fresh`` (a forced re-run) discards any checkpoint and
    trains from scratch; ``recorder`` replaces the CUDA graph recorder of ``cuda_graphs`` (tests record on the CPU
    with it)."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import AutocastKwargs

    torch.manual_seed(seed)
    cuda = torch.cuda.is_available()
    skip_cudnn_attention()  # batches change shape from step to step: cuDNN would plan each anew
    AcceleratorState._reset_state()  # precision/accumulation are per run (a process may train several models)
    graphs = getattr(cfg, "cuda_graphs", False) and (cuda or recorder is not None)
    if getattr(cfg, "cuda_graphs", False) and not graphs:
        log.info("cuda_graphs: no CUDA device here; training without graphs")
    accelerator = Accelerator(
        gradient_accumulation_steps=cfg.grad_accum,
        cpu=not cuda,
        mixed_precision=mixed_precision(cuda),
        dynamo_backend="no",  # compile=true compiles the model's blocks after prepare (crabrec.train.compiling)
        # a recorded step must not cache autocast's weight copies (they would outlive the recording)
        kwargs_handlers=[AutocastKwargs(cache_enabled=False)] if graphs else None,
    )
    if graphs and accelerator.num_processes > 1:
        log.info("cuda_graphs: %d processes; training without graphs", accelerator.num_processes)
        graphs = False
    log.info(
        "training on %s (mixed precision: %s%s)",
        accelerator.device,
        accelerator.mixed_precision,
        f", {accelerator.num_processes} processes, {accelerator.distributed_type.value}"
        if accelerator.num_processes > 1
        else "",
    )
    groups = param_groups or [{"params": [p for p in model.parameters() if p.requires_grad]}]
    # fused AdamW on CUDA: one kernel for every tensor's update instead of several per tensor (CPU: PyTorch's default);
    # a recorded step updates with the step counts and learning rate on the device (capturable)
    optimizer = torch.optim.AdamW(
        groups,
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        fused=True if cuda else None,
        capturable=bool(graphs and cuda),
    )
    plans = {
        e: rows.plan(e) if rows.plan else list(batches(rows.n, cfg.batch_size, seed, e))
        for e in range(1, cfg.epochs + 1)
    }
    total = max(1, sum(math.ceil(len(p) / cfg.grad_accum) for p in plans.values()))

    last = getattr(cfg, "keep", "best") == "last"
    plateau = {"scale": 1.0}  # schedule=plateau: shrunk after each epoch that does not improve validation
    kind, warmup = cfg.schedule, cfg.warmup_steps
    factor = cfg.plateau_factor if kind == "plateau" else 1.0

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        if kind == "plateau":
            return plateau["scale"]
        if kind == "inverse_sqrt":
            return math.sqrt(max(1, warmup) / (step + 1))
        left = max(0.0, (total - step) / max(1, total - warmup))
        return left if kind == "linear" else 0.5 * (1.0 - math.cos(math.pi * left))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    model, optimizer = accelerator.prepare(model, optimizer)
    compiled = []  # compile=true: the model's blocks, compiled in place (validation runs them eagerly)
    if getattr(cfg, "compile", False):
        compiled = compile_blocks(accelerator.unwrap_model(model), compile_backend())
    ckpt = out_dir / "checkpoint"
    saved = checkpoint_state(ckpt)
    other = saved is not None and saved.get("fingerprint") != fingerprint
    extended = other and bool(budget_free) and extends(saved, budget_free, cfg)
    if ckpt.exists() and (fresh or (other and not extended)):
        why = "re-run forced" if fresh else "saved by another configuration"
        log.info("%s: %s; training from scratch", ckpt, why)
        shutil.rmtree(ckpt)
        shutil.rmtree(out_dir / STAGED, ignore_errors=True)
    elif extended:
        cut = saved.get("cut")
        done = f"{saved['epoch']} epoch" + ("" if saved["epoch"] == 1 else "s")
        if cut:
            done = f"{cut['step']:,} step{'' if cut['step'] == 1 else 's'} of epoch {saved['epoch']}"
        log.info("%s: trained %s under a smaller budget; training on from there", ckpt, done)
        if accelerator.is_main_process:
            restore_best(out_dir, ckpt)
    state = load_checkpoint(ckpt, accelerator.unwrap_model(model), optimizer, scheduler) or {
        "epoch": 0,
        "best_score": -1.0,
        "best_epoch": 0,
        "bad_epochs": 0,
        "history": [],
        "seconds": 0.0,
    }
    state.update(fingerprint=fingerprint, budget_free=budget_free, planned_epochs=cfg.epochs)
    resumed, sums = state.pop("cut", None), state.pop("cut_sums", None)  # saved inside an epoch: on from that step
    if resumed:
        state["epoch"] -= 1
        if not extended:
            log.info("resuming from %s at step %d of epoch %d", ckpt, resumed["step"], state["epoch"] + 1)
    elif state["epoch"]:
        log.info("resuming from %s after epoch %d", ckpt, state["epoch"])
    engine = None
    if graphs:
        lr_tensors(optimizer, accelerator.device)  # after any checkpoint: loading replaces the learning rates
        inner = getattr(optimizer, "optimizer", optimizer)

        def graph_step(batch: Batch, update: bool = True) -> torch.Tensor:
            with accelerator.autocast():
                loss = loss_fn(model, batch)
            loss.backward()
            if update:
                inner.step()
            return loss

        engine = StepGraphs(graph_step, model, inner, recorder=recorder or cuda_recorder)
    plateau["scale"] = state.setdefault("lr_scale", 1.0)
    start_time = time.perf_counter() - state["seconds"]
    last_save = time.perf_counter()  # the last checkpoint (or the start): inside an epoch, one every SAVE_EVERY s
    prof = profiling.active()  # a benchmark asked where the step's time goes (crabrec.train.profile)
    every = cfg.valid_every  # read whatever the number of epochs: it is part of the stage's settings
    for epoch in range(state["epoch"] + 1, cfg.epochs + 1):
        if state["bad_epochs"] >= cfg.patience:
            break
        if cfg.max_minutes is not None and state["seconds"] >= 60 * cfg.max_minutes:
            log.info("time budget of %g min reached after epoch %d", cfg.max_minutes, state["epoch"])
            break
        model.train()
        # the loss is summed on the device (float64, the same sum the host would make): no host sync per step
        total_loss, count = torch.zeros((), dtype=torch.float64, device=accelerator.device), 0
        epoch_start = time.perf_counter()
        plan, skip = plans[epoch], 0
        if resumed:  # the steps run before the budget stopped this epoch, with every process's loss so far
            skip, resumed = resumed["step"], None
            if accelerator.is_main_process:
                total_loss, count = total_loss + sums[0], int(sums[1])
            epoch_start -= sums[2]
        if prof is not None:
            prof.device, prof.steps_per_epoch = str(accelerator.device), len(plan)
            prof.compiled = bool(getattr(cfg, "compile", False))
            prof.rows_per_epoch = int(rows.size(np.concatenate(plan))) if plan else 0
        bar = progress(plan[skip:], f"epoch {epoch}", show=accelerator.is_main_process, initial=skip, total=len(plan))
        world = accelerator.num_processes
        cut = 0  # the step at which the time budget stopped this epoch (0: it ran whole)
        for step, whole in enumerate(bar, skip + 1):
            index = whole[accelerator.process_index :: world]  # data parallel: a share each
            weight = rows.size(index)
            if not len(index):  # fewer indices than processes: this one joins the step with a zero-weight row
                index = whole[:1]
            profiling.start_step(prof)
            with profiling.phase(prof, "batch"):
                batch = to_device(rows.make(index), accelerator.device)
            if engine is not None:  # forward, backward and update in one replay: its time lands in "forward"
                with profiling.phase(prof, "forward"):
                    loss = engine(batch)
                with profiling.phase(prof, "backward"):  # empty: it closes the warm-up step's FLOP count
                    pass
                with profiling.phase(prof, "optimizer"):
                    scheduler.step()
            else:
                with accelerator.accumulate(model):
                    with profiling.phase(prof, "forward"), accelerator.autocast():
                        loss = loss_fn(model, batch)
                    # gradients are averaged over processes: weigh each share by its size, so that the step is the
                    # one of the whole batch's mean loss however the rows divide
                    with profiling.phase(prof, "backward"):
                        accelerator.backward(loss * (weight * world / rows.size(whole)) if world > 1 else loss)
                    with profiling.phase(prof, "optimizer"):
                        optimizer.step()
                        if accelerator.sync_gradients:
                            scheduler.step()
                        optimizer.zero_grad()
            total_loss += loss.detach().double() * weight
            count += weight
            # the host reads the loss only every CHECK_EVERY steps; the clock (the budget, a checkpoint inside the
            # epoch) every step, or every CHECK_EVERY steps with several processes (they decide together)
            checked = step % CHECK_EVERY == 0 or step == len(plan)
            stop = save = False
            if step < len(plan) and (checked or world == 1):
                stop, save = inside_epoch(cfg, start_time, last_save, prof, accelerator.sync_gradients)
            if checked or stop or save:
                value = float(total_loss) / max(count, 1)
                if not math.isfinite(value):  # nothing of this epoch is kept: the last checkpoint stays the last good
                    raise CrabError(
                        f"training diverged in epoch {epoch}: the loss is {value}; "
                        f"lower the learning rate (lr={cfg.lr})"
                    )
                if hasattr(bar, "set_postfix"):
                    bar.set_postfix(loss=f"{value:.4f}")
            if stop:
                cut = step  # after a whole optimizer step; the epoch's rows so far are its loss and its model
                break
            if save:  # where the epoch is: an interrupted run resumes from this step
                so_far = [float(total_loss), float(count)]
                if world > 1:  # every process's loss so far: the resumed main process goes on from the sum
                    so_far = accelerator.reduce(torch.tensor(so_far, device=accelerator.device), "sum").tolist()
                last_save = time.perf_counter()
                if accelerator.is_main_process:
                    here = at_step(state, epoch, step, so_far, last_save - start_time, last_save - epoch_start)
                    save_checkpoint(ckpt, accelerator.unwrap_model(model), optimizer, scheduler, here)
            if profiling.end_step(prof, weight, batch, engine is not None and engine.replayed):
                break
        total_loss = float(total_loss)
        if world > 1:  # the epoch's mean loss over every process's rows
            sums = accelerator.reduce(torch.tensor([total_loss, float(count)], device=accelerator.device), "sum")
            total_loss, count = float(sums[0]), int(sums[1])
        model.eval()
        validation_start = time.perf_counter()
        if cut and accelerator.is_main_process:  # where a longer run would be: before this validation
            seconds = (validation_start - start_time, validation_start - epoch_start)
            before = at_step(state, epoch, cut, [total_loss, count], *seconds)
            random_state = rng_state()
        # the time budget is decided here (by the main process, for all), so that the last epoch is validated
        out_of_time = bool(cut) or distributed.broadcast(
            cfg.max_minutes is not None and time.perf_counter() - start_time >= 60 * cfg.max_minutes
        )
        final = epoch == cfg.epochs or out_of_time
        skipped = not last and not final and epoch % every != 0 and prof is None
        with eager(compiled):  # beam search's shapes are not training's
            score = None if last or skipped else float(validate(accelerator.unwrap_model(model)))
        if prof is not None:  # a benchmark's profile: one validation timed, nothing saved
            prof.validation = time.perf_counter() - validation_start
            prof.graphs = engine.summary() if engine is not None else {}
            raise profiling.ProfileDone()
        entry = {
            "epoch": epoch,
            "loss": total_loss / max(count, 1),
            "valid_ndcg@10": score,
            "epoch_seconds": time.perf_counter() - epoch_start,
        }
        if cut:
            entry["steps"] = [cut, len(plan)]
        terms = getattr(loss_fn, "epoch_terms", None)  # a loss of several terms reports each (CRAB: L_Rec, L_T)
        if terms is not None and (means := terms()):
            entry["terms"] = means
        state["history"].append(entry)
        shown = (
            "not validated (keep=last)"
            if last
            else f"not validated (every {every} epochs)"
            if skipped
            else f"valid NDCG@10 {score:.4f}"
        )
        parts = "".join(f", {name} {value:.4f}" for name, value in entry.get("terms", {}).items())
        within = f" (the time budget stopped it after {cut:,} of {len(plan):,} steps)" if cut else ""
        log.info(
            "epoch %d%s: loss %.4f%s, %s (%.0fs)", epoch, within, entry["loss"], parts, shown, entry["epoch_seconds"]
        )
        main = accelerator.is_main_process  # every process validates identically; one writes
        wins = not skipped and (score is None or score > state["best_score"])
        if cut and main:  # saved first: a longer run from it trains, validates and keeps what one run would
            kept = best_so_far(out_dir, state["best_epoch"]) if wins and not last else None
            save_checkpoint(ckpt, accelerator.unwrap_model(model), optimizer, scheduler, before, random_state, kept)
        if skipped:  # neither a candidate nor a bad epoch: patience and the plateau count validations
            pass
        elif wins:  # keep=last: every epoch replaces the previous one
            state.update(best_score=state["best_score"] if score is None else score, best_epoch=epoch, bad_epochs=0)
            best = out_dir / STAGED  # published as out_dir/model only when training completes
            if main:  # only the writer touches model.next.tmp: another process must not delete it mid-write
                write_folder(best, lambda tmp: (export or _save_pretrained)(accelerator.unwrap_model(model), tmp))
        elif cut:  # the epoch so far is a candidate for the kept model only: patience and the plateau count epochs
            pass
        else:
            state["bad_epochs"] += 1
            if kind == "plateau":
                state["lr_scale"] = plateau["scale"] = plateau["scale"] * factor
                for group, base in zip(optimizer.param_groups, scheduler.base_lrs):  # from the next step on
                    set_lr(group, base * schedule(scheduler.last_epoch))
        state["epoch"] = epoch
        state["seconds"] = time.perf_counter() - start_time
        if main and not cut:
            save_checkpoint(ckpt, accelerator.unwrap_model(model), optimizer, scheduler, state)
        last_save = time.perf_counter()
        accelerator.wait_for_everyone()
        if out_of_time:
            if not cut:  # a stop inside the epoch said so on the epoch's line
                log.info("time budget of %g min reached after epoch %d", cfg.max_minutes, epoch)
            break
    if engine is not None:
        done = engine.summary()
        log.info("cuda_graphs: %(graphs)d graphs recorded, %(replayed)d steps replayed, %(eager)d eager", done)
    uncompile(compiled)  # the caller gets the model back as it came
    if accelerator.is_main_process:
        publish(out_dir, state["history"])
    accelerator.wait_for_everyone()
    seconds = time.perf_counter() - start_time
    return TrainResult(state["epoch"], state["best_epoch"], state["best_score"], seconds, state["history"])


def publish(out_dir: Path, history: list[dict[str, float]]) -> None:
    """Training completed: the staged best model becomes ``out_dir/model`` (replacing the previous one) and the
    epoch log is written. Until then an interrupted retraining leaves the previous model in place."""
    staged, best = out_dir / STAGED, out_dir / "model"
    if staged.is_dir():
        shutil.rmtree(best, ignore_errors=True)
        staged.rename(best)
    write_json(out_dir / "train_log.json", history)


def training_summary(result: TrainResult, out_dir: Path) -> dict[str, Any]:
    """The summary every trained method records (``out_dir/train_summary.json``) and returns to its stage."""
    # an epoch a budget stopped inside is not an epoch's time: the whole ones, else that one scaled to its steps
    whole = [h["epoch_seconds"] for h in result.history if "steps" not in h]
    cut = [h["epoch_seconds"] * h["steps"][1] / max(h["steps"][0], 1) for h in result.history if "steps" in h]
    epoch_seconds = whole or cut
    summary = {
        "epochs_run": result.epochs_run,
        "best_epoch": result.best_epoch,
        "best_valid_ndcg@10": round(result.best_score, 4) if result.best_score >= 0 else None,  # None: keep=last
        "train_seconds": round(result.seconds, 1),
        "seconds_per_epoch": round(float(np.mean(epoch_seconds)), 1) if epoch_seconds else 0.0,
    }
    from crabrec import distributed

    if distributed.is_main():
        write_json(out_dir / "train_summary.json", summary)
    return summary


def to_device(batch: Batch, device: torch.device) -> Batch:
    """Move a batch's tensors to the training device (numpy arrays and other values stay as they are)."""
    return {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _save_pretrained(model, path: Path) -> None:
    model.save_pretrained(path)
