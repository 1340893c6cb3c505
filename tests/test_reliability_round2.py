"""Reliability, round two: each class of defect an outside probe found, checked at its cause."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from crabrec.config import TrainConfig
from crabrec.errors import CrabError
from tests.conftest import TINY, cli, write_lcrec

CLI = [sys.executable, "-m", "crabrec"]


def one_line_error(capsys, args: list[str], expect: str) -> str:
    code, _ = cli(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert err and err[-1].startswith("crabrec: error: ") and expect in err[-1], err
    assert "Traceback" not in "\n".join(err)
    return err[-1]


# -- 1. a stage's outputs change only when it completes -------------------------------------------------------------
def _tiny_training(out: Path, loss_at, fresh: bool = False):
    from crabrec.train.loop import Rows, train

    model = torch.nn.Linear(2, 1)
    x = torch.randn(16, 2, generator=torch.Generator().manual_seed(0))

    def loss_fn(m, batch):
        return loss_at(batch["epoch"], m(x[batch["rows"]]).pow(2).mean())

    epoch = {"now": 0}

    def validate(m) -> float:
        epoch["now"] += 1
        return float(epoch["now"])  # every epoch is a new best

    def make(rows):
        return {"rows": torch.from_numpy(rows), "epoch": epoch["now"] + 1}

    def export(m, path: Path) -> None:
        path.mkdir(parents=True)
        torch.save(m.state_dict(), path / "weights.pt")

    cfg = TrainConfig(epochs=3, batch_size=8, warmup_steps=0, patience=5)
    return train(model, Rows(16, make), loss_fn, validate, cfg, out, seed=0, export=export, fresh=fresh)


def test_an_interrupted_retraining_leaves_the_finished_model_in_place(tmp_path):
    _tiny_training(tmp_path, lambda epoch, loss: loss)
    finished = (tmp_path / "model" / "weights.pt").read_bytes()

    def interrupt(epoch, loss):
        if epoch == 2:
            raise KeyboardInterrupt
        return loss * 3

    with pytest.raises(KeyboardInterrupt):  # a forced retraining, stopped in its second epoch
        _tiny_training(tmp_path, interrupt, fresh=True)
    assert (tmp_path / "model.next" / "weights.pt").is_file()  # its epoch-1 best is staged ...
    assert (tmp_path / "model" / "weights.pt").read_bytes() == finished  # ... and the finished model untouched


def test_a_non_finite_loss_stops_training_and_keeps_the_last_good_checkpoint(tmp_path):
    def diverge(epoch, loss):
        return loss * float("nan") if epoch == 2 else loss

    with pytest.raises(CrabError, match="training diverged in epoch 2: the loss is nan"):
        _tiny_training(tmp_path, diverge)
    state = json.loads((tmp_path / "checkpoint" / "state.json").read_text())
    assert state["epoch"] == 1 and all(np.isfinite(h["loss"]) for h in state["history"])
    assert not (tmp_path / "model").exists()  # nothing published by an unfinished training


# -- 2/6/10/11. values are checked when the config is read ---------------------------------------------------------
@pytest.mark.parametrize(
    "override, expect",
    [
        ("train.lr=.inf", "train.lr: Input should be a finite number"),
        ("crab.gamma=.nan", "crab.gamma: Input should be a finite number"),
        ("seed=-1", "seed: Input should be greater than or equal to 0"),
        ("seed=12345678901234567890123", "seed: Input should be less than"),
        ("train.threads=99999999999", "train.threads: Input should be less than or equal to 4096"),
        ("evaluate.ks=[0,10]", "evaluate.ks.0: Input should be greater than 0"),
        ("evaluate.ks=[1,5]", "evaluate.ks: must include 10"),
        ("crab.ratio=-0.1", "crab.ratio: Input should be greater than or equal to 0"),
        ("crab.ratio=.nan", "crab.ratio: Input should be a finite number"),
        ("name=../x", "name: must be a plain folder name"),
        ("name=", "name: Input should be a valid string"),
        ("train.epochs=yes", "train.epochs: Input should be a valid integer, unable to parse string as an integer"),
        ("data.repeats=no", "data.repeats: Input should be 'keep', 'collapse' or 'first' (got 'no')"),  # not False
        ("data.keep_rows={event: {a: 1}}", "--set: data.keep_rows.event.0: Input should be a valid string"),
        ("ppd.tau=false", "ppd.tau: expected a number, not true/false"),
        ("crab.ratio=true", "crab.ratio: expected a number, not true/false"),  # a number or a list
        ("evaluate.ks=[true,10]", "evaluate.ks: expected a list of numbers, not true/false"),
    ],
)
def test_out_of_range_values_fail_before_any_work(override, expect, tmp_path, capsys):
    one_line_error(capsys, ["run", "--set", f"runs_dir={tmp_path}", "--set", override], expect)
    assert not any(tmp_path.iterdir())  # nothing written


def test_yes_no_on_off_are_words_that_a_yes_no_setting_reads(tmp_path):
    """YAML 1.1 made ``yes``/``no``/``on``/``off`` booleans: a word setting given one said ``(got False)``. They are
    now the words typed, which yes/no settings read as true and false, in ``--set`` and in config files alike."""
    from crabrec.config import load_config, parse_overrides

    assert parse_overrides(["data.repeats=no", "a=on", "b=true", "c=False"]) == {
        "data": {"repeats": "no"}, "a": "on", "b": True, "c": False
    }  # fmt: skip
    for word, flag in (("yes", True), ("on", True), ("no", False), ("off", False), ("true", True)):
        assert load_config(overrides=parse_overrides([f"train.compile={word}"])).train.compile is flag
        (tmp_path / "c.yaml").write_text(f"train:\n  compile: {word}\n")
        assert load_config(str(tmp_path / "c.yaml")).train.compile is flag


def test_a_text_setting_takes_the_text_as_typed(tmp_path):
    """``--set embed.template={title}`` (YAML: a mapping), ``--set name=2024`` or ``data.user_col=123`` (numbers)
    were 'Input should be a valid string'. A setting that takes text takes what was typed (``007`` stays ``007``);
    in a config file, a number there is its text."""
    from crabrec.config import load_config, parse_overrides

    typed = parse_overrides(["embed.template={title}", "name=007", "data.user_col=123", "data.time_col=null"])
    assert typed == {"embed": {"template": "{title}"}, "name": "007", "data": {"user_col": "123", "time_col": None}}
    cfg = load_config(overrides=typed)
    assert (cfg.embed.template, cfg.name, cfg.data.user_col, cfg.data.time_col) == ("{title}", "007", "123", None)
    assert parse_overrides(["train.lr=0.1", "data.kcore=3"]) == {"train": {"lr": 0.1}, "data": {"kcore": 3}}
    (tmp_path / "c.yaml").write_text("name: 2024\ndata:\n  user_col: 7\n")
    cfg = load_config(str(tmp_path / "c.yaml"))
    assert (cfg.name, cfg.data.user_col) == ("2024", "7")


def test_errors_never_echo_a_huge_value(tmp_path, capsys):
    one_line_error(capsys, ["run", "--set", f"runs_dir={tmp_path}", "--set", "seed=" + "9" * 50_000], "seed")
    assert len(capsys.readouterr().err) < 3000


# -- 4. a command given an existing run reuses its saved config -----------------------------------------------------
def test_name_of_an_existing_run_reuses_its_config(tiny_run, tmp_path, capsys):
    run = tmp_path / "copy"
    shutil.copytree(tiny_run, run)
    saved = (run / "config.yaml").read_bytes()
    code, _ = cli(["tokenize", "--set", f"runs_dir={tmp_path}", "--name", "copy"])
    err = capsys.readouterr().err
    assert code == 0 and "[tokenize] cached" in err and "[data] cached" in err, err
    assert (run / "config.yaml").read_bytes() == saved


# -- 5. the minionerec layout reads every CSV of a split -------------------------------------------------------------
def test_minionerec_reads_every_csv_of_a_split(shared, tmp_path):
    from crabrec.config import DataConfig
    from crabrec.data import load_dataset

    src = shared("minionerec_amazon18")
    one = tmp_path / "one"
    shutil.copytree(src, one)
    (one / "train").mkdir()
    valid = sorted((one / "valid").glob("*.csv"))[0]
    shutil.copy(valid, one / "train" / "all.csv")
    two = tmp_path / "two"
    shutil.copytree(one, two)
    frame = pd.read_csv(two / "train" / "all.csv", dtype=str, keep_default_na=False)
    (two / "train" / "all.csv").unlink()
    half = len(frame) // 2
    frame.iloc[:half].to_csv(two / "train" / "a.csv", index=False)
    frame.iloc[half:].to_csv(two / "train" / "b.csv", index=False)
    a, b = (load_dataset(DataConfig(path=str(p))) for p in (one, two))
    assert len(a.given["train"][0]) == len(b.given["train"][0]) == len(frame)
    assert a.given["train"] == b.given["train"]


# -- 12/16. the run directory: checked before work, one process at a time ------------------------------------------
def test_a_run_directory_that_is_a_file_fails_before_work(tmp_path, capsys):
    (tmp_path / "taken").write_text("not a run")
    one_line_error(capsys, ["run", "--set", f"runs_dir={tmp_path}", "--name", "taken"], "is not a directory")


@pytest.mark.parametrize(
    "files",
    [{"notes.txt": "mine"}, {"config.yaml": "app: {port: 1}\n"}, {"config.yaml": "name: x\n", "data/a.csv": "u"}],
)
def test_a_run_is_never_written_into_a_folder_of_other_files(files, small_office, tmp_path, capsys):
    """`--name` naming a project folder by mistake: its files (a config.yaml of its own too) stay as they were."""
    folder = tmp_path / "mine"
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    args = ["run", "--data", str(small_office), "--set", f"runs_dir={tmp_path}", "--name", "mine", "--until", "data"]
    one_line_error(capsys, args, f"{folder}: exists and is not a crabrec run (it holds {min(files).split('/')[0]}")
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before


def test_a_run_resumes_in_its_own_folder_before_and_after_its_first_stage(small_office, tmp_path, capsys):
    """An empty folder made beforehand, and what a killed first stage leaves (its temporary folder), are a run's."""
    args = ["run", "--data", str(small_office), "--set", f"runs_dir={tmp_path}", "--until", "data", *TINY]
    (tmp_path / "empty").mkdir()
    (tmp_path / "killed" / "data.tmp").mkdir(parents=True)
    for name in ("empty", "killed"):
        assert cli([*args, "--name", name])[0] == 0, capsys.readouterr().err
    (tmp_path / "killed" / "notes.txt").write_text("a note beside a run is the user's business")
    assert cli([*args, "--name", "killed", "--force", "data"])[0] == 0, capsys.readouterr().err
    assert (tmp_path / "killed" / "notes.txt").exists()


