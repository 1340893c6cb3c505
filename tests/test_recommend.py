"""The Python API and `crabrec recommend`: what a user gets equals what `evaluate` scored, and bad input is one line."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crabrec
from crabrec.errors import CrabError
from crabrec.methods import methods
from crabrec.runfiles import RunFiles
from tests.conftest import cli
from tests.test_cli_bad_input import run_cli

RANKED = [m.name for m in methods() if m.ranker is not None]


def test_every_method_can_rank():
    assert set(RANKED) == {
        *("mor", "tiger", "sasrec", "rw", "rr", "d2lr", "crab", "ppd", "ppd-rr", "crab-ppd", "tiger-rr", "tiger-ppd"),
        *("tiger-crab", "tiger-ppd-rr", "pop", "random"),
    }


def histories_of(run, rows: int):
    files = RunFiles(run)
    ids = files.load_items()["item_ids"]
    test = files.load_splits().test
    n = min(rows, len(test))
    return [[ids[i] for i in row] for row in test.rows()[:n]], test.user[:n].tolist(), ids


@pytest.mark.parametrize("method", RANKED)
def test_api_top_k_equals_the_evaluated_rankings(tiny_run, method):
    """recommend_batch over the test histories (with their users) reproduces rankings.parquet, slot for slot."""
    histories, users, ids = histories_of(tiny_run, 150)
    rec = crabrec.load(tiny_run, method)
    got = rec.recommend_batch(histories, k=rec.max_k, users=users, exclude_seen=False)  # the paper's protocol
    saved = RunFiles(tiny_run).load_rankings(method)
    for row, recs in enumerate(got):
        expected = [ids[i] for i in saved["items"][row] if i >= 0]
        assert [r.item for r in recs] == expected[: rec.max_k]
        assert [r.rank for r in recs] == list(range(1, len(recs) + 1))
        if method != "sasrec":  # SASRec's stored scores are its logits too, but compare generative ones exactly
            assert np.allclose([r.score for r in recs], saved["scores"][row][: len(recs)], atol=1e-6)


def test_recommendation_fields_come_from_the_run(tiny_run):
    rec = crabrec.load(tiny_run, "mor")
    items = RunFiles(tiny_run).load_items()
    pop = RunFiles(tiny_run).load_popularity()
    out = rec.recommend([items["item_ids"][0], items["item_ids"][1]], k=5)
    assert 1 <= len(out) <= 5
    for r in out:
        i = items["item_ids"].index(r.item)
        assert r.title == html.unescape(items["text"][i]["title"])  # "&amp;" in the data is shown "&"
        assert r.group == pop.group[i] and r.popular == bool(pop.popular[i])
    assert [r.score for r in out] == sorted((r.score for r in out), reverse=True)
    assert set(out[0].as_dict()) == {"rank", "item", "title", "score", "group", "popular"}
    n = len(items["item_ids"])
    assert repr(rec) == f"Recommender(run={str(tiny_run)!r}, method='mor', items={n:,}, max_k={rec.max_k})"


def test_single_history_equals_its_row_in_a_batch(tiny_run):
    histories, _, _ = histories_of(tiny_run, 8)
    rec = crabrec.load(tiny_run, "crab")
    batch = rec.recommend_batch(histories, k=10)
    for h, expected in zip(histories, batch):
        assert [r.item for r in rec.recommend(h, k=10)] == [r.item for r in expected]


def test_long_history_reads_the_last_items(tiny_run):
    histories, _, _ = histories_of(tiny_run, 1)
    rec = crabrec.load(tiny_run, "sasrec")
    pad = [histories[0][0]] * 50
    assert [r.item for r in rec.recommend(pad + histories[0], k=5)] == [
        r.item for r in rec.recommend((pad + histories[0])[-rec.max_history :], k=5)
    ]


def test_api_errors(tiny_run, tmp_path):
    rec = crabrec.load(tiny_run, "mor")
    known = rec.item_ids[0]
    with pytest.raises(CrabError, match=r"history: 2 item id\(s\) not in .*'nope-1', 'nope-2'"):
        rec.recommend([known, "nope-1", "nope-2"])
    assert rec.recommend([known, "nope"], drop_unknown=True) == rec.recommend([known])
    with pytest.raises(CrabError, match="history: empty after dropping unknown items"):
        rec.recommend(["nope"], drop_unknown=True)
    with pytest.raises(CrabError, match="history: empty"):
        rec.recommend([])
    with pytest.raises(CrabError, match="history 1: 1 item id"):
        rec.recommend_batch([[known], ["zz"]])
    for k in (0, rec.max_k + 1, 2.5, True):
        with pytest.raises(CrabError, match=f"expected an integer from 1 to {rec.max_k}"):
            rec.recommend([known], k=k)
    with pytest.raises(CrabError, match="item ids are strings"):
        rec.recommend([known, None])
    with pytest.raises(CrabError, match="expected a list of item ids"):
        rec.recommend(known)
    with pytest.raises(CrabError, match="users: expected one per history"):
        rec.recommend_batch([[known], [known]], users=[1])
    with pytest.raises(CrabError, match=r"users\[0\]: expected a user index"):
        rec.recommend([known], user=-1)
    with pytest.raises(CrabError, match=r"got 'u3' \(users of the data by their ids go in user_ids\)"):
        rec.recommend([known], user="u3")
    with pytest.raises(CrabError, match="method 'nope': expected one of"):
        crabrec.load(tiny_run, "nope")
    with pytest.raises(CrabError, match="not a run folder"):
        crabrec.load(tmp_path, "mor")
    assert rec.recommend([int(known)]) == rec.recommend([known])  # JSON numbers as ids


def test_a_title_typed_for_an_item_id_names_the_items_it_is_in(tiny_run, capsys):
    """``--history "Toy Story"`` was two unknown ids and nothing more: the error names the items whose title holds
    the typed words, by id; words in no title add nothing."""
    rec = crabrec.load(tiny_run, "mor")
    i = next(i for i, t in enumerate(rec.titles) if len(t.split()) >= 3)
    words = rec.titles[i].split()[:2]
    with pytest.raises(CrabError, match="not in this run's catalogue") as info:
        rec.recommend(words)
    assert f"items are given by id, and {' '.join(words)!r} is in the title of {rec.item_ids[i]} (" in str(info.value)
    code, _, err = run_cli(["recommend", str(tiny_run), "--history", " ".join(words).upper()], capsys)
    assert code == 2 and f"is in the title of {rec.item_ids[i]} (" in err  # case aside, as typed on the command line
    with pytest.raises(CrabError, match=r"catalogue of \d+ items: 'zzqx' \(--drop-unknown"):
        rec.recommend(["zzqx"])


def test_the_data_stage_keeps_each_users_id_and_whole_history(tiny_run):
    """users.npz holds the dataset's own user ids in index order, and each test row is the end of its user's
    sequence (leave-one-out: history, then target)."""
    from crabrec.config import load_config
    from crabrec.data.loaders import load_dataset

    files = RunFiles(tiny_run)
    known = files.load_users()
    ds = load_dataset(load_config(str(files.config), {"name": tiny_run.name, "runs_dir": str(tiny_run.parent)}).data)
    assert known.ids == ds.users and len(known) == ds.n_users
    assert all(known.sequence(u) == ds.sequences[u].tolist() for u in range(ds.n_users))
    test = files.load_splits().test
    for r in range(len(test)):
        seq = known.sequence(int(test.user[r]))
        row = test.history[r, : test.length[r]].tolist() + [int(test.target[r])]
        assert seq[-len(row) :] == row


def test_recommend_for_a_user_of_the_data(tiny_run):
    """A user id stands for the user's whole known history and their index: the same list as giving both."""
    known = RunFiles(tiny_run).load_users()
    for method in ("mor", "tiger"):
        rec = crabrec.load(tiny_run, method)
        for u in (0, 3):
            user_id, history = known.ids[u], [rec.item_ids[i] for i in known.sequence(u)]
            assert rec.history(user_id) == history
            got = rec.recommend(user_id=user_id, k=8)
            assert got == rec.recommend(history, k=8, user=u)
            assert not {r.item for r in got} & set(history)  # nothing they had, however old
        ids = known.ids[:3]
        batch = rec.recommend_batch(None, k=5, user_ids=ids)  # (scores agree to float rounding across batches)
        assert [[r.item for r in x] for x in batch] == [[r.item for r in rec.recommend(user_id=i, k=5)] for i in ids]
        own = [rec.item_ids[0]]
        assert rec.recommend(own, user_id=ids[1], k=5) == rec.recommend(own, user=1, k=5)
    with pytest.raises(CrabError, match=r"user_id 'nobody': not a user of this run \(\d+ users"):
        rec.recommend(user_id="nobody")
    with pytest.raises(CrabError, match=rf"user_id '{known.ids[3]}.0': not a user of this run \(.*\); the data "
                                        rf"writes it '{known.ids[3]}'$"):  # fmt: skip
        rec.recommend(user_id=f"{known.ids[3]}.0")  # an id typed another way: what it stands for is said
    typed = f" 0{rec.item_ids[4]}"
    with pytest.raises(CrabError, match=rf"1 item id\(s\) not in this run's catalogue of \d+ items: '{typed}' \(the "
                                        rf"catalogue writes '{rec.item_ids[4]}'\) \(--drop-unknown"):  # fmt: skip
        rec.recommend([rec.item_ids[0], typed])
    with pytest.raises(CrabError, match="give users .* or user_ids .*, not both"):
        rec.recommend(user_id=known.ids[0], user=0)
    with pytest.raises(CrabError, match="history: missing"):
        rec.recommend()
    with pytest.raises(CrabError, match=r"user_ids\[1\]: expected a user id"):
        rec.recommend_batch(None, user_ids=[known.ids[0], None])


