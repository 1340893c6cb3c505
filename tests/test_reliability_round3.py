"""Reliability, round three: no command destroys or silently changes a user's data, caches follow their input
files, every setting that cannot work is refused up front, and a resumed training equals an uninterrupted one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from crabrec.config import TrainConfig
from tests.conftest import cli


def one_line_error(capsys, args: list[str], expect: str) -> str:
    code, _ = cli(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert expect in err, err
    errors = [line for line in err.splitlines() if line.startswith("crabrec: error:")]
    assert "Traceback" not in err and len(errors) == 1 and expect in errors[0], err
    return errors[0]


def tree(root: Path, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file under ``root`` (links followed) with its bytes, folders in ``skip`` left out."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(str(p.relative_to(root)).startswith(s) for s in skip)
    }


# -- class 2: every random generator is part of the checkpoint ---------------------------------------------------
class Killed(Exception):
    pass


def _train_with_dropout(out: Path, kill_after: int | None = None) -> tuple[list[float], bytes]:
    """Three epochs with dropout; ``kill_after``: stop the process (here: raise) once that epoch's checkpoint is
    written, as a kill between epochs does."""
    from crabrec.models.decoder import N_SPECIAL, build_decoder, encode_rows, item_tokens, target_loss
    from crabrec.train.loop import Rows, train

    rng = np.random.default_rng(0)
    tokens = item_tokens(np.arange(30).reshape(10, 3))
    arch = TrainConfig(hidden=16, layers=1, heads=2, ff=32, dropout=0.3, attention_dropout=0.2)
    model = build_decoder(N_SPECIAL + 30, arch, seed=0)
    hist, length, target = rng.integers(0, 10, (64, 4)), rng.integers(1, 5, 64), rng.integers(0, 10, 64)

    def make(rows):
        ids, mask, labels = encode_rows(hist[rows], length[rows], target[rows], tokens)
        return {"ids": ids, "mask": mask, "labels": labels}

    def loss(m, batch):
        return target_loss(m, batch["ids"], batch["mask"], batch["labels"])

    calls = []

    def validate(m) -> float:
        calls.append(1)
        if kill_after is not None and len(calls) > kill_after:
            raise Killed
        return 0.1 * len(calls)

    cfg = TrainConfig(epochs=3, batch_size=16, patience=9, warmup_steps=0, dropout=0.3)
    result = train(model, Rows(64, make), loss, validate, cfg, out, 7, fingerprint="a")
    weights = (out / "checkpoint" / "weights.safetensors").read_bytes()
    return [h["loss"] for h in result.history], weights


def test_a_resumed_training_with_dropout_is_byte_identical(tmp_path):
    whole_losses, whole = _train_with_dropout(tmp_path / "whole")
    with pytest.raises(Killed):
        _train_with_dropout(tmp_path / "cut", kill_after=1)  # the checkpoint of epoch 1, as a killed run leaves it
    np.random.default_rng().random()  # whatever ran in between must not matter
    import torch

    torch.rand(5)
    resumed_losses, resumed = _train_with_dropout(tmp_path / "cut")
    assert resumed_losses == whole_losses
    assert resumed == whole


# -- class 7: a full disk while a checkpoint is saved ------------------------------------------------------------
def test_a_full_disk_while_saving_a_checkpoint_is_one_error_and_leaves_no_temporary_folder(tmp_path, monkeypatch):
    import torch

    from crabrec.errors import CrabError
    from crabrec.train import loop

    def full(obj, path, *args, **kwargs):  # what torch's writer raises when the disk fills mid-file
        Path(path).write_bytes(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file data/0")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(CrabError, match=r"checkpoint: cannot write \(.*failed writing file.*\); free some space"):
        _train_with_dropout(tmp_path / "out")
    assert not (tmp_path / "out" / "checkpoint.tmp").exists() and not (tmp_path / "out" / "checkpoint").exists()
    monkeypatch.undo()
    _train_with_dropout(tmp_path / "out")  # with space again, the same command trains
    assert (tmp_path / "out" / "checkpoint" / "state.json").is_file()

    def no_space(tmp: Path) -> None:
        raise OSError(28, "No space left on device")

    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "a").write_text("old")
    with pytest.raises(CrabError, match="kept: cannot write \\(No space left on device\\)"):
        loop.write_folder(tmp_path / "kept", no_space)
    assert (tmp_path / "kept" / "a").read_text() == "old" and not (tmp_path / "kept.tmp").exists()


# -- class 1: a frontier point writes only its own folder --------------------------------------------------------
VARIANT_OUTPUTS = ("frontier", "report", "stages/report.json", "config.yaml")  # what a frontier adds to the base run


@pytest.mark.parametrize("setting", ["rr:train.hidden=16", "rr:data.kcore=3"])
def test_a_frontier_point_that_changes_a_shared_stage_retrains_in_its_own_folder(setting, tiny_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = tree(run, VARIANT_OUTPUTS)
    code, _ = cli(["frontier", str(run), "--grid", "rr=0", "--grid", setting, "--only", "rr"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert tree(run, VARIANT_OUTPUTS) == before  # the base run's data, codebook, models and stage keys unchanged
    point = next((run / "frontier" / "rr").iterdir())
    changed = {"rr:train.hidden=16": "models/mor", "rr:data.kcore=3": "data"}[setting]
    assert not (point / changed).is_symlink() and (point / changed).is_dir()  # its own copy, retrained there
    code, _ = cli(["evaluate", str(run)])  # the base run's cache still describes its own model
    assert code == 0 and "[evaluate] cached" in capsys.readouterr().err


def test_a_frontier_with_a_point_that_cannot_work_writes_nothing(tiny_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = tree(run)
    one_line_error(capsys, ["frontier", str(run), "--grid", "rr=0", "--grid", "rr:evaluate.beam=5"], "evaluate.beam")
    assert tree(run) == before and not (run / "frontier").exists()


# -- class 3: destructive options refuse a run or an input -------------------------------------------------------
def test_export_force_never_replaces_a_run_or_a_folder_it_did_not_write(tiny_run, tmp_path, capsys):
    runs = tmp_path / "runs"
    run = runs / "run"
    shutil.copytree(tiny_run, run)
    (runs / "neighbour").mkdir()
    (runs / "neighbour" / "keep.txt").write_text("mine")
    before = tree(runs)
    for target, expect in [
        (run, "which this command reads"),
        (runs, "which this command reads"),
        (run / "data", "not empty and not an earlier MiniOneRec export"),
        (runs / "neighbour", "not empty and not an earlier MiniOneRec export"),
    ]:
        one_line_error(capsys, ["data", "export", str(run), str(target), "--force"], expect)
    assert tree(runs) == before
    other = tmp_path / "other_run"
    shutil.copytree(tiny_run, other)
    one_line_error(capsys, ["data", "export", str(run), str(other), "--force"], "a run directory")
    out = tmp_path / "export"
    assert cli(["data", "export", str(run), str(out)])[0] == 0
    assert cli(["data", "export", str(run), str(out), "--force"])[0] == 0  # an earlier export is replaced
    assert sorted(p.name for p in out.iterdir()) == ["index", "info", "test", "train", "valid"]
    (tmp_path / "link").symlink_to(out, target_is_directory=True)
    one_line_error(capsys, ["data", "export", str(run), str(tmp_path / "link"), "--force"], "a link")


# -- class 4: a stage's cache key follows the content of the files it reads --------------------------------------
def test_the_cache_follows_edits_of_the_dataset_file(office_slice, tmp_path, capsys):
    from tests.conftest import TINY

    data = tmp_path / "data"
    shutil.copytree(office_slice, data)
    args = ["run", "--data", str(data), "--set", f"runs_dir={tmp_path / 'runs'}", "--name", "r", *TINY]
    assert cli([*args, "--until", "data"])[0] == 0
    capsys.readouterr()
    assert cli([*args, "--until", "data"])[0] == 0
    assert "[data] cached" in capsys.readouterr().err  # unchanged file: cached
    inter = data / "OfficeSlice.inter.json"
    users = json.loads(inter.read_text())
    inter.write_text(json.dumps(dict(list(users.items())[:300])))
    assert cli([*args, "--until", "data"])[0] == 0
    err = capsys.readouterr().err
    assert "[data] done" in err and "users=300" not in err and "cached" not in err
    stats = json.loads((tmp_path / "runs" / "r" / "data" / "stats.json").read_text())
    assert stats["users"] <= 300


def test_the_cache_follows_edits_of_an_imported_sid_index(beauty_slice, tmp_path, capsys):
    from tests.conftest import ids_only_args

    data = tmp_path / "beauty"
    shutil.copytree(beauty_slice, data)
    args = ["tokenize", *ids_only_args(data, tmp_path / "runs")]
    assert cli(args)[0] == 0
    saved_path = tmp_path / "runs" / "ids" / "sid" / "index.json"
    index_path = data / "index.json"
    index = json.loads(index_path.read_text())
    first, second = [k for k in index if k in json.loads(saved_path.read_text())][:2]
    index[first], index[second] = index[second], index[first]
    index_path.write_text(json.dumps(index))
    capsys.readouterr()
    assert cli(args)[0] == 0
    assert "[tokenize] done" in capsys.readouterr().err
    assert json.loads(saved_path.read_text())[first][: len(index[first])] == index[first]  # + a dedup level


def test_a_folders_content_hash_leaves_out_hidden_files_and_run_directories(tmp_path):
    from crabrec.io import content_hash

    (tmp_path / "a.json").write_text("1")
    one = content_hash(tmp_path)
    (tmp_path / ".lock").write_text("x")
    (tmp_path / "run" / "stages").mkdir(parents=True)
    (tmp_path / "run" / "config.yaml").write_text("a: 1")
    assert content_hash(tmp_path) == one
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.csv").write_text("2")
    assert content_hash(tmp_path) != one
    assert content_hash(tmp_path / "missing") is None
