"""`crabrec run --seeds N`: sibling runs with the next seeds share the seed-independent artifacts; mean ± std."""

from __future__ import annotations

import json
import shutil
import statistics

import pytest
import yaml

from crabrec.methods import methods
from tests.conftest import cli
from tests.test_reliability_round2 import one_line_error


def test_seeds_repeat_the_seeded_stages_and_summarize(tiny_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    trained = (run / "stages" / "train.json").read_bytes()
    code, _ = cli(["run", str(run), "--seeds", "2"])
    assert code == 0, capsys.readouterr().err
    base_seed = yaml.safe_load((run / "config.yaml").read_text())["seed"]
    sibling = run / "seeds" / f"seed={base_seed + 1}"
    assert yaml.safe_load((sibling / "config.yaml").read_text())["seed"] == base_seed + 1
    assert (sibling / "data").is_symlink() and (sibling / "embeddings.npy").is_symlink()  # shared, not recomputed
    assert not (sibling / "sid").is_symlink()  # the semantic IDs depend on the seed: redone
    assert (run / "stages" / "train.json").read_bytes() == trained  # the base run is reused as seed 1
    summary = json.loads((run / "seeds" / "seeds.json").read_text())
    assert summary["seeds"] == [base_seed, base_seed + 1]
    for name, m in summary["methods"].items():
        values = [p["HR@10"] for p in m["per_seed"]]
        assert m["HR@10"]["mean"] == pytest.approx(statistics.fmean(values))
        assert m["HR@10"]["std"] == pytest.approx(statistics.stdev(values))
        base = json.loads((run / "models" / name / "metrics.json").read_text())
        assert m["per_seed"][0]["HR@10"] == base["HR@10"]
    assert len(summary["methods"]) == len(methods())
    assert "Across seeds" in (run / "report.md").read_text()


def test_seeds_must_be_positive(capsys):
    one_line_error(capsys, ["run", "--seeds", "0"], "--seeds")


def test_a_stage_gets_the_process_thread_count_back_after_a_command_that_pinned_it():
    """`train.threads` pins torch's threads for one command; the next command in the same process (a test, the API,
    a notebook) without it runs with the process's own count again, so its results do not depend on what ran before."""
    import torch

    from crabrec.config import load_config
    from crabrec.pipeline import start_stage

    start_stage(load_config(), seeded=True)
    own = torch.get_num_threads()
    start_stage(load_config(overrides={"train": {"threads": own + 1}}), seeded=True)
    assert torch.get_num_threads() == own + 1
    start_stage(load_config(), seeded=True)
    assert torch.get_num_threads() == own
