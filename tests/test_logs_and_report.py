"""Logs for files, not terminals: no progress frames off a TTY, TQDM_DISABLE and --quiet respected; and a report
that says what it ran (data, split, SIDs, seed, version, hardware, training curves), worded for a partial run."""

from __future__ import annotations

import io
import json
import os
import sys

import pytest

from crabrec import progress
from crabrec.report import figure_titles
from crabrec.report_facts import facts_lines
from tests.conftest import TINY, cli


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def normal():
    yield
    progress.set_verbosity(progress.NORMAL)


def test_bars_only_on_a_terminal_without_tqdm_disable_or_quiet(monkeypatch, normal):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert not progress.bars_enabled()
    items = [1, 2, 3]
    assert list(progress.progress(items, "x")) == items and not sys.stderr.getvalue()  # nothing drawn, no minute
    monkeypatch.setattr("sys.stderr", FakeTTY())
    assert progress.bars_enabled()
    assert list(progress.progress(items, "x")) == items
    assert progress.progress(items, "x", show=False) is items  # e.g. not the main process
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert not progress.bars_enabled()
    monkeypatch.setenv("TQDM_DISABLE", "0")
    assert progress.bars_enabled()
    progress.set_verbosity(progress.QUIET)
    assert not progress.bars_enabled()
    assert progress.progress(items, "x") is items  # nothing drawn, nothing logged


def test_off_a_terminal_a_long_loop_logs_where_it_is_once_a_minute(monkeypatch, normal, caplog):
    """A line per LOG_EVERY seconds (0 here: one per item after the first), with the share done, the time taken and
    left, and what the loop set with set_postfix (the training loss)."""
    import logging

    monkeypatch.setattr("sys.stderr", io.StringIO())
    monkeypatch.setattr(progress, "LOG_EVERY", 0.0)
    loop = progress.progress(range(4), "epoch 3")
    with caplog.at_level(logging.INFO, logger="crabrec"):
        for i in loop:
            loop.set_postfix(loss=f"{1 / (i + 1):.4f}")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and lines[0].startswith("epoch 3: 25% (1 of 4), 0s, about 0s left, loss 1.0000")
    assert lines[2].startswith("epoch 3: 75% (3 of 4)") and lines[2].endswith("loss 0.3333")
    assert progress._duration(59.6) == "1m 00s" and progress._duration(3725) == "1h 02m"
    assert progress._Logged(iter("ab"), "x").line(2, 5) == "2 done, 5s"  # no length: a count
    resumed = progress._Logged(range(30, 40), "epoch 2", initial=30)  # 30 of 40 done before: 10s for 5 more
    assert resumed.line(5, 10) == "88% (35 of 40), 10s, about 10s left"


def test_off_a_terminal_a_library_s_own_tqdm_bar_draws_no_frames_either():
    """transformers' GGUF conversion draws a plain tqdm bar: off a terminal the process sets TQDM_DISABLE before tqdm
    is imported (tqdm reads it then), unless the user set it."""
    import subprocess
    import sys

    code = (
        "from crabrec.progress import NORMAL, set_verbosity; set_verbosity(NORMAL); "
        "from tqdm.auto import tqdm; list(tqdm(range(3), desc='a library bar'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    bare = subprocess.run([sys.executable, "-c", code.split("; ", 2)[2]], capture_output=True, text=True, env=env)
    assert "a library bar: 100%" in bare.stderr  # without crabrec's rule: the bar


def test_bars_come_back_on_a_terminal_after_a_call_that_turned_them_off(monkeypatch, normal):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    progress.set_verbosity(progress.NORMAL)
    assert os.environ.get("TQDM_DISABLE") == "1"  # for the libraries' bars
    monkeypatch.setattr("sys.stderr", FakeTTY())
    progress.set_verbosity(progress.NORMAL)
    assert "TQDM_DISABLE" not in os.environ and progress.bars_enabled()
    monkeypatch.setenv("TQDM_DISABLE", "0")  # the user's: never changed
    monkeypatch.setattr("sys.stderr", io.StringIO())
    progress.set_verbosity(progress.NORMAL)
    assert os.environ["TQDM_DISABLE"] == "0"


def test_lora_hides_the_libraries_deprecation_noise_and_nothing_else():
    """peft reads a property transformers deprecated: a FutureWarning no user can act on, hidden where LoRA is added
    (the CLI, a worker process and the Python API alike); the filters are as they were afterwards."""
    import warnings

    from transformers import Qwen2Config, Qwen2ForCausalLM

    from crabrec.models.lora import add_lora

    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2))  # fmt: skip
    with warnings.catch_warnings(record=True) as seen:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        assert model.is_gradient_checkpointing is False  # read directly, it warns (transformers since 5.x; 5.0 not)
        direct = len(seen)
        add_lora(model, 2, 4)
        warnings.warn("another FutureWarning", FutureWarning, 1)
    messages = [str(w.message) for w in seen]
    assert sum("is_gradient_checkpointing" in m for m in messages) == direct and "another FutureWarning" in messages


def test_a_run_logged_to_a_file_is_one_line_per_epoch_and_stage(office_slice, tmp_path, capsys, normal):
    args = ["run", "--data", str(office_slice), "--set", f"runs_dir={tmp_path}", *TINY, "--until", "evaluate"]
    assert cli(args)[0] == 0
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "\r" not in err and max(map(len, lines)) <= 300
    assert sum(line.startswith("[train] epoch ") for line in lines) == 2  # train.epochs=2, named by their stage
    assert any(line.startswith("[evaluate] done") for line in lines)
    assert cli([*args, "--force", "evaluate", "--quiet"])[0] == 0
    assert not [line for line in capsys.readouterr().err.splitlines() if not line.startswith("crabrec: warning")]


