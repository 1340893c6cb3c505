"""Datasets with semantic IDs but no item text (the TIGER Beauty benchmark's layout): load, skip embed, import SIDs,
train, and run CRAB stage 1 on the trained model's token embeddings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from crabrec.crab.rebalance import token_residuals
from tests.conftest import TINY, cli


@pytest.fixture(scope="module")
def beauty_slice(tmp_path_factory) -> Path:
    """The first 300 users of the shared Beauty benchmark, ids and imported SIDs only (no item.json)."""
    from tests.conftest import shared_path

    src = shared_path("amazon14_beauty_ids")
    inter = json.loads((src / "Beauty.inter.json").read_text())
    index = json.loads((src / "Beauty.rqvae_native.index.json").read_text())
    users = dict(list(inter.items())[:300])
    folder = tmp_path_factory.mktemp("beauty_slice")
    (folder / "Beauty.inter.json").write_text(json.dumps(users))
    used = {str(i) for seq in users.values() for i in seq}
    (folder / "index.json").write_text(json.dumps({k: v for k, v in index.items() if k in used}))
    return folder


def ids_only_args(folder: Path, runs: Path) -> list[str]:
    return [
        "--data", str(folder), "--set", f"runs_dir={runs}", "--name", "ids", *TINY,
        "--set", "tokenize.quantizer=import", "--set", f"tokenize.import_path={folder / 'index.json'}",
        "--set", "train.dropout=0.1", "--set", "train.attention_dropout=0.1", "--set", "train.label_smoothing=0.1",
        "--set", "train.schedule=plateau", "--set", "tiger.schedule=inverse_sqrt",
    ]  # fmt: skip


def test_ids_only_run_skips_embed_and_rebalances_on_model_vectors(beauty_slice, tmp_path, capsys):
    runs = tmp_path / "runs"
    args = ids_only_args(beauty_slice, runs)
    for stage in ("evaluate", "tiger-eval", "crab-eval"):
        assert cli(["run", *args, "--until", stage])[0] == 0
    run = runs / "ids"
    assert not (run / "embeddings.npy").exists()
    assert "skipped" in json.loads((run / "stages" / "embed.json").read_text())["summary"]
    assert not (run / "sid" / "codebook.residuals.npz").exists()
    rebalance = json.loads((run / "stages" / "rebalance.json").read_text())["summary"]
    assert rebalance["vectors"].startswith("MOR token embeddings") and rebalance["split"] > 0
    for model in ("mor", "tiger", "crab"):
        m = json.loads((run / "models" / model / "metrics.json").read_text())
        assert 0.0 <= m["NDCG@10"] <= m["HR@10"] <= 1.0
    assert "no item text" in capsys.readouterr().err


def test_ids_only_needs_imported_sids(beauty_slice, tmp_path, capsys):
    args = ["embed", "--data", str(beauty_slice), "--set", f"runs_dir={tmp_path}", *TINY]
    code, _ = cli(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "Traceback" not in "".join(err)
    assert err[-1].startswith("crabrec: error: ") and "has no item text" in err[-1] and "quantizer=import" in err[-1]


def test_token_residuals_follow_the_residual_recursion():
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    tokens = np.array([[0, 2, 4], [1, 3, 5]])
    res = token_residuals(tokens, table)
    assert np.array_equal(res[0][0], table[0] + table[2] + table[4])
    assert np.array_equal(res[1][1], table[3] + table[5])
    assert np.array_equal(res[2][0], table[4])
    for level in range(2):  # residual(l) - codeword(l) = residual(l+1)
        assert np.allclose(res[level] - table[tokens[:, level]], res[level + 1])


def test_report_says_embed_was_skipped_and_what_stage_1_clustered_on(beauty_slice, tmp_path):
    runs = tmp_path / "runs"
    for stage in ("evaluate", "rebalance"):
        assert cli(["run", *ids_only_args(beauty_slice, runs), "--until", stage])[0] == 0
    assert cli(["report", str(runs / "ids")])[0] == 0
    report = (runs / "ids" / "report.md").read_text()
    assert "embed (no item text: embed skipped, semantic IDs imported)" in report
    assert "clustered on: MOR token embeddings (no item text)" in report
