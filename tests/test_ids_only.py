"""Datasets with semantic IDs but no item text (the TIGER Beauty benchmark's layout): load, skip embed, import SIDs,
train, and run CRAB stage 1 on the trained model's token embeddings."""

from __future__ import annotations

import json

import numpy as np

from crabrec.crab.rebalance import token_residuals
from tests.conftest import TINY, cli


def test_ids_only_run_skips_embed_and_rebalances_on_model_vectors(ids_run):
    run = ids_run
    assert not (run / "embeddings.npy").exists()
    assert "skipped" in json.loads((run / "stages" / "embed.json").read_text())["summary"]
    assert not (run / "sid" / "codebook.residuals.npz").exists()
    rebalance = json.loads((run / "stages" / "rebalance.json").read_text())["summary"]
    assert rebalance["vectors"].startswith("MOR token embeddings") and rebalance["split"] > 0
    for model in ("mor", "tiger", "crab"):
        m = json.loads((run / "models" / model / "metrics.json").read_text())
        assert 0.0 <= m["NDCG@10"] <= m["HR@10"] <= 1.0


def test_ids_only_data_clusters_sasrec_vectors_by_default(beauty_slice, tmp_path, capsys):
    args = ["--data", str(beauty_slice), "--set", f"runs_dir={tmp_path}", *TINY]
    assert cli(["embed", *args])[0] == 0  # nothing to embed: skipped
    capsys.readouterr()
    code, _ = cli(["tokenize", *args])
    err = capsys.readouterr().err
    assert code == 0 and "no item text, so the semantic IDs cluster SASRec's item embeddings" in err
    run = next(p for p in tmp_path.iterdir() if p.is_dir())
    assert json.loads((run / "stages/tokenize.json").read_text())["summary"]["item_vectors"] == "sasrec"


def test_ids_only_data_needs_no_text_encoder(beauty_slice, tmp_path, capsys):
    """Nothing is encoded, so a missing encoder package is no error (a GPU image without it runs Beauty)."""
    args = ["--data", str(beauty_slice), "--set", f"runs_dir={tmp_path}", *TINY, "--set", "embed.encoder=absent-enc"]
    assert cli(["embed", *args])[0] == 0
    run = next(p for p in tmp_path.iterdir() if p.is_dir())
    assert "skipped" in json.loads((run / "stages" / "embed.json").read_text())["summary"]


def test_token_residuals_follow_the_residual_recursion():
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    tokens = np.array([[0, 2, 4], [1, 3, 5]])
    res = token_residuals(tokens, table)
    assert np.array_equal(res[0][0], table[0] + table[2] + table[4])
    assert np.array_equal(res[1][1], table[3] + table[5])
    assert np.array_equal(res[2][0], table[4])
    for level in range(2):  # residual(l) - codeword(l) = residual(l+1)
        assert np.allclose(res[level] - table[tokens[:, level]], res[level + 1])


def test_report_says_embed_was_skipped_and_what_stage_1_clustered_on(ids_run):
    assert cli(["report", str(ids_run)])[0] == 0
    report = (ids_run / "report.md").read_text()
    assert "embed (no item text: embed skipped, semantic IDs imported)" in report
    assert "clustered on: MOR token embeddings (no item text)" in report


def test_sasrec_trained_for_the_sids_is_not_trained_again_side_by_side(beauty_slice, tmp_path, capsys):
    """Ids-only data: SASRec trains first, in the main process, for the item vectors the codebook clusters; the
    training stages then trained side by side did not include it again (it was retrained from scratch)."""
    args = ["--data", str(beauty_slice), "--set", f"runs_dir={tmp_path}", *TINY, "--jobs", "2"]
    code, _ = cli(["run", *args, "--until", "train", "--until", "tiger", "--until", "sasrec"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert err.count("[sasrec] done") == 1 and "re-run forced" not in err, err
    assert "training train, tiger in 2 processes" in err or "training tiger, train in 2 processes" in err, err
