"""The whole pipeline on a slice of real Office data with a tiny model: data -> ... -> CRAB fine-tune."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crabrec.cli import main
from crabrec.metrics import group_unfairness
from tests.conftest import TINY


def test_run_end_to_end_with_crab(tiny_run, small_office, capsys):
    from crabrec.runfiles import RunFiles

    run = tiny_run
    users = len(RunFiles(run).load_splits().test)  # 135 test users: evaluate.max_samples (150) leaves them all
    base = json.loads((run / "models" / "mor" / "metrics.json").read_text())
    crab = json.loads((run / "models" / "crab" / "metrics.json").read_text())
    for m in (base, crab):
        assert 0.0 <= m["HR@10"] <= 1.0 and m["test_rows"] == users
        assert m["HR@10"] >= m["HR@5"] >= m["HR@1"]
    from crabrec.methods import get
    from crabrec.report import method_seconds

    states = [RunFiles(run).load_state(stage) for stage in ("rebalance", "finetune")]
    spent = states[0]["seconds"] + states[1]["summary"]["train_seconds"]  # rebalance's wall-clock, the fine-tune's loop
    assert method_seconds(RunFiles(run), get("crab")) == round(spent, 1)  # (a tiny run's can round to 0.0)
    for model in ("tiger", "sasrec", "rw", "rr", "d2lr"):
        m = json.loads((run / "models" / model / "metrics.json").read_text())
        assert m["test_rows"] == users and 0.0 <= m["NDCG@10"] <= m["HR@10"] <= 1.0, model
    # RR re-orders the base model's beams: same candidate sets per row
    rr = pd.read_parquet(run / "models" / "rr" / "rankings.parquet")
    mor = pd.read_parquet(run / "models" / "mor" / "rankings.parquet")
    assert all(sorted(a) == sorted(b) for a, b in zip(rr["items"], mor["items"]))
    report = (run / "report.html").read_text()
    for label in ("MOR (base)", "TIGER", "SASRec", "RW", "RR", "D²LR", "CRAB vs MOR"):
        assert label in report
    assert report.count("<svg") == 4  # training curves, Figure 1 left and right, token popularity
    # MGU/DGU recomputed from rankings.parquet independently of the evaluate code path
    ranks = pd.read_parquet(run / "models" / "mor" / "rankings.parquet")
    items = np.stack(ranks["items"].to_numpy())
    from crabrec.data.dataset import Splits

    test = Splits.load(run / "data" / "splits.npz").test
    group = np.load(run / "data" / "popularity.npz")["group"]
    hist_mass = np.zeros(5)
    for r in range(users):
        for i in test.history[r, : test.length[r]]:
            hist_mass[group[i]] += 1
    slot_mass = np.zeros(5)
    for row in items[:, :10]:
        for i in row[row >= 0]:
            slot_mass[group[i]] += 1
    gu = slot_mass / slot_mass.sum() - hist_mass / hist_mass.sum()
    assert base["MGU@10"] == pytest.approx(np.abs(gu).mean())
    assert base["DGU@10"] == pytest.approx(gu.max() - gu.min())
    same = group_unfairness(items, test.take(np.arange(users)).history_items(), group, 5, (10,))
    assert same["MGU@10"] == pytest.approx(base["MGU@10"])
    # second run: every stage cached
    with pytest.raises(SystemExit):
        main(["run", "--data", str(small_office), "--set", f"runs_dir={run.parent}", "--name", run.name, *TINY])
    err = capsys.readouterr().err
    assert "[finetune] cached" in err and "] done in" not in err


def test_report_renders_in_headless_chromium(tiny_run, tmp_path):
    """The report opened in a real browser: every table laid out with its rows, every figure drawn at a readable size
    with its shapes, and a full-page screenshot. CI installs Chromium and sets CRABREC_REQUIRE_BROWSER=1, so there the
    test runs instead of being skipped."""
    import json
    import os
    import re
    import shutil
    import subprocess
    import sys

    from tests.conftest import ROOT

    if shutil.which("chromium") is None:
        if os.environ.get("CRABREC_REQUIRE_BROWSER"):
            pytest.fail("CRABREC_REQUIRE_BROWSER is set but chromium is not installed")
        pytest.skip("chromium not installed (apt-get install chromium)")
    run = tmp_path / "copy"
    shutil.copytree(tiny_run, run)
    script = ROOT / "scripts" / "screenshot_report.py"
    done = subprocess.run(
        [sys.executable, str(script), str(run), "--height", "2400", "--check"],
        check=True,
        timeout=300,
        capture_output=True,
        text=True,
    )
    drawn = json.loads(done.stdout.strip().splitlines()[-1])
    html = (run / "report.html").read_text(encoding="utf-8")
    assert drawn["title"].startswith("crabrec report")
    assert len(drawn["tables"]) == html.count("<table") >= 3
    assert all(t["rows"] >= 2 and t["height"] > 20 for t in drawn["tables"]), drawn["tables"]
    assert len(drawn["figures"]) == len(re.findall(r"<svg[ >]", html)) >= 3
    assert all(f["width"] > 200 and f["height"] > 150 and f["shapes"] > 10 for f in drawn["figures"]), drawn["figures"]
    png = (run / "report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000


def test_analyses_reuse_the_base_run(tiny_run, tmp_path, capsys):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(tiny_run, run)
    with pytest.raises(SystemExit) as exc:
        main(["analyze", "lora", str(run)])
    assert exc.value.code in (0, None), capsys.readouterr().err
    err = capsys.readouterr().err
    assert "[train] done" not in err  # the base model is reused, not retrained
    table = pd.read_csv(run / "analysis" / "lora.csv")
    assert table["setting"].tolist() == ["MOR (base)", "LoRA", "full fine-tune"]
    crab = json.loads((run / "models" / "crab" / "metrics.json").read_text())
    lora = table.set_index("setting").loc["LoRA"]
    assert lora["NDCG@10"] == pytest.approx(round(crab["NDCG@10"], 4))  # same config + seed -> same result
    assert (run / "analysis" / "lora.png").stat().st_size > 10_000
    md = (run / "analysis" / "lora.md").read_text()
    split = int(lora["tokens_split"])
    assert f"| {split} |" in md and f"| {split}.0 |" not in md  # a count, not a float (the base row has none)
    with pytest.raises(SystemExit):
        main(["analyze", "tokens", str(run)])
    out = capsys.readouterr().out
    assert "GU pop" in out and (run / "analysis" / "tokens.csv").is_file()
