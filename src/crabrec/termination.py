"""A termination signal ends a command the way Ctrl-C does.

``SIGTERM`` (``kill``, a batch scheduler at its time limit, ``docker stop``) and ``SIGHUP`` (the terminal closed)
would otherwise end the process at once, leaving a temporary file behind and no word of what happened. Under
:func:`handle` the first one raises :class:`Terminated` (a ``KeyboardInterrupt``) in the main thread instead: the
work in progress stops, what it was writing is removed, the finished stages are kept, and the command says so. A
second one ends the process at once. A signal the process was started ignoring (``nohup``) stays ignored.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))

_received: list[int] = []
_hooks: list[Callable[[int], None]] = []


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by a termination signal (its number in ``args[0]``)."""

    def __str__(self) -> str:
        return signal.Signals(self.args[0]).name


def handle() -> None:
    """From now on the first termination signal raises :class:`Terminated` (in the main thread; elsewhere, where
    Python allows no signal handler, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in SIGNALS:
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _terminate)


def received() -> int | None:
    """The termination signal this process received (``None``: none)."""
    return _received[0] if _received else None


@contextlib.contextmanager
def on_signal(hook: Callable[[int], None]) -> Iterator[None]:
    """Within the block, a termination signal first calls ``hook(signal number)`` (e.g. to pass it on to worker
    processes)."""
    _hooks.append(hook)
    try:
        yield
    finally:
        _hooks.remove(hook)


def _terminate(signum: int, frame: object) -> None:
    for other in SIGNALS:  # a second signal ends the process at once
        if signal.getsignal(other) is _terminate:
            signal.signal(other, signal.SIG_DFL)
    _received.append(signum)
    for hook in list(_hooks):
        hook(signum)
    raise Terminated(signum)
