"""`crabrec run --jobs N`: the independent training stages in worker processes give the run they give one by one."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TINY, cli


def _fingerprint(run: Path) -> dict[str, str]:
    """Content hash of every trained model's weights and every method's rankings (not its timings)."""
    files = [p for p in (run / "models").rglob("*") if p.suffix in (".safetensors", ".parquet")]
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(files)
        if "checkpoint" not in p.parts
    }


def test_stages_side_by_side_give_the_sequential_run(small_office, tmp_path, capfd):
    """Two processes of one thread each train what one process of one thread trains: the same weights and
    rankings, bit for bit; each worker's log lines name its stage."""
    runs = tmp_path / "runs"
    common = ["run", "--data", str(small_office), "--set", f"runs_dir={runs}", "--set", "train.threads=1", *TINY]
    assert cli([*common, "--name", "par", "--jobs", "2"])[0] == 0
    err = capfd.readouterr().err
    assert "training tiger, train, rw, d2lr, sasrec in 2 processes, 1 thread(s) each" in err
    assert "[tiger] epoch 1:" in err and "[sasrec] done in" in err
    assert cli([*common, "--name", "seq", "--jobs", "1"])[0] == 0
    assert "processes" not in capfd.readouterr().err
    par, seq = _fingerprint(runs / "par"), _fingerprint(runs / "seq")
    assert len(par) >= 10 and par == seq
    state = json.loads((runs / "par" / "stages" / "tiger.json").read_text())
    assert state["key"] == json.loads((runs / "seq" / "stages" / "tiger.json").read_text())["key"]


def test_the_workers_compute_every_stage_after_the_shared_inputs_but_the_report(small_office, tmp_path):
    """Evaluations, RR, CRAB and the decoding-time methods go to the workers as soon as what they need is finished
    (no worker waits for the last training stage); the main process is left with the report alone."""
    from crabrec.config import load_config, parse_overrides
    from crabrec.parallel import INDEPENDENT, followers, run_side_by_side
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    sets = [TINY[i + 1] for i in range(0, len(TINY), 2)] + [f"data.path={small_office}", f"runs_dir={tmp_path}"]
    ctx = RunContext(config=load_config(overrides=parse_overrides(sets)), stages=registry())
    names = list(ctx.stages)
    after = followers(ctx, names, list(INDEPENDENT))
    assert after[0] == "evaluate" and {"rr", "rebalance", "finetune", "crab-eval", "ppd-rr"} <= set(after)
    assert not {"data", "embed", "tokenize", "report", *INDEPENDENT} & set(after)
    ctx.ensure("data")
    run_side_by_side(ctx, names, 2)
    assert [n for n in names if not ctx.is_done(n)] == ["report"]
    assert {*INDEPENDENT, *after} <= ctx._ran  # computed by the workers, and known as computed here


def test_several_targets_run_what_they_need_and_nothing_else(small_office, tmp_path):
    """`--until` repeated: each target and its inputs, in run order, with their training stages side by side."""
    runs = tmp_path / "runs"
    args = ["run", "--data", str(small_office), "--set", f"runs_dir={runs}", "--name", "two", *TINY, "--jobs", "2"]
    assert cli([*args, "--until", "sasrec-eval", "--until", "rr"])[0] == 0
    done = {p.stem for p in (runs / "two" / "stages").glob("*.json")}
    assert done == {"data", "embed", "tokenize", "train", "evaluate", "sasrec", "sasrec-eval", "rr"}


def test_a_stage_failing_in_a_worker_is_one_line_and_exit_2(small_office, tmp_path, capfd):
    """A user error inside a worker (here a learning rate that makes SASRec diverge) ends the command as any user
    error does, after the stages already training have finished; nothing of the failed stage is kept."""
    runs = tmp_path / "runs"
    args = ["run", "--data", str(small_office), "--set", f"runs_dir={runs}", "--name", "bad", *TINY]
    code, _ = cli([*args, "--set", "sasrec.lr=1e30", "--jobs", "2"])
    err = capfd.readouterr().err
    assert code == 2, err
    assert "crabrec: error: training diverged" in err and "Traceback" not in err
    assert not (runs / "bad" / "stages" / "sasrec.json").exists()
    assert (runs / "bad" / "stages" / "tiger.json").exists()


_ORPHAN = """
import os, sys, time
from crabrec.parallel import worker_pool

with worker_pool(1) as pool:
    pid = pool.submit(os.getpid).result()
    pool.submit(time.sleep, 120)  # the worker is busy, as a training stage would be
    print(pid, flush=True)
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """Running (not ended, not a zombie left for a parent that does not reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_worker_ends_when_the_command_that_started_it_is_killed(tmp_path):
    """SIGKILL gives the main process no chance to clean up: its busy worker still ends within seconds, so no
    trainer outlives a killed `crabrec run` and goes on writing into its run."""
    main = subprocess.Popen([sys.executable, "-c", _ORPHAN], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        worker = int(main.stdout.readline())
        assert _alive(worker)
        main.kill()
        main.wait(10)
        deadline = time.monotonic() + 10
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), f"worker {worker} outlived its killed parent"
    finally:
        main.kill()
        if "worker" in locals() and _alive(worker):
            os.kill(worker, signal.SIGKILL)


_WRITERS = """
import sys, time
from pathlib import Path

from crabrec import termination
from crabrec.io import atomic_path
from crabrec.parallel import worker_job, worker_pool


def write_slowly(path):
    with worker_job(), atomic_path(Path(path)) as tmp:
        tmp.write_text("half written")
        time.sleep(120)


if __name__ == "__main__":
    termination.handle()
    with worker_pool(2) as pool:
        futures = [pool.submit(write_slowly, f"out{i}") for i in range(2)]
        time.sleep(0.5)
        print(" ".join(str(pid) for pid in pool._processes), flush=True)
        try:
            time.sleep(120)
        except termination.Terminated as exc:
            print(f"stopping on {exc}", flush=True)
            raise
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_workers_stop_their_jobs_cleanly_when_the_command_is_terminated_or_killed(sig, tmp_path):
    """SIGTERM to the main process is passed on to its workers, whose jobs stop as after Ctrl-C: the files they were
    writing are removed, and the command ends within seconds instead of waiting for them. SIGKILL leaves the main
    process nothing to do: its workers, told by the system, clean up the same way and end."""
    script = tmp_path / "writers.py"
    script.write_text(_WRITERS)
    main = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        workers = [int(pid) for pid in main.stdout.readline().split()]
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob(".out*.tmp"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(tmp_path.glob(".out*.tmp"))) == 2 and len(workers) == 2
        main.send_signal(sig)
        out, _ = main.communicate(timeout=20)
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), "a worker outlived the command"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["writers.py"], "a half-written file was left"
        if sig == signal.SIGTERM:
            assert "stopping on SIGTERM" in out
    finally:
        main.kill()
        for w in locals().get("workers", []):
            if _alive(w):
                os.kill(w, signal.SIGKILL)
