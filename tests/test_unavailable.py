"""Items a trained run must not recommend (``unavailable=``, ``--unavailable``, a request's ``exclude``): known answer
with an exhaustive beam (the list without them is the plain list with them taken out, scores unchanged), lists that
keep their length, histories that still read them, the files they come from, the CLI and the service."""

from __future__ import annotations

import pytest

import crabrec
from crabrec.errors import CrabError
from tests.conftest import cli
from tests.test_serve import call, post, serving

HISTORY_AT = 3  # the catalogue position the histories start at


@pytest.fixture(scope="module")
def catalogue(tiny_run) -> list[str]:
    return crabrec.load(tiny_run, "mor").item_ids


@pytest.mark.parametrize("method", ["mor", "tiger", "crab", "ppd", "rr", "d2lr", "sasrec", "pop"])
def test_a_list_without_the_unavailable_items_is_the_plain_list_without_them(tiny_run, catalogue, method):
    plain = crabrec.load(tiny_run, method, beam=1000)  # exhaustive: every SID's exact score, in order
    history = catalogue[HISTORY_AT : HISTORY_AT + 3]
    full = plain.recommend(history, plain.max_k)
    gone = [r.item for r in full[::3]]  # every third item of the list
    rec = crabrec.load(tiny_run, method, beam=1000, unavailable=gone)
    assert len(rec.unavailable) == len(gone)
    got = rec.recommend(history, plain.max_k - len(gone))
    kept = [r for r in full if r.item not in set(gone)]
    assert [(r.item, r.score) for r in got] == [(r.item, r.score) for r in kept]
    fewer = rec.recommend(history, 10, exclude=[r.item for r in kept[:2]])
    assert [(r.item, r.score) for r in fewer] == [(r.item, r.score) for r in kept[2:12]]