def test_a_second_process_on_the_same_run_is_refused(tiny_run):
    from crabrec.pipeline import run_lock

    with run_lock(tiny_run):
        done = subprocess.run([*CLI, "report", str(tiny_run)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"in use by crabrec process {os.getpid()}" in done.stderr and "Traceback" not in done.stderr


def test_a_run_the_user_cannot_write_says_what_still_works(tiny_run, tmp_path, capsys, monkeypatch):
    """A shared or read-only run: a writing command stops in one line pointing at the commands that write nothing,
    and a run folder that is writable beside an unwritable parent names the lock file kept there."""
    import crabrec.pipeline

    readonly: set[Path] = set()
    real_access = os.access
    monkeypatch.setattr(crabrec.pipeline.os, "access", lambda p, mode: Path(p) not in readonly and real_access(p, mode))
    readonly.add(tiny_run.resolve())
    err = one_line_error(capsys, ["report", str(tiny_run)], "not writable, and this command writes into the run")
    assert "crabrec runs, compare, recommend or serve" in err
    for reads in (["runs", str(tiny_run.parent)], ["compare", str(tiny_run), "--method", "rr"]):
        assert cli(reads)[0] == 0, capsys.readouterr().err
    readonly.clear()
    readonly.add(tiny_run.resolve().parent)
    one_line_error(capsys, ["evaluate", str(tiny_run), "--method", "pop"], f"lock file (.{tiny_run.name}.lock)")
    readonly.add(tmp_path.resolve())
    one_line_error(capsys, ["run", "--set", f"runs_dir={tmp_path}", "--until", "data"], "choose another runs_dir")
    assert list(tmp_path.iterdir()) == []


# -- 14. a dataset with no training rows is an error at the data stage ------------------------------------------------
def test_no_training_rows_is_a_data_error(tmp_path, capsys):
    d = write_lcrec(tmp_path / "d", {f"u{i}": [0, 1] for i in range(4)}, {str(i): {"title": "x"} for i in range(2)})
    args = ["run", "--data", str(d), "--set", "data.kcore=0", "--set", "data.split=leave_one_out"]
    one_line_error(capsys, [*args, "--set", f"runs_dir={tmp_path / 'runs'}"], "leaves no train rows")


# -- 15. messages: bad options are one line; Ctrl-C says so ----------------------------------------------------------
def test_a_bad_option_is_one_line(capsys):
    one_line_error(capsys, ["train", "--methd", "mor"], "No such option: --methd")
    one_line_error(capsys, ["train", "--seed", "abc"], "Invalid value for '--seed'")


@pytest.mark.parametrize(
    ("sig", "code", "says"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated by SIGTERM")]
)
def test_ctrl_c_or_a_termination_signal_stops_with_a_message(sig, code, says, office_slice, tmp_path):
    args = ["run", "--data", str(office_slice), "--set", f"runs_dir={tmp_path}", *TINY]
    # as from a terminal: the signal acts even if something earlier in this test process set it to be ignored (an
    # ignored signal stays ignored in a child, and Python then installs no handler for it)
    default = functools.partial(signal.signal, sig, signal.SIG_DFL)
    proc = subprocess.Popen([*CLI, *args], stderr=subprocess.PIPE, text=True, preexec_fn=default)
    deadline = time.time() + 120
    while not list(tmp_path.glob("*/stages/embed.json")) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err[-2000:]
    assert f"crabrec: error: {says} (finished stages are kept" in err and "Traceback" not in err
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name], "a temporary file was left"
    if sig == signal.SIGTERM:  # and the next command resumes from the finished stages
        done = subprocess.run([*CLI, *args, "--until", "embed"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "[embed] cached" in done.stderr, done.stderr[-2000:]


_NOHUP = """
import os, signal
from crabrec import termination

signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
termination.handle()
os.kill(os.getpid(), signal.SIGHUP)  # ignored: the command goes on
try:
    os.kill(os.getpid(), signal.SIGTERM)
except termination.Terminated as exc:
    print(exc, termination.received(), signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
"""


def test_a_termination_signal_is_raised_once_and_an_ignored_one_stays_ignored():
    """nohup's ignored SIGHUP stays ignored; SIGTERM raises Terminated once, and a second one would end the process
    at once (the default action is back)."""
    out = subprocess.run([sys.executable, "-c", _NOHUP], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["SIGTERM", str(int(signal.SIGTERM)), "True"], out.stderr


def test_ctrl_c_in_a_command_that_writes_no_run_says_nothing_was_written(tiny_run, tmp_path, capsys, monkeypatch):
    import crabrec.recommender

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    item = crabrec.recommender.load(tiny_run).item_ids[0]
    (tmp_path / "in.jsonl").write_text(json.dumps({"history": [item]}) + "\n")
    monkeypatch.setattr(crabrec.recommender.Recommender, "answers", ctrl_c)
    args = ["--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "o.csv")]
    code, _ = cli(["recommend", str(tiny_run), *args])
    assert code == 130 and capsys.readouterr().err.strip() == "crabrec: error: interrupted; nothing was written"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
    import crabrec.cli

    monkeypatch.setattr(crabrec.cli, "refresh_help", ctrl_c)  # Ctrl-C while the command's modules load
    assert cli(["runs", str(tmp_path)])[0] == 130
    assert capsys.readouterr().err.strip() == "crabrec: error: interrupted; nothing was written"


def test_own_data_without_a_name_gets_its_own_run_folder(office_slice, tmp_path, capsys):
    code, _ = cli(["data", "stats", "--data", str(office_slice)])
    assert code == 0
    code, _ = cli(["embed", "--data", str(office_slice), "--set", f"runs_dir={tmp_path}", *TINY])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / f"{office_slice.name}-quick" / "embeddings.npy").is_file()
    assert not (tmp_path / "office-quick").exists()


def test_a_section_overridden_by_a_value_is_one_line(capsys):
    one_line_error(capsys, ["data", "stats", "--set", "data=3", "--set", "data.kcore=2"], "data was set to a value")


def test_the_run_lock_uses_msvcrt_where_there_is_no_fcntl(tmp_path, monkeypatch):
    """Windows has no fcntl: the lock falls back to msvcrt's byte lock at the file's start, and a held lock is
    refused the same way."""
    import types

    from crabrec.io import try_lock, unlock
    from crabrec.pipeline import run_lock

    calls, held = [], set()

    def locking(fd, mode, n):
        calls.append((mode, n, os.lseek(fd, 0, os.SEEK_CUR)))
        if mode == 2 and fd in held:
            raise PermissionError(13, "Permission denied")

    import crabrec.io

    monkeypatch.setattr(crabrec.io, "fcntl", None)  # as where ``import fcntl`` fails
    monkeypatch.setitem(sys.modules, "msvcrt", types.SimpleNamespace(LK_UNLCK=0, LK_NBLCK=2, locking=locking))
    with open(tmp_path / "f.lock", "a+", encoding="utf-8") as handle:
        handle.write("crabrec process 1")
        assert try_lock(handle) and calls[-1] == (2, 1, 0)
        held.add(handle.fileno())
        assert not try_lock(handle)
        unlock(handle)
        assert calls[-1] == (0, 1, 0)
    held.clear()
    with run_lock(tmp_path / "run"):
        assert (tmp_path / ".run.lock").read_text() == f"crabrec process {os.getpid()}"
    assert [c[0] for c in calls[-2:]] == [2, 0]
