"""``crabrec runs``: every run under a folder with its data and each evaluated method's stored headline metrics."""

from __future__ import annotations

import json
import shutil

from tests.conftest import cli


def test_runs_lists_each_runs_data_and_stored_metrics(tiny_run, tmp_path, capsys):
    runs = tmp_path / "runs"
    shutil.copytree(tiny_run, runs / "a")
    (runs / "b" / "stages").mkdir(parents=True)  # a run whose data stage has not finished
    (runs / "b" / "config.yaml").write_text("data:\n  path: ratings.csv\n")
    (runs / "notes").mkdir()  # not a run
    assert cli(["runs", str(runs)])[0] == 0
    out = capsys.readouterr().out.splitlines()
    stored = json.loads((runs / "a" / "models" / "tiger" / "metrics.json").read_text())
    assert out[0].startswith(f"{runs / 'a'}: ") and ", 135 users, 364 items, updated " in out[0]
    assert out[1].split() == ["method", "HR@10", "NDCG@10", "DGU@10", "MGU@10"]
    assert out[2].split()[0] == "mor"  # Table 1's order
    rows = [line for line in out[1:] if line.startswith("  ") and "no method" not in line]
    ends = {len(line) for line in rows}  # the columns line up, the longest method name (tiger-ppd-rr) included
    assert len(ends) == 1 and any(line.split()[0] == "tiger-ppd-rr" for line in rows), rows
    tiger = next(line.split() for line in out if line.split()[0] == "tiger")
    assert tiger[1:] == [f"{stored[k]:.4f}" for k in ("HR@10", "NDCG@10", "DGU@10", "MGU@10")]
    assert out[-2:] == [f"{runs / 'b'}: ratings.csv, data not loaded", "  no method evaluated yet"]
    assert not any("notes" in line for line in out)
    assert cli(["runs", str(runs / "a"), "--json"])[0] == 0
    (one,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert one["users"] == 135 and one["methods"]["tiger"]["HR@10"] == stored["HR@10"]
    assert cli(["runs", str(tmp_path / "nowhere")])[0] == 2
    assert "nowhere: no such folder" in capsys.readouterr().err


def test_a_damaged_run_shows_what_is_wrong_instead_of_leaving_it_out(tiny_run, tmp_path, capsys):
    """A metrics.json that cannot be read is a row saying so and how to write it again (not a method left out as if
    never evaluated); a config.yaml that cannot be read does not pass for the embedded data."""
    runs = tmp_path / "runs"
    shutil.copytree(tiny_run, runs / "a")
    (runs / "a" / "models" / "tiger" / "metrics.json").write_text('{"HR@10": 0.1')
    (runs / "a" / "config.yaml").write_text("data: [\n")
    assert cli(["runs", str(runs)])[0] == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{runs / 'a'}: data unknown (config.yaml unreadable), 135 users, 364 items")
    tiger = next(line for line in out if line.split()[0] == "tiger")
    assert "metrics.json: unreadable JSON" in tiger
    assert tiger.endswith(f"`crabrec evaluate {runs / 'a'} --method tiger --force` writes it again")
    assert next(line for line in out if line.split()[0] == "mor").split()[1] != "metrics.json:"  # the others read


def test_results_is_table_1_as_a_dataframe(tiny_run, tmp_path):
    """``crabrec.results``: a row per evaluated method in Table 1's order, each stored metric to the last bit, the
    method's cost as the report counts it; a folder that is no run is one line."""
    import pytest

    import crabrec
    from crabrec.errors import CrabError
    from crabrec.methods import methods
    from crabrec.report import method_seconds
    from crabrec.runfiles import RunFiles

    table = crabrec.results(tiny_run)
    files = RunFiles(tiny_run)
    evaluated = [m for m in methods() if files.metrics(m.name).is_file()]
    assert list(table.index) == [m.name for m in evaluated] and len(evaluated) >= 10
    for m in evaluated:
        stored = json.loads(files.metrics(m.name).read_text())
        row = table.loc[m.name]
        assert row["label"] == m.label and row["setting"] == ""
        assert all(row[k] == stored[k] for k in ("HR@1", "NDCG@20", "DGU@10", "MGU@5", "coverage@10", "test_rows"))
        seconds = method_seconds(files, m)
        assert row["train_s"] == seconds or seconds is None and row["train_s"] != row["train_s"]  # None: NaN
    with pytest.raises(CrabError, match="not a run folder"):
        crabrec.results(tmp_path)
