"""Every config shipped in configs/ validates (a renamed or retyped setting must not break a documented command)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crabrec.config import load_config

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


def test_there_are_configs():
    assert len(CONFIGS) >= 5


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_validates(path: Path):
    cfg = load_config(str(path))
    assert cfg.name == path.stem.replace("_", "-")  # its run folder is named after the file
