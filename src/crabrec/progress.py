"""Progress bars and log verbosity, decided in one place.

A bar is drawn only when stderr is a terminal, the standard ``TQDM_DISABLE`` is unset, and the command was not given
``--quiet``. Off a terminal (a log file, CI) long work reports through the log instead: one line per epoch and per
stage. Third-party bars (Hugging Face, sentence-transformers) follow the same rule.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

T = TypeVar("T")

QUIET, NORMAL, VERBOSE = logging.WARNING, logging.INFO, logging.DEBUG
_level = NORMAL


def set_verbosity(level: int) -> None:
    """The command's verbosity (``QUIET``, ``NORMAL`` or ``VERBOSE``): the crabrec log level, and whether bars show."""
    from crabrec import distributed

    global _level
    if distributed.launched() and not distributed.is_main():  # one process reports: the others only warn
        level = max(level, QUIET)
    _level = level
    logging.getLogger("crabrec").setLevel(level)
    if not bars_enabled():
        _silence_third_party_bars()


def bars_enabled() -> bool:
    """Whether a progress bar may be drawn at all: a terminal on stderr, no ``TQDM_DISABLE``, no ``--quiet``."""
    from crabrec.config import env_flag

    if env_flag("TQDM_DISABLE"):
        return False
    if _level > NORMAL:
        return False
    stream = sys.stderr
    return bool(getattr(stream, "isatty", None)) and stream.isatty()


def progress(iterable: Iterable[T], desc: str, show: bool = True, **kwargs: Any) -> Iterable[T]:
    """``iterable`` with a transient tqdm bar when ``show`` and bars are enabled; the iterable itself otherwise."""
    if not (show and bars_enabled()):
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, leave=False, dynamic_ncols=True, **kwargs)


def _silence_third_party_bars() -> None:
    """Hugging Face's bars (downloads, weight loading) off, for libraries already imported and those to come."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
