"""What a call from Python leaves of the caller's process: as it was.

A run seeds Python's, NumPy's and torch's global random generators at the start of every stage, and sets torch's
thread count (``train.threads``), as its results require. Around :func:`crabrec.run` and :func:`crabrec.load`
these are put back afterwards, so a script or notebook that seeded its own work, or set its own threads, draws the
same numbers and runs on the same threads after the call as without it.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np


@contextmanager
def kept() -> Iterator[None]:
    """The global random generators and torch's thread count as they were before the block, after it (also when
    it raises)."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    torch = sys.modules.get("torch")
    torch_state = _torch_state(torch) if torch is not None else None
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        if torch_state is not None:
            _set_torch_state(torch, torch_state)
        elif "torch" in sys.modules:  # imported in the block (seeded at random before): the default thread count
            from crabrec import pipeline

            if pipeline.PROCESS_THREADS is not None:
                sys.modules["torch"].set_num_threads(pipeline.PROCESS_THREADS)


def _torch_state(torch) -> tuple:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return torch.random.get_rng_state(), cuda, torch.get_num_threads()


def _set_torch_state(torch, state: tuple) -> None:
    cpu, cuda, threads = state
    torch.random.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
