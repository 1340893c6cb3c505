"""Methods from outside the package: an installed package's entry point (group ``crabrec.methods``) and a method
registered at run time both reach every process that computes stages, worker processes included."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

import crabrec.methods as registry
from crabrec.errors import CrabError
from crabrec.methods import methods, register, unregister
from crabrec.parallel import worker_pool
from crabrec.pipeline import Stage
from tests.test_design import MOSTPOP


def installed(site, name: str, points: dict[str, str]) -> None:
    """A distribution ``name`` installed into the folder ``site``: its metadata and its entry points."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{k} = {v}\n" for k, v in points.items())
    (info / "entry_points.txt").write_text(f"[{registry.PLUGIN_GROUP}]\n{lines}")


@pytest.fixture
def fresh_registry(monkeypatch):
    """The registry as a new process finds it: loaded again at its first use, then put back as it was."""
    monkeypatch.setattr(registry, "_REGISTRY", {})
    monkeypatch.setattr(registry, "_ADDED", [])
    monkeypatch.setattr(registry, "_LOADED", False)


def names() -> list[str]:
    return [m.name for m in methods()]


def worker_names() -> list[str]:
    """In a worker process: the methods it has."""
    return names()


def test_an_installed_methods_entry_point_registers_it_and_a_broken_one_is_skipped(
    tmp_path, monkeypatch, fresh_registry, caplog
):
    installed(tmp_path, "good-plugin", {"mostpop": "tests.test_design:MOSTPOP"})
    installed(tmp_path, "bad-plugin", {"gone": "no_such_module:METHOD", "odd": "tests.test_plugins:names"})
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="crabrec"):
        found = names()
    assert found[-1] == "mostpop" and found.count("mostpop") == 1 and "gone" not in found
    assert registry.origin("mostpop") == "good-plugin" and registry.origin("mor") is None
    assert "method plugin 'gone' (no_such_module:METHOD, from bad-plugin) cannot be loaded (ModuleNotFoundError" in (
        caplog.text
    )
    assert "method plugin 'odd' (tests.test_plugins:names, from bad-plugin): expected a crabrec.methods.Method" in (
        caplog.text
    )


def test_a_plugin_taking_a_built_in_name_is_skipped_with_a_warning(tmp_path, monkeypatch, fresh_registry, caplog):
    installed(tmp_path, "clash", {"mor": "tests.test_plugins:TWIN_OF_MOR"})
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="crabrec"):
        assert names().count("mor") == 1
    assert "method plugin 'mor' (tests.test_plugins:TWIN_OF_MOR, from clash): method 'mor'" in caplog.text


TWIN_OF_MOR = replace(MOSTPOP, name="mor", stages=(replace(MOSTPOP.stages[0], name="mor-twin"),))


def test_worker_processes_have_the_installed_and_the_registered_methods(tmp_path, monkeypatch, fresh_registry):
    """A worker process (spawned: nothing inherited) finds installed methods itself and gets the ones registered at
    run time from its parent; before this, a registered method's stage or config section was unknown there."""
    installed(tmp_path, "good-plugin", {"mostpop": "tests.test_design:MOSTPOP"})
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "mostpop" in names()
    twin = replace(MOSTPOP, name="mostpop2", stages=(replace(MOSTPOP.stages[0], name="mostpop2"),))
    register(twin)
    with worker_pool(1) as pool:
        assert pool.submit(worker_names).result() == names()
    unregister("mostpop2")
    assert "mostpop2" not in names() and registry._ADDED == []


def test_a_registered_method_that_cannot_reach_a_worker_is_a_one_line_error(fresh_registry):
    local = replace(MOSTPOP, name="local", stages=(Stage("local", lambda ctx: {}, artifacts=("x.json",)),))
    register(local)
    expect = (
        r"^method 'local': registered in this process, but worker processes cannot import it \(.*\); define its "
        r"functions and settings at the top level of a module, or run with --jobs 1$"
    )
    with pytest.raises(CrabError, match=expect), worker_pool(1):
        pass