def test_a_run_without_users_says_how_to_get_them(tiny_run, tmp_path):
    import shutil

    run = tmp_path / "old"
    shutil.copytree(tiny_run, run)
    (run / "data" / "users.npz").unlink()  # as a run made before the data stage kept them
    rec = crabrec.load(run, "mor")
    assert rec.recommend([rec.item_ids[0]], k=3)  # histories still work
    with pytest.raises(CrabError, match=r"made before crabrec kept each user's history .* --force data"):
        rec.recommend(user_id="a")
    states = {p.name: p.read_bytes() for p in (run / "stages").glob("*.json")}
    code, _ = cli(["run", str(run), "--until", "evaluate"])  # still cached: nothing is recomputed
    assert code == 0 and not (run / "data" / "users.npz").exists()
    assert {p.name: p.read_bytes() for p in (run / "stages").glob("*.json")} == states


def test_a_method_not_trained_in_the_run_says_which_stage_trains_it(tiny_run, tmp_path, capsys):
    """A run stopped before a method's training (``--until tiger``), or whose training did not finish, names the
    stage and the command instead of a missing model file."""
    import shutil

    run = tmp_path / "partial"
    run.mkdir()
    shutil.copy(tiny_run / "config.yaml", run / "config.yaml")
    shutil.copytree(tiny_run / "stages", run / "stages")
    (run / "stages" / "finetune.json").unlink()
    with pytest.raises(CrabError, match=r"crab is not trained in this run \(its stage 'finetune' has not finished\)"):
        crabrec.load(run, "crab")
    code, _ = cli(["recommend", str(run), "--method", "crab", "--history", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and f"`crabrec train {run} --method crab` trains it" in err


def test_beam_sets_the_longest_list(tiny_run):
    rec = crabrec.load(tiny_run, "mor", beam=30)
    assert rec.max_k == 30 and len(rec.recommend([rec.item_ids[0]], k=30)) == 30
    with pytest.raises(CrabError, match="beam=0"):
        crabrec.load(tiny_run, "mor", beam=0)
    huge = crabrec.load(tiny_run, "mor", beam=10**12)  # capped: not a [rows, 10^12] array
    n_sids = len(huge.ranker.trie.sids)
    assert huge.max_k == n_sids
    assert len(huge.recommend([rec.item_ids[0]], k=n_sids, exclude_seen=False)) == n_sids
    assert len(huge.recommend([rec.item_ids[0]], k=n_sids)) == n_sids - 1  # every SID but the history's
    assert [r.item for r in huge.recommend([rec.item_ids[0]], k=30)] == [
        r.item for r in rec.recommend([rec.item_ids[0]], k=30)
    ]


def test_numpy_histories_are_read_as_lists(tiny_run):
    rec = crabrec.load(tiny_run, "mor")
    ids = rec.item_ids[:4]
    assert rec.recommend(np.array(ids[:2]), k=5) == rec.recommend(ids[:2], k=5)
    batch = rec.recommend_batch(np.array([ids[:2], ids[2:]]), k=5)
    assert batch == rec.recommend_batch([ids[:2], ids[2:]], k=5)
    with pytest.raises(CrabError, match="run_dir: expected a path"):
        crabrec.load(None)


def test_pandas_columns_are_read_as_lists(tiny_run):
    """What a notebook holds: a Series of histories (``groupby(...).agg(list)``), a Series or Index of ids; each is
    the list it holds (a user id Index, per-history excludes, unavailable items and a frame's rows too)."""
    import pandas as pd

    rec = crabrec.load(tiny_run, "mor")
    ids, users = rec.item_ids[:4], rec.known_users().ids[:2]
    lists = [ids[:2], ids[2:]]
    histories = pd.Series(lists, index=["u1", "u2"])
    assert rec.recommend(pd.Series(ids[:2]), k=5) == rec.recommend(ids[:2], k=5)
    assert rec.recommend_batch(histories, k=5, excludes=pd.Series([ids[:1], ids[3:]])) == rec.recommend_batch(
        lists, k=5, excludes=[ids[:1], ids[3:]]
    )
    assert rec.recommend_batch(user_ids=pd.Index(users), k=5) == rec.recommend_batch(user_ids=list(users), k=5)
    assert rec.recommend_frame(histories, k=5).equals(rec.recommend_frame(lists, k=5))
    rec.set_unavailable(pd.Index(ids[:1]))
    assert ids[0] not in [r.item for r in rec.recommend(ids[1:3], k=20)]


def test_untrained_method_is_one_line(tiny_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    shutil.rmtree(run / "models" / "rr")
    with pytest.raises(CrabError, match=rf"rerank.json: missing; run `crabrec evaluate {run} --method rr`"):
        crabrec.load(run, "rr")
    shutil.rmtree(run / "models" / "d2lr" / "model")
    with pytest.raises(CrabError, match=r"d2lr is not trained in this run \(no model in models/d2lr/model\); `crabrec"):
        crabrec.load(run, "d2lr")
    shutil.rmtree(run / "models" / "mor" / "model")  # PPD ranks with MOR's model: MOR is named
    with pytest.raises(CrabError, match=r"mor is not trained in this run .*; `crabrec train .* --method mor`"):
        crabrec.load(run, "ppd")
    (run / "crab" / "codebook.json").unlink()
    with pytest.raises(CrabError, match=r"CRAB has not run here \(no rebalanced codebook, crab/codebook.json\)"):
        crabrec.load(run, "crab-ppd")


def test_cli_recommend_prints_a_table(tiny_run, capsys):
    rec = crabrec.load(tiny_run, "rr")
    history = ",".join(rec.item_ids[:3])
    code, out, err = run_cli(["recommend", str(tiny_run), "--method", "rr", "--history", history, "-k", "4"], capsys)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].split()[:4] == ["rank", "item", "score", "group"]
    expected = rec.recommend(rec.item_ids[:3], k=4)
    assert [line.split()[1] for line in lines[1:]] == [r.item for r in expected]


def test_cli_recommend_file_to_standard_output(tiny_run, tmp_path, capsys):
    """``--output -`` prints the file's answers as JSON lines, the same as a .jsonl file holds, and nothing else."""
    histories, users, _ = histories_of(tiny_run, 6)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"history": h, "user": u}) + "\n" for h, u in zip(histories, users)))
    args = ["recommend", str(tiny_run), "--method", "tiger", "--input", str(src), "-k", "3", "--output"]
    code, out, err = run_cli([*args, "-"], capsys)
    assert code == 0, err
    assert run_cli([*args, str(tmp_path / "out.jsonl")], capsys)[0] == 0
    assert out == (tmp_path / "out.jsonl").read_text() and len(out.splitlines()) == 6


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_cli_recommend_file(tiny_run, tmp_path, capsys, suffix):
    histories, users, _ = histories_of(tiny_run, 20)
    src = tmp_path / f"in{suffix}"
    sep = "\t" if suffix == ".tsv" else ","
    if suffix in (".csv", ".tsv"):
        pd.DataFrame({"history": [" ".join(h) for h in histories], "user": users}).to_csv(src, index=False, sep=sep)
    elif suffix == ".jsonl":
        src.write_text("".join(json.dumps({"history": h, "user": u}) + "\n" for h, u in zip(histories, users)))
    else:
        pd.DataFrame({"history": histories, "user": users}).to_parquet(src)
    out = tmp_path / f"out{suffix}"
    code, _, err = run_cli(["recommend", str(tiny_run), "--method", "tiger", "--input", str(src), "--output", str(out),
                            "-k", "5"], capsys)  # fmt: skip
    assert code == 0, err
    expected = crabrec.load(tiny_run, "tiger").recommend_batch(histories, k=5, users=users)
    if suffix in (".csv", ".tsv"):
        got = [row.split() for row in pd.read_csv(out, sep=sep)["items"].astype(str)]
    elif suffix == ".jsonl":
        got = [json.loads(line)["items"] for line in out.read_text().splitlines()]
    else:
        got = [list(x) for x in pd.read_parquet(out)["items"]]
    assert got == [[r.item for r in recs] for recs in expected]


