"""The whole pipeline on a slice of real Office data with a tiny model: data -> ... -> CRAB fine-tune."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crabrec.cli import main
from crabrec.metrics import group_unfairness

TINY = [
    "--set", "embed.encoder=hashing-bow", "--set", "tokenize.codebook_size=16", "--set", "data.kcore=2",
    "--set", "train.hidden=32", "--set", "train.layers=1", "--set", "train.heads=2", "--set", "train.ff=64",
    "--set", "train.epochs=2", "--set", "train.valid_samples=100", "--set", "train.lr=0.003",
    "--set", "crab.epochs=1", "--set", "crab.n_init=3", "--set", "evaluate.max_samples=150",
    "--set", "tiger.d_model=32", "--set", "tiger.layers=1", "--set", "tiger.heads=2", "--set", "tiger.d_kv=16",
    "--set", "tiger.ff=64", "--set", "tiger.epochs=1", "--set", "tiger.user_bins=50",
    "--set", "sasrec.epochs=2", "--set", "sasrec.hidden=16", "--set", "baselines.rr_valid_samples=100",
]  # fmt: skip


def test_run_end_to_end_with_crab(office_slice, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--data", str(office_slice), "--set", f"runs_dir={tmp_path}", "--name", "e2e", *TINY])
    err = capsys.readouterr().err
    assert exc.value.code in (0, None), err
    run = tmp_path / "e2e"
    base = json.loads((run / "models" / "mor" / "metrics.json").read_text())
    crab = json.loads((run / "models" / "crab" / "metrics.json").read_text())
    for m in (base, crab):
        assert 0.0 <= m["HR@10"] <= 1.0 and m["test_rows"] == 150
        assert m["HR@10"] >= m["HR@5"] >= m["HR@1"]
    assert crab["time"]["finetune_seconds"] > 0
    for model in ("tiger", "sasrec", "rw", "rr", "d2lr"):
        m = json.loads((run / "models" / model / "metrics.json").read_text())
        assert m["test_rows"] == 150 and 0.0 <= m["NDCG@10"] <= m["HR@10"] <= 1.0, model
    # RR re-orders the base model's beams: same candidate sets per row
    rr = pd.read_parquet(run / "models" / "rr" / "rankings.parquet")
    mor = pd.read_parquet(run / "models" / "mor" / "rankings.parquet")
    assert all(sorted(a) == sorted(b) for a, b in zip(rr["items"], mor["items"]))
    report = (run / "report.html").read_text()
    for label in ("MOR (base)", "TIGER", "SASRec", "RW", "RR", "D²LR", "CRAB vs MOR"):
        assert label in report
    assert report.count("<svg") == 3
    # MGU/DGU recomputed from rankings.parquet independently of the evaluate code path
    ranks = pd.read_parquet(run / "models" / "mor" / "rankings.parquet")
    items = np.stack(ranks["items"].to_numpy())
    from crabrec.data.dataset import Splits

    test = Splits.load(run / "data" / "splits.npz").test
    group = np.load(run / "data" / "popularity.npz")["group"]
    hist_mass = np.zeros(5)
    for r in range(150):
        for i in test.history[r, : test.length[r]]:
            hist_mass[group[i]] += 1
    slot_mass = np.zeros(5)
    for row in items[:, :10]:
        for i in row[row >= 0]:
            slot_mass[group[i]] += 1
    gu = slot_mass / slot_mass.sum() - hist_mass / hist_mass.sum()
    assert base["MGU@10"] == pytest.approx(np.abs(gu).mean())
    assert base["DGU@10"] == pytest.approx(gu.max() - gu.min())
    same = group_unfairness(items, test.take(np.arange(150)).history_items(), group, 5, (10,))
    assert same["MGU@10"] == pytest.approx(base["MGU@10"])
    # second run: every stage cached
    with pytest.raises(SystemExit):
        main(["run", "--data", str(office_slice), "--set", f"runs_dir={tmp_path}", "--name", "e2e", *TINY])
    err = capsys.readouterr().err
    assert "[finetune] cached" in err and "] done in" not in err
