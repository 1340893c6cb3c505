"""Reliability: bad input on an existing run (one line, exit 2, artifacts untouched), safe loading, determinism,
and kill -9 at any time then resume to the same metrics."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from crabrec.cli import main
from tests.conftest import ROOT, TINY, write_lcrec


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def cli_err(args: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return int(exc.value.code or 0), capsys.readouterr().err


def at(run: Path) -> list[str]:
    """Flags that point a config-based command at ``run``."""
    return ["--config", str(run / "config.yaml"), "--set", f"runs_dir={run.parent}", "--name", run.name]


# each case: (prepare the copied run, CLI args, expected text)
def rc_missing_run_dir(run: Path):
    return ["evaluate", str(run.parent / "nope")], "nope: no such run folder"


def rc_report_missing_run_dir(run: Path):
    return ["report", str(run.parent / "nope")], "no such run folder"


def rc_model_from_other_codebook(run: Path):
    shutil.rmtree(run / "models" / "crab" / "model")
    shutil.copytree(run / "models" / "mor" / "model", run / "models" / "crab" / "model")
    return ["evaluate", str(run), "--model", "crab", "--force"], "not the file the finetune stage wrote in this run"


def rc_nan_embeddings(run: Path):
    x = np.load(run / "embeddings.npy")
    x[3, 0] = np.nan
    np.save(run / "embeddings.npy", x)
    return ["tokenize", *at(run), "--force"], "embeddings.npy: row 3"


def rc_pickled_embeddings(run: Path):
    np.save(run / "embeddings.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return ["tokenize", *at(run), "--force"], "embeddings.npy: unreadable artifact"


def rc_ks_beyond_the_beam(run: Path):  # (a beam wider than the catalogue is fitted to it: test_reliability_files)
    return ["train", str(run), "--set", "evaluate.beam=5"], "go up to 20 but evaluate.beam=5 ranks fewer items"


def rc_ks_beyond_beam(run: Path):
    return ["train", str(run), "--set", "evaluate.beam=5"], "raise evaluate.beam"


def rc_negative_learning_rate(run: Path):
    return ["train", str(run), "--set", "train.lr=-1"], "train.lr: Input should be greater than 0"


def rc_unknown_method(run: Path):
    return ["train", str(run), "--method", "bert4rec"], "--method 'bert4rec': expected one of"


def rc_unknown_stage(run: Path):
    return ["run", *at(run), "--until", "deploy"], "stage 'deploy': expected one of"


def rc_rr_grid_without_zero(run: Path):
    return ["evaluate", str(run), "--rerank", "rr", "--set", "rr.alphas=[0.1]"], "must be non-negative"


def rc_truncated_codebook(run: Path):
    text = (run / "sid" / "codebook.json").read_text()
    (run / "sid" / "broken.json").write_text(text[: len(text) // 2])
    return ["sid", "stats", *at(run), "--codebook", str(run / "sid" / "broken.json")], "broken.json"


def rc_all_text_empty(run: Path):
    items = {"0": {"title": ""}, "1": {"title": " "}, "2": {"title": "\n"}, "3": {}}
    d = write_lcrec(run.parent / "toy", {"u1": [0, 1, 2, 3], "u2": [3, 2, 1, 0]}, items)
    return ["embed", "--data", str(d), "--set", "data.kcore=0", "--set", f"runs_dir={run.parent}"], (
        "every item's text is empty"
    )


CASES = [v for k, v in sorted(globals().items()) if k.startswith("rc_")]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__[3:] for c in CASES])
def test_bad_input_on_a_run(case, tiny_run, tmp_path, capsys):
    run = tmp_path / "runs" / "copy"
    shutil.copytree(tiny_run, run)
    args, expected = case(run)
    before = snapshot(run)
    code, err = cli_err(args, capsys)
    assert code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("crabrec: error: ")]
    assert len(errors) == 1 and expected in errors[0], err  # progress lines may precede the one error line
    assert "Traceback" not in err and err.strip().splitlines()[-1] == errors[0]
    assert snapshot(run) == before  # nothing written, nothing half-written


class Payload:
    """Unpickling this would create a marker directory (the attack a tampered checkpoint could carry)."""

    marker = ""

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_malicious_pickle_in_checkpoint_is_not_executed(tiny_run, tmp_path, capsys):
    run = tmp_path / "runs" / "copy"
    shutil.copytree(tiny_run, run)
    marker = tmp_path / "pwned"
    Payload.marker = str(marker)
    (run / "models" / "mor" / "checkpoint" / "optim.pt").write_bytes(pickle.dumps(Payload()))
    (run / "stages" / "train.json").unlink()  # unfinished stage: the next `train` resumes from its checkpoint
    code, err = cli_err(["train", str(run)], capsys)
    assert code == 2 and "unusable checkpoint" in err, err
    assert not marker.exists()


def test_same_seed_gives_byte_identical_codebooks(office_slice, tmp_path, capsys):
    for name in ("a", "b"):
        args = ["tokenize", "--data", str(office_slice), "--set", f"runs_dir={tmp_path}", "--name", name, *TINY]
        main_ok(args)
    for f in ("codebook.json", "codebook.codewords.npz", "codebook.residuals.npz", "index.json"):
        assert (tmp_path / "a" / "sid" / f).read_bytes() == (tmp_path / "b" / "sid" / f).read_bytes(), f


def main_ok(args: list[str]) -> None:
    try:
        main(args)
    except SystemExit as exc:
        assert not exc.code, exc.code


def _spawn(args: list[str], log: Path) -> subprocess.Popen:
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "TQDM_DISABLE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "crabrec.cli", *args], stdout=log.open("a"), stderr=subprocess.STDOUT, env=env
    )


def _kill_when(proc: subprocess.Popen, ready, timeout: float = 300) -> bool:
    start = time.time()
    while time.time() - start < timeout:
        if proc.poll() is not None:
            return False
        if ready():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.02)
    proc.kill()
    raise AssertionError("timed out waiting for the kill point")


def test_kill_during_training_and_evaluation_then_resume(small_office, tmp_path):
    flags = [*TINY, "--set", "train.epochs=3", "--set", "train.patience=3", "--set", "evaluate.max_samples=400"]
    flags += ["--set", "train.dropout=0.2", "--set", "train.attention_dropout=0.1"]  # the resumed epochs draw masks too
    flags += ["--set", "evaluate.batch_size=4", "--until", "evaluate"]
    base = ["run", "--data", str(small_office), "--set", f"runs_dir={tmp_path}"]
    log, clean_log = tmp_path / "log.txt", tmp_path / "clean.txt"
    clean = _spawn([*base, "--name", "clean", *flags], clean_log)  # the uninterrupted run, beside the killed one

    run = tmp_path / "killed"
    proc = _spawn([*base, "--name", "killed", *flags], log)
    killed_training = _kill_when(proc, lambda: (run / "models" / "mor" / "checkpoint" / "state.json").exists())
    proc = _spawn([*base, "--name", "killed", *flags], log)
    killed_eval = _kill_when(proc, lambda: (run / "stages" / "train.json").exists())
    assert killed_training and killed_eval, log.read_text()
    assert not (run / "stages" / "evaluate.json").exists()
    for path in run.rglob("*.json"):  # every artifact that exists is complete
        json.loads(path.read_text())
    assert "resuming from" in log.read_text()
    assert _spawn([*base, "--name", "killed", *flags], log).wait() == 0, log.read_text()
    assert clean.wait() == 0, clean_log.read_text()

    def metrics(name: str) -> dict:
        m = json.loads((tmp_path / name / "models" / "mor" / "metrics.json").read_text())
        return {k: v for k, v in m.items() if "seconds" not in k and k != "users_per_s"}

    assert metrics("killed") == metrics("clean")

    def losses(name: str) -> list[float]:  # the resumed epochs too, not only the kept best one
        return [h["loss"] for h in json.loads((tmp_path / name / "models" / "mor" / "train_log.json").read_text())]

    assert losses("killed") == losses("clean") and len(losses("clean")) == 3
    for f in ("models/mor/rankings.parquet", "sid/codebook.json", "models/mor/model/model.safetensors"):
        assert (tmp_path / "killed" / f).read_bytes() == (tmp_path / "clean" / f).read_bytes(), f
