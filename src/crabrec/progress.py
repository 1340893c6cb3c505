"""Progress bars and log verbosity, decided in one place.

A bar is drawn only when stderr is a terminal, the standard ``TQDM_DISABLE`` is unset, and the command was not given
``--quiet``. Off a terminal (a log file, CI) long work reports through the log instead: one line per epoch and per
stage, and a line a minute inside a loop that runs longer than that (an epoch, an evaluation). Third-party bars
(Hugging Face, sentence-transformers, and plain tqdm bars in libraries, such as transformers' GGUF conversion:
``TQDM_DISABLE`` is set for the process, unless the user set it, before they import tqdm) follow the same rule.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

QUIET, NORMAL, VERBOSE = logging.WARNING, logging.INFO, logging.DEBUG
_level = NORMAL
_set_tqdm_disable = False  # TQDM_DISABLE is ours (set by _silence_third_party_bars), not the user's


def set_verbosity(level: int) -> None:
    """The command's verbosity (``QUIET``, ``NORMAL`` or ``VERBOSE``): the crabrec log level, and whether bars show."""
    from crabrec import distributed

    global _level, _set_tqdm_disable
    if distributed.launched() and not distributed.is_main():  # one process reports: the others only warn
        level = max(level, QUIET)
    _level = level
    logging.getLogger("crabrec").setLevel(level)
    if _set_tqdm_disable:  # an earlier call's: decide afresh
        os.environ.pop("TQDM_DISABLE", None)
        _set_tqdm_disable = False
    if not bars_enabled():
        _silence_third_party_bars()


_stage = ""  # the stage this process is running (the pipeline sets it): the command's lines name it, as a worker's do


@contextmanager
def stage_lines(name: str) -> Iterator[None]:
    """While stage ``name`` runs, the command's log lines start with ``[name]``: two stages run one after the other
    (``crabrec train --method tiger`` trains MOR after TIGER, for its comparison) read as two, as in a worker."""
    global _stage
    before, _stage = _stage, name
    try:
        yield
    finally:
        _stage = before


def tagged(msg: str, stage: str) -> str:
    """``msg`` after ``[stage]``, unless it names that stage already or no stage runs."""
    return msg if not stage or msg.startswith(f"[{stage}]") else f"[{stage}] {msg}"


class CommandFormatter(logging.Formatter):
    """A log line as the command prints it: the message alone, after ``[stage]`` while a stage runs (see
    :func:`stage_lines`), a warning or error as ``crabrec: warning: ...``, and no control character a data file's
    text could hold (:func:`~crabrec.errors.printable`)."""

    def format(self, record: logging.LogRecord) -> str:
        from crabrec.errors import printable

        msg = printable(record.getMessage(), keep="\n")
        if record.levelno >= logging.WARNING:
            return f"crabrec: {record.levelname.lower()}: {msg}"
        return tagged(msg, _stage)


@contextmanager
def shown_as_the_command_shows(quiet: bool = False) -> Iterator[None]:
    """For a call from Python (:func:`crabrec.run`): where the program has set up no logging (no handler on the
    ``crabrec`` logger or the root logger), the stage and epoch lines go to stderr as the command prints them; a
    program that has set up logging keeps its setup. ``quiet``: warnings only, and no bars (the command's
    ``--quiet``). The logger and the bars are as they were afterwards."""
    global _level
    log = logging.getLogger("crabrec")
    before = (_level, log.level, list(log.handlers))
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(CommandFormatter())
        log.addHandler(handler)
        if log.level == logging.NOTSET:
            log.setLevel(NORMAL)
    if quiet:
        _level = QUIET
        log.setLevel(max(log.level, QUIET))
    try:
        yield
    finally:
        _level = before[0]
        log.setLevel(before[1])
        log.handlers[:] = before[2]