def test_the_guides_plugins_run_as_written(tmp_path, monkeypatch, fresh_registry, tiny_run, capfd):
    """The extending guide's package, installed from its own text (modules and entry points), joins a finished run:
    its settings sections are validated, its stages compute alone (the rest is cached), the training one in a worker
    process beside SASRec (which finds the plugin itself), and Table 1 shows both."""
    import json
    import re
    import shutil

    from tests.conftest import ROOT, cli

    guide = (ROOT / "docs" / "guides" / "extending.md").read_text()
    section = guide.split("## A method in its own package")[1].split("\n## ")[0]
    points = dict(re.findall(r'^(\w+) = "([\w.:]+)"$', section, re.M))
    assert set(points) == {"toppop", "coarse"}
    for code in re.findall(r"```python\n(.*?)```", section, re.S):
        path = tmp_path / "site" / re.match(r"# (\S+\.py):", code).group(1)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    installed(tmp_path / "site", "my-methods", points)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    run = tmp_path / "runs" / "copy"
    shutil.copytree(tiny_run, run)
    assert cli(["run", str(run), "--set", "toppop.depth=0"])[0] == 2
    assert "toppop.depth: Input should be greater than or equal to 1" in capfd.readouterr().err
    assert cli(["run", str(run), "--jobs", "2", "--force", "sasrec", "--set", "coarse.weight=3"])[0] == 0
    err = capfd.readouterr().err
    assert "training sasrec, coarse in 2 processes" in err
    assert "[toppop] done" in err and "[coarse] done" in err and "[coarse-eval] done" in err
    assert "[train] cached" in err
    assert json.loads((run / "models" / "toppop" / "metrics.json").read_text())["HR@10"] >= 0
    assert json.loads((run / "models" / "coarse" / "metrics.json").read_text())["HR@10"] >= 0
    report = (run / "report.md").read_text()
    assert "| TopPop |" in report and "| MOR, coarse-weighted |" in report


def test_a_runs_section_of_a_plugin_not_installed_here_is_warned_of_and_kept(tmp_path, caplog):
    """A run made with a method plugin opens where the plugin is not installed: its section is left out with a
    warning (not refused as an unknown key), and the run's config.yaml keeps it when a command rewrites the file."""
    import yaml

    from crabrec.config import load_config
    from crabrec.pipeline import write_config

    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    saved = yaml.safe_dump(load_config(overrides={"name": "r"}).model_dump(mode="json")) + "toppop:\n  depth: 3\n"
    (run / "config.yaml").write_text(saved)
    with pytest.raises(CrabError, match="toppop: unknown key"):
        load_config(str(run / "config.yaml"))  # a config file a user wrote: a typo stays an error
    location = {"name": "r", "runs_dir": str(tmp_path / "runs")}
    with caplog.at_level(logging.WARNING, logger="crabrec"):
        cfg = load_config(str(run / "config.yaml"), location, saved=True)
    assert "section 'toppop' belongs to no method installed here" in caplog.text
    write_config(cfg.model_copy(update={"seed": 7}))
    text = yaml.safe_load((run / "config.yaml").read_text())
    assert text["seed"] == 7 and text["toppop"] == {"depth": 3}


def test_asking_for_a_plugins_results_where_it_is_not_installed_says_so(tiny_run, tmp_path):
    import shutil

    import crabrec

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (run / "models" / "ghost").mkdir()
    with pytest.raises(CrabError, match=r"^method 'ghost': this run holds its results \(models/ghost\), but no method "
                       r"of that name is installed here; install the package that provides it"):  # fmt: skip
        crabrec.load(run, "ghost")
    with pytest.raises(CrabError, match=r"^method 'nothing': expected one of mor, "):
        crabrec.load(run, "nothing")
