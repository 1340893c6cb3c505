"""Reliability, round three: no command destroys or silently changes a user's data, caches follow their input
files, every setting that cannot work is refused up front, and a resumed training equals an uninterrupted one."""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from crabrec.config import TrainConfig
from crabrec.serve.batcher import DynamicBatcher
from tests.conftest import cli


def one_line_error(capsys, args: list[str], expect: str) -> str:
    code, _ = cli(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert expect in err, err
    errors = [line for line in err.splitlines() if line.startswith("crabrec: error:")]
    assert "Traceback" not in err and len(errors) == 1 and expect in errors[0], err
    return errors[0]


def tree(root: Path, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file under ``root`` (links followed) with its bytes, folders in ``skip`` left out."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(str(p.relative_to(root)).startswith(s) for s in skip)
    }


# -- class 2: every random generator is part of the checkpoint ---------------------------------------------------
class Killed(Exception):
    pass


def _train_with_dropout(out: Path, kill_after: int | None = None) -> tuple[list[float], bytes]:
    """Three epochs with dropout; ``kill_after``: stop the process (here: raise) once that epoch's checkpoint is
    written, as a kill between epochs does."""
    from crabrec.models.decoder import N_SPECIAL, build_decoder, encode_rows, item_tokens, target_loss
    from crabrec.train.loop import Rows, train

    rng = np.random.default_rng(0)
    tokens = item_tokens(np.arange(30).reshape(10, 3))
    arch = TrainConfig(hidden=16, layers=1, heads=2, ff=32, dropout=0.3, attention_dropout=0.2)
    model = build_decoder(N_SPECIAL + 30, arch, seed=0)
    hist, length, target = rng.integers(0, 10, (64, 4)), rng.integers(1, 5, 64), rng.integers(0, 10, 64)

    def make(rows):
        ids, mask, labels = encode_rows(hist[rows], length[rows], target[rows], tokens)
        return {"ids": ids, "mask": mask, "labels": labels}

    def loss(m, batch):
        return target_loss(m, batch["ids"], batch["mask"], batch["labels"])

    calls = []

    def validate(m) -> float:
        calls.append(1)
        if kill_after is not None and len(calls) > kill_after:
            raise Killed
        return 0.1 * len(calls)

    cfg = TrainConfig(epochs=3, batch_size=16, patience=9, warmup_steps=0, dropout=0.3)
    result = train(model, Rows(64, make), loss, validate, cfg, out, 7, fingerprint="a")
    weights = (out / "checkpoint" / "weights.safetensors").read_bytes()
    return [h["loss"] for h in result.history], weights


def test_a_resumed_training_with_dropout_is_byte_identical(tmp_path):
    whole_losses, whole = _train_with_dropout(tmp_path / "whole")
    with pytest.raises(Killed):
        _train_with_dropout(tmp_path / "cut", kill_after=1)  # the checkpoint of epoch 1, as a killed run leaves it
    np.random.default_rng().random()  # whatever ran in between must not matter
    import torch

    torch.rand(5)
    resumed_losses, resumed = _train_with_dropout(tmp_path / "cut")
    assert resumed_losses == whole_losses
    assert resumed == whole


# -- class 7: a full disk while a checkpoint is saved ------------------------------------------------------------
def test_a_full_disk_while_saving_a_checkpoint_is_one_error_and_leaves_no_temporary_folder(tmp_path, monkeypatch):
    import torch

    from crabrec.errors import CrabError
    from crabrec.io import write_folder

    def full(obj, path, *args, **kwargs):  # what torch's writer raises when the disk fills mid-file
        Path(path).write_bytes(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file data/0")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(CrabError, match=r"checkpoint: cannot write \(.*failed writing file.*\)$"):
        _train_with_dropout(tmp_path / "out")
    assert not (tmp_path / "out" / "checkpoint.tmp").exists() and not (tmp_path / "out" / "checkpoint").exists()
    monkeypatch.undo()
    _train_with_dropout(tmp_path / "out")  # with space again, the same command trains
    assert (tmp_path / "out" / "checkpoint" / "state.json").is_file()

    def no_space(tmp: Path) -> None:
        raise OSError(28, "No space left on device")

    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "a").write_text("old")
    with pytest.raises(CrabError, match="kept: cannot write \\(No space left on device\\)"):
        write_folder(tmp_path / "kept", no_space)
    assert (tmp_path / "kept" / "a").read_text() == "old" and not (tmp_path / "kept.tmp").exists()


def test_a_folder_being_replaced_survives_ctrl_c_and_a_failed_rename(tmp_path, monkeypatch):
    """Ctrl-C while the new folder is filled leaves the old one and no temporary folder; a failure after the old one
    is moved aside puts it back; a replacement that completes leaves neither the temporary nor the old folder."""
    from crabrec.errors import CrabError
    from crabrec.io import write_folder

    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "a").write_text("old")

    def interrupted(tmp: Path) -> None:
        tmp.mkdir()
        (tmp / "a").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_folder(kept, interrupted)
    assert (kept / "a").read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["kept"]

    real_rename = Path.rename

    def refuse_new(self, target):
        if self.name == "kept.tmp":
            raise OSError(5, "Input/output error")
        return real_rename(self, target)

    def fill(tmp: Path) -> None:
        tmp.mkdir()
        (tmp / "a").write_text("new")

    monkeypatch.setattr(Path, "rename", refuse_new)
    with pytest.raises(CrabError, match="kept: cannot write"):
        write_folder(kept, fill)
    assert (kept / "a").read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    monkeypatch.undo()
    write_folder(kept, fill)
    assert (kept / "a").read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["kept"]


