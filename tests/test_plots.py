"""Figures: the same numbers give the same bytes in any process, and the caller's matplotlib is left alone."""

from __future__ import annotations

import matplotlib
import pytest

from crabrec.report import figures

EXPOSURE = {"MOR": [0.1, 0.2, 0.7], "CRAB": [0.2, 0.3, 0.5]}
CURVES = {"a": {"before": [0.5, 0.3, 0.2], "after CRAB": [0.4, 0.35, 0.25]}}
TRAINING = {"MOR": [{"epoch": 1, "loss": 2.5, "valid_ndcg@10": 0.01}, {"epoch": 2, "loss": 2.1}]}


def draw() -> dict[str, str]:
    return figures(EXPOSURE, {}, CURVES, TRAINING)


def test_the_same_numbers_draw_the_same_svg_whatever_was_set_before():
    """No date, the same element ids each time, and crabrec's own style: a caller's rcParams (a larger font, text
    as paths) change neither the figure nor are changed by it."""
    first = draw()
    assert set(first) == {"exposure", "curves", "training"}
    assert all(svg.startswith("<svg") and "<dc:date>" not in svg for svg in first.values())
    with matplotlib.rc_context({"font.size": 20, "svg.fonttype": "path", "svg.hashsalt": None}):
        assert draw() == first
        assert matplotlib.rcParams["font.size"] == 20 and matplotlib.rcParams["svg.fonttype"] == "path"
    assert draw() == first


def test_drawing_chooses_no_backend_and_leaves_no_figure():
    """The caller's backend (here svg, standing for a notebook's inline one) stays chosen, and pyplot holds no
    figure of ours."""
    pyplot = pytest.importorskip("matplotlib.pyplot")
    backend = matplotlib.get_backend()
    pyplot.switch_backend("svg")
    try:
        draw()
        assert matplotlib.get_backend() == "svg" and pyplot.get_fignums() == []
    finally:
        pyplot.switch_backend(backend)


def test_a_report_written_again_has_the_same_figures(tiny_run, tmp_path):
    """``crabrec report`` on a finished run inlines the same figures, byte for byte, each time it is written (the
    report differs only in the time it names as written)."""
    import re
    import shutil

    from tests.conftest import cli

    run = tmp_path / "copy"
    shutil.copytree(tiny_run, run, symlinks=True)
    def written() -> tuple[list[str], str]:
        assert cli(["report", str(run)])[0] == 0
        html = (run / "report.html").read_text()
        return re.findall(r"<svg.*?</svg>", html, re.S), re.sub(r"report written</th><td>[^<]*", "", html)

    first = written()
    assert len(first[0]) >= 3
    assert written() == first


def test_a_backend_matplotlib_refuses_is_one_line(tiny_run, tmp_path):
    """``MPLBACKEND`` naming no backend made ``crabrec report`` a matplotlib traceback; crabrec draws without a
    backend, and says so in one line."""
    import os
    import shutil
    import subprocess
    import sys

    run = tmp_path / "copy"
    shutil.copytree(tiny_run, run, symlinks=True)
    env = {**os.environ, "MPLBACKEND": "nonsense"}
    res = subprocess.run([sys.executable, "-m", "crabrec", "report", str(run)], capture_output=True, text=True,
                         env=env, timeout=300)  # fmt: skip
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert res.stderr.strip().splitlines() == [
        "crabrec: error: MPLBACKEND=nonsense: not a matplotlib backend (crabrec draws without one): unset it, or set "
        "one such as agg"
    ]
