"""The accuracy–fairness frontier: the selection rule and Pareto sets by hand, and one sweep end to end."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml

from crabrec.frontier import dominates, pareto, plan, select, tag
from tests.conftest import cli
from tests.test_reliability_round2 import one_line_error


def pt(method, setting, v_ndcg, v_dgu, t_hr, t_dgu):
    return {
        "method": method, "label": method.upper(), "setting": setting,
        "valid NDCG@10": v_ndcg, "valid DGU@10": v_dgu, "test HR@10": t_hr, "test DGU@10": t_dgu,
    }  # fmt: skip


POINTS = [
    pt("mor", "base", 0.100, 0.50, 0.050, 0.50),
    pt("crab", "g=0", 0.099, 0.45, 0.049, 0.46),  # within 5%: DGU 0.45
    pt("crab", "g=1", 0.096, 0.30, 0.045, 0.30),  # within 5% (0.096 ≥ 0.095): lowest DGU → picked
    pt("crab", "g=2", 0.090, 0.10, 0.040, 0.10),  # 10% below MOR: not eligible, although fairest
    pt("rr", "a=1", 0.080, 0.20, 0.040, 0.20),  # no rr point within 5% → its best NDCG
    pt("rr", "a=2", 0.070, 0.10, 0.030, 0.25),  # dominated on test by a=1
]


def test_selection_rule_uses_validation_only():
    picked = select(POINTS, 0.05)
    assert picked["crab"]["setting"] == "g=1" and picked["crab"]["within_drop"]
    assert picked["rr"]["setting"] == "a=1" and not picked["rr"]["within_drop"]
    assert select(POINTS, 0.2)["crab"]["setting"] == "g=2"  # a looser budget admits the fairer point
    assert "mor" not in picked


def test_a_method_over_tiger_is_held_to_tigers_validation_ndcg():
    """A point records the model it debiases (``base``): TIGER's reference point sets its methods' NDCG floor, MOR's
    the others'; points written before ``base`` existed count as over MOR."""
    tiger = [
        {**pt("tiger", "base", 0.060, 0.50, 0.030, 0.50), "base": "tiger"},
        {**pt("tiger-ppd", "t=0.5", 0.058, 0.30, 0.029, 0.30), "base": "tiger"},  # ≥ 0.95 × TIGER's: picked
        {**pt("tiger-ppd", "t=1", 0.050, 0.10, 0.025, 0.10), "base": "tiger"},  # below TIGER's floor
    ]
    picked = select(POINTS + tiger, 0.05)
    assert picked["tiger-ppd"]["setting"] == "t=0.5" and picked["tiger-ppd"]["within_drop"]
    assert picked["crab"]["setting"] == "g=1" and not {"mor", "tiger"} & set(picked)  # MOR's floor, as before
    assert select([*POINTS, *({**p, "base": "mor"} for p in tiger[1:])], 0.05)["tiger-ppd"]["within_drop"] is False


def test_pareto_sets_per_method():
    front = pareto(POINTS)
    assert front["crab"] == ["g=0", "g=1", "g=2"]  # each trades HR for DGU
    assert front["rr"] == ["a=1"]
    assert dominates(POINTS[4], POINTS[5], "test") and not dominates(POINTS[5], POINTS[4], "test")
    assert not dominates(POINTS[1], POINTS[1], "test")


def test_further_axes_are_crossed_with_the_knob():
    given = {"": [0, 0.1], "epochs": [1, 3], "levels": [None], "ratio": [0.2], "train.lr": [0.01]}
    ((method, settings),) = plan({"crab": given}, ["crab"])
    assert method.name == "crab" and len(settings) == 4
    assert settings[1] == {"crab.gamma": 0, "crab.levels": None, "crab.ratio": 0.2, "crab.epochs": 3, "train.lr": 0.01}
    assert tag(settings[2]) == "gamma=0.1,levels=all,ratio=0.2,epochs=1,lr=0.01"
    assert tag({"crab.levels": [0, 1], "crab.normalize_lt": True}) == "levels=0+1,normalize_lt=true"
    assert tag({"crab.levels": None, "rr.alpha": None}) == "levels=all,alpha=none"
    ((_, lv),) = plan({"crab": {"": [0], "levels": [None, 0, [0, 1]], "ratio": [0.2]}}, ["crab"])
    assert [s["crab.levels"] for s in lv] == [None, [0], [0, 1]] and lv[0]["crab.ratio"] == 0.2  # a level is a list
    ((_, default),) = plan({"crab": {"epochs": [2]}}, ["crab"])
    own = len(method.grid) * int(np.prod([len(v) for _, v in method.axes]))
    assert len(default) == own and {s["crab.gamma"] for s in default} == set(method.grid)  # the knob keeps its grid


