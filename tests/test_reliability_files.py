"""Reliability, round two (files): malformed data files, corrupt run artifacts, imported SID indexes, encoder input and
tiny catalogues. Every case is a one-line error naming the file (exit 2) or, where the input is legal, a working run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from crabrec.errors import CrabError
from tests.conftest import TINY, cli, write_lcrec
from tests.test_reliability_round2 import one_line_error

USERS = {f"u{u}": [str((u + j) % 12) for j in range(6)] for u in range(30)}
ITEMS = {str(i): {"title": f"item {i}"} for i in range(12)}


def stats(path: Path) -> list[str]:
    return ["data", "stats", "--data", str(path), "--set", "data.kcore=2"]


def lcrec_raw(folder: Path, inter: str, items: str | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "T.inter.json").write_text(inter)
    (folder / "T.item.json").write_text(items if items is not None else json.dumps(ITEMS))
    return folder


def minionerec(folder: Path, history: str = "[{h}]", info: bytes | None = None) -> Path:
    for split in ("train", "valid", "test"):
        (folder / split).mkdir(parents=True)
        rows = "".join(f'{u},"{history.format(h=",".join(s[:3]))}",{s[3]}\n' for u, s in USERS.items())
        (folder / split / "T.csv").write_text("user_id,history_item_id,item_id\n" + rows)
    (folder / "info").mkdir()
    lines = "".join(f"<a_{i}>\titem {i}\t{i}\n" for i in range(12)).encode()
    (folder / "info" / "T.txt").write_bytes(lines if info is None else info)
    return folder


# -- 7. malformed data files ------------------------------------------------------------------------------------------
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "make, expect",
    [
        (lambda d: lcrec_raw(d, DEEP), "T.inter.json: JSON nested too deeply"),
        (lambda d: lcrec_raw(d, json.dumps(USERS), '{"0": ' + DEEP + "}"), "T.item.json: JSON nested too deeply"),
        (lambda d: lcrec_raw(d, json.dumps({**USERS, "u0": [[["1"]], "2"]})), "item ids are strings or integers"),
        (lambda d: lcrec_raw(d, json.dumps({**USERS, "u0": [1.5, "2"]})), "item ids are strings or integers, got 1.5"),
        (lambda d: lcrec_raw(d, '{"u0": ["1"], "u0": ["2"]}'), "duplicate key 'u0'"),
        (lambda d: minionerec(d, info="<a_1>\titém\t1\n".encode("latin-1")), "info/T.txt: not UTF-8 text"),
        (lambda d: minionerec(d, history="[[[{h}]]]"), "row 2: history_item_id '[[[0,1,2]]]' is not a list"),
        (lambda d: minionerec(d, history="[" * 5000 + "{h}" + "]" * 5000), "is not a list of item ids"),
        (lambda d: minionerec(d, history="[" + "9" * 5000 + "]"), "is not a list of item ids"),
    ],
    ids=["deep-inter", "deep-items", "nested-ids", "float-id", "dup-user", "latin1-info", "nested-hist", "deep-hist",
         "huge-int-hist"],
)  # fmt: skip
def test_a_malformed_data_file_is_one_line(make, expect, tmp_path, capsys):
    one_line_error(capsys, stats(make(tmp_path / "d")), expect)


def test_an_info_file_that_is_a_folder(tmp_path, capsys):
    d = minionerec(tmp_path / "d")
    (d / "info" / "T.txt").unlink()
    (d / "info" / "T.txt").mkdir()
    one_line_error(capsys, stats(d), "info/T.txt: a folder, not a file")


def test_recbole_columns_that_clash_without_their_type(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    rows = "".join(f"{u}\t{x}\t1\n" for u, s in USERS.items() for x in s)
    (d / "T.inter").write_text("user_id:token\titem_id:token\titem_id:float\n" + rows)
    (d / "T.item").write_text("item_id:token\ttitle:token_seq\n" + "".join(f"{i}\titem {i}\n" for i in range(12)))
    one_line_error(capsys, stats(d), "T.inter: header: column 'item_id' is given twice")


def test_odd_and_huge_item_ids_load_in_a_defined_order(tmp_path):
    from crabrec.config import DataConfig
    from crabrec.data import load_dataset
    from crabrec.data.loaders import _catalogue_order

    huge = "1" + "0" * 5000
    assert _catalogue_order(["10", huge, "-3", "9"]) == ["-3", "9", "10", huge]  # numeric, any length
    assert _catalogue_order(["10", "²", "9"]) == ["10", "²", "9"]  # "²" is not an ASCII integer: file order
    assert _catalogue_order(["10", "--5", "9"]) == ["10", "--5", "9"]
    users = {**USERS, "u0": [huge, "²", "--5", "1", "2"]}
    items = {**ITEMS, huge: {"title": "big"}, "²": {"title": "sup"}, "--5": {"title": "dash"}}
    ds = load_dataset(DataConfig(path=str(write_lcrec(tmp_path / "d", users, items)), kcore=0))
    assert {huge, "²", "--5"} <= set(ds.item_ids)


def test_a_huge_integer_in_item_text_is_kept_as_text(tmp_path):
    from crabrec.config import DataConfig
    from crabrec.data import load_dataset

    items = "{" + ",".join(f'"{i}": {{"title": {"9" * 5000}}}' for i in range(12)) + "}"
    ds = load_dataset(DataConfig(path=str(lcrec_raw(tmp_path / "d", json.dumps(USERS), items)), kcore=0))
    assert ds.item_text[0]["title"] == "9" * 5000


# -- 13. item text and encoders ----------------------------------------------------------------------------------------
def test_a_lone_surrogate_in_a_title_is_replaced(tmp_path):
    from crabrec.config import DataConfig
    from crabrec.data import load_dataset

    items = "{" + ",".join(f'"{i}": {{"title": "caf\\ud800 {i}"}}' for i in range(12)) + "}"
    ds = load_dataset(DataConfig(path=str(lcrec_raw(tmp_path / "d", json.dumps(USERS), items)), kcore=0))
    assert ds.item_text[0]["title"] == "caf? 0"
    assert all(rec["title"].encode("utf-8") for rec in ds.item_text)  # valid UTF-8 for every encoder


def test_an_encoder_folder_that_is_not_a_model(office_slice, tmp_path, capsys):
    enc = tmp_path / "enc"
    enc.mkdir()
    (enc / "config.json").write_text("{}")
    args = ["run", "--data", str(office_slice), "--set", f"runs_dir={tmp_path / 'r'}", "--until", "embed"]
    one_line_error(capsys, [*args, "--set", f"embed.encoder={enc}"], "not a sentence-transformers model")


# -- 8. corrupt run artifacts ------------------------------------------------------------------------------------------
def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _json_list(path: Path) -> None:
    path.write_text("[1, 2]")


@pytest.mark.parametrize(
    "rel, corrupt, command, expect",
    [
        ("models/mor/model/model.safetensors", _truncate, ["evaluate", "--method", "mor", "--force"],
         "unusable artifact"),
        ("models/mor/model/config.json", _json_list, ["evaluate", "--method", "mor", "--force"], "unusable artifact"),
        ("data/splits.npz", _truncate, ["evaluate", "--method", "mor", "--force"], "unreadable artifact"),
        ("data/popularity.npz", _truncate, ["report"], "unreadable artifact"),
        ("sid/codebook.json", _json_list, ["evaluate", "--method", "mor", "--force"], "not a crabrec codebook"),
        ("crab/codebook.json", _json_list, ["evaluate", "--method", "crab", "--force"], "not a crabrec codebook"),
        ("models/mor/metrics.json", _truncate, ["report"], "unreadable JSON"),
        ("models/mor/rankings.parquet", _truncate, ["report"], "unusable artifact"),
        ("models/mor/rankings.parquet", _truncate, ["evaluate", "--method", "rr", "--force"], "unusable artifact"),
        ("models/sasrec/model/model.safetensors", _truncate, ["evaluate", "--method", "sasrec", "--force"],
         "unusable artifact"),
        ("models/sasrec/model/config.json", _truncate, ["evaluate", "--method", "sasrec", "--force"],
         "unusable artifact"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("recorded", [True, False])
def test_a_corrupt_artifact_is_one_line_naming_it(rel, corrupt, command, expect, recorded, tiny_run, tmp_path, capsys):
    """Caught by the content hash its stage recorded, or (a run whose states hold none) by the loader that reads it."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    declared = False
    for state in (run / "stages").glob("*.json"):
        saved = json.loads(state.read_text())
        declared |= rel in saved.get("artifacts", {})
        if not recorded:
            saved.pop("artifacts", None)
            state.write_text(json.dumps(saved))
    corrupt(run / rel)
    metrics = (run / "models" / "mor" / "metrics.json").read_bytes()
    if recorded and declared:  # a command that runs the stages sees the hash first; `report` reads the file itself
        line = one_line_error(capsys, [*command, str(run)], f"{run / rel}: ")
        assert expect in line or "not the file the" in line, line
    else:
        one_line_error(capsys, [*command, str(run)], f"{run / rel}: {expect}")
    assert (run / "models" / "mor" / "metrics.json").read_bytes() == metrics  # nothing rewritten by the failure


