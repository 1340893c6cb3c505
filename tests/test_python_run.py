"""``crabrec.run``: the Python API runs an experiment as ``crabrec run`` does, and ``crabrec.results`` reads it."""

from __future__ import annotations

import json
import os

import pytest
import yaml

import crabrec
from crabrec.errors import CrabError
from tests.conftest import TINY


def tiny_overrides() -> dict:
    """The test suite's tiny settings, as the API takes them: values by dotted key."""
    pairs = [arg.split("=", 1) for arg in TINY if arg != "--set"]
    return {key: yaml.safe_load(value) for key, value in pairs}


def test_the_api_gives_the_commands_results(tiny_run, small_office, tmp_path):
    """The same data and settings through ``crabrec.run`` give MOR's and SASRec's metrics of the command's run to the
    last bit; a second call finds every stage finished; ``run_dir`` resumes a run by its folder."""
    run = crabrec.run(
        data=small_office,
        name="api",
        overrides={**tiny_overrides(), "runs_dir": str(tmp_path)},
        until=["evaluate", "sasrec-eval"],
    )
    assert run == tmp_path / "api"
    for method in ("mor", "sasrec"):
        ours = json.loads((run / "models" / method / "metrics.json").read_text())
        theirs = json.loads((tiny_run / "models" / method / "metrics.json").read_text())
        assert {k: ours[k] for k in ("HR@10", "NDCG@10", "DGU@10")} == {k: theirs[k] for k in ("HR@10", "NDCG@10",
                                                                                             "DGU@10")}  # fmt: skip
    stamps = {p: p.stat().st_mtime_ns for p in (run / "stages").glob("*.json")}
    assert crabrec.run(run, until="evaluate") == run
    assert {p: p.stat().st_mtime_ns for p in (run / "stages").glob("*.json")} == stamps  # nothing recomputed
    assert list(crabrec.results(run).index) == ["mor", "sasrec"]


@pytest.mark.parametrize(
    "kwargs, expect",
    [
        ({"overrides": {"train.epochz": 3}}, "train.epochz"),
        ({"overrides": {"train.epochs": "many"}}, "overrides: train.epochs"),
        ({"overrides": {"": 3}}, "expected a setting's dotted name"),
        ({"seeds": 0}, "seeds=0: expected a number of seeds from 1 to 100"),
        ({"jobs": True}, "jobs=True: expected a number of processes"),
        ({"until": "nope"}, "stage 'nope': expected one of data, embed"),
    ],
)
def test_a_bad_argument_is_a_one_line_error(kwargs, expect, tmp_path):
    overrides = {"runs_dir": str(tmp_path), **kwargs.pop("overrides", {})}
    with pytest.raises(CrabError) as err:
        crabrec.run(overrides=overrides, **kwargs)
    assert expect in str(err.value) and "\n" not in str(err.value)
    assert not any(tmp_path.iterdir())  # nothing written