def test_report_header_says_what_ran(tiny_run):
    text = (tiny_run / "report.md").read_text()
    head = text.split("## Table 1")[0]
    for label in ("| data | OfficeSmall:", "| split | leave_one_out:", "| semantic IDs | rqkmeans", "| seed | 2024",
                  "| crabrec | 0.1.0", "| hardware |", "| report written |"):  # fmt: skip
        assert label in head, label
    assert "## Training curves" in text and "report_files/training.svg" in text
    assert "MostPop" in text and "Random" in text  # the floors are in Table 1


def test_facts_lines_by_hand():
    facts = {
        "data": {"dataset": "D", "users": 1200, "items": 30, "interactions": 5000, "split": "leave_one_out",
                 "samples": {"train": 10, "valid": 2, "test": 2}, "item_text": False,
                 "notes": ["left out 3 of 5,003 rows with an empty cell in u, i", "no item table"]},
        "sids": {"quantizer": "rqkmeans", "levels": 3, "collisions_before_dedup": 4, "collisions": 0},
        "seed": 7, "seeds": [7, 8], "evaluation": {"beam": 20, "max_samples": None},
        "crabrec": "0.1.0+abc", "generated": "2026-01-01T00:00:00+00:00",
        "hardware": {"cpu": "X", "cores": 2, "os": "Linux 6"},
    }  # fmt: skip
    assert facts_lines(facts) == [
        ("data", "D: 1,200 users, 30 items, 5,000 interactions (ids only, no item text)"),
        ("data notes", "left out 3 of 5,003 rows with an empty cell in u, i; no item table"),
        ("split", "leave_one_out: 10 train, 2 valid, 2 test rows"),
        ("semantic IDs", "rqkmeans, 3 levels; 4 items shared a SID before deduplication, 0 after"),
        (
            "evaluation",
            "all test rows, lists of 20 (beam); every item is ranked, history items included (the "
            "paper's protocol; recommendations exclude them)",
        ),
        ("seed", "7 (2 seeds: [7, 8])"),
        ("crabrec", "0.1.0+abc"),
        ("hardware", "X, 2 cores (Linux 6)"),
        ("report written", "2026-01-01T00:00:00+00:00"),
    ]


def test_report_names_the_threads_each_stage_ran_with(tiny_run):
    """Stages trained side by side run with fewer threads than the main process, and their results depend on it in
    the last digits: each stage's state records its count and the report says which ran with what."""
    states = {p.stem: json.loads(p.read_text()) for p in (tiny_run / "stages").glob("*.json")}
    assert all(isinstance(states[s]["threads"], int) for s in ("train", "tiger", "evaluate", "finetune"))
    row = next(line for line in (tiny_run / "report.md").read_text().splitlines() if line.startswith("| hardware |"))
    counts = {states[s]["threads"] for s in states if "threads" in states[s] and s != "report"}
    assert "torch threads: " in row
    if len(counts) > 1:  # several processes: each count with its stages
        assert f"{states['train']['threads']} (" in row and "train" in row
    facts = {"hardware": {"cpu": "X", "cores": 2, "os": "L"}, "threads": {"2": ["embed"], "1": ["tiger", "train"]}}
    hardware = dict(facts_lines({**facts, "crabrec": "v", "generated": "t"}))["hardware"]
    assert hardware == "X, 2 cores, torch threads: 1 (tiger, train); 2 (embed) (L)"


def test_headings_fit_a_run_without_crab():
    partial = figure_titles({"MOR": []}, {"1": {"before": [3.0]}})
    assert "CRAB" not in partial["tokens"] and "CRAB" not in partial["curves"]
    full = figure_titles({"MOR": [], "CRAB": []}, {"1": {"before": [3.0], "after CRAB": [2.0]}})
    assert "after CRAB" in full["tokens"] and "after rebalancing" in full["curves"]


@pytest.mark.parametrize("where", ["main", "worker"])
def test_log_lines_pass_no_control_characters_to_the_terminal(where):
    """A value from the user's files in a log line (a column name, a title) cannot recolour or clear the terminal;
    a message's own line breaks stay."""
    import logging

    from crabrec.parallel import _Tagged
    from crabrec.progress import CommandFormatter

    formatter = CommandFormatter() if where == "main" else _Tagged("data")
    for level in (logging.INFO, logging.WARNING):
        record = logging.LogRecord("crabrec", level, __file__, 1, "column %s\nnext", ("a\x1b[2J\x9b\u202e",), None)
        text = formatter.format(record)
        assert "a\\x1b[2J\\x9b\\u202e" in text and text.count("\n") == 1
        assert not any(ch in text for ch in "\x1b\x9b\u202e")


def test_while_a_stage_runs_the_commands_lines_name_it_once():
    """Two stages run one after the other in one process (TIGER, then the MOR it is compared with) read as two, as a
    worker's lines do; a line that names its stage already is not named twice, and warnings read as before."""
    import logging

    from crabrec.progress import CommandFormatter, stage_lines

    def line(msg: str, level: int = logging.INFO) -> str:
        return CommandFormatter().format(logging.LogRecord("crabrec", level, __file__, 1, msg, (), None))

    assert line("epoch 1: loss 2.0") == "epoch 1: loss 2.0"
    with stage_lines("tiger"):
        assert line("epoch 1: loss 2.0") == "[tiger] epoch 1: loss 2.0"
        assert line("[tiger] done in 1.0s") == "[tiger] done in 1.0s"
        assert line("slow", logging.WARNING) == "crabrec: warning: slow"
        with stage_lines("train"):
            assert line("epoch 1: loss 3.0") == "[train] epoch 1: loss 3.0"
        assert line("epoch 2: loss 1.9") == "[tiger] epoch 2: loss 1.9"
    assert line("finished") == "finished"