def test_a_codebook_code_out_of_range_names_file_and_item(tiny_run, tmp_path):
    from crabrec.sid.codebook import Codebook

    path = tmp_path / "codebook.json"
    data = json.loads((tiny_run / "sid" / "codebook.json").read_text())
    data["codes"][3][1] = data["sizes"][1] + 5
    path.write_text(json.dumps(data))
    with pytest.raises(CrabError, match=rf"{path}: item '{data['item_ids'][3]}' has code \d+ at level 1, outside"):
        Codebook.load(path)


@pytest.mark.parametrize(
    "damage, expect",
    [
        (lambda d: torch.save({"x": 1}, d / "optim.pt"), "'optimizer'"),
        (lambda d: (d / "state.json").write_text("[]"), "state.json lacks"),
        (lambda d: _truncate(d / "weights.safetensors"), "unusable checkpoint"),
    ],
    ids=["optim-without-keys", "state-list", "weights-truncated"],
)
def test_a_damaged_checkpoint_is_refused(damage, expect, tmp_path):
    from crabrec.train.loop import load_checkpoint, save_checkpoint

    model = torch.nn.Linear(2, 1)
    opt = torch.optim.AdamW(model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
    state = {"epoch": 1, "best_score": 0.1, "best_epoch": 1, "bad_epochs": 0, "history": [], "seconds": 1.0}
    save_checkpoint(tmp_path / "ckpt", model, opt, sched, state)
    assert load_checkpoint(tmp_path / "ckpt", model, opt, sched)["epoch"] == 1
    damage(tmp_path / "ckpt")
    with pytest.raises(CrabError, match=f"unusable checkpoint.*{expect}|{expect}"):
        load_checkpoint(tmp_path / "ckpt", model, opt, sched)


class Tied(torch.nn.Module):
    """One weight under six names, as a tied embedding and output layer are (and PEFT's wrappers add more)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(3, 3, bias=False)
        for name in "bcdef":
            setattr(self, name, torch.nn.Linear(3, 3, bias=False))
            getattr(self, name).weight = self.a.weight
        self.empty_1, self.empty_2 = torch.nn.Parameter(torch.zeros(0, 2)), torch.nn.Parameter(torch.zeros(0, 2))


def test_a_checkpoint_of_tied_weights_is_the_same_bytes_each_time_and_loads_back(tmp_path):
    """safetensors writes a metadata map of several entries in a random order (save_model names each tied copy in
    one): the same weights gave a different checkpoint file from one write to the next."""
    from safetensors.torch import load_model

    from crabrec.train.loop import save_weights

    torch.manual_seed(0)
    model = Tied()
    files = [tmp_path / f"w{i}.safetensors" for i in range(3)]
    for path in files:
        save_weights(model, path)
    assert len({path.read_bytes() for path in files}) == 1
    again = Tied()
    load_model(again, str(files[0]))
    assert torch.equal(again.a.weight, model.a.weight) and again.f.weight is again.a.weight
    assert again.empty_1 is not again.empty_2  # two empty tensors (both at address 0) are two, not one under two names


# -- 9. an imported SID index ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expect",
    [
        ("{", "invalid JSON at line 1"),
        ("[1, 2]", "expected an object {item_id: [token, ...]}, got list"),
        (json.dumps({"1": ["<a_" + "9" * 5000 + ">"], "2": ["<a_1>"]}), "token number too large"),
        (json.dumps({"1": ["<a_70000>"], "2": ["<a_1>"]}), "token number too large"),
        (json.dumps({"1": 5, "2": ["<a_1>"]}), "item '1': expected a list of tokens"),
        (json.dumps({"1": "<a_1>", "2": ["<a_1>"]}), "item '1': expected a list of tokens"),
        ('{"1": ' + DEEP + "}", "JSON nested too deeply"),
        (json.dumps({"1": ["<a_1>"]}), "item '2' of the dataset has no SID"),
    ],
)
def test_a_bad_sid_index_is_one_line(text, expect, tmp_path):
    from crabrec.sid.codebook import parse_index

    path = tmp_path / "index.json"
    path.write_text(text)
    with pytest.raises(CrabError, match=str(path)) as err:
        parse_index(path, ["1", "2"])
    assert expect in str(err.value) and len(str(err.value)) < 400


def test_a_sid_index_saved_with_a_byte_order_mark_reads_as_without(tmp_path):
    """Notepad and Excel write a byte-order mark first; json refused it ("Unexpected UTF-8 BOM")."""
    from crabrec.sid.codebook import parse_index

    text = json.dumps({"1": ["<a_1>", "<b_0>"], "2": ["<a_0>", "<b_1>"]})
    plain, marked = tmp_path / "plain.json", tmp_path / "marked.json"
    plain.write_text(text)
    marked.write_bytes(b"\xef\xbb\xbf" + text.encode())
    got, expected = parse_index(marked, ["1", "2"]), parse_index(plain, ["1", "2"])
    assert got.codes.tolist() == expected.codes.tolist() == [[1, 0], [0, 1]] and got.prefixes == expected.prefixes


# -- 3. a tiny catalogue ---------------------------------------------------------------------------------------------
def test_ranking_sizes_fit_a_tiny_catalogue():
    from crabrec.config import run_config_model
    from crabrec.stages import fit_catalogue

    RunConfig = run_config_model()  # the toolkit's sections and every registered method's own
    cfg = fit_catalogue(RunConfig(), 12)
    assert (cfg.evaluate.beam, cfg.train.valid_beam) == (12, 12)
    assert cfg.evaluate.ks == [1, 3, 5, 10] and cfg.evaluate.fairness_ks == [1, 5, 10]
    assert cfg.rr.ks == [1, 5, 10]
    assert fit_catalogue(RunConfig(), 5000) == RunConfig()  # a normal catalogue is untouched
    with pytest.raises(CrabError, match="the catalogue has 9 items; HR@10/NDCG@10 need at least 10"):
        fit_catalogue(RunConfig(), 9)


def test_a_twelve_item_catalogue_runs_with_the_defaults(tmp_path, capsys):
    d = write_lcrec(tmp_path / "d", USERS, ITEMS)
    runs = tmp_path / "runs"
    args = ["run", "--data", str(d), "--set", f"runs_dir={runs}", "--name", "tiny", *TINY, "--until", "rr"]
    code, _ = cli([*args, "--set", "tokenize.codebook_size=4"])
    err = capsys.readouterr().err
    assert code == 0, err
    metrics = json.loads((runs / "tiny" / "models" / "rr" / "metrics.json").read_text())
    assert "HR@10" in metrics and "HR@20" not in metrics
    items = np.stack(__import__("pandas").read_parquet(runs / "tiny" / "models" / "mor" / "rankings.parquet")["items"])
    assert items.shape[1] == 12  # the whole catalogue ranked


# -- 10. a config file that is not UTF-8 ----------------------------------------------------------------------------
def test_a_config_file_that_is_not_utf8_is_one_line(tmp_path, capsys):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("seed: 3\nname: café\n".encode("latin-1"))
    one_line_error(capsys, ["run", "--config", str(path), "--set", f"runs_dir={tmp_path / 'r'}"], "not UTF-8 text")
    assert not (tmp_path / "r").exists()
