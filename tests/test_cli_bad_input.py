"""Bad input: a one-line error naming the file and the row or key, exit code 2, no traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from crabrec.cli import main
from tests.conftest import write_lcrec

ITEMS = {str(i): {"title": f"t{i}"} for i in range(3)}
INTER = {"u1": [0, 1, 2], "u2": [2, 1, 0], "u3": [1, 0, 2]}


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def _lcrec(tmp_path: Path, inter=None, items=None) -> Path:
    return write_lcrec(tmp_path / "d", inter if inter is not None else INTER, items if items is not None else ITEMS)


def case_missing_path(tmp: Path) -> tuple[list[str], str]:
    return ["--data", str(tmp / "nope")], "dataset path not found"


def case_truncated_json(tmp: Path) -> tuple[list[str], str]:
    d = _lcrec(tmp)
    (d / "Toy.inter.json").write_text('{"u1": [0, 1')
    return ["--data", str(d)], "Toy.inter.json: invalid JSON at line 1"


def case_unknown_item(tmp: Path) -> tuple[list[str], str]:
    d = _lcrec(tmp, inter={**INTER, "u9": [0, 7]})
    return ["--data", str(d)], "user 'u9': item '7' is not in the item table"


def case_duplicate_item_json(tmp: Path) -> tuple[list[str], str]:
    d = _lcrec(tmp)
    (d / "Toy.item.json").write_text('{"0": {"title": "a"}, "1": {"title": "b"}, "0": {"title": "c"}, "2": {}}')
    return ["--data", str(d)], "Toy.item.json: duplicate key '0'"


def case_duplicate_key_in_a_json_lines_row(tmp: Path) -> tuple[list[str], str]:
    (tmp / "inter.jsonl").write_text('{"user": "a", "item": "x"}\n{"user": "a", "item": "y", "user": "b"}\n')
    return ["--data", str(tmp / "inter.jsonl")], "inter.jsonl: line 2: duplicate key 'user' (a key given twice"


def case_duplicate_key_in_a_json_array_row(tmp: Path) -> tuple[list[str], str]:
    (tmp / "inter.json").write_text('[{"user": "a", "item": "x"},\n {"user": "a", "item": {"id": 1, "id": 2}}]')
    return ["--data", str(tmp / "inter.json")], "inter.json: duplicate key 'id' (a key given twice in one object)"


def case_wrong_json_shape(tmp: Path) -> tuple[list[str], str]:
    d = _lcrec(tmp)
    (d / "Toy.inter.json").write_text(json.dumps({"u1": 5}))
    return ["--data", str(d)], "user 'u1': expected a list of item ids"


def case_null_item_id(tmp: Path) -> tuple[list[str], str]:
    d = _lcrec(tmp, inter={**INTER, "u4": [0, None, 1]})
    return ["--data", str(d)], "user 'u4': item ids are strings or integers, got None"


def case_empty_after_kcore(tmp: Path) -> tuple[list[str], str]:
    return ["--data", str(_lcrec(tmp)), "--set", "data.kcore=10"], "no interactions left after 10-core"


def _table(tmp: Path, inter: str, items: str = "item,title\nx,X\ny,Y\n") -> tuple[Path, Path]:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "inter.csv").write_text(inter)
    (tmp / "items.csv").write_text(items)
    return tmp / "inter.csv", tmp / "items.csv"


def case_non_numeric_timestamp(tmp: Path) -> tuple[list[str], str]:
    i, t = _table(tmp, "user,item,timestamp\na,x,1\na,y,yesterday\nb,x,3\nb,y,4\n")
    return ["--data", str(i), "--set", f"data.item_table={t}", "--set", "data.kcore=0"], (
        "inter.csv: row 3: timestamp 'yesterday' is not a number (the other rows are Unix time)"
    )


def case_infinite_timestamp(tmp: Path) -> tuple[list[str], str]:
    i, t = _table(tmp, "user,item,timestamp\na,x,1\na,y,2\nb,x,-inf\nb,y,1e400\n")
    return ["--data", str(i), "--set", f"data.item_table={t}", "--set", "data.kcore=0"], (
        "inter.csv: row 4: timestamp '-inf' is not a finite number"
    )


def case_wrong_columns(tmp: Path) -> tuple[list[str], str]:
    i, t = _table(tmp, "who,what\na,x\n")
    return ["--data", str(i), "--set", f"data.item_table={t}"], "inter.csv: no user column (looked for user,"


def case_duplicate_item_csv(tmp: Path) -> tuple[list[str], str]:
    i, t = _table(tmp, "user,item\na,x\na,y\n", "item,title\nx,X\ny,Y\nx,Z\n")
    return ["--data", str(i), "--set", f"data.item_table={t}", "--set", "data.kcore=0"], (
        "items.csv: rows 2 and 4: item id 'x' is given twice, with different text; keep one row per item"
    )


def case_minionerec_missing_train(tmp: Path) -> tuple[list[str], str]:
    d = tmp / "mor"
    for split in ("valid", "test"):
        (d / split).mkdir(parents=True)
        (d / split / "x.csv").write_text('user_id,history_item_id,item_id\nA1,"[0, 1]",2\n')
    (d / "index").mkdir()
    (d / "index" / "x.item.json").write_text(json.dumps(ITEMS))
    return ["--data", str(d)], "no train split (train/*.csv)"


def case_minionerec_bad_history(tmp: Path) -> tuple[list[str], str]:
    d = tmp / "mor"
    for split in ("train", "valid", "test"):
        (d / split).mkdir(parents=True)
        (d / split / "x.csv").write_text('user_id,history_item_id,item_id\nA1,"[0, 1]",2\nA2,"[0,",1\n')
    (d / "index").mkdir()
    (d / "index" / "x.item.json").write_text(json.dumps(ITEMS))
    return ["--data", str(d)], "train/x.csv: row 3: history_item_id '[0,' is not a list of item ids"


def case_config_unknown_key(tmp: Path) -> tuple[list[str], str]:
    (tmp / "c.yaml").write_text("data:\n  kcoer: 3\n")
    return ["--config", str(tmp / "c.yaml")], "c.yaml: data.kcoer: unknown key"


def case_config_ill_typed(tmp: Path) -> tuple[list[str], str]:
    return ["--set", "data.kcore=many"], "--set: data.kcore: Input should be a valid integer"


def case_config_negative(tmp: Path) -> tuple[list[str], str]:
    return ["--set", "data.max_history=0"], "--set: data.max_history: Input should be greater than or equal to 1"


def case_config_file_and_option_each_named(tmp: Path) -> tuple[list[str], str]:
    (tmp / "c.yaml").write_text("data:\n  kcore: -2\n")
    return ["--config", str(tmp / "c.yaml"), "--set", "data.max_history=0"], (
        "c.yaml: data.kcore: Input should be greater than or equal to 0 (got -2); --set: data.max_history: Input "
        "should be greater than or equal to 1 (got 0)"
    )


def case_config_settings_that_clash_name_the_file_and_the_option(tmp: Path) -> tuple[list[str], str]:
    (tmp / "c.yaml").write_text("train:\n  cuda_graphs: true\n")
    return ["--config", str(tmp / "c.yaml"), "--set", "train.grad_accum=2"], (
        "c.yaml with --set: train: cuda_graphs=true records whole steps: it needs grad_accum=1, not 2"
    )


def case_config_invalid_yaml(tmp: Path) -> tuple[list[str], str]:
    (tmp / "c.yaml").write_text("data: [unclosed\n")
    return ["--config", str(tmp / "c.yaml")], "c.yaml: line"


def case_config_section_written_twice(tmp: Path) -> tuple[list[str], str]:
    (tmp / "c.yaml").write_text("data:\n  kcore: 3\ntrain:\n  epochs: 2\ntrain:\n  lr: 0.1\n")  # epochs would be lost
    return ["--config", str(tmp / "c.yaml")], (
        "c.yaml: line 5 invalid YAML (key 'train' written twice; the first is on line 3)"
    )


def case_config_key_written_twice(tmp: Path) -> tuple[list[str], str]:
    (tmp / "c.yaml").write_text("data:\n  kcore: 3\n  kcore: 5\n")
    return ["--config", str(tmp / "c.yaml")], (
        "c.yaml: line 3 invalid YAML (key 'kcore' written twice; the first is on line 2)"
    )


def case_config_missing(tmp: Path) -> tuple[list[str], str]:
    return ["--config", str(tmp / "missing.yaml")], "missing.yaml: file not found"


def case_config_is_a_folder(tmp: Path) -> tuple[list[str], str]:
    return ["--config", str(tmp)], f"config {tmp}: a folder, not a YAML file"


def case_data_is_a_pipe(tmp: Path) -> tuple[list[str], str]:
    os.mkfifo(tmp / "fifo")  # as --data <(...) hands over: a run reads its data again, a pipe only once
    return ["--data", str(tmp / "fifo")], "fifo: not a file or folder (a pipe, as from <(...)?)"


def case_bad_override(tmp: Path) -> tuple[list[str], str]:
    return ["--set", "justakey"], "expected KEY=VALUE"


CASES = [v for k, v in sorted(globals().items()) if k.startswith("case_")]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__[5:] for c in CASES])
def test_bad_input_one_line_error(case, tmp_path, capsys):
    args, expected = case(tmp_path)
    code, out, err = run_cli(["data", "stats", *args], capsys)
    assert code == 2
    assert err.startswith("crabrec: error: ")
    assert expected in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_commands_own_option_is_named_in_its_error(tmp_path, capsys):
    """A bad value given through a command's own option names that option (typer's name for it), not the config."""
    code, _, err = run_cli(["tokenize", "--levels", "99", "--set", f"runs_dir={tmp_path}"], capsys)
    assert code == 2 and "--levels: tokenize.levels: Input should be less than or equal to 8 (got 99)" in err, err
    code, _, err = run_cli(["rebalance", "--lambda", "-1", "--set", f"runs_dir={tmp_path}"], capsys)
    assert code == 2 and "--lambda: crab.lam: Input should be greater than or equal to 0" in err, err
    code, _, err = run_cli(["recommend", str(tmp_path), "--user", "0"], capsys)  # an index, not a user to look up
    assert code == 2 and "--user 0 goes with --history" in err and "--user-id ID" in err, err
    code, _, err = run_cli(["evaluate", "--method", "nosuch"], capsys)  # --model is its alias, not its name
    assert code == 2 and "--method 'nosuch': expected one of mor," in err, err
    code, _, err = run_cli(["data", "stats", "--seed", "-1"], capsys)
    assert code == 2 and "--seed: seed: Input should be greater than or equal to 0 (got -1)" in err, err


def test_short_users_are_dropped_with_a_warning(tmp_path, capsys):
    d = _lcrec(tmp_path, inter={**INTER, "solo": [1]})
    code, out, err = run_cli(["data", "stats", "--data", str(d), "--set", "data.kcore=0"], capsys)
    assert code == 0
    assert "dropped 1 user(s) with fewer than 2 interactions" in err
    assert "users              3" in out


def test_data_stats_minionerec(shared, capsys):
    path = shared("minionerec_amazon18")
    code, out, _ = run_cli(["data", "stats", "--data", str(path), "--set", "data.train_on_available=true"], capsys)
    assert code == 0
    assert "valid 4,866  test 4,866" in out


def test_a_run_folder_that_is_not_one_says_what_it_is(tmp_path, capsys, monkeypatch):
    """Every command given RUN_DIR says what the path is instead of a run, and what was likely meant."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ratings.csv").write_text("user,item\n")
    (tmp_path / "runs" / "office-quick").mkdir(parents=True)
    (tmp_path / "runs" / "office-quick" / "config.yaml").write_text("name: office-quick\n")
    (tmp_path / "empty").mkdir()
    cases = {
        ("train", "mor"): "mor: no such run folder; a method is chosen with --method mor",
        ("evaluate", "D²LR"): "D²LR: no such run folder; a method is chosen with --method d2lr",
        ("train", "nosuch", "--config", "x.yaml"): "nosuch: no such run folder; `crabrec runs` lists the runs in runs/",
        ("run", "ratings.csv"): "ratings.csv: a file, not a run folder (one holding config.yaml); a data file goes",
        ("evaluate", "office-quick"): "office-quick: no such folder here; the run of that name is runs/office-quick",
        ("report", "runs"): "runs: a folder of runs (office-quick), not a run; name one of them",
        ("serve", "empty"): "empty: not a run folder (no config.yaml); `crabrec run` makes one",
        ("compare", "nosuch", "--method", "rr"): "nosuch: no such run folder",
        ("recommend", "nosuch", "--user-id", "u1"): "nosuch: no such run folder",
        ("data", "export", "nosuch", "out"): "nosuch: no such run folder",
    }
    for args, expected in cases.items():
        code, _, err = run_cli(list(args), capsys)
        assert code == 2 and f"crabrec: error: {expected}" in err and err.count("\n") == 1, (args, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "ratings.csv", "runs"]  # nothing written