def test_a_methods_own_axes_are_crossed_and_a_given_axis_replaces_them():
    import dataclasses

    from crabrec.methods import get, register, unregister

    twin = dataclasses.replace(get("crab"), name="twin", stages=(), grid=(0.0, 1.0), axes=(("crab.epochs", (1, 2)),))
    register(twin)
    try:
        ((_, own),) = plan(None, ["twin"])
        assert own == [{"crab.gamma": g, "crab.epochs": e} for g in (0.0, 1.0) for e in (1, 2)]
        ((_, given),) = plan({"twin": {"epochs": [3]}}, ["twin"])
        assert given == [{"crab.gamma": 0.0, "crab.epochs": 3}, {"crab.gamma": 1.0, "crab.epochs": 3}]
    finally:
        unregister("twin")


@pytest.mark.parametrize(
    "args, expect",
    [
        (["--grid", "sasrec=1"], "frontier: method 'sasrec' has no knob to sweep"),
        (["--grid", "crab=x"], "--grid 'crab=x': expected comma-separated finite numbers"),
        (["--grid", "crab"], "expected METHOD=V1,V2"),
        (["--grid", "crab:=1"], "expected METHOD=V1,V2,... or METHOD:SETTING=V1,V2"),
        (["--grid", "crab=nan"], "--grid 'crab=nan': expected comma-separated finite numbers"),
        (["--grid", "crab:nope=1"], "frontier: --grid crab:nope: no setting 'crab.nope' in the config"),
        (["--grid", "crab=0", "--grid", "crab:epochs=2,0"], "frontier: gamma=0,levels=all,ratio=0.1,epochs=0: crab"),
        (["--grid", "crab:ratio=2"], "frontier: gamma=0,levels=all,ratio=2: crab.ratio: Input should be less than"),
        (["--grid", "rw=1", "--only", "crab"], "frontier: --grid for rw, which --only crab leaves out"),
        (["--max-drop", "2"], "--max-drop 2.0: expected a share in [0, 1]"),
        (["--only", "mor"], "frontier: method 'mor' has no knob"),
    ],
)
def test_bad_frontier_options_are_one_line(args, expect, tiny_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    one_line_error(capsys, ["frontier", str(run), *args], expect)
    assert not (run / "frontier").exists()


def test_a_frontier_sweep_end_to_end(tiny_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    mor_state = (run / "stages" / "train.json").read_bytes()
    grid = ["--grid", "rr=0,0.5", "--grid", "crab=0", "--grid", "crab:epochs=1,2", "--grid", "crab:levels=all",
            "--grid", "crab:ratio=0.1", "--grid", "rw=1", "--grid", "d2lr=0.5"]  # fmt: skip
    at = "gamma=0,levels=all,ratio=0.1,epochs="
    code, _ = cli(["frontier", str(run), *grid, "--only", "rr,crab,rw,d2lr"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads((run / "frontier" / "frontier.json").read_text())
    points = {(p["method"], p["setting"]): p for p in result["points"]}
    assert set(points) == {
        ("mor", "base"), ("rr", "alpha=0"), ("rr", "alpha=0.5"), ("crab", f"{at}1"), ("crab", f"{at}2"),
        ("rw", "beta=1"), ("d2lr", "alpha=0.5"),
    }  # fmt: skip
    assert (run / "stages" / "train.json").read_bytes() == mor_state  # MOR reused, not retrained
    mor, rr0 = points[("mor", "base")], points[("rr", "alpha=0")]
    for k in ("HR@10", "NDCG@10", "MGU@10", "DGU@10"):
        # α = 0 leaves MOR's beams as they are: two code paths (MOR's validation beam search, RR's curve) agree
        assert rr0[f"valid {k}"] == pytest.approx(mor[f"valid {k}"], abs=1e-12), k
        assert rr0[f"test {k}"] == pytest.approx(mor[f"test {k}"], abs=1e-12), k
    crab = run / "frontier" / "crab"
    crab_cfg = yaml.safe_load((crab / f"{at}2" / "config.yaml").read_text())["crab"]
    assert crab_cfg["gamma"] == 0.0 and crab_cfg["epochs"] == 2
    one, two = (json.loads((crab / f"{at}{e}" / "models" / "crab" / "train_log.json").read_text()) for e in (1, 2))
    assert len(one) == 1 and len(two) == 2 and one[0]["loss"] == pytest.approx(two[0]["loss"])  # same first epoch
    assert set(result["selected"]) == {"rr", "crab", "rw", "d2lr"}
    report = (run / "report.md").read_text()
    assert "Accuracy–fairness frontier" in report
    from crabrec.report import table_rows

    rows = {r["model"]: r for r in table_rows(run)}  # Table 1 shows each swept method at its picked point
    for name, point in result["selected"].items():
        assert rows[name]["setting"] == point["setting"] and rows[name]["HR@10"] == point["test HR@10"]
        assert f"| {point['label']} ({point['setting']}) |" in report
    assert rows["mor"]["setting"] == "" and rows["sasrec"]["setting"] == ""
    assert (run / "frontier" / "frontier.svg").read_text().startswith("<?xml")
    assert "Selection rule" in out.out


def test_run_with_frontier_sweeps_every_default_grid_and_reports_the_picked_points(tiny_run, tmp_path, capfd):
    """`crabrec run --frontier --jobs 2`: the stages (cached here), then every method's default sweep, its points in
    two processes, then the report."""
    from crabrec.frontier import plan

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    code, _ = cli(["run", str(run), "--frontier", "--jobs", "2"])
    err = capfd.readouterr().err
    assert code == 0, err
    assert "points in 2 processes" in err
    result = json.loads((run / "frontier" / "frontier.json").read_text())
    expected = sum(len(settings) for _, settings in plan()) + 2  # and the reference points, MOR's and TIGER's
    assert len(result["points"]) == expected
    bases = {p["method"]: p["base"] for p in result["points"] if p["setting"] == "base"}
    assert bases == {"mor": "mor", "tiger": "tiger"}
    tiger = json.loads((run / "models" / "tiger" / "metrics.json").read_text())
    tiger_point = next(p for p in result["points"] if p["method"] == "tiger")
    assert tiger_point["test HR@10"] == tiger["HR@10"]
    assert (run / "frontier" / "tiger-ppd" / "tau=0.5" / "models" / "tiger").is_symlink()  # linked, not trained again
    assert result["versus"]["tiger-ppd"]["against"] == "tiger-rr" and result["versus"]["ppd"]["against"] == "rr"
    assert "Head to head against TIGER+RR's picked point" in (run / "frontier" / "frontier.md").read_text()
    report = (run / "report.md").read_text()
    assert "Accuracy–fairness frontier" in report and "picked for it on validation" in report


def test_a_frontier_does_not_train_the_methods_the_report_lacks(tiny_run, tmp_path, capsys):
    """On a run without TIGER, `frontier --only rr` sweeps RR and says how to get the report, instead of training
    TIGER for it."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    shutil.rmtree(run / "models" / "tiger")
    for state in (run / "stages").glob("tiger*.json"):
        state.unlink()
    report = (run / "report.md").read_bytes()
    assert cli(["frontier", str(run), "--only", "rr", "--grid", "rr=0,0.5"])[0] == 0
    err = capsys.readouterr().err
    assert "report not refreshed" in err and "tiger" in err and f"crabrec run {run}` runs them" in err
    assert not (run / "models" / "tiger").exists() and not list((run / "stages").glob("tiger*.json"))
    assert json.loads((run / "frontier" / "frontier.json").read_text())["selected"].keys() == {"rr"}
    assert (run / "report.md").read_bytes() == report  # left as it was


def _points(run) -> dict[tuple[str, str], dict]:
    result = json.loads((run / "frontier" / "frontier.json").read_text())
    return {(p["method"], p["setting"]): {k: v for k, v in p.items() if k not in ("cost_s", "run")} for p in
            result["points"]}  # fmt: skip


def test_points_in_workers_equal_points_one_by_one_and_a_second_sweep_keeps_them(tiny_run, tmp_path, capfd):
    """`frontier --jobs 2`: the points computed in two processes of one thread each equal those computed one after the
    other in one process of one thread, bit for bit; each worker's log lines name its point. Sweeping one method
    again keeps the other methods' points."""
    one = ["--grid", "crab:epochs=1", "--grid", "crab:levels=all", "--grid", "crab:ratio=0.1",
           "--set", "train.threads=1"]  # fmt: skip
    grid = ["--grid", "rr=0,0.5", "--grid", "crab=0", *one, "--only", "rr,crab"]
    runs = {}
    for jobs in ("2", "1"):
        runs[jobs] = tmp_path / f"jobs{jobs}"
        shutil.copytree(tiny_run, runs[jobs])
        assert cli(["frontier", str(runs[jobs]), *grid, "--jobs", jobs])[0] == 0
        err = capfd.readouterr().err
        assert ("frontier: 3 points in 2 processes, 1 thread(s) each" in err) == (jobs == "2")
        assert ("[crab gamma=0,levels=all,ratio=0.1,epochs=1] " in err) == (jobs == "2"), err[-2000:]
    par, seq = _points(runs["2"]), _points(runs["1"])
    assert len(par) == 4 and par == seq
    run = runs["1"]
    assert cli(["frontier", str(run), "--grid", "crab=1", *one, "--only", "crab"])[0] == 0
    capfd.readouterr()
    result = json.loads((run / "frontier" / "frontier.json").read_text())
    settings = sorted((p["method"], p["setting"]) for p in result["points"])
    assert settings == [("crab", "gamma=1,levels=all,ratio=0.1,epochs=1"), ("mor", "base"), ("rr", "alpha=0"),
                        ("rr", "alpha=0.5")]  # fmt: skip
    assert set(result["selected"]) == {"rr", "crab"}


def test_a_point_failing_in_a_worker_is_one_line_and_leaves_no_half_made_point(tiny_run, tmp_path, capfd):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    args = ["frontier", str(run), "--grid", "crab=0,1", "--grid", "crab:levels=all", "--grid", "crab:ratio=0.1",
            "--grid", "crab:lr=1e30", "--only", "crab"]  # fmt: skip
    code, _ = cli([*args, "--jobs", "2"])
    err = capfd.readouterr().err
    assert code == 2, err
    assert "crabrec: error: training diverged" in err and "Traceback" not in err
    assert not list((run / "frontier" / "crab").glob("*")) and not (run / "frontier" / "frontier.json").exists()


def test_each_point_is_paired_with_its_control_at_its_other_settings():
    """CRAB's control is crab.ratio=0 (no split) at the point's other settings; crab.levels does not matter there,
    a control is not paired with itself, and a point without a control (or another method's) is left out."""
    from crabrec.frontier import control_pairs

    def point(method: str, setting: str) -> dict:
        return {"method": method, "setting": setting}

    points = [
        point("mor", "base"),
        point("crab", "gamma=0,levels=all,ratio=0"),
        point("crab", "gamma=0,levels=all,ratio=0.1"),
        point("crab", "gamma=0,levels=0,ratio=0.5"),
        point("crab", "gamma=0.2,levels=0,ratio=0"),
        point("crab", "gamma=0.2,levels=all,ratio=0.1"),
        point("crab", "gamma=1,levels=all,ratio=0.1"),  # no control at gamma=1
        point("crab", "gamma=0,epochs=4,levels=all,ratio=0.1"),  # nor at 4 epochs
        point("rr", "alpha=0"),
    ]
    pairs = [(p["setting"], c["setting"]) for p, c in control_pairs(points)]
    assert pairs == [
        ("gamma=0,levels=all,ratio=0.1", "gamma=0,levels=all,ratio=0"),
        ("gamma=0,levels=0,ratio=0.5", "gamma=0,levels=all,ratio=0"),
        ("gamma=0.2,levels=all,ratio=0.1", "gamma=0.2,levels=0,ratio=0"),
    ]


def test_a_frontier_where_links_are_refused_copies_the_shared_artifacts(tiny_run, tmp_path, capsys, monkeypatch):
    """Windows lets only some users make symbolic links: a point then gets copies of the base run's artifacts, and
    the same numbers."""
    import os

    import crabrec.runfiles

    args = ["--only", "rr", "--grid", "rr=0.5", "--jobs", "1"]
    linked, copied = tmp_path / "linked", tmp_path / "copied"
    shutil.copytree(tiny_run, linked)
    shutil.copytree(tiny_run, copied)
    assert cli(["frontier", str(linked), *args])[0] == 0, capsys.readouterr().err
    monkeypatch.setattr(crabrec.runfiles, "LINKS_MAY_BE_REFUSED", True)

    def refuse(*_args, **_kwargs):
        raise OSError(1314, "A required privilege is not held by the client")

    monkeypatch.setattr(os, "symlink", refuse)
    assert cli(["frontier", str(copied), *args])[0] == 0, capsys.readouterr().err
    point = copied / "frontier" / "rr" / "alpha=0.5"
    assert (point / "models" / "mor").is_dir() and not (point / "models" / "mor").is_symlink()
    assert (linked / "frontier" / "rr" / "alpha=0.5" / "models" / "mor").is_symlink()
    picked = [json.loads((r / "frontier" / "frontier.json").read_text())["selected"]["rr"] for r in (linked, copied)]
    numbers = [{k: v for k, v in p.items() if k.startswith(("valid", "test"))} for p in picked]
    assert numbers[0] == numbers[1] and numbers[0]
