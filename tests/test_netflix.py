"""The Netflix Prize training data as it ships: ratings grouped under movie lines (``1:``), in Kaggle's
``combined_data_*.txt`` or the original ``training_set/mv_*.txt``, with ``movie_titles.csv``. Built from MovieLens-100K
at test time: each read gives exactly the sequences of the same ratings written as a plain table."""

from __future__ import annotations

import datetime
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from crabrec.config import DataConfig
from crabrec.data.loaders import companion_files, detect_format, load_dataset
from crabrec.errors import CrabError
from tests.conftest import cli, shared_path


def load(path: Path, **kw) -> object:
    return load_dataset(DataConfig(path=str(path), kcore=0, **kw))


@pytest.fixture(scope="module")
def netflix(tmp_path_factory) -> dict[str, Path]:
    src = shared_path("ml-100k")
    rows = [line.split("\t") for line in (src / "ml-100k.inter").read_text().splitlines()[1:]]
    titles = [line.split("\t") for line in (src / "ml-100k.item").read_text().splitlines()[1:]]
    by_movie: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
    for user, item, rating, time in rows:
        day = datetime.datetime.fromtimestamp(int(float(time)), datetime.timezone.utc).strftime("%Y-%m-%d")
        by_movie[int(item)].append((user, str(int(float(rating))), day))
    root = tmp_path_factory.mktemp("netflix")
    kaggle, original = root / "kaggle", root / "original"
    (original / "training_set").mkdir(parents=True)
    kaggle.mkdir()
    movies = sorted(by_movie)
    table = ["user_id,item_id,rating,date"]  # the same ratings in the same order, as a table
    for n, part in enumerate((movies[: len(movies) // 2], movies[len(movies) // 2 :]), start=1):
        lines = []
        for movie in part:
            block = [f"{movie}:", *(",".join(r) for r in by_movie[movie])]
            lines += block
            table += [f"{u},{movie},{r},{d}" for u, r, d in by_movie[movie]]
            (original / "training_set" / f"mv_{movie:07d}.txt").write_text("\n".join(block) + "\n")
        (kaggle / f"combined_data_{n}.txt").write_text("\n".join(lines) + "\n")
    names = "".join(f"{i},{year or 'NULL'},{title}, Vol. é\n" for i, title, year, _ in titles)
    (kaggle / "movie_titles.csv").write_bytes(names.encode("latin-1"))
    (original / "movie_titles.txt").write_bytes(names.encode("latin-1"))
    (root / "table.csv").write_text("\n".join(table) + "\n")
    return {"kaggle": kaggle, "original": original, "table": root / "table.csv"}


def sequences(ds) -> dict[str, list[str]]:
    return {u: [ds.item_ids[i] for i in s] for u, s in zip(ds.users, ds.sequences, strict=True)}


def test_both_layouts_read_as_the_same_ratings_written_as_a_table(netflix):
    """Kaggle's files were 'no user column ... found 1:'; a user's ratings of one day keep their file order."""
    want = load(netflix["table"])
    for path in (netflix["kaggle"], netflix["original"]):
        assert detect_format(path) == "netflix"
        ds = load(path)
        assert sequences(ds) == sequences(want) and ds.n_interactions == 100_000, path
        assert all(np.array_equal(a, b) for a, b in zip(ds.timestamps, want.timestamps, strict=True))
        assert ds.has_text and ds.name == path.name
    text = dict(zip(ds.item_ids, ds.item_text, strict=True))
    assert text["1"] == {"title": "Toy Story, Vol. é", "year": "1995"}  # a title's commas stay, Latin-1 read
    assert sequences(load(netflix["kaggle"], min_rating=4)) == sequences(load(netflix["table"], min_rating=4))


def test_one_rating_file_reads_with_the_titles_beside_it(netflix):
    part = netflix["kaggle"] / "combined_data_2.txt"
    ds = load(part)
    assert ds.has_text and ds.n_items == 1682 - 841 and ds.name == "combined_data_2"
    assert companion_files(part) == [netflix["kaggle"] / "movie_titles.csv"]
    movie = netflix["original"] / "training_set" / "mv_0000050.txt"
    assert companion_files(movie) == [netflix["original"] / "movie_titles.txt"]
    beside = load(movie.parent)  # training_set/ given: the titles beside it, the dataset named for its folder
    assert beside.has_text and beside.name == "original"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("1:\n5,3,2005-01-02\n\n2:\n6,1,2005-01-01,x\n", "line 5: expected a movie line 'ID:' or a rating"),
        ("1:\n5,3,2005-01-02\n6,4,2005-13-03\n", "line 3: expected a movie line 'ID:' or a rating "),
        ("1:\n5,three,2005-01-02\n", "got '5,three,2005-01-02'"),
        ("1:\n5,inf,2005-01-02\n", "line 2: expected"),
    ],
)
def test_a_bad_line_is_one_line_naming_it(tmp_path, capsys, text, said):
    (tmp_path / "combined_data_1.txt").write_text(text)
    code, _ = cli(["data", "stats", "--data", str(tmp_path / "combined_data_1.txt")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "Traceback" not in "\n".join(err) and said in err[-1], err


def test_a_bad_title_line_and_a_table_that_is_no_netflix_file(tmp_path):
    (tmp_path / "combined_data_1.txt").write_text("1:\n5,3,2005-01-02\n6,4,2005-01-03\n2:\n5,2,2005-01-04\n")
    (tmp_path / "movie_titles.csv").write_text("1,2003,Dinosaur Planet\n2\n")
    with pytest.raises(CrabError, match=r"movie_titles.csv: line 2: expected 'ID,year,title'"):
        load(tmp_path)
    (tmp_path / "combined_data_1.txt").write_text(
        "1:\n5,3,2005-01-02\n6,4,2005-01-03\n2:\n5,2,2005-01-04\n3:\n6,1,2005-01-05\n5,1,2005-01-05\n"
    )
    (tmp_path / "movie_titles.csv").write_text("1,NULL,Dinosaur Planet\n3,2004,Isle of Man TT 2004 Review\n")
    ds = load(tmp_path, missing_items="drop")
    assert ds.item_ids == ["1", "3"] and ds.item_text[0] == {"title": "Dinosaur Planet"}
    (tmp_path / "movie_titles.csv").unlink()
    ds = load(tmp_path)
    assert not ds.has_text and ds.item_ids == ["1", "2", "3"] and ds.users == ["5", "6"]
    (tmp_path / "probe.txt").write_text("1:\n30878\n")
    with pytest.raises(CrabError, match=r"probe.txt: Netflix's probe set lists pairs to predict, without ratings"):
        load(tmp_path / "probe.txt")
    (tmp_path / "plain.txt").write_text("1,2\n3,4\n")
    assert detect_format(tmp_path / "plain.txt") == "table"


def test_a_file_that_is_no_netflix_data_asked_to_read_as_one_says_so(tmp_path):
    (tmp_path / "ratings.csv").write_text("user,item\n1,2\n")
    with pytest.raises(CrabError, match=r"ratings.csv: not Netflix Prize data \(expected combined_data_\*.txt"):
        load(tmp_path / "ratings.csv", format="netflix")
