"""``crabrec.run``: the Python API runs an experiment as ``crabrec run`` does, and ``crabrec.results`` reads it."""

from __future__ import annotations

import json

import pytest
import yaml

import crabrec
from crabrec.errors import CrabError
from tests.conftest import TINY


def tiny_overrides() -> dict:
    """The test suite's tiny settings, as the API takes them: values by dotted key."""
    pairs = [arg.split("=", 1) for arg in TINY if arg != "--set"]
    return {key: yaml.safe_load(value) for key, value in pairs}


def test_the_api_gives_the_commands_results(tiny_run, small_office, tmp_path):
    """The same data and settings through ``crabrec.run`` give MOR's and SASRec's metrics of the command's run to the
    last bit; a second call finds every stage finished; ``run_dir`` resumes a run by its folder."""
    run = crabrec.run(
        data=small_office,
        name="api",
        overrides={**tiny_overrides(), "runs_dir": str(tmp_path)},
        until=["evaluate", "sasrec-eval"],
    )
    assert run == tmp_path / "api"
    for method in ("mor", "sasrec"):
        ours = json.loads((run / "models" / method / "metrics.json").read_text())
        theirs = json.loads((tiny_run / "models" / method / "metrics.json").read_text())
        assert {k: ours[k] for k in ("HR@10", "NDCG@10", "DGU@10")} == {k: theirs[k] for k in ("HR@10", "NDCG@10",
                                                                                             "DGU@10")}  # fmt: skip
    stamps = {p: p.stat().st_mtime_ns for p in (run / "stages").glob("*.json")}
    assert crabrec.run(run, until="evaluate") == run
    assert {p: p.stat().st_mtime_ns for p in (run / "stages").glob("*.json")} == stamps  # nothing recomputed
    assert list(crabrec.results(run).index) == ["mor", "sasrec"]


@pytest.mark.parametrize(
    "kwargs, expect",
    [
        ({"overrides": {"train.epochz": 3}}, "train.epochz"),
        ({"overrides": {"train.epochs": "many"}}, "overrides: train.epochs"),
        ({"overrides": {"": 3}}, "expected a setting's dotted name"),
        ({"seeds": 0}, "seeds=0: expected a number of seeds from 1 to 100"),
        ({"jobs": True}, "jobs=True: expected a number of processes"),
        ({"until": "nope"}, "stage 'nope': expected one of data, embed"),
    ],
)
def test_a_bad_argument_is_a_one_line_error(kwargs, expect, tmp_path):
    overrides = {"runs_dir": str(tmp_path), **kwargs.pop("overrides", {})}
    with pytest.raises(CrabError) as err:
        crabrec.run(overrides=overrides, **kwargs)
    assert expect in str(err.value) and "\n" not in str(err.value)
    assert not any(tmp_path.iterdir())  # nothing written
