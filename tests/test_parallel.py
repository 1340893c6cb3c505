"""`crabrec run --jobs N`: the independent training stages in worker processes give the run they give one by one."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.conftest import TINY, cli


def _fingerprint(run: Path) -> dict[str, str]:
    """Content hash of every trained model's weights and every method's rankings (not its timings)."""
    files = [p for p in (run / "models").rglob("*") if p.suffix in (".safetensors", ".parquet")]
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(files)
        if "checkpoint" not in p.parts
    }


def test_stages_side_by_side_give_the_sequential_run(office_slice, tmp_path, capfd):
    """Two processes of one thread each train what one process of one thread trains: the same weights and
    rankings, bit for bit; each worker's log lines name its stage."""
    runs = tmp_path / "runs"
    common = ["run", "--data", str(office_slice), "--set", f"runs_dir={runs}", "--set", "train.threads=1", *TINY]
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


def test_a_stage_failing_in_a_worker_is_one_line_and_exit_2(office_slice, tmp_path, capfd):
    """A user error inside a worker (here a learning rate that makes SASRec diverge) ends the command as any user
    error does, after the stages already training have finished; nothing of the failed stage is kept."""
    runs = tmp_path / "runs"
    args = ["run", "--data", str(office_slice), "--set", f"runs_dir={runs}", "--name", "bad", *TINY]
    code, _ = cli([*args, "--set", "sasrec.lr=1e30", "--jobs", "2"])
    err = capfd.readouterr().err
    assert code == 2, err
    assert "crabrec: error: training diverged" in err and "Traceback" not in err
    assert not (runs / "bad" / "stages" / "sasrec.json").exists()
    assert (runs / "bad" / "stages" / "tiger.json").exists()
