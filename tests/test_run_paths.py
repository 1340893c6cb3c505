"""Relative paths in a run's config are read from the folder the run was made in, whichever folder a later command
starts in: a command on a run never reads (and never replaces the run's results with) files of the same relative
names elsewhere, a project moved as a whole keeps its cached results, and runs saved before the base folder was
recorded keep theirs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from crabrec.config import load_config
from crabrec.config_paths import from_values, saved_base, values_of
from crabrec.pipeline import RunContext
from crabrec.stages import registry
from tests.conftest import cli

DATA_ONLY = ["--until", "data", "--set", "data.kcore=2"]


def project(root: Path, data: Path) -> Path:
    """A project folder holding a copy of the dataset folder ``data`` as ``data/office``."""
    shutil.copytree(data, root / "data" / "office")
    return root


def run_in(folder: Path, args: list[str], monkeypatch, capsys) -> str:
    monkeypatch.chdir(folder)
    code, _ = cli(args)
    err = capsys.readouterr().err
    assert code == 0, err
    return err


def test_a_run_reads_its_own_data_from_any_folder(small_office, office_slice, tmp_path, monkeypatch, capsys):
    """The same relative path names another dataset in another folder: a command started there on the run keeps the
    run's results (cached, byte-identical) and its config file as it was."""
    mine, other = project(tmp_path / "mine", small_office), project(tmp_path / "other", office_slice)
    run_in(mine, ["run", "--data", "data/office", "--name", "r", *DATA_ONLY], monkeypatch, capsys)
    run = mine / "runs" / "r"
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["data"]["path"] == "data/office" and saved["paths_from"] == "../.."
    before = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    err = run_in(other, ["run", str(run), *DATA_ONLY], monkeypatch, capsys)
    assert "[data] cached" in err
    assert {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()} == before
    cfg = load_config(str(run / "config.yaml"), saved=True)  # from the other folder: the run's own file
    assert Path(cfg.data.path).resolve() == (mine / "data" / "office").resolve()
    run_in(other, ["run", str(run), "--force", "data", *DATA_ONLY], monkeypatch, capsys)  # recomputed from there
    data = [p for p in before if "data" in p.relative_to(run).parts[:1]]
    assert {p: p.read_bytes() for p in data} == {p: before[p] for p in data}  # the same artifacts, paths as written
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["data"]["path"] == "data/office" and saved["paths_from"] == "../.."


def test_a_project_moved_as_a_whole_keeps_its_results(small_office, tmp_path, monkeypatch, capsys):
    old = project(tmp_path / "old", small_office)
    run_in(old, ["run", "--data", "data/office", "--name", "r", *DATA_ONLY], monkeypatch, capsys)
    monkeypatch.chdir(tmp_path)
    new = tmp_path / "new"
    shutil.move(old, new)
    err = run_in(tmp_path, ["run", str(new / "runs" / "r"), *DATA_ONLY], monkeypatch, capsys)
    assert "[data] cached" in err


def test_a_run_copied_without_its_data_keeps_its_finished_stages(small_office, tmp_path, monkeypatch, capsys):
    """The run folder alone, copied where its relative data path names nothing: its finished data stage is kept
    (from the content hashes its state recorded), with a warning; a stage that must read the data again (another
    setting, or a state that recorded none) stops with a one-line error that names the setting and its base folder,
    and pointing ``paths_from`` at the data's new folder, as it says, finds the stage cached again."""
    import json

    mine = project(tmp_path / "mine", small_office)
    run_in(mine, ["run", "--data", "data/office", "--name", "r", *DATA_ONLY], monkeypatch, capsys)
    (tmp_path / "copy").mkdir()
    run = tmp_path / "copy" / "r"
    shutil.copytree(mine / "runs" / "r", run)
    shutil.rmtree(mine)
    err = run_in(tmp_path / "copy", ["run", "r", *DATA_ONLY], monkeypatch, capsys)
    assert "[data] cached" in err
    assert "data.path 'data/office':" in err and "the stored results of stage data, made from it, are used" in err
    for args in (["--set", "data.kcore=3"], []):
        if not args:  # a state written before the inputs were recorded
            state = json.loads((run / "stages" / "data.json").read_text())
            del state["inputs"]
            (run / "stages" / "data.json").write_text(json.dumps(state))
        code, _ = cli(["run", "r", *DATA_ONLY, *args])
        err = capsys.readouterr().err
        missing = tmp_path / "data" / "office"  # data/office from the copy's base folder, two levels above the run
        assert code == 2 and f"data.path 'data/office': {missing} not found" in err, err
        assert f"{run / 'config.yaml'} reads its relative paths from {tmp_path}" in err and "set paths_from" in err
        assert "Traceback" not in err and "are used" not in err
    assert (run / "data" / "splits.npz").exists()  # nothing of the run was replaced
    saved = yaml.safe_load((run / "config.yaml").read_text())
    shutil.copytree(small_office, tmp_path / "moved" / "data" / "office")
    (run / "config.yaml").write_text(yaml.safe_dump({**saved, "paths_from": str(tmp_path / "moved")}, sort_keys=False))
    assert "[data] cached" in run_in(tmp_path / "copy", ["run", "r", *DATA_ONLY], monkeypatch, capsys)  # the hint