def test_cli_recommend_a_file_of_one_user_a_line(tiny_run, tmp_path, capsys):
    """S3-Rec's and P5's layout (``user item item ...``) was "unknown extension '.txt'": each line is a user id and
    the history after it (none: the user's known history), the same answers as a CSV of user_id and history."""
    rec = crabrec.load(tiny_run, "sasrec")
    histories, users, _ = histories_of(tiny_run, 6)
    ids = [rec.known_users().ids[u] for u in users]
    lines = [f"{u} {' '.join(h)}" for u, h in zip(ids[:4], histories[:4], strict=True)] + ["", f"{ids[4]}"]
    (tmp_path / "in.txt").write_text("\n".join([*lines[:2], lines[2].replace(" ", ","), *lines[3:]]) + "\n")
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(["recommend", str(tiny_run), "--method", "sasrec", "--input", str(tmp_path / "in.txt"),
                            "--output", str(out), "-k", "3"], capsys)  # fmt: skip
    assert code == 0, err
    expected = rec.recommend_batch([*histories[:4], None], k=3, user_ids=ids[:5])
    assert [json.loads(line)["items"] for line in out.read_text().splitlines()] == [
        [r.item for r in recs] for recs in expected
    ]
    (tmp_path / "bad.txt").write_text(f"{ids[0]} {histories[0][0]}\nnobody {histories[0][0]}\n")
    code, _, err = run_cli(["recommend", str(tiny_run), "--input", str(tmp_path / "bad.txt"), "--output", str(out)],
                           capsys)  # fmt: skip
    assert code == 2 and "bad.txt: line 2: user_id 'nobody': not a user of this run" in err


