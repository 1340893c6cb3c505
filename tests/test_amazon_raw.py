"""Raw Amazon dumps (2014, 2018, 2023 formats) on small hand-written files whose answers were worked out beforehand."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from crabrec.config import DataConfig, load_config
from crabrec.data.amazon import clean, month_start, usable_title
from crabrec.data.loaders import load_dataset
from crabrec.data.splits import make_splits
from crabrec.data.users import UserHistories
from crabrec.errors import CrabError

DAY = 86400
T0 = 1_480_000_000  # 2016-11-24


def review14(user: str, item: str, t: int) -> str:
    return json.dumps({"reviewerID": user, "asin": item, "unixReviewTime": t, "reviewText": "ok", "overall": 5.0})


def write_gz(path: Path, lines: list[str]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def items_meta14(items: list[str]) -> list[str]:
    """amazon14 meta lines are Python literals (single quotes), not JSON."""
    return [
        repr({"asin": i, "title": f"Item &amp; {i} <b>bold</b>", "description": "<p>Nice</p>", "brand": "B",
              "categories": [["Office Products", "Pens"]]})
        for i in items
    ]  # fmt: skip


def tiger_fixture(folder: Path) -> Path:
    """3 users over items a..c; u1 buys `a` twice (the second copy must go); u4 has 2 interactions, one with `d`,
    seen once (any k-core ≥ 2 drops both); one line of every malformed kind."""
    folder.mkdir()
    lines = [
        review14("u1", "a", T0), review14("u1", "b", T0 + DAY), review14("u1", "a", T0 + 2 * DAY),
        review14("u1", "c", T0 + 3 * DAY),
        review14("u2", "b", T0 + 5 * DAY), review14("u2", "a", T0 + 4 * DAY), review14("u2", "c", T0 + 6 * DAY),
        review14("u3", "c", T0 + DAY), review14("u3", "b", T0 + 2 * DAY), review14("u3", "a", T0 + 3 * DAY),
        review14("u4", "d", T0), review14("u4", "a", T0 + DAY),
        "{not json",
        json.dumps({"asin": "a", "unixReviewTime": T0}),
        json.dumps({"reviewerID": "u9", "unixReviewTime": T0}),
        json.dumps({"reviewerID": "u9", "asin": "a"}),
        json.dumps({"reviewerID": "u9", "asin": "a", "unixReviewTime": "yesterday"}),
        "[1, 2]",
    ]  # fmt: skip
    write_gz(folder / "reviews_Office_Products_5.json.gz", lines)
    write_gz(folder / "meta_Office_Products.json.gz", [*items_meta14(["a", "b", "c", "d"]), "not a literal ("])
    return folder


def test_amazon14_tiger_recipe(tmp_path, caplog):
    folder = tiger_fixture(tmp_path / "raw14")
    ds = load_dataset(DataConfig(path=str(folder), kcore=3))
    assert ds.name == "Office_Products" and ds.source.endswith("reviews_Office_Products_5.json.gz")
    seqs = {u: [ds.item_ids[i] for i in s] for u, s in zip(ds.users, ds.sequences)}
    assert seqs == {"u1": ["a", "b", "c"], "u2": ["a", "b", "c"], "u3": ["c", "b", "a"]}  # dedup, time order, 3-core
    assert ds.item_text[ds.item_ids.index("a")] == {
        "title": "Item & a bold", "description": "Nice", "brand": "B", "categories": "Office Products, Pens",
    }  # fmt: skip
    note = ds.notes[0]
    assert "6 of 18 review lines skipped" in note
    for kind in ("bad JSON 1", "missing asin 1", "missing reviewerID 1", "missing unixReviewTime 1",
                 "non-numeric unixReviewTime 1", "not an object 1"):  # fmt: skip
        assert kind in note
    assert any("1 unparsable meta lines" in n for n in ds.notes)
    splits = make_splits(ds, "auto", 10)
    assert splits.kind == "leave_one_out" and len(splits.test) == 3
    assert load_dataset(DataConfig(path=str(folder), kcore=2)).n_users == 3
    unfiltered = load_dataset(DataConfig(path=str(folder), kcore=0))
    assert unfiltered.n_users == 4 and sorted(unfiltered.item_ids) == ["a", "b", "c", "d"]


def test_amazon18_minionerec_recipe(tmp_path):
    """Window 2017-01..2017-02; item `x` has a 21-word title, `y` a one-character one: both dropped; duplicates
    kept."""
    folder = tmp_path / "raw18"
    folder.mkdir()
    jan, feb, mar = 1_483_228_800, 1_485_907_200, 1_488_326_400  # 2017-01-01, 02-01, 03-01 UTC

    def r(user, item, t):
        return json.dumps({"reviewerID": user, "asin": item, "unixReviewTime": t, "overall": 4.0})

    lines = [r("u1", "a", jan), r("u1", "b", jan + DAY), r("u1", "a", jan + 2 * DAY), r("u1", "x", jan + 3 * DAY),
             r("u2", "b", feb), r("u2", "a", feb + DAY), r("u2", "y", feb + 2 * DAY), r("u2", "b", feb + 3 * DAY),
             r("u3", "a", mar), r("u3", "b", mar + DAY)]  # fmt: skip
    write_gz(folder / "Office_Products_5.json.gz", lines)
    meta = [
        {"asin": "a", "title": "Pen", "description": ["A <i>good</i> pen", "Blue"], "brand": "P",
         "category": ["Office"]},
        {"asin": "b", "title": "Paper &quot;A4&quot;", "description": [], "category": ["Office", "Paper"]},
        {"asin": "x", "title": " ".join(["word"] * 21)},
        {"asin": "y", "title": "Z"},
    ]  # fmt: skip
    write_gz(folder / "meta_Office_Products.json.gz", [json.dumps(m) for m in meta])
    ds = load_dataset(DataConfig(path=str(folder), kcore=2, time_window=["2017-01", "2017-02"]))
    seqs = {u: [ds.item_ids[i] for i in s] for u, s in zip(ds.users, ds.sequences)}
    assert seqs == {"u1": ["a", "b", "a"], "u2": ["b", "a", "b"]}  # x, y and March dropped; duplicates kept
    assert ds.notes == ["the minionerec recipe kept 6 of 10 reviews: 8 of 10 reviews are of an item with a usable "
                        "title; 8 are dated 2017-01 to 2017-02 (data.time_window, the reviews run from 2017-01 to "
                        "2017-03)"]  # fmt: skip
    assert ds.item_text[ds.item_ids.index("b")]["title"] == 'Paper "A4"'
    assert ds.item_text[ds.item_ids.index("a")]["description"] == "A good pen, Blue"
    splits = make_splits(ds, "auto", 10)
    assert splits.kind == "global_time" and len(splits.train) + len(splits.valid) + len(splits.test) == 4


def test_amazon23_parent_asin_and_milliseconds(tmp_path):
    folder = tmp_path / "raw23"
    folder.mkdir()

    def r(user, item, t):
        return json.dumps({"user_id": user, "asin": item + "-variant", "parent_asin": item, "timestamp": t * 1000,
                           "rating": 5.0, "text": "fine"})  # fmt: skip

    lines = [r("u1", "p", T0), r("u1", "q", T0 + DAY), r("u2", "q", T0), r("u2", "p", T0 + DAY), r("u3", "p", T0),
             r("u3", "q", T0 + DAY), json.dumps({"user_id": "u4", "timestamp": 5})]  # fmt: skip
    write_gz(folder / "Office_Products.jsonl.gz", lines)
    meta = [{"parent_asin": "p", "title": "Stapler", "store": "S", "categories": ["Office", "Staplers"],
             "description": ["<br>Heavy duty"]}, {"parent_asin": "q", "title": "Staples"}]  # fmt: skip
    write_gz(folder / "meta_Office_Products.jsonl.gz", [json.dumps(m) for m in meta])
    ds = load_dataset(DataConfig(path=str(folder), kcore=2, recipe="tiger"))
    assert sorted(ds.item_ids) == ["p", "q"] and ds.n_users == 3
    assert ds.timestamps is not None and ds.timestamps[0][0] == T0  # milliseconds -> seconds
    text = ds.item_text[ds.item_ids.index("p")]
    assert text == {"title": "Stapler", "description": "Heavy duty", "brand": "S", "categories": "Office, Staplers"}
    assert "1 of 7 review lines skipped (missing parent_asin 1)" in ds.notes[0]


def test_bad_raw_input_is_one_line(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    write_gz(folder / "reviews_Toys_5.json.gz", ["{oops", json.dumps({"asin": "a"})])
    write_gz(folder / "meta_Toys.json.gz", [])
    with pytest.raises(CrabError, match=r"reviews_Toys_5.json.gz: no valid review line \(2 of 2 review lines skipped"):
        load_dataset(DataConfig(path=str(folder)))
    (folder / "meta_Toys.json.gz").unlink()
    with pytest.raises(CrabError, match="meta_Toys.json.gz not found"):
        load_dataset(DataConfig(path=str(folder)))
    (folder / "reviews_Toys_5.json.gz").write_bytes(b"\x1f\x8b\x08broken")
    write_gz(folder / "meta_Toys.json.gz", [])
    with pytest.raises(CrabError, match="reviews_Toys_5.json.gz: unreadable"):
        load_dataset(DataConfig(path=str(folder)))
    with pytest.raises(CrabError, match="not a YYYY-MM month"):
        month_start("2016-13")
    with pytest.raises(CrabError, match=r"data.time_window.0: String should match pattern"):
        load_config(None, {"data": {"time_window": ["2016-13", "2018-11"]}})


def test_text_cleaning_and_title_rule():
    assert clean("<p>A &amp; B</p>\n  C") == "A & B C"
    assert clean(["x", "<b>y</b>"]) == "x, y"
    assert usable_title("Pen") and not usable_title("") and not usable_title("P")
    assert not usable_title('<span id="x">Pen</span>') and not usable_title(" ".join(["w"] * 21))
    assert usable_title(" ".join(["w"] * 20))


def test_meta_literals_are_never_executed(tmp_path):
    folder = tiger_fixture(tmp_path / "evil")
    marker = tmp_path / "pwned"
    evil = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    write_gz(folder / "meta_Office_Products.json.gz", [*items_meta14(["a", "b", "c"]), evil])
    load_dataset(DataConfig(path=str(folder), kcore=3))
    assert not marker.exists()


def test_minionerec_export_round_trips(tiny_run, tmp_path, capsys):
    """`crabrec data export` writes MiniOneRec's layout; reading it back as data.format=minionerec gives the run's
    own splits row for row, and the SIDs of index.json are the run's."""
    from crabrec.runfiles import RunFiles
    from tests.test_cli_bad_input import run_cli

    out = tmp_path / "mor-data"
    code, printed, err = run_cli(["data", "export", str(tiny_run), str(out)], capsys)
    assert code == 0, err
    files = RunFiles(tiny_run)
    name = files.load_items()["name"]
    for part in ("train", "valid", "test"):
        header = (out / part / f"{name}.csv").read_text().splitlines()[0]
        assert header == "user_id,history_item_title,item_title,history_item_id,item_id,history_item_sid,item_sid"
    mine = files.load_splits()
    dataset = load_dataset(DataConfig(path=str(out), format="minionerec"))
    back = make_splits(dataset, "auto", 10)
    # each user's whole sequence comes back too (recommend --user-id): the first row's history, then every target
    # (the layout names users and items by the run's indices)
    users, again = files.load_users(), UserHistories.from_dataset(dataset)
    assert sorted(again.ids) == sorted(str(u) for u in range(len(users))) and not dataset.notes
    assert all(again.sequence(again.user(str(u))) == users.sequence(u) for u in range(len(users)))
    assert back.kind == "given"
    for part in ("train", "valid", "test"):
        a, b = getattr(mine, part), getattr(back, part)
        assert (a.history == b.history).all() and (a.target == b.target).all() and (a.length == b.length).all()
    index = json.loads((out / "index" / f"{name}.index.json").read_text())
    codebook = files.load_codebook()
    assert "".join(index["7"]) == codebook.sid_string(7)
    info = (out / "info" / f"{name}.txt").read_text().splitlines()
    assert info[7].split("\t")[0] == codebook.sid_string(7) and info[7].split("\t")[2] == "7"
    code, _, err = run_cli(["data", "export", str(tiny_run), str(out)], capsys)
    assert code == 2 and "exists and is not empty" in err
    assert run_cli(["data", "export", str(tiny_run), str(out), "--force"], capsys)[0] == 0