def test_the_same_relative_path_naming_another_dataset_is_refused(
    small_office, office_slice, tmp_path, monkeypatch, capsys
):
    """``--data`` given in another folder with the run's own relative spelling names another file: refused."""
    mine, other = project(tmp_path / "mine", small_office), project(tmp_path / "other", office_slice)
    run_in(mine, ["run", "--data", "data/office", "--name", "r", *DATA_ONLY], monkeypatch, capsys)
    monkeypatch.chdir(other)
    runs = f"runs_dir={mine / 'runs'}"
    code, _ = cli(["run", "--data", "data/office", "--name", "r", "--set", runs, *DATA_ONLY])
    err = capsys.readouterr().err
    assert code == 2 and f"holds the results of a run on {(mine / 'data' / 'office').resolve()}" in err, err


def test_a_run_saved_without_its_base_folder_still_reads_its_own_files(small_office, tmp_path, monkeypatch, capsys):
    """A run saved before the base folder was recorded: its relative ``runs_dir`` tells where it was made."""
    mine = project(tmp_path / "mine", small_office)
    run_in(mine, ["run", "--data", "data/office", "--name", "r", *DATA_ONLY], monkeypatch, capsys)
    run = mine / "runs" / "r"
    saved = yaml.safe_load((run / "config.yaml").read_text())
    del saved["paths_from"]
    (run / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    (tmp_path / "elsewhere" / "data").mkdir(parents=True)  # a folder without the dataset
    err = run_in(tmp_path / "elsewhere", ["run", str(run), *DATA_ONLY], monkeypatch, capsys)
    assert "[data] cached" in err


@pytest.mark.parametrize(
    ("runs_dir", "run", "base"),
    [
        ("runs", "proj/runs/r", "proj"),
        ("out/runs", "proj/out/runs/r", "proj"),
        (".", "proj/r", "proj"),
        ("../runs", "runs/r", None),  # where `..` came from is unknown: the current folder
    ],
)
def test_the_base_folder_of_a_run_saved_without_one(runs_dir, run, base, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got = saved_base(tmp_path / run, {"name": "r", "runs_dir": runs_dir})
    assert got == str(tmp_path / base if base else tmp_path)


def test_a_frontier_point_saved_without_a_base_folder_uses_its_runs(tmp_path, monkeypatch):
    """A point's ``runs_dir`` is absolute: the run that holds it tells the base folder."""
    run = tmp_path / "proj" / "runs" / "r"
    point = run / "frontier" / "rr" / "alpha=0.1"
    point.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"name": "r", "runs_dir": "runs"}))
    monkeypatch.chdir(tmp_path)
    assert saved_base(point, {"name": "alpha=0.1", "runs_dir": str(point.parent)}) == str(tmp_path / "proj")
    assert saved_base(point, {"paths_from": "../../../../..", "runs_dir": "x"}) == str(tmp_path / "proj")


def test_cache_keys_are_the_same_from_every_folder(small_office, tmp_path, monkeypatch):
    """Paths are joined to the base folder in memory but keyed (and sent to worker processes) as written."""
    mine = project(tmp_path / "mine", small_office)
    monkeypatch.chdir(mine)
    cfg = load_config(None, {"data": {"path": "data/office"}, "runs_dir": "runs", "name": "r"})
    here = RunContext(config=cfg, stages=registry()).key("data")
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    moved = from_values(values_of(cfg))
    assert moved.data.path == os.path.join(mine, "data/office")
    assert values_of(moved)["data"]["path"] == "data/office"
    assert RunContext(config=moved, stages=registry()).key("data") == here
    assert moved.model_copy(update={"name": "s"})._written == moved._written  # a derived config keeps them


def test_setting_another_dataset_on_a_run_is_refused(small_office, office_slice, tmp_path, monkeypatch, capsys):
    """``--set data.path`` on a run directory: another dataset (even a copy of its own, which may change apart from
    it) or the embedded one would replace its results and is refused before any write; its own is fine."""
    mine = project(tmp_path / "mine", small_office)
    run_in(mine, ["run", "--data", "data/office", "--name", "r", *DATA_ONLY], monkeypatch, capsys)
    run = mine / "runs" / "r"
    before = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    shutil.copytree(mine / "data" / "office", tmp_path / "copy")
    for value in (str(office_slice), "null", str(tmp_path / "copy")):
        code, _ = cli(["run", str(run), "--set", f"data.path={value}", *DATA_ONLY])
        err = capsys.readouterr().err
        assert code == 2 and "--set data.path" in err and "would replace them" in err, err
    assert {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()} == before
    run_in(
        tmp_path, ["run", str(run), "--set", f"data.path={mine / 'data' / 'office'}", *DATA_ONLY], monkeypatch, capsys
    )


def test_a_path_from_the_home_folder(small_office, tmp_path, monkeypatch, capsys):
    """``~`` in a config value (which no shell expands) is the home folder; the run's config keeps ``~``."""
    home = project(tmp_path / "home", small_office)
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "work").mkdir()
    run_in(
        tmp_path / "work", ["run", "--set", "data.path=~/data/office", "--name", "r", *DATA_ONLY], monkeypatch, capsys
    )
    saved = yaml.safe_load((tmp_path / "work" / "runs" / "r" / "config.yaml").read_text())
    assert saved["data"]["path"] == "~/data/office"
    cfg = load_config(None, {"data": {"path": "~/data/office", "item_table": "~/items.csv"}})
    assert (cfg.data.path, cfg.data.item_table) == (f"{home}/data/office", f"{home}/items.csv")
    assert values_of(cfg)["data"]["path"] == "~/data/office"