def test_a_spreadsheets_csv_export_reads_as_a_plain_csv(tmp_path):
    """Excel's "CSV UTF-8" starts with a byte-order mark, and where the decimal mark is a comma it separates fields
    with semicolons: the same histories as a plain CSV (the header was read as "\\ufeffhistory", or as one column)."""
    from crabrec.histories import iter_histories

    plain = tmp_path / "plain.csv"
    plain.write_text("user_id,history\nA7,1000 1001\nB2,1002\n")
    expected = next(iter_histories(plain))
    assert expected == ([["1000", "1001"], ["1002"]], None, ["A7", "B2"], ["line 2", "line 3"], None)
    exports = {
        "bom.csv": "\ufeffuser_id,history\r\nA7,1000 1001\r\nB2,1002\r\n",
        "semicolons.csv": "\ufeffuser_id;history\r\nA7;1000,1001\r\nB2;1002\r\n",
        "tabs.tsv": "user_id\thistory\nA7\t1000,1001\nB2\t1002\n",
        "bars.csv": "user_id|history\nA7|1000 1001\nB2|1002\n",
    }
    for name, text in exports.items():
        (tmp_path / name).write_bytes(text.encode("utf-8"))
        assert next(iter_histories(tmp_path / name)) == expected, name


@pytest.mark.parametrize("kind", ["csv", "jsonl", "parquet"])
def test_histories_from_standard_input_or_a_pipe_are_told_apart_by_content(kind, tiny_run, tmp_path, capsys,
                                                                          monkeypatch):  # fmt: skip
    """``--input -`` (standard input) and ``--input <(...)`` (a pipe) have no extension: CSV, JSON lines and parquet
    are told apart by their content, and the answers are the file's (they were "unknown extension '(none)'")."""
    import io
    import os
    import sys
    import threading

    histories, users, _ = histories_of(tiny_run, 5)
    src = tmp_path / f"in.{kind}"
    if kind == "csv":
        src.write_text("history\n" + "".join(" ".join(h) + "\n" for h in histories))
    elif kind == "jsonl":
        src.write_text("".join(json.dumps({"history": h}) + "\n" for h in histories))
    else:
        pd.DataFrame({"history": histories}).to_parquet(src)
    args = ["recommend", str(tiny_run), "--method", "sasrec", "--output", "-", "-k", "3", "--input"]
    code, expected, err = run_cli([*args, str(src)], capsys)
    assert code == 0 and len(expected.splitlines()) == 5, err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(src.read_bytes())))
    assert run_cli([*args, "-"], capsys)[:2] == (0, expected)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(src.read_bytes()))
    writer.start()
    assert run_cli([*args, str(fifo)], capsys)[:2] == (0, expected)
    writer.join()


def test_a_history_written_as_a_list_reads_as_its_ids(tiny_run, tmp_path, capsys):
    """A CSV with a list column as pandas writes it (``['B01', 'B02']``), a JSON list in a cell, or ``--history
    "[1, 2]"`` / ``"1 2"`` / ``"1,2"`` / ``"1;2"`` / ``"1|2"``: the same ids (the brackets were read as part of the
    first and last id)."""
    rec = crabrec.load(tiny_run, "sasrec")
    ids = rec.item_ids[:3]
    src, out = tmp_path / "lists.csv", tmp_path / "out.jsonl"
    written = [str(list(ids)), str(list(ids[:2])), json.dumps(ids), " ".join(ids)]  # the first two as pandas writes
    pd.DataFrame({"history": written}).to_csv(src, index=False)  # a list column: "['3', '4', '6']"
    assert src.read_text().splitlines()[1].startswith("\"['")
    code, _, err = run_cli(["recommend", str(tiny_run), "--method", "sasrec", "--input", str(src), "--output",
                            str(out), "-k", "5"], capsys)  # fmt: skip
    assert code == 0, err
    expected = [[r.item for r in x] for x in rec.recommend_batch([ids, ids[:2], ids, ids], k=5)]
    assert [json.loads(line)["items"] for line in out.read_text().splitlines()] == expected
    for text in (f"[{', '.join(ids)}]", " ".join(ids), ",".join(ids), ";".join(ids), "|".join(ids), json.dumps(ids)):
        code, printed, err = run_cli(["recommend", str(tiny_run), "--method", "sasrec", "--history", text, "-k",
                                      "5"], capsys)  # fmt: skip
        assert code == 0, (text, err)
        assert [line.split()[1] for line in printed.strip().splitlines()[1:]] == expected[0], text