def test_cli_no_valid_line_is_exit_2(tmp_path, capsys):
    from tests.test_cli_bad_input import run_cli

    folder = tmp_path / "raw"
    folder.mkdir()
    write_gz(folder / "Toys_5.json.gz", ["{oops", json.dumps({"reviewerID": "u", "asin": "a", "unixReviewTime": "x"})])
    write_gz(folder / "meta_Toys.json.gz", [json.dumps({"asin": "a", "title": "Toy"})])
    code, _, err = run_cli(["data", "stats", "--data", str(folder), "--set", f"runs_dir={tmp_path / 'runs'}"], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "Toys_5.json.gz: no valid review line (2 of 2 review lines skipped (bad JSON 1, non-numeric" in err


def test_time_window_applies_to_the_tiger_recipe_when_set(tmp_path):
    folder = tiger_fixture(tmp_path / "w")  # every interaction is in 2016-11 or 2016-12
    assert load_dataset(DataConfig(path=str(folder), kcore=3, time_window=["2016-11", "2016-12"])).n_users == 3
    left = r"no interaction left after the tiger recipe's filters: 0 are dated 2017-01 to 2017-02 \(data.time_window, "
    with pytest.raises(CrabError, match=left + r"the reviews run from 2016-11 to 2016-11\)$"):
        load_dataset(DataConfig(path=str(folder), kcore=3, time_window=["2017-01", "2017-02"]))


def test_minionerec_rows_out_of_time_order_are_noted(tmp_path):
    """A user's later row whose history does not end with what their earlier rows gave is counted in a note."""
    folder = tmp_path / "mor"
    (folder / "index").mkdir(parents=True)
    (folder / "index" / "T.item.json").write_text(json.dumps({str(i): {"title": f"item {i}"} for i in range(5)}))
    head = "user_id,history_item_title,item_title,history_item_id,item_id,history_item_sid,item_sid\n"
    rows = {"train": ["u,[],x,[0],1,[],s", 'u,[],x,"[0, 1]",2,[],s'], "valid": ['u,[],x,"[0, 1, 2]",3,[],s']}
    rows["test"] = ['u,[],x,"[0, 2]",4,[],s']  # skips item 3: not the end of 0 1 2 3
    for split, lines in rows.items():
        (folder / split).mkdir()
        (folder / split / "T.csv").write_text(head + "\n".join(lines) + "\n")
    dataset = load_dataset(DataConfig(path=str(folder), format="minionerec"))
    assert dataset.sequences[0].tolist() == [0, 1, 2, 3, 4]
    assert len(dataset.notes) == 1 and dataset.notes[0].startswith("1 of 4 rows have a history that does not end")