# -- class 1: a frontier point writes only its own folder --------------------------------------------------------
VARIANT_OUTPUTS = ("frontier", "report", "stages/report.json", "config.yaml")  # what a frontier adds to the base run


@pytest.mark.parametrize("setting", ["rr:train.hidden=16", "rr:data.kcore=3"])
def test_a_frontier_point_that_changes_a_shared_stage_retrains_in_its_own_folder(setting, tiny_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = tree(run, VARIANT_OUTPUTS)
    code, _ = cli(["frontier", str(run), "--grid", "rr=0", "--grid", setting, "--only", "rr"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert tree(run, VARIANT_OUTPUTS) == before  # the base run's data, codebook, models and stage keys unchanged
    point = next((run / "frontier" / "rr").iterdir())
    changed = {"rr:train.hidden=16": "models/mor", "rr:data.kcore=3": "data"}[setting]
    assert not (point / changed).is_symlink() and (point / changed).is_dir()  # its own copy, retrained there
    code, _ = cli(["evaluate", str(run)])  # the base run's cache still describes its own model
    assert code == 0 and "[evaluate] cached" in capsys.readouterr().err


def test_a_frontier_with_a_point_that_cannot_work_writes_nothing(tiny_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = tree(run)
    one_line_error(capsys, ["frontier", str(run), "--grid", "rr=0", "--grid", "rr:evaluate.beam=5"], "evaluate.beam")
    assert tree(run) == before and not (run / "frontier").exists()


# -- class 3: destructive options refuse a run or an input -------------------------------------------------------
def test_export_force_never_replaces_a_run_or_a_folder_it_did_not_write(tiny_run, tmp_path, capsys):
    runs = tmp_path / "runs"
    run = runs / "run"
    shutil.copytree(tiny_run, run)
    (runs / "neighbour").mkdir()
    (runs / "neighbour" / "keep.txt").write_text("mine")
    before = tree(runs)
    for target, expect in [
        (run, "which this command reads"),
        (runs, "which this command reads"),
        (run / "data", "is inside the run"),
        (runs / "neighbour", "not empty and not an earlier MiniOneRec export"),
    ]:
        one_line_error(capsys, ["data", "export", str(run), str(target), "--force"], expect)
    assert tree(runs) == before
    other = tmp_path / "other_run"
    shutil.copytree(tiny_run, other)
    one_line_error(capsys, ["data", "export", str(run), str(other), "--force"], "a run directory")
    out = tmp_path / "export"
    assert cli(["data", "export", str(run), str(out)])[0] == 0
    assert cli(["data", "export", str(run), str(out), "--force"])[0] == 0  # an earlier export is replaced
    assert sorted(p.name for p in out.iterdir()) == ["index", "info", "test", "train", "valid"]
    (tmp_path / "link").symlink_to(out, target_is_directory=True)
    one_line_error(capsys, ["data", "export", str(run), str(tmp_path / "link"), "--force"], "a link")


# -- class 4: a stage's cache key follows the content of the files it reads --------------------------------------
def test_the_cache_follows_edits_of_the_dataset_file(office_slice, tmp_path, capsys):
    from tests.conftest import TINY

    data = tmp_path / "data"
    shutil.copytree(office_slice, data)
    args = ["run", "--data", str(data), "--set", f"runs_dir={tmp_path / 'runs'}", "--name", "r", *TINY]
    assert cli([*args, "--until", "data"])[0] == 0
    capsys.readouterr()
    assert cli([*args, "--until", "data"])[0] == 0
    assert "[data] cached" in capsys.readouterr().err  # unchanged file: cached
    inter = data / "OfficeSlice.inter.json"
    users = json.loads(inter.read_text())
    inter.write_text(json.dumps(dict(list(users.items())[:300])))
    assert cli([*args, "--until", "data"])[0] == 0
    err = capsys.readouterr().err
    assert "[data] done" in err and "users=300" not in err and "cached" not in err
    stats = json.loads((tmp_path / "runs" / "r" / "data" / "stats.json").read_text())
    assert stats["users"] <= 300


def test_the_cache_follows_edits_of_an_imported_sid_index(beauty_slice, tmp_path, capsys):
    from tests.conftest import ids_only_args

    data = tmp_path / "beauty"
    shutil.copytree(beauty_slice, data)
    args = ["tokenize", *ids_only_args(data, tmp_path / "runs")]
    assert cli(args)[0] == 0
    saved_path = tmp_path / "runs" / "ids" / "sid" / "index.json"
    index_path = data / "index.json"
    index = json.loads(index_path.read_text())
    first, second = [k for k in index if k in json.loads(saved_path.read_text())][:2]
    index[first], index[second] = index[second], index[first]
    index_path.write_text(json.dumps(index))
    capsys.readouterr()
    assert cli(args)[0] == 0
    assert "[tokenize] done" in capsys.readouterr().err
    assert json.loads(saved_path.read_text())[first][: len(index[first])] == index[first]  # + a dedup level


def test_a_folders_content_hash_leaves_out_hidden_files_and_run_directories(tmp_path):
    from crabrec.io import content_hash

    (tmp_path / "a.json").write_text("1")
    one = content_hash(tmp_path)
    (tmp_path / ".lock").write_text("x")
    (tmp_path / "run" / "stages").mkdir(parents=True)
    (tmp_path / "run" / "config.yaml").write_text("a: 1")
    assert content_hash(tmp_path) == one
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.csv").write_text("2")
    assert content_hash(tmp_path) != one
    assert content_hash(tmp_path / "missing") is None


# -- class 5: every check before the first write -----------------------------------------------------------------
@pytest.mark.parametrize(
    "extra, expect",
    [
        (
            ["--set", "embed.max_chars=17", "--quantizer", "import", "--import-path", "{bad}"],
            "of the dataset has no SID",
        ),
        (["--set", "embed.max_chars=17", "--quantizer", "import", "--import-path", "{empty}"], "got an empty object"),
        (["--set", "embed.template={nosuch} x"], "field 'nosuch' is in no item's text"),
        (["--set", "embed.template=same for all"], "every item gets the same text"),
        (["--set", "embed.encoder=/no/such/encoder"], "not a local directory and not a bundled encoder"),
    ],
)
def test_a_failing_check_leaves_the_run_directory_as_it_was(extra, expect, tiny_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (tmp_path / "bad.json").write_text('{"nosuch": ["<a_1>"]}')
    (tmp_path / "empty.json").write_text("{}")
    before = tree(run)
    args = [
        a.replace("{bad}", str(tmp_path / "bad.json")).replace("{empty}", str(tmp_path / "empty.json")) for a in extra
    ]
    one_line_error(capsys, ["tokenize", str(run), *args], expect)
    assert tree(run) == before


def test_a_crab_ratio_per_level_must_match_the_codebook(tiny_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = tree(run)
    one_line_error(capsys, ["rebalance", str(run), "--ratio", "0.1,0.1,0.1,0.1,0.1,0.1"], "6 values for a codebook of")
    one_line_error(capsys, ["rebalance", str(run), "--ratio", "0.1,0.1"], "2 values for a codebook of")
    assert tree(run) == before


# -- class 6: values the config accepts work downstream ----------------------------------------------------------
@pytest.mark.parametrize(
    "setting, expect",
    [
        ("sasrec.hidden=10", None),
        ("train.hidden=30", "heads=4 must divide hidden=30"),
        ("tokenize.rqvae_hidden=[0]", "rqvae_hidden.0: Input should be greater than 0"),
        ("seed=4294967296", "seed: Input should be less than 4294967296"),
    ],
)
def test_settings_that_cannot_work_are_refused_by_the_config(setting, expect, capsys):
    if expect is None:  # a width one head takes whole is fine
        assert cli(["data", "stats", "--set", setting, "--set", "sasrec.heads=1", "--json"])[0] == 0
        return
    one_line_error(capsys, ["data", "stats", "--set", setting], expect)
    one_line_error(capsys, ["data", "stats", "--set", "sasrec.hidden=10", "--set", "sasrec.heads=3"], "heads=3 must")


def test_a_seed_past_two_to_the_31_tokenizes(office_slice, tmp_path, capsys):
    from tests.conftest import TINY

    args = ["tokenize", "--data", str(office_slice), "--set", f"runs_dir={tmp_path}", *TINY]
    assert cli([*args, "--name", "big", "--seed", "2147483648"])[0] == 0, capsys.readouterr().err
    assert cli([*args, "--name", "top", "--seed", str(2**32 - 1)])[0] == 0, capsys.readouterr().err


def test_a_collapsed_quantizer_is_an_error():
    from crabrec.config import TokenizeConfig
    from crabrec.errors import CrabError
    from crabrec.sid.build import build_codebook

    same = np.ones((40, 8), np.float32)
    with pytest.raises(CrabError, match="every item got the same semantic ID"):
        build_codebook(TokenizeConfig(codebook_size=4, levels=2), same, [str(i) for i in range(40)], 0)


@pytest.mark.parametrize("wait", [float("inf"), float("nan"), -1.0, 10_001.0])
def test_serve_refuses_a_wait_that_never_ends(wait):
    from crabrec.errors import CrabError

    with pytest.raises(CrabError, match="max_wait_ms"):
        DynamicBatcher(lambda rows: rows, 8, wait)


# -- class 8: CSV histories with unquoted commas -----------------------------------------------------------------
def test_a_csv_history_with_unquoted_commas_keeps_every_item(tmp_path):
    from crabrec.errors import CrabError
    from crabrec.histories import iter_histories

    cases = {
        "history\n1000,1001\n1002 1003\n": ([["1000", "1001"], ["1002", "1003"]], None, None),
        'history\n"1000,\n1001"\n\n1002\n': ([["1000", "1001"], ["1002"]], None, None),
        'history\n"1000,1001"\n': ([["1000", "1001"]], None, None),
        "user,history\n3,1000,1001,1002\n4.0,7\n": ([["1000", "1001", "1002"], ["7"]], [3, 4], None),
        "user_id,history\nA7,1000,1001\nB2,\n": ([["1000", "1001"], None], None, ["A7", "B2"]),
    }
    for n, (text, expect) in enumerate(cases.items()):
        path = tmp_path / f"h{n}.csv"
        path.write_text(text)
        assert next(iter_histories(path))[:3] == expect, text
    path = tmp_path / "ambiguous.csv"
    path.write_text("history,user\n1000,1001,3\n")
    with pytest.raises(CrabError, match=r"ambiguous.csv: line 2: 3 fields for 2 columns; quote the history"):
        next(iter_histories(path))


# -- class 11: serve accepts connections once it prints its address; a signal stops it normally ---------------------
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "nohup"])
def test_serve_accepts_a_connection_as_soon_as_it_prints_its_address(sig, tiny_run, tmp_path):
    """``nohup``: SIGHUP stays ignored (the server goes on), then SIGTERM stops it."""
    import os
    import re
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "TQDM_DISABLE": "1"}
    cmd = [sys.executable, "-m", "crabrec.cli", "serve", str(tiny_run), "--port", "0", "--method", "mor"]
    hup = signal.SIG_IGN if sig == "nohup" else signal.SIG_DFL
    start = functools.partial(signal.signal, signal.SIGHUP, hup)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, preexec_fn=start)
    try:
        line = ""
        while "serving" not in line:
            line = proc.stdout.readline()
            assert line, "serve exited before printing its address"
        url = re.search(r"at (http://\S+)", line).group(1)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=5).close()  # at once: no retry
        with urllib.request.urlopen(url + "/health", timeout=60) as answer:
            assert json.loads(answer.read())["status"] == "ok"
        if sig == "nohup":
            proc.send_signal(signal.SIGHUP)
            time.sleep(1)
            with urllib.request.urlopen(url + "/health", timeout=60) as answer:
                assert answer.status == 200  # still serving
            sig = "SIGTERM"
        proc.send_signal(getattr(signal, sig))  # as a service manager stops it, or a closed terminal
        out = proc.communicate(timeout=30)[0]
        assert proc.returncode == 0, out
        assert f"received {sig}: finishing the requests in flight" in out and "stopped (histories ranked: 0)" in out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# -- class 9: a cut or damaged raw file is named, not an interruption ---------------------------------------------
@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_raw_meta_file_is_a_one_line_error_naming_it(damage, tmp_path, capsys):
    from tests.test_amazon_raw import tiger_fixture

    folder = tiger_fixture(tmp_path / "raw")
    meta = folder / "meta_Office_Products.json.gz"
    blob = meta.read_bytes()
    meta.write_bytes(blob[: len(blob) // 2] if damage == "truncated" else blob[:2] + b"\x07" + blob[3:])
    args = ["data", "stats", "--data", str(folder), "--set", "data.kcore=0", "--set", f"runs_dir={tmp_path / 'r'}"]
    code, _ = cli(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "interrupted" not in err and "Traceback" not in err
    assert f"{meta}: unreadable, {'cut short' if damage == 'truncated' else 'damaged'}" in err, err


# -- class 10: corrupt or foreign artifacts -----------------------------------------------------------------------
def test_a_codebook_code_that_is_not_a_whole_number_is_refused(tiny_run, tmp_path, capsys):
    data = json.loads((tiny_run / "sid" / "codebook.json").read_text())
    data["codes"][3][1] = 2.5
    path = tmp_path / "codebook.json"
    path.write_text(json.dumps(data))
    one_line_error(capsys, ["sid", "stats", str(tiny_run), "--codebook", str(path)], "codes must be whole numbers")


def test_a_model_from_another_run_is_refused_not_evaluated(tiny_run, tmp_path, capsys):
    from safetensors.numpy import load_file, save_file

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    weights = run / "models" / "mor" / "model" / "model.safetensors"
    tensors = load_file(str(weights))
    save_file({k: v + np.float32(0.01) for k, v in tensors.items()}, str(weights))  # same shapes, other values
    metrics = (run / "models" / "mor" / "metrics.json").read_bytes()
    one_line_error(capsys, ["evaluate", str(run)], f"{weights}: not the file the train stage wrote in this run")
    assert (run / "models" / "mor" / "metrics.json").read_bytes() == metrics
    assert cli(["train", str(run), "--force"])[0] == 0  # the way out the message names


@pytest.mark.parametrize(
    "setting, until, expect",
    [
        ("data.n_groups=1000", "evaluate", "more popularity groups than the"),
        ("rr.ks=[1000]", "rr", "rr.ks=[1000]: every K is beyond the catalogue"),
    ],
)
def test_settings_that_do_not_fit_the_catalogue_are_one_line_errors(
    setting, until, expect, office_slice, tmp_path, capsys
):
    from tests.conftest import TINY

    args = ["run", "--data", str(office_slice), "--set", f"runs_dir={tmp_path}", "--name", "r", *TINY]
    one_line_error(capsys, [*args, "--set", setting, "--until", until], expect)
    assert not (tmp_path / "r" / "stages" / until).with_suffix(".json").exists()


def test_the_api_refuses_a_model_that_its_stage_did_not_write(tiny_run, tmp_path):
    import crabrec
    from crabrec.errors import CrabError

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    crabrec.load(run, "rr")
    weights = run / "models" / "mor" / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b" ")
    with pytest.raises(CrabError, match="model.safetensors: not the file the train stage wrote"):
        crabrec.load(run, "rr")  # RR ranks MOR's beams: MOR's weights are checked too


@pytest.mark.parametrize("kind", ["answers", "other rows"])
def test_report_refuses_rankings_its_evaluation_did_not_write(kind, tiny_run, tmp_path, capsys):
    """A file of answers (``recommend --output``'s columns) or another run's rankings in MOR's place made
    ``crabrec report`` an IndexError traceback; it is one line naming the file and the way out."""
    import pandas as pd

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    path = run / "models" / "mor" / "rankings.parquet"
    frame = pd.read_parquet(path)
    if kind == "answers":
        frame = frame[["row", "items", "scores"]].assign(row=frame["row"] + 1000)
        expect = "expected columns row, user, target, items, scores"
    else:  # the same columns, rows of a larger test split with other targets
        frame = pd.concat([frame, frame]).assign(row=range(2 * len(frame)))
        expect = "not rankings of this run's test rows"
    frame.to_parquet(path)
    before = (run / "report.md").read_bytes()
    one_line_error(capsys, ["report", str(run)], f"{path}: {expect}")
    assert (run / "report.md").read_bytes() == before


# -- class 12: a command that fails before writing a run leaves no lock file (or runs folder) beside it ---------
def test_a_failed_command_leaves_no_lock_file_and_a_lock_file_removed_meanwhile_is_opened_again(
    tmp_path, capsys, monkeypatch
):
    import crabrec.pipeline

    data = tmp_path / "e.csv"
    data.write_text("user,item\n")  # no rows: the data stage fails after the lock is taken
    runs = tmp_path / "runs"
    one_line_error(capsys, ["run", "--data", str(data), "--set", f"runs_dir={runs}/a/b"], "no rows after the header")
    assert not runs.exists()  # nor the runs folder it made for the run, and its parents
    runs.mkdir()
    (runs / "keep.txt").write_text("x")
    one_line_error(capsys, ["run", "--data", str(data), "--set", f"runs_dir={runs}"], "no rows after the header")
    assert [p.name for p in runs.iterdir()] == ["keep.txt"]  # a runs folder that was there stays, as it was
    # a holder removed the lock file between this process opening it and locking it: the lock taken on the removed
    # file would not exclude a third process, so the file is opened again
    real, removed = crabrec.pipeline.try_lock, []

    def first_removed(handle):
        if not removed:
            removed.append(Path(handle.name))
            Path(handle.name).unlink()
        return real(handle)

    monkeypatch.setattr(crabrec.pipeline, "try_lock", first_removed)
    run = runs / "r"
    with crabrec.pipeline.run_lock(run):
        run.mkdir()
        lock = runs / ".r.lock"
        assert removed == [lock] and lock.read_text() == f"crabrec process {os.getpid()}"
    assert lock.exists()  # the run exists: its lock file stays