def test_cli_recommend_for_users(tiny_run, tmp_path, capsys):
    rec = crabrec.load(tiny_run, "tiger")
    ids = RunFiles(tiny_run).load_users().ids[:3]
    code, out, err = run_cli(["recommend", str(tiny_run), "--method", "tiger", "--user-id", ids[0], "-k", "4"], capsys)
    assert code == 0, err
    assert [line.split()[1] for line in out.strip().splitlines()[1:]] == [r.item for r in rec.recommend(
        user_id=ids[0], k=4)]  # fmt: skip
    assert f"user {ids[0]!r}: {len(rec.history(ids[0]))} known items" in err
    src, dst = tmp_path / "users.csv", tmp_path / "out.jsonl"
    own = rec.item_ids[0]
    src.write_text(f"user_id,history\n{ids[0]},\n{ids[1]},{own}\n{ids[2]},\n")
    code, _, err = run_cli(["recommend", str(tiny_run), "--method", "tiger", "--input", str(src), "--output",
                            str(dst), "-k", "5"], capsys)  # fmt: skip
    assert code == 0, err
    expected = rec.recommend_batch([None, [own], None], k=5, user_ids=ids)
    assert [json.loads(line)["items"] for line in dst.read_text().splitlines()] == [
        [r.item for r in x] for x in expected
    ]


def bad_files(tmp_path, item: str, user: str):
    (tmp_path / "nohist.csv").write_text("items\n1 2\n")
    (tmp_path / "unknown.jsonl").write_text(json.dumps({"history": [item]}) + "\n" + json.dumps({"history": ["zz"]}))
    (tmp_path / "notjson.jsonl").write_text('{"history": ["1"]}\n{oops\n')
    (tmp_path / "empty.csv").write_text("history\n")
    (tmp_path / "users.jsonl").write_text(json.dumps({"history": [item], "user": -3}) + "\n")
    (tmp_path / "struser.jsonl").write_text(json.dumps({"history": [item], "user": "u3"}) + "\n")
    (tmp_path / "partial.jsonl").write_text(json.dumps({"history": [item], "user": 1}) + '\n{"history": ["1"]}\n')
    (tmp_path / "cell.jsonl").write_text(json.dumps({"history": {"a": 1}}) + "\n")
    (tmp_path / "h.xlsx").write_text("x")
    (tmp_path / "latin1.txt").write_bytes(b"B\xe9\n")
    (tmp_path / "both.jsonl").write_text(json.dumps({"history": [item], "user": 1, "user_id": "a"}) + "\n")
    (tmp_path / "booluser.jsonl").write_text(json.dumps({"user_id": True}) + "\n")
    (tmp_path / "nouser.csv").write_text(f"user_id,history\n{user},\nzz,{item}\n")
    (tmp_path / "ok.csv").write_text(f"history\n{item}\n")
    (tmp_path / "folder.csv").mkdir()
    (tmp_path / "brokenlist.csv").write_text(f'history\n"[{item}, [1]]"\n')
    return [
        (["--input", "nohist.csv", "--output", "o.csv"], "nohist.csv: no `history` or `user_id` column"),
        (["--input", "both.jsonl", "--output", "o.csv"], "both.jsonl: both `user` and `user_id` columns"),
        (["--input", "booluser.jsonl", "--output", "o.csv"], "booluser.jsonl: line 1: user_id True: expected a"),
        (["--input", "nouser.csv", "--output", "o.csv"], "nouser.csv: line 3: user_id 'zz': not a user of this run"),
        (["--user-id", "zz"], "user_id 'zz': not a user of this run"),
        (["--user-id", "zz", "--user", "1"], "give --user-id (the data's user id) or --user"),
        (["--user", "u3"], "--user u3: expected the run's user index, a whole number; for a user of the data by"),
        (["--user", "u3"], "a whole number; for a user of the data by their id, give --user-id u3"),
        (["--input", "unknown.jsonl", "--output", "o.csv"], "unknown.jsonl: line 2: history: 1 item id(s) not in"),
        (["--input", "notjson.jsonl", "--output", "o.csv"], "notjson.jsonl: line 2: not JSON"),
        (["--input", "empty.csv", "--output", "o.csv"], "empty.csv: no rows"),
        (["--input", "users.jsonl", "--output", "o.csv"], "users.jsonl: line 1: user -3: expected a user index"),
        (["--input", "struser.jsonl", "--output", "o.csv"], "(users of the data by their ids go in a `user_id` column"),
        (["--input", "partial.jsonl", "--output", "o.csv"], "partial.jsonl: `user` is missing on some rows"),
        (["--input", "cell.jsonl", "--output", "o.csv"], "cell.jsonl: line 1: history {'a': 1}: expected item ids"),
        (["--input", "h.xlsx", "--output", "o.csv"], "h.xlsx: unknown extension '.xlsx'; expected one of .csv, .tsv"),
        (["--input", "ok.csv", "--output", "o.txt"], "o.txt: unknown extension '.txt'"),
        (["--input", "missing.csv", "--output", "o.csv"], "missing.csv: file not found"),
        (["--input", ".", "--output", "o.csv"], ".: a folder, not a file of histories"),
        (["--input", "empty.csv"], "--input needs --output"),
        (["--input", "ok.csv", "--output", "./ok.csv"], "--output ./ok.csv: is the --input file"),
        (["--input", "x.csv", "--new-items", "ok.csv", "--output", "ok.csv"], "ok.csv: is the --new-items file"),
        (["--input", "x.csv", "--unavailable", "ok.csv", "--output", "ok.csv"], "ok.csv: is the --unavailable file"),
        (["--history", item, "--unavailable", "missing.txt"], "missing.txt: file not found"),
        (["--history", item, "--unavailable", "folder.csv"], "folder.csv: a folder, not a table file"),
        (["--history", item, "--unavailable", "nohist.csv"], "nohist.csv: no item id column (looked for item_id"),
        (["--history", item, "--unavailable", "h.xlsx"], "h.xlsx: a spreadsheet workbook"),
        (["--history", item, "--unavailable", "latin1.txt"], "latin1.txt: not UTF-8 text (byte 1)"),
        (["--history", item, "--new-share", "0.2"], "new_share (--new-share) goes with new_items (--new-items)"),
        (["--input", "ok.csv", "--output", "folder.csv"], "--output folder.csv: is a folder"),
        (["--input", "ok.csv", "--output", "ok.csv/o.csv"], "ok.csv/o.csv: cannot create its folder"),
        (["--history", item, "--output", "o.xlsx"], "o.xlsx: unknown extension"),
        ([], "give --history ID,ID,... or --user-id ID, or --input FILE"),
        (["--history", f"{item},zz"], "history: 1 item id(s) not in this run's catalogue"),
        (["--history", item, "-k", "0"], "k=0: expected an integer from 1 to"),
        (["--history", item, "--method", "bogus"], "method 'bogus': expected one of"),
        (["--history", f"[{item}, 2"], f"--history '[{item}, 2': expected item ids separated by spaces, commas"),
        (["--input", "brokenlist.csv", "--output", "o.csv"], "brokenlist.csv: line 2: history '[" + item + ", [1]]': "),
    ]