def test_off_a_terminal_the_libraries_bars_stay_off_as_ours_do(small_office, tmp_path):
    """From Python with stderr no terminal (a notebook, a script logging to a file), transformers' bars (saving the
    model, loading the encoder) draw no frames, as ours draw none; after the call they are as they were."""
    import os
    import subprocess
    import sys

    script = (
        "import json, sys; import crabrec; from transformers.utils import logging as hf; "
        "crabrec.run(data=sys.argv[1], overrides=json.loads(sys.argv[2]), until='train'); "
        "print(hf.is_progress_bar_enabled())"
    )
    overrides = json.dumps({**tiny_overrides(), "runs_dir": str(tmp_path), "train.epochs": 1})
    env = {k: v for k, v in os.environ.items() if k not in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS")}
    res = subprocess.run([sys.executable, "-c", script, str(small_office), overrides], capture_output=True, text=True,
                         env=env, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert "\r" not in res.stderr and "Writing model shards" not in res.stderr, res.stderr[-2000:]
    assert res.stdout.split() == ["True"]


@pytest.mark.parametrize(
    "setup, shown",
    [
        ("", "lines"),  # a program that set up no logging: the command's lines on stderr
        ("quiet", "nothing"),  # quiet=True: warnings only
        ("logging.basicConfig(level=logging.WARNING)", "nothing"),  # the program's own setup is kept
        ("logging.basicConfig(level=logging.INFO, format='%(name)s|%(message)s')", "its own"),
    ],
)
def test_a_program_without_logging_sees_the_commands_lines(setup, shown, small_office, tmp_path):
    """From Python, the stage lines reach stderr as the command prints them unless the program has set up logging
    (then its setup decides) or asks for ``quiet``; the crabrec logger is as it was after the call."""
    import os
    import subprocess
    import sys

    quiet = setup == "quiet"
    script = (
        "import json, logging, sys; import crabrec; "
        + ("" if quiet or not setup else setup + "; ")
        + "log = logging.getLogger('crabrec'); before = (log.level, list(log.handlers)); "
        + f"crabrec.run(data=sys.argv[1], overrides=json.loads(sys.argv[2]), until='data', quiet={quiet}); "
        + "print(before == (log.level, list(log.handlers)))"
    )
    overrides = json.dumps({**tiny_overrides(), "runs_dir": str(tmp_path)})
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    res = subprocess.run([sys.executable, "-c", script, str(small_office), overrides], capture_output=True, text=True,
                         env=env, timeout=300)  # fmt: skip
    assert res.returncode == 0 and res.stdout.split() == ["True"], res.stderr[-2000:]
    lines = res.stderr.splitlines()
    if shown == "lines":
        assert any(line.startswith("[data] done in ") for line in lines), res.stderr
        assert lines[0].startswith("run ") and not any("INFO" in line for line in lines)
    elif shown == "its own":
        assert any(line.startswith("crabrec|[data] done in ") for line in lines), res.stderr
    else:
        assert "[data]" not in res.stderr, res.stderr


def test_the_callers_process_is_left_as_it_was(small_office, tmp_path):
    """A script or notebook that calls ``crabrec.run`` and ``crabrec.load`` finds its process as it left it: the
    next draws of its seeded Python, NumPy and torch generators, its torch thread count, its matplotlib backend and
    ``rcParams`` (a notebook's inline backend stays), no figure left in pyplot, though the run sets threads, seeds
    every stage and draws the report's figures."""
    import subprocess
    import sys

    script = """
import json, random, sys
import matplotlib; matplotlib.use("svg")
import matplotlib.pyplot as plt
import numpy as np, torch
import crabrec

def draws():
    state = (random.getstate(), np.random.get_state(), torch.random.get_rng_state())
    out = [random.random(), float(np.random.rand()), float(torch.rand(1))]
    random.setstate(state[0]); np.random.set_state(state[1]); torch.random.set_rng_state(state[2])
    return out

plt.rcParams["font.size"] = 14
torch.set_num_threads(2)
random.seed(7); np.random.seed(7); torch.manual_seed(7)
before = [draws(), torch.get_num_threads(), matplotlib.get_backend(), dict(plt.rcParams)]
run = crabrec.run(data=sys.argv[1], overrides=json.loads(sys.argv[2]), until=["train", "report"], quiet=True)
crabrec.load(run, "mor")
after = [draws(), torch.get_num_threads(), matplotlib.get_backend(), dict(plt.rcParams)]
assert (run / "report.html").read_text().count("<svg") >= 1
print(json.dumps({"same": [b == a for b, a in zip(before, after)], "figures": plt.get_fignums()}))
"""
    overrides = json.dumps({**tiny_overrides(), "runs_dir": str(tmp_path), "train.epochs": 1, "train.threads": 1})
    res = subprocess.run([sys.executable, "-c", script, str(small_office), overrides], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout) == {"same": [True, True, True, True], "figures": []}


def test_the_bundled_encoder_loads_without_the_network_or_changing_the_environment():
    """The encoder is read from its folder with no connection attempted, and no Hugging Face variable is left set
    (``HF_HUB_OFFLINE`` would stop the caller's later downloads, and its child processes')."""
    import subprocess
    import sys

    script = """
import json, os, socket
def refused(*args, **kwargs):
    raise OSError("a connection was attempted")
socket.socket.connect = socket.create_connection = socket.getaddrinfo = refused
before = dict(os.environ)
from crabrec.config import EmbedConfig
from crabrec.embed import encode
vectors = encode(["a desk lamp", "a stapler"], EmbedConfig(), progress=False).vectors
added = sorted(k for k in os.environ if k not in before and k.startswith(("HF_", "TRANSFORMERS_")))
print(json.dumps([list(vectors.shape), added]))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout) == [[2, 384], []]
