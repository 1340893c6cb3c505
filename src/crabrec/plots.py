"""Figures drawn without touching the caller's matplotlib, and the same bytes from the same numbers.

A figure is a ``matplotlib.figure.Figure`` outside pyplot: no backend is chosen (a notebook's inline backend stays),
no figure is left in pyplot's list, and the style is set for the figure only (``rc_context``), so the caller's
``rcParams`` stay theirs and a figure does not look different for what was drawn before it in the process. An SVG
carries no date and the same element ids every time. Where matplotlib cannot write its config folder (a user
without a writable home, as in many containers), its notice about that is not shown: it uses a temporary folder.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crabrec.errors import CrabError, clip

STYLE = {"svg.fonttype": "none", "font.size": 9, "svg.hashsalt": "crabrec"}


def _matplotlib() -> Any:
    """matplotlib, imported without its notices about an unwritable config or cache folder."""
    if "matplotlib.figure" not in sys.modules:
        log = logging.getLogger("matplotlib")
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            import matplotlib.figure  # noqa: F401  (reads the config folder, builds the font list)
        except ValueError:  # matplotlib refuses the environment's backend as it is imported
            backend = os.environ.get("MPLBACKEND")
            if backend is None:
                raise
            raise CrabError(
                f"MPLBACKEND={clip(backend)}: not a matplotlib backend (crabrec draws without one): unset it, or "
                "set one such as agg"
            ) from None
        finally:
            log.setLevel(level)
    import matplotlib

    return matplotlib


@contextmanager
def drawing(**figure_kw: Any) -> Iterator[Any]:
    """A new Figure (``figsize=...``) under crabrec's style; save it with :func:`svg` or :func:`png` inside the
    block, where the style holds."""
    matplotlib = _matplotlib()
    from matplotlib.figure import Figure

    with matplotlib.rc_context(STYLE):
        yield Figure(**figure_kw)


def svg(fig: Any, header: bool = False) -> str:
    """``fig`` as SVG text; ``header``: with its ``<?xml ...>`` lines, as a file of its own (otherwise from ``<svg``,
    to inline into HTML)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text if header else text[text.index("<svg") :]


def png(fig: Any, path: Path) -> None:
    """``fig`` as a PNG at ``path`` (a temporary path the caller renames into place)."""
    fig.savefig(path, format="png", dpi=120, bbox_inches="tight")