def test_cli_recommend_bad_input_is_one_line(tiny_run, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    item = crabrec.load(tiny_run, "sasrec").item_ids[0]
    for args, expected in bad_files(tmp_path, item, RunFiles(tiny_run).load_users().ids[0]):
        code, _, err = run_cli(["recommend", str(tiny_run), "--method", "sasrec", *args], capsys)
        assert code == 2, (args, err)
        assert expected in err and err.count("\n") == 1 and "Traceback" not in err, (args, err)
    assert not (tmp_path / "o.csv").exists()
    assert (tmp_path / "ok.csv").read_text() == f"history\n{item}\n"  # the input is never overwritten
    code, _, err = run_cli(["recommend", str(tmp_path / "nope"), "--history", "1"], capsys)
    assert code == 2 and "nope: no such run folder" in err


def test_titles_that_are_not_utf8_are_answered(tiny_run):
    """A title holding a lone surrogate (a ``\\ud83d`` escape in the item JSON) still serializes as JSON."""
    import orjson

    from crabrec.recommender import Recommender

    files = RunFiles(tiny_run)
    items = files.load_items()
    items = {**items, "text": [{"title": "caf\udce9 \ud83d mug"}] + list(items["text"][1:])}
    rec = Recommender(tiny_run, "mor", None, items, files.load_popularity(), 10)
    out = rec.top_dicts(np.array([0, 1, -1]), np.array([-0.5, -1.25, -np.inf]), k=3)
    assert [d["rank"] for d in out] == [1, 2] and out[0]["title"] == "caf? ? mug"
    assert orjson.loads(orjson.dumps(out)) == out
    assert [r.as_dict() for r in rec.top(np.array([0, 1, -1]), np.array([-0.5, -1.25, -np.inf]), k=3)] == out


def test_the_table_keeps_a_title_with_line_breaks_and_escapes_on_one_line():
    """Item text comes from the user's files: a line break or a terminal escape in it stays inside its row."""
    from crabrec.cli import format_recommendations
    from crabrec.recommender import Recommendation

    rows = [Recommendation(1, "a\x1b]0;x\x07", "Mug\n\x1b[2Jred \u202eblue", 0.5, 4, True)]
    lines = format_recommendations(rows).splitlines()
    assert len(lines) == 2 and "\x1b" not in lines[1] and "\u202e" not in lines[1]
    assert lines[1].split()[1] == "a\\x1b]0;x\\x07" and lines[1].endswith("Mug \\x1b[2Jred \\u202eblue")


def test_the_table_shows_item_ids_whole_and_in_line():
    """A Yelp business id has 22 characters: it was cut to 11 and an ellipsis, and could not be typed back."""
    from crabrec.cli import format_recommendations
    from crabrec.recommender import Recommendation

    rows = [
        Recommendation(1, "Pns2l4eNsfO8kk83dixA6A", "Cafe", 0.5, 4, True),
        Recommendation(2, "7", "Tea", 0.2, 1, False),
    ]
    lines = format_recommendations(rows).splitlines()
    assert [line.split()[1] for line in lines] == ["item", "Pns2l4eNsfO8kk83dixA6A", "7"]
    assert lines[0].index("title") == lines[1].index("Cafe") == lines[2].index("Tea")  # the columns line up


def test_answers_and_exports_never_land_on_the_runs_data(tiny_run, tmp_path, capsys):
    """``--output`` naming the run's data file, or a file inside its data folder, replaced or added to the user's
    data; ``data export --force`` into a MiniOneRec data folder would replace it. Both are one-line errors."""
    from crabrec.config import load_saved

    data = Path(load_saved(tiny_run).data.path)
    before = sorted((p.name, p.read_bytes()) for p in data.iterdir())
    item = crabrec.load(tiny_run, "sasrec").item_ids[0]
    (tmp_path / "h.csv").write_text(f"history\n{item}\n")
    code, _, err = run_cli(["recommend", str(tiny_run), "--input", str(tmp_path / "h.csv"), "--output",
                            str(data / "answers.csv")], capsys)  # fmt: skip
    assert code == 2 and "is inside this run's data (data.path" in err and err.count("\n") == 1, err
    code, _, err = run_cli(["data", "export", str(tiny_run), str(data), "--force"], capsys)
    assert code == 2 and f"export folder {data}: is this run's data" in err, err
    assert sorted((p.name, p.read_bytes()) for p in data.iterdir()) == before


def test_answers_and_exports_never_land_in_a_run_folder(tiny_run, tmp_path, capsys):
    """``--output runs/r/models/mor/rankings.parquet`` replaced the run's evaluated rankings with the answers (the
    run's report and comparisons then failed until its evaluation was re-run); any file or export folder inside a
    run, this one or another, is now a one-line error, and the run is left as it was."""
    import shutil

    other = tmp_path / "runs" / "other"
    shutil.copytree(tiny_run, other, symlinks=True)
    rankings = tiny_run / "models" / "mor" / "rankings.parquet"
    before = rankings.read_bytes()
    item = crabrec.load(tiny_run, "sasrec").item_ids[0]
    (tmp_path / "h.csv").write_text(f"history\n{item}\n")
    for target in (rankings, tiny_run / "answers.csv", other / "models" / "answers.csv"):
        code, _, err = run_cli(["recommend", str(tiny_run), "--method", "sasrec", "--input", str(tmp_path / "h.csv"),
                                "--output", str(target)], capsys)  # fmt: skip
        assert code == 2 and f"--output {target}: is inside the run " in err and err.count("\n") == 1, err
    code, _, err = run_cli(["data", "export", str(tiny_run), str(other / "export")], capsys)
    assert code == 2 and "export folder" in err and "is inside the run" in err, err
    assert rankings.read_bytes() == before
    assert not (tiny_run / "answers.csv").exists() and not (other / "models" / "answers.csv").exists()
    assert not (other / "export").exists()
    code, _, err = run_cli(["recommend", str(tiny_run), "--method", "sasrec", "--input", str(tmp_path / "h.csv"),
                            "--output", str(tmp_path / "runs" / "answers.csv")], capsys)  # fmt: skip
    assert code == 0 and (tmp_path / "runs" / "answers.csv").is_file(), err  # beside the runs: a plain folder


def test_a_histories_file_in_utf16_reads_like_its_utf8_copy(tiny_run, tmp_path, capsys):
    """A file of histories saved as Excel's "Unicode Text" (UTF-16 with a byte-order mark) was 'not UTF-8 text'."""
    item = crabrec.load(tiny_run, "sasrec").item_ids[0]
    text = f"history\n{item}\n"
    (tmp_path / "h8.csv").write_text(text, encoding="utf-8")
    (tmp_path / "h16.csv").write_text(text, encoding="utf-16")
    for name in ("h8", "h16"):
        paths = ["--input", str(tmp_path / f"{name}.csv"), "--output", str(tmp_path / f"{name}.out.csv")]
        code, _, err = run_cli(["recommend", str(tiny_run), "--method", "sasrec", *paths], capsys)
        assert code == 0, err
    assert (tmp_path / "h16.out.csv").read_bytes() == (tmp_path / "h8.out.csv").read_bytes()


def test_an_input_files_rows_are_named_by_their_line(tmp_path):
    """Errors named a history file's row by its place counted from 0 (``history 1``, ``row 0``): a text file's
    row is named by the line it starts on (blank lines and multi-line quoted cells counted), a Parquet file's by
    its place, as the output's ``row`` column numbers it."""
    import pandas as pd

    from crabrec.histories import iter_histories

    (tmp_path / "h.csv").write_text('user_id,history\n\nA7,"1000\n1001"\nB2,1002\n')
    assert next(iter_histories(tmp_path / "h.csv")).rows == ["line 3", "line 5"]
    (tmp_path / "h.jsonl").write_text('{"history": [1]}\n\n{"history": [2]}\n')
    assert next(iter_histories(tmp_path / "h.jsonl")).rows == ["line 1", "line 3"]
    pd.DataFrame({"history": [["1"], ["2"]]}).to_parquet(tmp_path / "h.parquet")
    assert next(iter_histories(tmp_path / "h.parquet")).rows == ["row 0", "row 1"]


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet", "-"])
def test_cli_recommend_answers_a_file_part_by_part_as_in_one_part(tiny_run, tmp_path, capsys, monkeypatch, suffix):
    """A file of histories is read and checked, then ranked and written, a part of its rows at a time, in whole
    batches of the ranker (a million histories are never held as Python lists, nor their answers): the answers
    equal those of one part byte for byte, the row numbers run on, and a bad row in a later part leaves no file and
    prints nothing."""
    from crabrec import histories as hist
    from crabrec.rankers import GeneratorRanker

    made = GeneratorRanker.__init__

    def in_twos(self, *args, **kwargs):  # the ranker decodes 2 rows at a time, so that 7 rows make 4 parts
        made(self, *args, **kwargs)
        self.batch_size = self.block = 2

    monkeypatch.setattr(GeneratorRanker, "__init__", in_twos)

    histories, users, _ = histories_of(tiny_run, 7)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"history": h, "user": u}) + "\n" for h, u in zip(histories, users)))
    out = "-" if suffix == "-" else str(tmp_path / f"out{suffix}")
    args = ["recommend", str(tiny_run), "--method", "tiger", "--input", str(src), "-k", "3", "--output", out]
    code, whole, err = run_cli(args, capsys)
    assert code == 0, err
    read = (lambda text: text) if suffix == "-" else (lambda _: pd.read_parquet(out).to_json() if suffix == ".parquet"
                                                     else Path(out).read_bytes())  # fmt: skip
    one = read(whole)
    monkeypatch.setattr(hist, "ANSWER_PART", 2)
    monkeypatch.setattr(hist, "READ_PART", 4)  # the file read and checked 4 rows at a time too
    code, parted, err = run_cli(args, capsys)
    assert code == 0, err
    assert read(parted) == one
    if suffix != "-":
        Path(out).unlink()
    src.write_text(src.read_text() + json.dumps({"history": ["no such item"], "user": 0}) + "\n")
    code, printed, err = run_cli(args, capsys)
    assert code == 2 and "in.jsonl: line 8: history: 1 item id(s) not in" in err
    assert printed == "" and (suffix == "-" or not Path(out).exists())


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet", "-"])
def test_a_files_answers_are_the_apis_lists_item_score_and_group(tiny_run, tmp_path, capsys, suffix):
    """The answers a file gets (written from arrays, not from one object per item) are the API's lists: the same
    items, scores and groups, and a list shorter than k (the catalogue runs out once a history is left out) ends
    where the API's does."""
    k = len(crabrec.load(tiny_run, "pop").item_ids)
    rec = crabrec.load(tiny_run, "pop", beam=k)
    histories, _, _ = histories_of(tiny_run, 9)
    expected = rec.recommend_batch(histories, k=k)
    assert {len(recs) for recs in expected} != {k}  # some lists are short
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"history": h}) + "\n" for h in histories))
    out = tmp_path / f"out{suffix}"
    args = ["recommend", str(tiny_run), "--method", "pop", "--input", str(src), "-k", str(k), "--beam", str(k)]
    code, printed, err = run_cli([*args, "--output", "-" if suffix == "-" else str(out)], capsys)
    assert code == 0, err
    if suffix == "-":
        frame = pd.DataFrame([json.loads(line) for line in printed.splitlines()])
    elif suffix == ".jsonl":
        frame = pd.read_json(out, lines=True)
    elif suffix == ".parquet":
        frame = pd.read_parquet(out)
    else:
        frame = pd.read_csv(out, sep="\t" if suffix == ".tsv" else ",", dtype=str, keep_default_na=False)
        frame = frame.map(str.split) if hasattr(frame, "map") else frame.applymap(str.split)
    assert [int(r[0]) if isinstance(r, list) else int(r) for r in frame["row"]] == list(range(9))
    for column, field in (("items", "item"), ("scores", "score"), ("groups", "group")):
        got = [[type(getattr(recs[0], field))(v) for v in row] for row, recs in zip(frame[column], expected)]
        assert got == [[getattr(r, field) for r in recs] for recs in expected], column


