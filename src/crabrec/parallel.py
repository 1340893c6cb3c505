"""Independent training stages side by side (``crabrec run --jobs N``).

MOR, TIGER, SASRec, RW and D²LR each train from the run's data and SIDs alone, so they can train at the same time.
Small models use two threads poorly (on 2 CPU cores one MOR step takes 0.66x the time of one thread, not 0.5x), so
``N`` processes of ``cores // N`` threads each finish the same work sooner than one process after the other.

The main process computes what they all need first (data, embeddings, SIDs), then hands the training stages, longest
first, to ``N`` worker processes, and each stage that follows them (an evaluation, RR, CRAB, a decoding-time method)
as soon as the stages it needs are finished, so that no worker waits idle for the last training stage. Each worker
runs its stage through the usual cache (:meth:`RunContext.ensure`), so a stage writes its artifacts and state exactly
as in a sequential run; the main process then finds them finished and writes the report. A stage's thread count
depends only on ``N`` and the machine, so a command repeated gives the same artifacts. Results under another thread
count differ by floating-point rounding. A worker ends when the process that started it ends, however it ends
(:func:`worker_pool`): a killed command leaves no trainer behind writing into its run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from crabrec.config_paths import values_of
from crabrec.cpus import available as cores  # the cores this process may use, within a container's CPU quota
from crabrec.errors import CrabError, printable
from crabrec.pipeline import RunContext
from crabrec.progress import tagged
from crabrec.termination import SIGNALS, Terminated, on_signal

log = logging.getLogger("crabrec")

# the built-in training stages that only need data and SIDs, in the order they are handed out: longest first (quick
# and paper presets); a method plugin's such stage comes after them
INDEPENDENT = ("tiger", "train", "rw", "d2lr", "sasrec")
FIXED_INPUTS = frozenset({"data", "embed", "tokenize"})


def closure(ctx: RunContext, names: list[str]) -> set[str]:
    """``names`` and every stage they need (their fixed inputs)."""
    out: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name not in out:
            out.add(name)
            stack.extend(ctx.stages[name].needs)
    return out


def independent(ctx: RunContext) -> list[str]:
    """The training stages that need only the data and SIDs (:data:`FIXED_INPUTS`): the built-in ones longest first,
    then those of other registered methods in Table 1's order."""
    from crabrec.methods import methods

    other = [
        m.trains
        for m in methods()
        if m.trains
        and m.trains not in INDEPENDENT
        and m.trains in ctx.stages
        and set(ctx.needs(m.trains)) <= FIXED_INPUTS
    ]
    return [s for s in INDEPENDENT if s in ctx.stages] + other


def pending(ctx: RunContext, names: list[str]) -> list[str]:
    """The independent training stages that running ``names`` will compute (not finished, or forced)."""
    wanted = closure(ctx, names)
    return [s for s in independent(ctx) if s in wanted and (s in ctx.force or not ctx.is_done(s))]


def auto_count(cfg: Any, n: int) -> int:
    """``--jobs 0`` for ``n`` independent pieces of work: one process each up to the CPU cores; 1 on a GPU, under a
    launcher, or when ``train.threads`` pins the threads."""
    from crabrec import distributed

    if distributed.launched() or cfg.train.threads:
        return 1
    import torch

    if torch.cuda.is_available():
        return 1
    return max(1, min(n, cores()))


def followers(ctx: RunContext, names: list[str], todo: list[str]) -> list[str]:
    """What ``names`` computes besides the training stages ``todo`` and their inputs, in run order: evaluations, RR,
    CRAB, the decoding-time methods. The report, which reads every method, stays with the main process."""
    rest = closure(ctx, names) - closure(ctx, todo) - {"report"}
    return [s for s in ctx.stages if s in rest]