@pytest.mark.parametrize("method", ["mor", "random"])
def test_lists_keep_their_length_and_histories_still_read_the_items(tiny_run, catalogue, method):
    rec = crabrec.load(tiny_run, method, beam=20)
    top = [r.item for r in rec.recommend(catalogue[:4], rec.max_k)]
    rec.set_unavailable(top[: rec.max_k // 2])
    history = [top[0], *catalogue[:4]]  # an unavailable item in the history is read as before
    got = rec.recommend(history, rec.max_k)
    assert len(got) == rec.max_k and not {r.item for r in got} & set(top[: rec.max_k // 2])
    assert rec.set_unavailable([]) == 0 and len(rec.recommend(catalogue[:4], rec.max_k)) == rec.max_k


def test_a_ranker_that_cannot_leave_items_out_has_each_row_exclude_them(tiny_run, catalogue):
    class Plain:  # a ranker of a method from another package: rank, width and block only
        def __init__(self, ranker) -> None:
            self.base, self.width, self.block = ranker, ranker.width, ranker.block

        def rank(self, rows, desc: str = "ranking", progress: bool = True):
            return self.base.rank(rows, desc, progress)

    gone = catalogue[: len(catalogue) // 2]
    rec = crabrec.load(tiny_run, "mor", beam=1000, unavailable=gone)
    plain = crabrec.load(tiny_run, "mor", beam=1000)
    plain.ranker = Plain(plain.ranker)
    plain.set_unavailable(gone)
    assert len(plain.in_rows) == len(gone) and not len(rec.in_rows)
    history = catalogue[-3:]
    assert plain.recommend(history, 20) == rec.recommend(history, 20)


def test_a_requests_exclude_adds_to_the_unavailable_items(tiny_run, catalogue):
    rec = crabrec.load(tiny_run, "tiger", unavailable=catalogue[:5])
    top = [r.item for r in rec.recommend(catalogue[HISTORY_AT:HISTORY_AT + 2], 10)]  # fmt: skip
    again = rec.recommend(catalogue[HISTORY_AT:HISTORY_AT + 2], 10, exclude=[top[0], "not-an-item"])  # fmt: skip
    assert [r.item for r in again][:9] == top[1:]
    batch = rec.recommend_batch([catalogue[5:7], catalogue[7:9]], 10, exclude=[top[0]])
    assert all(top[0] not in [r.item for r in row] and len(row) == 10 for row in batch)
    with pytest.raises(CrabError, match="exclude: expected a list of item ids, got str"):
        rec.recommend(catalogue[:2], 5, exclude="B0001")
    with pytest.raises(CrabError, match="unavailable: item ids are strings, got 1.5"):
        rec.set_unavailable([1.5])


def test_unavailable_items_come_from_a_txt_list_or_an_item_table(tiny_run, catalogue, tmp_path, caplog):
    (tmp_path / "gone.txt").write_text(f"{catalogue[0]}\n\n{catalogue[1]}\nno-such-item\n")
    (tmp_path / "gone.csv").write_text(f"title,item_id\nx,{catalogue[0]}\ny,{catalogue[1]}\n")
    import pandas as pd

    ids = [float(catalogue[0]), float(catalogue[1]), None]  # integer ids in a Parquet column that holds a null
    pd.DataFrame({"item_id": ids}).to_parquet(tmp_path / "gone.parquet")
    for name in ("gone.txt", "gone.csv", "gone.parquet"):
        rec = crabrec.load(tiny_run, "mor", unavailable=tmp_path / name)
        assert sorted(rec.unavailable.tolist()) == [0, 1]
    assert "1 of its 3 item ids are not in the run's catalogue" in caplog.text and "'no-such-item'" in caplog.text
    (tmp_path / "skus.csv").write_text(f"stock\n{catalogue[0]}\n")
    with pytest.raises(CrabError, match=r"skus.csv: no item id column .* or list the ids one a line in a .txt file"):
        crabrec.load(tiny_run, "mor", unavailable=tmp_path / "skus.csv")
    with pytest.raises(CrabError, match="missing.txt: file not found"):
        crabrec.load(tiny_run, "mor", unavailable=tmp_path / "missing.txt")


def test_new_items_that_are_unavailable_are_not_placed(tiny_run, catalogue, tmp_path):
    import json

    from crabrec.data.loaders import embedded_path

    items = json.loads((embedded_path() / "Office.item.json").read_text())
    new = [k for k in items if k not in set(catalogue)][:6]
    path = tmp_path / "new.jsonl"
    path.write_text("".join(json.dumps({"item_id": k, **items[k]}) + "\n" for k in new))
    rec = crabrec.load(tiny_run, "mor", new_items=path, new_share=1.0, unavailable=new[:3])
    got = {r.item for r in rec.recommend(catalogue[:3], rec.max_k)}
    assert not got & set(new[:3]) and got & set(new[3:])


def test_cli_recommend_leaves_out_the_unavailable_items(tiny_run, catalogue, tmp_path, capsys):
    history = ",".join(catalogue[HISTORY_AT : HISTORY_AT + 2])
    code, _ = cli(["recommend", str(tiny_run), "--history", history, "-k", "3"])
    top = [line.split()[1] for line in capsys.readouterr().out.splitlines()[1:]]
    gone = tmp_path / "gone.txt"
    gone.write_text(top[0] + "\n")
    code, _ = cli(["recommend", str(tiny_run), "--history", history, "-k", "3", "--unavailable", str(gone)])
    assert code == 0 and [line.split()[1] for line in capsys.readouterr().out.splitlines()[1:]][:2] == top[1:]
    inputs, table = tmp_path / "in.csv", tmp_path / "gone.csv"
    inputs.write_text(f"history\n{history}\n")
    table.write_text(f"item_id\n{top[0]}\n")
    code, _ = cli(["recommend", str(tiny_run), "--input", str(inputs), "--output", str(table), "--unavailable",
                   str(table)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "is the --unavailable file" in err and table.read_text() == f"item_id\n{top[0]}\n"


def test_the_service_leaves_out_unavailable_and_excluded_items(tiny_run, catalogue, tmp_path):
    from crabrec.serve import build_app

    gone = tmp_path / "gone.txt"
    gone.write_text("\n".join(catalogue[:4]))
    app = build_app(tiny_run, ["mor", "sasrec"], unavailable=gone, max_wait_ms=1)
    history = catalogue[HISTORY_AT : HISTORY_AT + 2]
    with serving(app) as base:
        for method in ("mor", "sasrec"):
            code, body = post(base, {"history": history, "k": 5, "method": method})
            top = [r["item"] for r in body["items"]]
            assert code == 200 and len(top) == 5 and not set(top) & set(catalogue[:4])
            code, body = post(base, {"histories": [history], "k": 5, "method": method, "exclude": top[:1]})
            assert code == 200 and [r["item"] for r in body["results"][0]][:4] == top[1:]
        code, bad = post(base, {"history": history, "exclude": "B0001"})
        assert code == 422 and "exclude" in bad["error"]
        code, body = call(f"{base}/models")
    table = {m["method"]: m for m in body["models"]}
    assert table["mor"]["unavailable"] == table["sasrec"]["unavailable"] == 4 and "unavailable" not in table["rr"]


def test_each_history_may_exclude_items_of_its_own(tiny_run, catalogue, tmp_path, capsys):
    import json

    rec = crabrec.load(tiny_run, "mor")
    histories = [catalogue[HISTORY_AT : HISTORY_AT + 2], catalogue[HISTORY_AT + 5 : HISTORY_AT + 7]]
    plain = [[r.item for r in row] for row in rec.recommend_batch(histories, 12)]
    own = [plain[0][:2], None]  # the first row leaves out its first two, the second nothing
    got = [[r.item for r in row] for row in rec.recommend_batch(histories, 10, excludes=own)]
    assert got == [plain[0][2:12], plain[1][:10]]
    with pytest.raises(CrabError, match=r"excludes: expected one per history \(2\), got 1"):
        rec.recommend_batch(histories, 10, excludes=[[]])
    with pytest.raises(CrabError, match=r"excludes\[1\]: item ids are strings"):
        rec.recommend_batch(histories, 10, excludes=[[], [2.5]])
    # a file's `exclude` column, written as a history is; an empty cell excludes nothing more
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"history": h, "exclude": e}) + "\n"
                                               for h, e in zip(histories, own)))  # fmt: skip
    (tmp_path / "in.csv").write_text("exclude,history\n" + f"\"{' '.join(own[0])}\",\"{' '.join(histories[0])}\"\n"
                                     + f",\"{' '.join(histories[1])}\"\n")  # fmt: skip
    for name in ("in.jsonl", "in.csv"):
        out = tmp_path / f"{name}.out.jsonl"
        code, _ = cli(["recommend", str(tiny_run), "--input", str(tmp_path / name), "--output", str(out), "-k", "10"])
        assert code == 0 and [json.loads(line)["items"] for line in out.read_text().splitlines()] == got, name
    (tmp_path / "bad.jsonl").write_text(json.dumps({"history": histories[0], "exclude": {"a": 1}}) + "\n")
    code, _ = cli(["recommend", str(tiny_run), "--input", str(tmp_path / "bad.jsonl"), "--output", "-"])
    err = capsys.readouterr().err
    assert code == 2 and "bad.jsonl: line 1: exclude {'a': 1}: expected item ids" in err


def test_the_service_takes_one_exclude_list_per_history(tiny_run, catalogue):
    from crabrec.serve import build_app

    history = catalogue[HISTORY_AT : HISTORY_AT + 2]
    with serving(build_app(tiny_run, ["mor"], max_wait_ms=1)) as base:
        code, body = post(base, {"history": history, "k": 6})
        top = [r["item"] for r in body["items"]]
        code, body = post(base, {"histories": [history, history], "k": 5, "excludes": [top[:1], None]})
        assert code == 200 and [[r["item"] for r in row] for row in body["results"]] == [top[1:6], top[:5]]
        code, bad = post(base, {"history": history, "excludes": [top[:1]]})
        assert code == 422 and "`excludes` (one list per history) goes with `histories`" in bad["error"]