def test_a_file_read_in_parts_gives_the_requests_of_the_whole(tiny_run, tmp_path):
    """A history file is read a part at a time (a million rows are never held at once): the parts hold the rows of
    the whole file, named by their lines; a column given on the rows of one part and not on another's is the same
    error as within a part."""
    from crabrec.histories import iter_histories

    histories, users, _ = histories_of(tiny_run, 7)
    files = {
        "h.csv": "history,user\n" + "".join(f"{' '.join(h)},{u}\n\n" for h, u in zip(histories, users)),
        "h.jsonl": "".join(json.dumps({"history": h, "user": u}) + "\n" for h, u in zip(histories, users)),
        "h.txt": "".join(f"u{u} {' '.join(h)}\n" for h, u in zip(histories, users)),
    }
    pd.DataFrame({"history": histories, "user": users}).to_parquet(tmp_path / "h.parquet")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    for name in [*files, "h.parquet"]:
        whole = next(iter_histories(tmp_path / name))
        parts = list(iter_histories(tmp_path / name, size=3))
        assert [len(p.rows) for p in parts] == [3, 3, 1], name
        for field in ("histories", "users", "user_ids", "rows"):
            joined = None if getattr(whole, field) is None else [v for p in parts for v in getattr(p, field)]
            assert joined == getattr(whole, field), (name, field)
    assert next(iter_histories(tmp_path / "h.csv")).rows[:2] == ["line 2", "line 4"]
    (tmp_path / "late.jsonl").write_text(files["h.jsonl"] + json.dumps({"history": histories[0]}) + "\n")
    with pytest.raises(CrabError, match="late.jsonl: `user` is missing on some rows"):
        list(iter_histories(tmp_path / "late.jsonl", size=7))