def run_side_by_side(ctx: RunContext, names: list[str], jobs: int) -> None:
    """Compute the independent training stages among ``names``, then what follows them, in ``jobs`` worker processes
    (0 = :func:`auto_count`); nothing happens when fewer than two training stages would run at once.

    A stage is handed to a free worker once every stage it needs is finished, training stages first (longest
    first), so that a worker idle at the end of the training stages evaluates the models already trained instead of
    leaving that to the main process after the last one."""
    todo = pending(ctx, names)
    jobs = jobs or auto_count(ctx.config, len(todo))
    jobs = min(jobs, len(todo))
    if jobs < 2:
        return
    after = followers(ctx, names, todo)
    for name in todo + after:  # every check first: a setting that cannot work fails before any worker starts
        ctx.check_ahead(name)
    for name in todo:
        for dep in ctx.stages[name].needs:
            ctx.ensure(dep)
    todo = [n for n in todo if n not in ctx._ran]  # trained here as another's input (SASRec for ids-only SIDs)
    jobs = min(jobs, len(todo))
    if jobs < 2:
        return
    threads = ctx.config.train.threads or max(1, cores() // jobs)
    log.info("training %s in %d processes, %d thread(s) each", ", ".join(todo), jobs, threads)
    config = values_of(ctx.config)  # the config class is built at start-up: send its values
    level = logging.getLogger("crabrec").level

    from concurrent.futures import FIRST_COMPLETED, wait

    queue, scheduled, finished = [*todo, *after], {*todo, *after}, set()

    def ready(name: str) -> bool:
        """Every input finished: by a worker, or before (a stage none of them computes, e.g. a dynamic input that is
        not wanted, leaves ``name`` to the main process)."""

        def done(dep: str) -> bool:
            if dep not in finished and dep not in scheduled and ctx.is_done(dep):
                finished.add(dep)  # checked once (it hashes the stage's files)
            return dep in finished

        return all(done(d) for d in ctx.stages[name].needs) and all(done(d) for d in ctx.needs(name))

    running: dict = {}
    failed: BaseException | None = None
    with worker_pool(jobs) as pool:
        while True:
            while failed is None and len(running) < jobs:
                name = next((n for n in queue if ready(n)), None)
                if name is None:
                    break
                queue.remove(name)
                fresh = name in ctx.force or any(dep in ctx._ran for dep in ctx.needs(name))
                running[pool.submit(_compute, config, name, fresh, threads, level)] = name
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            busy = " or ".join(running.values())
            for future in done:
                name = running.pop(future)
                if future.exception() is not None:  # the stages already running finish (and keep their files)
                    failed = failed or ended_abruptly(future.exception(), busy)
                    continue
                _, computed = future.result()
                finished.add(name)
                if computed:  # what depends on it is recomputed, as if this process had computed it
                    ctx._ran.add(name)
                ctx.force.discard(name)
    if failed is not None:
        raise failed


@contextlib.contextmanager
def worker_pool(jobs: int) -> Iterator[Any]:
    """``jobs`` worker processes (spawned: no state inherited from this one).

    A worker ends when this process ends, even killed (SIGTERM, SIGKILL, out of memory): a stage left running would
    go on writing into a run that another command may already be using. A termination signal this process receives
    is passed on to the workers, which stop their work as Ctrl-C stops it (:func:`worker_job`). The methods
    registered at run time in this process are registered in each worker too (installed ones each process finds
    itself)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from crabrec.methods import added_payload

    context = multiprocessing.get_context("spawn")
    init = (os.getpid(), added_payload())
    pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_start_worker, initargs=init)

    def pass_on(signum: int) -> None:
        for pid in list(getattr(pool, "_processes", None) or {}):
            with contextlib.suppress(OSError):
                os.kill(pid, signum)

    with pool, on_signal(pass_on):
        yield pool


def ended_abruptly(exc: BaseException, what: str) -> BaseException:
    """``exc`` from a worker's job, or, when its worker process ended abruptly (killed, or by the system for want of
    memory), one error saying so of ``what`` it computed."""
    from concurrent.futures.process import BrokenProcessPool

    if not isinstance(exc, BrokenProcessPool):
        return exc
    return CrabError(
        f"a worker process computing {what} ended abruptly (killed, or stopped by the system for want of memory); "
        "the finished stages are kept: run the command again with fewer processes (--jobs 1 computes one stage at "
        "a time) to resume"
    )


_PARENT = [0]  # in a worker process: the main process's id


def _start_worker(parent: int, methods: bytes) -> None:
    """In a worker process, first: end when ``parent`` ends (:func:`_die_with_parent`); then the parent's
    methods registered at run time (quietly: the parent has already warned of a plugin it skipped)."""
    from crabrec.methods import register_payload

    _PARENT[0] = parent
    _die_with_parent(parent)
    logger = logging.getLogger("crabrec")
    was_disabled, logger.disabled = logger.disabled, True
    try:
        register_payload(methods)
    finally:
        logger.disabled = was_disabled


def _die_with_parent(parent: int) -> None:
    """End when ``parent`` ends. Linux signals it (``PR_SET_PDEATHSIG``); elsewhere a thread checks every second
    whether the process has been handed to another parent."""
    if not _death_signal():
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # it ended before the request above could take effect
        os._exit(1)


def _death_signal() -> bool:
    """Ask Linux for SIGTERM when the parent ends; False where that cannot be asked."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    import signal

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM) == 0  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


