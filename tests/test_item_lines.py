"""A text file of one user a line, the user's id then the user's items in order, as S3-Rec's ``Beauty.txt`` and P5's
``sequential_data.txt`` are written."""

from __future__ import annotations

import gzip
from collections import defaultdict
from pathlib import Path

import pytest

from crabrec.config import DataConfig
from crabrec.data.loaders import load_dataset
from crabrec.data.reading import item_lines
from tests.conftest import cli, shared_path


@pytest.fixture(scope="module")
def ml_sequences() -> dict[str, list[str]]:
    """MovieLens-100K's users' items in time order (file order breaks ties)."""
    rows = [line.split("\t") for line in (shared_path("ml-100k") / "ml-100k.inter").read_text().splitlines()[1:]]
    seqs: dict[str, list[str]] = defaultdict(list)
    for u, i, _, _ in sorted(rows, key=lambda r: (int(r[0]), float(r[3]))):
        seqs[u].append(i)
    return dict(seqs)


def write_lines(path: Path, seqs: dict[str, list[str]], sep: str = " ") -> Path:
    text = "".join(sep.join([u, *items]) + "\n" for u, items in seqs.items())
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def load(path: Path, **kw):
    return load_dataset(DataConfig(path=str(path), kcore=0, **kw))


@pytest.mark.parametrize(("name", "sep"), [("Beauty.txt", " "), ("seq.csv", ","), ("seq.tsv", "\t"), ("s.txt.gz", " ")])
def test_each_line_is_a_user_then_the_users_items(ml_sequences, tmp_path, name, sep):
    """It was 'its first line (1, 168, 172, …) looks like a row, not a header; … data.columns=[user,item,column3,
    …,rating,column16 …]' (a name for each of the first line's 273 fields)."""
    ds = load(write_lines(tmp_path / name, ml_sequences, sep))
    assert {u: [ds.item_ids[i] for i in s] for u, s in zip(ds.users, ds.sequences, strict=True)} == ml_sequences
    assert ds.timestamps is None and not ds.has_text
    assert ds.notes[0] == "one line per user: the user's id, then the user's items in order"


def test_item_text_and_users_without_items(tmp_path, capsys):
    path = write_lines(tmp_path / "seq.txt", {"1": ["10", "11", "12"], "2": ["11", "10"], "3": [], "4": ["12", "10"]})
    (tmp_path / "items.csv").write_text("item_id,title\n10,Pens\n11,Paper\n12,Stapler\n")
    ds = load(path, item_table=str(tmp_path / "items.csv"))
    assert ds.users == ["1", "2", "4"] and ds.has_text
    assert [[ds.item_text[i]["title"] for i in s] for s in ds.sequences] == [
        ["Pens", "Paper", "Stapler"],
        ["Paper", "Pens"],
        ["Stapler", "Pens"],
    ]
    assert ds.notes[:2] == [
        "one line per user: the user's id, then the user's items in order",
        "left out 1 line(s) of a user id without items",
    ]
    (tmp_path / "items.csv").write_text("item_id,title\n10,Pens\n11,Paper\n")
    code, _ = cli(["data", "stats", "--data", str(path), "--items", str(tmp_path / "items.csv")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "Traceback" not in "\n".join(err)
    assert err[-1].startswith("crabrec: error: ") and "'12'" in err[-1] and "seq.txt" in err[-1]


def test_tables_are_not_read_as_item_lines(tmp_path):
    """Lines of one length (a headerless ``user item rating time`` file), a header line, MovieLens' ``::`` and quoted
    CSV text stay tables."""
    cases = {
        "u.txt": "1 10 5 881250949\n1 11 3 881250950\n2 10 4 881250951\n",
        "h.csv": "user,item\n1,10\n1,11,12\n",
        "r.dat": "1::10::5::881250949\n1::11::3::881250950::x\n",
        "q.csv": '1,"Pens, blue",Office\n2,Paper,Office,Paper\n',
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        assert item_lines(tmp_path / name) is None, name
    (tmp_path / "ok.txt").write_text("1 10 11 12\n2 10 11\n")
    assert item_lines(tmp_path / "ok.txt") == " "
