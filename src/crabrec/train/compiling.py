"""``compile=true``: torch.compile on a model's repeated blocks (a transformer's layers), one block at a time.

A transformer is a stack of blocks of one class. Compiled as one graph, the model is traced and code-generated with
every block in it, and again for each new batch shape: for a 30-layer LLM backbone that is minutes at the start of
training. Compiled block by block, in place (:meth:`torch.nn.Module.compile`), the blocks share one compiled code
(their weights are its inputs), so the first block's compilation serves the others; the embedding, the last norm
and the output layer stay eager (a few operators each). Validation runs the model eagerly (:func:`eager`): beam
search feeds shapes that training never sees.
"""

from __future__ import annotations

import collections
import contextlib
import logging
from collections.abc import Iterator

import torch

log = logging.getLogger("crabrec")

RECOMPILE_LIMIT = 64  # compiled variants of the blocks' shared frame (dynamo's default: 8)


def repeated_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The blocks of every ``ModuleList`` whose members are containers of one class (a transformer's layers), outermost
    first; a list of bare layers (e.g. one output projection per SID level) is not a stack of blocks."""
    found: list[torch.nn.Module] = []

    def walk(module: torch.nn.Module) -> None:
        for child in module.children():
            kinds = {type(m) for m in child} if isinstance(child, torch.nn.ModuleList) else set()
            if len(kinds) == 1 and len(child) and all(next(m.children(), None) is not None for m in child):
                found.extend(child)
            else:
                walk(child)

    walk(model)
    return found


def compile_blocks(model: torch.nn.Module, backend: str) -> list[torch.nn.Module]:
    """Compile ``model``'s repeated blocks in place (the whole model when it has none); the modules compiled."""
    targets = repeated_blocks(model) or [model]
    # every block runs through one Python frame (the module call), and dynamo keeps at most recompile_limit (8)
    # compiled variants per frame: TIGER's first encoder block differs from the others and an encoder block from a
    # decoder block, each compiled for its first shape and again with dynamic lengths and batch sizes; past the limit
    # the frame would run eagerly
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    for module in targets:
        module.compile(backend=backend)
    kinds = collections.Counter(type(m).__name__ for m in targets)
    log.info(
        "compile: %s, compiled with %s at the first step of each new batch shape (those steps take longer)",
        ", ".join(f"{n} × {kind}" for kind, n in kinds.items()),
        backend,
    )
    return targets


@contextlib.contextmanager
def eager(modules: list[torch.nn.Module]) -> Iterator[None]:
    """Run ``modules`` uncompiled inside the block; their compiled code is kept for afterwards."""
    saved = [m._compiled_call_impl for m in modules]
    uncompile(modules)
    try:
        yield
    finally:
        for m, impl in zip(modules, saved):
            m._compiled_call_impl = impl


def uncompile(modules: list[torch.nn.Module]) -> None:
    """Undo :func:`compile_blocks`: the modules run eagerly from now on."""
    for m in modules:
        m._compiled_call_impl = None
