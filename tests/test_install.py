"""The install: `make setup` picks the constraints file for its Python, and the Python 3.10 file pins every package
of the main one (many of the main file's releases need Python 3.11: on 3.10 pip could resolve nothing)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def pins(name: str) -> dict[str, str]:
    out = {}
    for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            package, sep, version = line.partition("==")
            assert sep and version.strip(), f"{name}: {line!r} is not a pin"
            out[re.sub(r"[-_.]+", "-", package).lower()] = version
    return out


def test_the_python_310_constraints_pin_every_package_of_the_main_ones():
    main, py310 = pins("constraints.txt"), pins("constraints-py310.txt")
    assert not set(main) - set(py310)
    assert set(py310) - set(main) <= {"exceptiongroup", "pytz", "six", "tomli"}  # what only Python 3.10 needs
    assert main["torch"] == py310["torch"] == "2.13.0"  # the torch every table was measured with, on both


def make_constraints(python: str) -> str:
    text = subprocess.run(
        ["make", "-n", "-B", "setup", f"PYTHON={python}", "VENV=/nonexistent-venv"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    return re.search(r"install -q -c (\S+) -e", text).group(1)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_setup_installs_under_the_constraints_of_its_python():
    assert make_constraints(sys.executable) == (
        "constraints-py310.txt" if sys.version_info[:2] == (3, 10) else "constraints.txt"
    )
    for py310 in [shutil.which("python3.10"), *Path("/root/.pyenv/versions").glob("3.10*/bin/python3.10")]:
        is_310 = "import sys; sys.exit(sys.version_info[:2] != (3, 10))"
        if py310 and subprocess.run([py310, "-c", is_310], capture_output=True).returncode == 0:
            assert make_constraints(str(py310)) == "constraints-py310.txt"
            break
