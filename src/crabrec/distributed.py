"""Several processes on one run: data-parallel training and sharded evaluation under ``torchrun`` (or
``accelerate launch`` on GPUs).

A launcher sets ``WORLD_SIZE``/``RANK`` for each process; :func:`setup` then joins the process group (gloo on the
CPU, nccl on GPUs) through ``accelerate``. Without a launcher everything here is the single-process no-op. The rules
the package follows: the main process (rank 0) alone writes run files; a stage that is not distributed runs on the
main process while the others wait for it; training shards every batch and averages gradients; evaluation shards
the test rows by whole decoding batches and gathers them in order, so its files equal a single process's.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import timedelta
from typing import Any, NoReturn

WAIT = timedelta(hours=2)  # how long a process waits in a collective (e.g. for the main process's embedding stage)


def launched() -> bool:
    """Whether a launcher started several processes for this run."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def setup() -> None:
    """Join the launcher's process group (once); quiet the logs of every process but the main one."""
    if not launched():
        return
    import torch
    import torch.distributed as dist
    from accelerate import PartialState

    if not dist.is_initialized():
        PartialState(cpu=not torch.cuda.is_available(), timeout=WAIT)
    if not is_main():
        logging.getLogger("crabrec").setLevel(logging.WARNING)


def teardown() -> None:
    """Leave the process group before the interpreter exits (its threads must not outlive it: that aborts)."""
    group = _group()
    if group:
        group.barrier()  # nobody leaves while another process still talks to it
        group.destroy_process_group()


def finish(code: int) -> NoReturn:
    """End the process with ``code``. Under a launcher, skip the interpreter's shutdown: even after
    :func:`teardown`, gloo and the store keep C++ threads that the exit's static destructors may find still running,
    which aborts the process (SIGABRT instead of ``code``; seen in about one exit in six under a loaded 2-core host).
    Every run file is written and closed by then; the logs and standard streams are flushed here."""
    if launched():
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)
    sys.exit(code)


def _group():
    if not launched():
        return None
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def rank() -> int:
    group = _group()
    return group.get_rank() if group else 0


def size() -> int:
    group = _group()
    return group.get_world_size() if group else 1


def is_main() -> bool:
    return rank() == 0


def barrier() -> None:
    group = _group()
    if group:
        group.barrier()


def gather(value: Any) -> list[Any]:
    """Every process's ``value``, in rank order (on every process)."""
    group = _group()
    if not group:
        return [value]
    out: list[Any] = [None] * group.get_world_size()
    group.all_gather_object(out, value)
    return out


def broadcast(value: Any) -> Any:
    """The main process's ``value``, on every process."""
    group = _group()
    if not group:
        return value
    box = [value]
    group.broadcast_object_list(box, src=0)
    return box[0]
