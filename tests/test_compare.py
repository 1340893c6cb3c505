"""`crabrec compare`: two methods' paired-bootstrap comparison from their stored rankings, the same numbers as the
intervals every evaluation stores (against MOR, or against the model a method is built over)."""

from __future__ import annotations

import json
import shutil

import pytest

from crabrec.comparison import compare
from crabrec.metrics import HEADLINE
from tests.conftest import cli
from tests.test_reliability_round2 import one_line_error


def stored(run, method: str) -> dict:
    return json.loads((run / "models" / method / "metrics.json").read_text())


@pytest.mark.parametrize("method,against,key", [("rr", "mor", "vs_mor"), ("tiger-ppd", "tiger", "vs_base")])
def test_it_reproduces_the_intervals_the_evaluation_stored(tiny_run, method, against, key):
    got = compare(tiny_run, method, against)
    want = stored(tiny_run, method)[key]
    for k in HEADLINE:
        assert got[k] == want[k], k  # the same rows, resamples and seed: equal to the last bit
    assert got["bootstrap"]["users"] == want["bootstrap"]["users"]


def test_swapping_the_two_methods_negates_each_difference(tiny_run):
    ab, ba = compare(tiny_run, "sasrec", "crab"), compare(tiny_run, "crab", "sasrec")  # item ids against CRAB's SIDs
    for k in HEADLINE:
        assert ab[k]["delta"] == pytest.approx(-ba[k]["delta"], abs=1e-12)
        assert (ab[k]["value"], ab[k]["base"]) == (ba[k]["base"], ba[k]["value"])
        assert ab[k]["value"] == pytest.approx(stored(tiny_run, "sasrec")[k], abs=1e-12)


def test_the_command_prints_a_table_or_json(tiny_run, capsys):
    args = ["compare", str(tiny_run), "--method", "tiger-ppd-rr", "--against", "tiger-rr", "--samples", "50"]
    assert cli(args)[0] == 0
    out = capsys.readouterr().out
    assert out.startswith("TIGER+PPD+RR (ours) against TIGER+RR:") and "50 resamples" in out
    assert all(f"\n{k} " in out for k in HEADLINE)
    assert cli(["compare", str(tiny_run), "--method", "ppd", "--json"])[0] == 0
    result = json.loads(capsys.readouterr().out)
    assert result["against"] == "mor" and result["bootstrap"]["samples"] == 1000


def test_bad_requests_are_one_line_errors(tiny_run, tmp_path, capsys):
    one_line_error(capsys, ["compare", str(tiny_run), "--method", "zzz"], "--method 'zzz': expected one of")
    one_line_error(capsys, ["compare", str(tiny_run), "--method", "rr", "--against", "rr"], "name two methods")
    one_line_error(capsys, ["compare", str(tmp_path), "--method", "rr"], "not a run folder (no config.yaml)")
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (run / "models" / "rr" / "rankings.parquet").unlink()
    one_line_error(capsys, ["compare", str(run), "--method", "rr"], "rankings.parquet: missing")


def test_the_python_api_gives_the_same_comparison_as_a_table(tiny_run):
    """``crabrec.compare``: the command's numbers, one row per metric, the two methods' values under their names."""
    import crabrec

    table = crabrec.compare(tiny_run, "rr", samples=50)
    got = compare(tiny_run, "rr", "mor", 50)
    assert list(table.index) == list(HEADLINE)
    for k in HEADLINE:
        row = table.loc[k]
        assert (row["mor"], row["rr"], row["delta"]) == (got[k]["base"], got[k]["value"], got[k]["delta"])
        low, high = got[k]["ci"]
        assert (row["low"], row["high"], bool(row["excludes_0"])) == (low, high, not low <= 0 <= high)
    assert table.attrs["bootstrap"]["samples"] == 50 and table.attrs["labels"]["method"] == "RR"


@pytest.mark.parametrize(
    "kwargs, expect",
    [
        ({"method": "zzz"}, "method 'zzz': expected one of"),
        ({"method": "rr", "against": "rr"}, "method and against are both 'rr'; name two methods"),
        ({"method": "rr", "samples": 0}, "samples=0: expected a number of resamples ≥ 1"),
        ({"method": "rr", "run_dir": ["runs"]}, "run_dir: expected a path to a run folder, got list"),
    ],
)
def test_the_python_api_says_what_is_wrong_in_its_own_terms(tiny_run, kwargs, expect):
    import crabrec
    from crabrec.errors import CrabError

    with pytest.raises(CrabError) as err:
        crabrec.compare(**{"run_dir": tiny_run, **kwargs})
    assert expect in str(err.value)
