"""Several processes on one run (torchrun, 2 CPU processes, gloo) on a small slice of the embedded data:
data-parallel training equals one process, sharded evaluation equals one process byte for byte, a killed process
fails the run and a relaunch resumes from the last checkpoint."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TINY, cli

SMALL = [*TINY, "--set", "train.dropout=0", "--set", "train.attention_dropout=0", "--set", "train.batch_size=32"]


@pytest.fixture(scope="module")
def base(small_office, tmp_path_factory) -> Path:
    """A tokenized run of the Office slice (no model trained yet), copied by each test."""
    runs = tmp_path_factory.mktemp("druns")
    code, _ = cli(["run", "--data", str(small_office), "--set", f"runs_dir={runs}", "--name", "base", *SMALL,
                   "--until", "tokenize"])  # fmt: skip
    assert code == 0
    return runs / "base"


@pytest.fixture(scope="module", autouse=True)
def torchrun_logs(tmp_path_factory):
    """torchrun leaves a log folder per launch in the temporary folder: keep them under pytest's, which it prunes."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(tmp_path_factory.mktemp("tmp")))
        yield


def copy(base: Path, tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(base, tmp_path / name))


def launch(args: list[str], processes: int = 2, **popen) -> subprocess.Popen:
    """``torchrun --standalone --nproc_per_node N -m crabrec ARGS`` (one thread per process, as torchrun sets)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
           "-m", "crabrec", *args]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def single(args: list[str]) -> str:
    out = subprocess.run([sys.executable, "-m", "crabrec", *args], env={**os.environ, "OMP_NUM_THREADS": "1"},
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stderr


def finish(proc: subprocess.Popen, timeout: float = 300) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-3000:]
    return out


@pytest.fixture(scope="module")
def one_process_mor(base, tmp_path_factory) -> Path:
    """The base run with MOR trained by one process of one thread (read by the tests, never written)."""
    one = copy(base, tmp_path_factory.mktemp("one"), "one")
    single(["train", str(one), "--method", "mor"])
    return one


def test_two_processes_train_like_one(base, one_process_mor, tmp_path):
    """2 processes sharing each batch of 32 rows follow the loss trajectory of 1 process on the whole batch."""
    one, two = one_process_mor, copy(base, tmp_path, "two")
    log = finish(launch(["train", str(two), "--method", "mor"]))
    assert "2 processes, MULTI_CPU" in log
    a = json.loads((one / "models/mor/train_log.json").read_text())
    b = json.loads((two / "models/mor/train_log.json").read_text())
    assert len(a) == len(b) == 2
    for x, y in zip(a, b):
        assert y["loss"] == pytest.approx(x["loss"], rel=1e-4)
        assert y["valid_ndcg@10"] == pytest.approx(x["valid_ndcg@10"], abs=2e-3)
    mor = two / "models/mor"
    assert (mor / "model/model.safetensors").is_file() and (mor / "train_summary.json").is_file()
    assert not (mor / "model.next").exists() and not (mor / "model.tmp").exists()  # published once, nothing staged
    assert log.count("[train] done") == 1  # only the main process reports (and writes)


@pytest.mark.parametrize("method", ["mor", "sasrec"])
def test_sharded_evaluation_equals_one_process(base, tmp_path, method, request):
    trained = request.getfixturevalue("one_process_mor") if method == "mor" else base  # MOR's training is shared
    run = copy(trained, tmp_path, f"eval-{method}")
    single(["evaluate", str(run), "--method", method])  # trains it where it is not trained, evaluates in one process
    folder = run / "models" / method
    ranked, metrics = (folder / "rankings.parquet").read_bytes(), json.loads((folder / "metrics.json").read_text())
    finish(launch(["evaluate", str(run), "--method", method, "--force"]))
    assert (folder / "rankings.parquet").read_bytes() == ranked  # every row decoded in the same batch, same order
    sharded = json.loads((folder / "metrics.json").read_text())
    for timing in ("inference_seconds", "users_per_s"):
        metrics.pop(timing), sharded.pop(timing)
    assert sharded == metrics


def test_a_killed_process_fails_the_run_and_a_relaunch_resumes(base, tmp_path):
    run = copy(base, tmp_path, "kill")
    args = ["train", str(run), "--method", "mor", "--set", "train.epochs=5", "--set", "train.patience=5"]
    proc = launch(args, start_new_session=True)
    state = run / "models/mor/checkpoint/state.json"
    end = time.time() + 120
    while time.time() < end and proc.poll() is None:
        try:
            if json.loads(state.read_text())["epoch"] >= 2:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    assert proc.poll() is None, "training finished before a process could be killed"
    children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
    victim = next(int(c) for c in children if b"RANK=1\x00" in Path(f"/proc/{c}/environ").read_bytes())
    os.kill(victim, signal.SIGKILL)
    start = time.time()
    proc.communicate(timeout=60)
    assert proc.returncode != 0 and time.time() - start < 30  # the launcher stops the survivor and fails
    assert not (run / "models/mor/model").exists() and not (run / "stages/train.json").exists()
    done_epochs = json.loads(state.read_text())["epoch"]
    log = finish(launch(args))
    assert f"resuming from {run / 'models/mor/checkpoint'} after epoch {done_epochs}" in log
    assert len(json.loads((run / "models/mor/train_log.json").read_text())) == 5
    assert (run / "models/mor/model/model.safetensors").is_file()
