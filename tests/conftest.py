"""Shared fixtures: paths to the shared datasets and small hand-written datasets on disk."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CRABREC_SHARED", ROOT.parent / "shared"))
# `crabrec run` trains one stage at a time in the tests (worker processes cost seconds to start, more than the tiny
# models take); tests/test_parallel.py runs the stages side by side
os.environ.setdefault("CRABREC_JOBS", "1")
# tiny models run fastest on one thread; set before torch loads, so that the commands the tests start in subprocesses
# train with the same count as the ones they run in this process (results differ in their last digits otherwise)
os.environ.setdefault("OMP_NUM_THREADS", "1")


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath("datasets", *parts)
    if not path.exists():
        pytest.skip(f"shared dataset not available: {path}")
    return path


@pytest.fixture
def shared():
    return shared_path


def write_lcrec(folder: Path, inter: dict, items: dict, name: str = "Toy") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.inter.json").write_text(json.dumps(inter))
    (folder / f"{name}.item.json").write_text(json.dumps(items))
    return folder


@pytest.fixture
def toy_lcrec(tmp_path: Path) -> Path:
    """6 users over 4 items; every item has >= 2 interactions."""
    inter = {
        "u1": [0, 1, 2, 3],
        "u2": [1, 2, 3],
        "u3": [0, 2],
        "u4": [3, 1, 0],
        "u5": [2, 3, 1],
        "u6": [0, 1],
    }
    items = {str(i): {"title": f"item {i}", "description": f"desc {i}"} for i in range(4)}
    return write_lcrec(tmp_path / "toy", inter, items)


def office_head(folder: Path, users: int, name: str) -> Path:
    """The first ``users`` users of the embedded Office data (and their items) as an LC-Rec folder."""
    from crabrec.data.loaders import embedded_path

    src = embedded_path()
    inter = json.loads((src / "Office.inter.json").read_text())
    items = json.loads((src / "Office.item.json").read_text())
    head = dict(list(inter.items())[:users])
    used = {str(i) for seq in head.values() for i in seq}
    return write_lcrec(folder, head, {k: v for k, v in items.items() if k in used}, name=name)


@pytest.fixture(scope="session")
def office_slice(tmp_path_factory) -> Path:
    """The first 400 users of the embedded Office data (and their items) as an LC-Rec folder."""
    return office_head(tmp_path_factory.mktemp("office_slice"), 400, "OfficeSlice")


@pytest.fixture(scope="session")
def small_office(tmp_path_factory) -> Path:
    """The first 150 users: enough for the plumbing of a whole run at a third of the slice's training time."""
    return office_head(tmp_path_factory.mktemp("small_office"), 150, "OfficeSmall")


TINY = [
    "--set", "embed.encoder=hashing-bow", "--set", "tokenize.codebook_size=16", "--set", "data.kcore=2",
    "--set", "train.hidden=32", "--set", "train.layers=1", "--set", "train.heads=2", "--set", "train.ff=64",
    "--set", "train.epochs=2", "--set", "train.valid_samples=100", "--set", "train.lr=0.003",
    "--set", "crab.epochs=1", "--set", "crab.n_init=3", "--set", "evaluate.max_samples=150",
    "--set", "tiger.d_model=32", "--set", "tiger.layers=1", "--set", "tiger.heads=2", "--set", "tiger.d_kv=16",
    "--set", "tiger.ff=64", "--set", "tiger.epochs=1", "--set", "tiger.user_bins=50",
    "--set", "sasrec.epochs=2", "--set", "sasrec.hidden=16", "--set", "rr.valid_samples=100",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _crabrec_log_handlers():
    """A CLI run in one test logs to that test's captured stderr; the next test starts with the logger's handlers as
    they were before it (a handler left on a closed capture stream would print a logging traceback)."""
    log = logging.getLogger("crabrec")
    handlers, propagate = list(log.handlers), log.propagate
    yield
    log.handlers[:] = handlers
    log.propagate = propagate


def cli(args: list[str]) -> tuple[int, str]:
    """Run the CLI in-process; returns (exit code, stderr is left to capsys)."""
    from crabrec.cli import main

    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0), ""
    return 0, ""


@pytest.fixture(scope="session")
def tiny_run(small_office, tmp_path_factory) -> Path:
    """One full `crabrec run` (every stage, tiny models) on the first 150 Office users, shared by the tests that read
    it."""
    runs = tmp_path_factory.mktemp("runs")
    code, _ = cli(["run", "--data", str(small_office), "--set", f"runs_dir={runs}", "--name", "e2e", *TINY])
    assert code == 0
    return runs / "e2e"


@pytest.fixture(scope="session")
def beauty_slice(tmp_path_factory) -> Path:
    """The first 300 users of the shared Beauty benchmark, ids and imported SIDs only (no item.json)."""
    src = shared_path("amazon14_beauty_ids")
    inter = json.loads((src / "Beauty.inter.json").read_text())
    index = json.loads((src / "Beauty.rqvae_native.index.json").read_text())
    users = dict(list(inter.items())[:300])
    folder = tmp_path_factory.mktemp("beauty_slice")
    (folder / "Beauty.inter.json").write_text(json.dumps(users))
    used = {str(i) for seq in users.values() for i in seq}
    (folder / "index.json").write_text(json.dumps({k: v for k, v in index.items() if k in used}))
    return folder


def ids_only_args(folder: Path, runs: Path) -> list[str]:
    return [
        "--data", str(folder), "--set", f"runs_dir={runs}", "--name", "ids", *TINY,
        "--set", "tokenize.quantizer=import", "--set", f"tokenize.import_path={folder / 'index.json'}",
        "--set", "train.dropout=0.1", "--set", "train.attention_dropout=0.1", "--set", "train.label_smoothing=0.1",
        "--set", "train.schedule=plateau", "--set", "tiger.schedule=inverse_sqrt",
    ]  # fmt: skip


@pytest.fixture(scope="session")
def ids_run(beauty_slice, tmp_path_factory) -> Path:
    """`crabrec run` up to CRAB's evaluation (MOR, TIGER, CRAB) on the ids-only Beauty slice."""
    runs = tmp_path_factory.mktemp("ids_runs")
    for stage in ("evaluate", "tiger-eval", "crab-eval"):
        assert cli(["run", *ids_only_args(beauty_slice, runs), "--until", stage])[0] == 0
    return runs / "ids"