@contextlib.contextmanager
def worker_job() -> Iterator[None]:
    """In a worker process, around one job: a termination signal (passed on by the main process, or sent because it
    ended) stops the job as Ctrl-C stops it, so that what it was writing is removed; a repeat is ignored while it
    stops, unless the main process has ended. Between jobs a signal ends the worker at once: it has nothing to
    remove."""

    def stop(signum: int, frame: object) -> None:
        signal.signal(signum, _ignore_unless_orphaned)
        raise Terminated(signum)

    for signum in SIGNALS:
        signal.signal(signum, stop)
    try:
        yield
    except Terminated:
        if os.getppid() != _PARENT[0]:  # nobody waits for the result
            os._exit(1)
        raise
    finally:
        for signum in SIGNALS:
            signal.signal(signum, signal.SIG_DFL)


def _ignore_unless_orphaned(signum: int, frame: object) -> None:
    if os.getppid() != _PARENT[0]:
        os._exit(1)


def _compute(values: dict[str, Any], name: str, fresh: bool, threads: int, level: int) -> tuple[str, bool]:
    """In a worker process: compute stage ``name`` (from scratch when ``fresh``) with ``threads`` torch threads;
    -> ``(name, whether it was computed rather than found finished)``."""
    from crabrec.config_paths import from_values
    from crabrec.stages import registry

    worker_setup(name, threads, level)
    config = from_values(values)
    ctx = RunContext(config=config, stages=registry(), force={name} if fresh else set())
    ctx._checked.update(n for n in ctx.stages if n != name)  # the main process has reported its inputs
    try:
        with worker_job():
            ctx.ensure(name)
    except CrabError as exc:  # a user error crosses the process boundary as itself, without the worker's traceback
        raise CrabError(str(exc)) from None
    return name, name in ctx._ran


def worker_setup(tag: str, threads: int, level: int) -> None:
    """In a worker process: no progress bars (one process draws them, and the workers share its terminal), log lines
    tagged ``[tag]`` at the main process's verbosity, ``threads`` torch threads (stages keep them; ``train.threads``,
    when set, is already ``threads``)."""
    from crabrec.progress import set_verbosity

    os.environ["TQDM_DISABLE"] = "1"
    handler = logging.StreamHandler()
    handler.setFormatter(_Tagged(tag))
    logger = logging.getLogger("crabrec")
    logger.handlers[:] = [handler]
    logger.propagate = False
    set_verbosity(level)
    import torch

    torch.set_num_threads(threads)


class _Tagged(logging.Formatter):
    """A worker's log lines carry its stage, as ``[stage] ...``; warnings read as the main process's do."""

    def __init__(self, stage: str) -> None:
        super().__init__()
        self.stage = stage

    def format(self, record: logging.LogRecord) -> str:
        msg = printable(record.getMessage(), keep="\n")
        if record.levelno >= logging.WARNING:
            return f"crabrec: {record.levelname.lower()}: [{self.stage}] {msg}"
        return tagged(msg, self.stage)