def bars_enabled() -> bool:
    """Whether a progress bar may be drawn at all: a terminal on stderr, no ``TQDM_DISABLE``, no ``--quiet``."""
    from crabrec.config import env_flag

    if env_flag("TQDM_DISABLE"):
        return False
    if _level > NORMAL:
        return False
    stream = sys.stderr
    return bool(getattr(stream, "isatty", None)) and stream.isatty()


LOG_EVERY = 60.0  # seconds between the log lines of a long loop off a terminal


def progress(iterable: Iterable[T], desc: str, show: bool = True, **kwargs: Any) -> Iterable[T]:
    """``iterable`` with a transient tqdm bar when ``show`` and bars are enabled. Off a terminal, a loop that runs
    longer than a minute logs where it is once a minute instead (at the normal verbosity); otherwise the iterable
    itself."""
    if not show:
        return iterable
    if not bars_enabled():
        return _Logged(iterable, desc, kwargs.get("initial", 0), kwargs.get("total")) if _level <= NORMAL else iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, leave=False, dynamic_ncols=True, **kwargs)


class _Logged:
    """A loop's progress as log lines, one every ``LOG_EVERY`` seconds: ``epoch 1: 35% (3,880 of 11,084), 5m 12s,
    about 9m 40s left, loss 3.2104``. ``set_postfix`` (tqdm's) adds its values to the next line; as with tqdm,
    ``initial`` items were done before and ``total`` counts them (a loop resumed inside)."""

    def __init__(self, iterable: Iterable[Any], desc: str, initial: int = 0, total: int | None = None) -> None:
        self.iterable, self.desc, self.postfix, self.initial = iterable, desc, "", initial
        if total is None and hasattr(iterable, "__len__"):
            total = initial + len(iterable)  # type: ignore[arg-type]
        self.total = total

    def __len__(self) -> int:
        return len(self.iterable)  # type: ignore[arg-type]

    def set_postfix(self, **values: Any) -> None:
        self.postfix = "".join(f", {k} {v}" for k, v in values.items())

    def __iter__(self):
        import time

        start = last = time.perf_counter()
        for done, item in enumerate(self.iterable):
            now = time.perf_counter()
            if now - last >= LOG_EVERY and done:
                last = now
                logging.getLogger("crabrec").info("%s: %s", self.desc, self.line(done, now - start))
            yield item

    def line(self, done: int, seconds: float) -> str:
        """Where the loop is after ``done`` items in ``seconds`` (this process's)."""
        at = self.initial + done
        if not self.total:
            return f"{at:,} done, {_duration(seconds)}{self.postfix}"
        left = seconds * (self.total - at) / done
        return (
            f"{at / self.total:.0%} ({at:,} of {self.total:,}), {_duration(seconds)}, "
            f"about {_duration(left)} left{self.postfix}"
        )


def _duration(seconds: float) -> str:
    """``45s``, ``5m 12s``, ``2h 03m``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


@contextmanager
def library_bars_off(only_off_terminal: bool = False) -> Iterator[None]:
    """Hugging Face's bars (transformers' weight loading and saving, the Hub's) off for the length of a block, and as
    they were afterwards. ``only_off_terminal``: only where ours are off too (a call from Python, whose process set
    no verbosity: a notebook, a script logging to a file)."""
    if only_off_terminal and bars_enabled():
        yield
        return
    from huggingface_hub import utils as hub
    from transformers.utils import logging as hf_logging

    shown, hub_shown = hf_logging.is_progress_bar_enabled(), not hub.are_progress_bars_disabled()
    hf_logging.disable_progress_bar()
    hub.disable_progress_bars()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()
        if hub_shown:
            hub.enable_progress_bars()


def _silence_third_party_bars() -> None:
    """Hugging Face's bars (downloads, weight loading) off, for libraries already imported and those to come; plain
    tqdm bars off in libraries that import tqdm from now on (tqdm reads ``TQDM_DISABLE`` when it is imported)."""
    global _set_tqdm_disable
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "TQDM_DISABLE" not in os.environ:
        os.environ["TQDM_DISABLE"] = "1"
        _set_tqdm_disable = True
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
