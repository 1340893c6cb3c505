"""The package's shape: one method registry every command reads, imports that only go down the floors, results that
depend only on their inputs, and ``evaluate --force`` that behaves the same for every method."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from crabrec.methods import Method, methods, register, unregister
from crabrec.methods.common import EVAL_READS, eval_needs
from crabrec.pipeline import RunContext, Stage
from tests.conftest import ROOT, TINY, cli

PACKAGE = ROOT / "src" / "crabrec"
# Each module may import only from its own floor or below.
FLOORS = {
    0: (
        "errors",
        "io",
        "config",
        "config_paths",
        "presets",
        "datasets",
        "distributed",
        "progress",
        "termination",
        "plots",
        "cpus",
    ),
    1: ("data", "sid", "decode", "metrics", "models", "crab", "baselines", "embed"),
    2: ("train", "evaluation", "runfiles", "rankers", "histories", "export", "new_items", "unavailable"),
    3: ("pipeline", "stages", "methods", "report", "report_facts", "parallel"),
    4: (
        "analyses",
        "frontier",
        "seeds",
        "recommender",
        "serve",
        "cli",
        "__main__",
        "docgen",
        "runlist",
        "comparison",
        "runner",
        "frames",
        "process_state",
    ),
}
TOP = 5  # the package root itself: it re-exports the public API (crabrec.load)
# The one import that goes up, lazily: the run config gains each registered method's own settings section.
UPWARD = {"crabrec.config -> crabrec.methods"}
FLOOR_OF = {name: floor for floor, names in FLOORS.items() for name in names}
TIMING = ("inference_seconds", "users_per_s")


def _floor(module: str) -> int:
    return FLOOR_OF[module.split(".")[1]] if "." in module else TOP


def test_imports_only_go_down_the_floors():
    bad = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):  # lazy imports inside functions count too
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("crabrec."):
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("crabrec.")]
            bad += [
                f"{module} -> {n}" for n in names if _floor(n) > _floor(module) and f"{module} -> {n}" not in UPWARD
            ]
    assert not bad, bad


def _mostpop(ctx: RunContext) -> dict:
    """A registered test method: every user gets the most popular items."""
    from crabrec.evaluation import test_rows, write_evaluation

    cfg = ctx.cfg.evaluate
    test = test_rows(ctx.files, cfg)
    top = np.argsort(-ctx.files.load_popularity().freq, kind="stable")[: cfg.beam]
    items = np.tile(top, (len(test), 1))
    return write_evaluation(ctx.files, "mostpop", items, np.zeros(items.shape), test, 0.0, None, cfg, ctx.cfg.seed)


MOSTPOP = Method(
    name="mostpop",
    label="MostPop (test)",
    stages=(
        Stage(
            "mostpop",
            _mostpop,
            reads=EVAL_READS,
            needs=eval_needs("mostpop", ("data",)),
            artifacts=("models/mostpop/metrics.json",),
        ),
    ),
    evaluates="mostpop",
    cost=("mostpop",),
    section="evaluate",
)


@pytest.fixture
def copy_run(tiny_run, tmp_path) -> Path:
    run = tmp_path / "runs" / "copy"
    shutil.copytree(tiny_run, run)
    return run


def test_a_registered_method_shows_up_in_run_report_and_help(copy_run, small_office, capsys):
    register(MOSTPOP)
    try:
        assert cli(["methods"])[0] == 0
        assert "mostpop" in capsys.readouterr().out
        for command in (["evaluate", "--help"], ["run", "--help"]):
            cli(command)
            assert "mostpop" in capsys.readouterr().out.replace("\n", " "), command
        args = ["run", "--data", str(small_office), "--set", f"runs_dir={copy_run.parent}", "--name", "copy", *TINY]
        assert cli(args)[0] == 0
        err = capsys.readouterr().err
        assert "[mostpop] done" in err and "[train] cached" in err and "[report] done" in err
    finally:
        unregister("mostpop")
    assert "MostPop (test)" in (copy_run / "report.md").read_text()
    from crabrec.data.dataset import Splits

    test = Splits.load(copy_run / "data" / "splits.npz").test  # 135 rows: evaluate.max_samples (150) takes all
    freq = np.load(copy_run / "data" / "popularity.npz")["freq"]
    top10 = set(np.argsort(-freq, kind="stable")[:10].tolist())
    hr = np.mean([t in top10 for t in test.target])
    assert json.loads((copy_run / "models" / "mostpop" / "metrics.json").read_text())["HR@10"] == pytest.approx(hr)


def _result(run: Path, method: str) -> tuple[bytes, dict]:
    weights = run / "models" / method / "model" / "model.safetensors"
    metrics = json.loads((run / "models" / method / "metrics.json").read_text())
    return weights.read_bytes(), {k: v for k, v in metrics.items() if k not in TIMING}


def test_each_training_stage_alone_in_a_fresh_process_matches_the_full_run(copy_run):
    trained = [m for m in methods() if m.trains]
    before = {m.name: _result(copy_run, m.name) for m in trained}

    def alone(m) -> tuple[subprocess.CompletedProcess, Path]:  # in its own copy of the run: two at a time
        run = copy_run.parent / f"alone-{m.name}"
        shutil.copytree(copy_run, run)
        cmd = ["finetune", str(run)] if m.name == "crab" else ["train", str(run), "--method", m.name]
        return subprocess.run([sys.executable, "-m", "crabrec", *cmd, "--force"], capture_output=True, text=True), run

    with ThreadPoolExecutor(2) as pool:
        done_all = list(pool.map(alone, trained))
    for m, (done, run) in zip(trained, done_all):
        assert done.returncode == 0, done.stderr[-2000:]
        for stage in (m.trains, m.evaluates):  # each once: a stage is computed at most once per command
            assert done.stderr.count(f"[{stage}] done") == 1, done.stderr[-2000:]
        weights, metrics = _result(run, m.name)
        assert weights == before[m.name][0], f"{m.name}: weights differ from the ones `crabrec run` trained"
        assert metrics == before[m.name][1], m.name


def test_evaluate_force_re_evaluates_only_and_keeps_what_the_method_wrote(copy_run, capsys):
    from crabrec.report import method_seconds
    from crabrec.runfiles import RunFiles

    files = RunFiles(copy_run)
    for m in methods():
        before = _result(copy_run, m.name)[1] if m.trains else None  # untrained methods write no weights
        seconds = method_seconds(files, m)
        assert cli(["evaluate", str(copy_run), "--model", m.name, "--force"])[0] == 0
        err = capsys.readouterr().err
        assert f"[{m.evaluates}] done" in err, m.name
        if m.trains:
            assert f"[{m.trains}] cached" in err and "epoch 1" not in err, m.name
            assert _result(copy_run, m.name)[1] == before, m.name
            assert method_seconds(files, m) == seconds, m.name  # the method's time survives a re-evaluation
    assert cli(["report", str(copy_run)])[0] == 0
    assert "| CRAB |" in (copy_run / "report.md").read_text()


def test_a_method_over_another_model_needs_that_models_evaluation():
    """A method's evaluation compares it with the model it is based on (``Method.base``), from that model's stored
    rankings: so its stage needs the base's evaluation, directly or through its other needs, and runs on a run where
    only the base was trained (``--until``, ``crabrec finetune --method tiger-crab``)."""
    from crabrec.stages import registry

    stages = registry()

    def upstream(name: str) -> set[str]:
        seen: set[str] = set()
        todo = [name]
        while todo:
            for need in stages[todo.pop()].needs:
                if need not in seen:
                    seen.add(need)
                    todo.append(need)
        return seen

    based = [m for m in methods() if m.base != "mor"]
    assert {m.name for m in based} >= {"tiger-rr", "tiger-ppd", "tiger-ppd-rr", "tiger-crab"}
    for m in based:
        base = next(b for b in methods() if b.name == m.base)
        assert base.evaluates in upstream(m.evaluates), m.name


def test_a_method_brings_its_own_settings_section():
    """A method's settings model becomes its config section (validated, in the cache keys' leaf keys); taking a
    section of the toolkit or of another method is refused; unregistered, the section is gone again."""
    from dataclasses import replace

    from pydantic import Field

    from crabrec.config import Strict, leaf_keys, load_config
    from crabrec.errors import CrabError

    class Settings(Strict):
        depth: int = Field(3, ge=1)

    own = replace(MOSTPOP, section="mostpop", settings=Settings)
    register(own)
    try:
        assert load_config(overrides={"mostpop": {"depth": 5}}).mostpop.depth == 5
        assert load_config().mostpop.depth == 3 and "mostpop.depth" in leaf_keys()
        with pytest.raises(CrabError, match="mostpop.depth"):
            load_config(overrides={"mostpop": {"depth": 0}})
        with pytest.raises(CrabError, match="mostpop.width: unknown key"):
            load_config(overrides={"mostpop": {"width": 1}})
        twin = replace(own, name="twin", stages=(replace(own.stages[0], name="twin"),))
        with pytest.raises(ValueError, match="section 'mostpop' is already taken"):
            register(twin)
    finally:
        unregister("mostpop")
    with pytest.raises(ValueError, match="section 'train' is already taken"):
        register(replace(own, section="train"))
    assert "mostpop" not in methods_names() and "mostpop.depth" not in leaf_keys()
    with pytest.raises(CrabError, match="mostpop: unknown key"):
        load_config(overrides={"mostpop": {"depth": 5}})


def methods_names() -> list[str]:
    return [m.name for m in methods()]