def test_most_popular_leaves_out_each_rows_items_as_a_loop_over_rows_does():
    """MostPop leaves out each row's items with array operations; the lists equal a loop over the rows filtering the
    catalogue's order (random catalogues, frequencies with ties, histories with repeats, unavailable items, lists
    longer than what is left)."""
    from crabrec.baselines.floors import MostPopularRanker
    from crabrec.data.dataset import Samples

    rng = np.random.default_rng(0)
    for _ in range(200):
        n_items, n = int(rng.integers(1, 60)), int(rng.integers(1, 30))
        ranker = MostPopularRanker(rng.integers(0, 5, n_items), int(rng.integers(1, 70)))
        ranker.block = int(rng.integers(1, 8))
        if rng.random() < 0.3:
            ranker.set_unavailable(rng.choice(n_items, int(rng.integers(0, n_items)), replace=False))
        seen = [rng.integers(0, n_items, int(rng.integers(0, 20))).tolist() for _ in range(n)]
        items, scores = ranker.rank(Samples.from_rows([0] * n, [[0]] * n, [0] * n, 5, seen=seen))
        expected = np.full_like(items, -1)
        for r in range(n):
            keep = ranker.order[~np.isin(ranker.order, seen[r])][: ranker.width]
            expected[r, : len(keep)] = keep
        assert (items == expected).all()
        assert (scores == np.where(items >= 0, ranker.freq[np.maximum(items, 0)], -np.inf)).all()


def test_recommend_frame_is_recommend_batch_as_one_table(tiny_run):
    """``recommend_frame`` holds the lists of ``recommend_batch`` (users by id, exclusions, lists shorter than k
    included) as one row per item: the same items, ranks, scores and groups, built without an object per item."""
    k = len(crabrec.load(tiny_run, "pop").item_ids)
    for method, beam in (("pop", k), ("tiger", None)):
        rec = crabrec.load(tiny_run, method, beam=beam)
        histories, _, _ = histories_of(tiny_run, 6)
        ids = rec.known_users().ids[:6]
        asks = {"user_ids": ids, "excludes": [[histories[0][0]], None, [], None, None, None]}
        width = k if beam else 5
        frame = rec.recommend_frame(None, width, **asks)
        lists = rec.recommend_batch(None, width, **asks)
        assert list(frame.columns) == ["row", "rank", "item", "score", "group"]
        expected = [(r, x.rank, x.item, x.score, x.group) for r, recs in enumerate(lists) for x in recs]
        assert list(frame.itertuples(index=False, name=None)) == expected
        assert beam is None or len(frame) < 6 * width  # lists shorter than k


def test_titles_the_terminal_cannot_encode_are_escaped(tmp_path):
    """A Latin-1 terminal (or a file redirected on Windows) gets ``\\u03a9`` for a title's Ω, not a
    UnicodeEncodeError traceback; what it can encode is written as itself."""
    import os
    import subprocess
    import sys

    (tmp_path / "items.csv").write_text("item_id,title\n" + "".join(f"i{i},Ω clip {i} é\n" for i in range(12)))
    rows = [f"u{u},i{(u * 3 + t) % 12 if t else 0},{t}\n" for u in range(40) for t in range(4)]
    (tmp_path / "ratings.csv").write_text("user_id,item_id,timestamp\n" + "".join(rows))
    run = tmp_path / "runs" / "latin"
    args = ["--data", str(tmp_path / "ratings.csv"), "--items", str(tmp_path / "items.csv"), "--until", "data"]
    assert cli(["run", *args, "--set", "data.kcore=0", "--set", f"runs_dir={run.parent}", "--name", "latin"])[0] == 0
    command = [sys.executable, "-m", "crabrec", "recommend", str(run), "--method", "pop", "--history", "i1", "-k", "3"]
    res = subprocess.run(command, capture_output=True, env={**os.environ, "PYTHONIOENCODING": "latin-1"}, timeout=120)
    assert res.returncode == 0, res.stderr.decode("latin-1")[-2000:]
    titles = [line.split(maxsplit=4)[-1] for line in res.stdout.decode("latin-1").splitlines()[1:]]
    assert len(titles) == 3 and all(t.startswith("\\u03a9 clip ") and t.endswith(" é") for t in titles), titles
