"""MovieLens releases as they unpack (100K's u.data, 1M/10M's ratings.dat, 20M+'s ratings.csv folder), and the item
text picked when the items have no description."""

from __future__ import annotations

import csv
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

from crabrec.config import DataConfig, EmbedConfig
from crabrec.data.loaders import detect_format, load_dataset
from crabrec.data.table import dataset_name
from crabrec.embed import item_texts, text_fields
from crabrec.errors import CrabError
from tests.conftest import cli, shared_path

GENRES = ("unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary", "Drama",
          "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War",
          "Western")  # fmt: skip


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> dict[str, Path]:
    """The shared MovieLens-100K (RecBole atomic files) written in each release's own layout."""
    src = shared_path("ml-100k")
    inter = (src / "ml-100k.inter").read_text().splitlines()[1:]
    movies = [line.split("\t") for line in (src / "ml-100k.item").read_text(encoding="utf-8").splitlines()[1:]]
    title = {i: f"{t} ({y})" if y else t for i, t, y, _ in movies}
    genres = {i: c.split() for i, _, _, c in movies}
    root = tmp_path_factory.mktemp("movielens")
    out = {"recbole": src}

    k100 = root / "ml-100k"
    k100.mkdir()
    (k100 / "u.data").write_text("\n".join(inter) + "\n")
    (k100 / "u.item").write_bytes("".join(
        "|".join([i, title[i], "01-Jan-1995", "", f"http://us.imdb.com/M/title-exact?{i}",
                  *("1" if g in genres[i] else "0" for g in GENRES)]) + "\n" for i in title
    ).encode("latin-1", "replace"))  # fmt: skip
    (k100 / "u.genre").write_text("".join(f"{g}|{n}\n" for n, g in enumerate(GENRES)) + "\n")
    out["100k"] = k100

    m1 = root / "ml-1m"
    m1.mkdir()
    (m1 / "ratings.dat").write_text("\n".join(line.replace("\t", "::") for line in inter) + "\n")
    (m1 / "movies.dat").write_bytes("".join(
        f"{i}::{title[i]}::{'|'.join(genres[i])}\n" for i in title
    ).encode("latin-1", "replace"))  # fmt: skip
    (m1 / "users.dat").write_text("1::F::1::10::48067\n")
    out["1m"] = m1

    latest = root / "ml-latest-small"
    latest.mkdir()
    (latest / "ratings.csv").write_text("userId,movieId,rating,timestamp\n" + "\n".join(
        line.replace("\t", ",") for line in inter) + "\n")  # fmt: skip
    with (latest / "movies.csv").open("w", newline="", encoding="utf-8") as f:
        rows = csv.writer(f)
        rows.writerow(["movieId", "title", "genres"])
        rows.writerows([i, title[i], "|".join(genres[i]) or "(no genres listed)"] for i in title)
    (latest / "tags.csv").write_text("userId,movieId,tag,timestamp\n196,242,funny,881250950\n")  # also has users
    (latest / "links.csv").write_text("movieId,imdbId,tmdbId\n1,0114709,862\n")
    out["latest"] = latest
    return out


def load(path: Path, **kw) -> object:
    return load_dataset(DataConfig(path=str(path), **kw))


@pytest.mark.parametrize("release", ["100k", "1m", "latest"])
def test_each_release_reads_the_same_interactions_as_recbole_atomic_files(releases, release):
    ours, recbole = load(releases[release]), load(releases["recbole"])
    assert (ours.n_users, ours.n_items) == (943, 1349) == (recbole.n_users, recbole.n_items)
    assert ours.users == recbole.users and ours.item_ids == recbole.item_ids
    assert all(np.array_equal(a, b) for a, b in zip(ours.sequences, recbole.sequences, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(ours.timestamps, recbole.timestamps, strict=True))
    toy = ours.item_text[ours.item_ids.index("1")]
    assert toy == {"title": "Toy Story (1995)", "genres": "Animation, Children's, Comedy"}


def test_min_rating_keeps_the_same_interactions_in_every_layout(releases, tmp_path):
    """``data.min_rating=4`` (ratings of 4 or more as positives, before k-core) in each MovieLens release, the RecBole
    atomic file and the same ratings as a plain table: the same users, items and sequences, and as many interactions
    as the file has rows rated 4 or 5."""
    inter = (shared_path("ml-100k") / "ml-100k.inter").read_text().splitlines()[1:]
    rated = sum(float(line.split("\t")[2]) >= 4 for line in inter)
    table = tmp_path / "ratings.csv"
    table.write_text("user,item,stars,timestamp\n" + "\n".join(line.replace("\t", ",") for line in inter) + "\n")
    datasets = {name: load(releases[name], min_rating=4, kcore=0) for name in ("recbole", "100k", "1m", "latest")}
    datasets["table"] = load(table, min_rating=4, kcore=0)
    every = load(releases["recbole"], kcore=0)
    base = datasets["recbole"]
    assert sum(len(s) for s in base.sequences) == rated < sum(len(s) for s in every.sequences)
    for name, ds in datasets.items():
        assert ds.users == base.users and ds.item_ids == base.item_ids, name
        assert all(np.array_equal(a, b) for a, b in zip(ds.sequences, base.sequences, strict=True)), name


@pytest.mark.parametrize(
    "data, kw, expect",
    [
        ("ratings.csv", {"min_rating": 6}, "no interaction is rated 6 or more (the rating column runs from 3 to 5)"),
        ("events.csv", {"min_rating": 4}, "no rating column (looked for rating, ratings, score"),
        ("events.csv", {"min_rating": 4, "rating_col": "stars"}, "data.rating_col='stars': no such column"),
        ("text.csv", {"min_rating": 4}, "text.csv: row 3: rating 'good' is not a number"),
        ("Toy.inter.json", {"min_rating": 4}, "the lcrec layout has no ratings that crabrec reads"),
    ],
)
def test_min_rating_errors_are_one_line(data, kw, expect, tmp_path):
    (tmp_path / "ratings.csv").write_text("user,item,rating\n1,1,5\n1,2,3\n")
    (tmp_path / "events.csv").write_text("user,item\n1,1\n1,2\n")
    (tmp_path / "text.csv").write_text("user,item,rating\n1,1,5\n1,2,good\n")
    (tmp_path / "Toy.inter.json").write_text('{"1": [1, 2]}')
    with pytest.raises(CrabError, match=re.escape(expect)):
        load(tmp_path / data, kcore=0, **kw)


@pytest.mark.parametrize("release", ["100k", "1m", "latest"])
def test_a_release_is_detected_from_its_folder_and_from_its_ratings_file(releases, release):
    folder = releases[release]
    assert detect_format(folder) == "movielens"
    ratings = next(folder / n for n in ("u.data", "ratings.dat", "ratings.csv") if (folder / n).exists())
    if ratings.name != "ratings.csv":  # a ratings.csv alone is a plain table (its item table is --items)
        assert detect_format(ratings) == "movielens"
        assert dataset_name(ratings) == folder.name
        assert load(ratings).sequences[0].tolist() == load(folder).sequences[0].tolist()
    assert dataset_name(folder) == folder.name


@pytest.mark.parametrize("release", ["100k", "1m", "latest"])
def test_a_release_still_zipped_reads_as_unpacked(releases, release, tmp_path):
    folder = releases[release]
    archive = tmp_path / f"{folder.name}.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"{folder.name}/", "")
        for p in sorted(folder.iterdir()):
            z.write(p, f"{folder.name}/{p.name}")
    assert detect_format(archive) == "movielens" and dataset_name(archive) == folder.name
    zipped, unpacked = load(archive), load(folder)
    assert zipped.users == unpacked.users and zipped.item_text == unpacked.item_text
    assert all(np.array_equal(a, b) for a, b in zip(zipped.sequences, unpacked.sequences, strict=True))


def test_a_damaged_archive_is_one_line(tmp_path, capsys):
    archive = tmp_path / "ml-1m.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(
            "ml-1m/ratings.dat", "".join(f"{u}::{i}::4::{978300000 + i}\n" for u in range(50) for i in range(50))
        )
    data = bytearray(archive.read_bytes())
    data[60:90] = bytes(30)  # inside the member's compressed bytes
    archive.write_bytes(bytes(data))
    code, _ = cli(["run", "--data", str(archive), "--until", "data", "--set", f"runs_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith(f"crabrec: error: {archive}: cannot read ("), err


def test_a_folder_of_other_tables_named_ratings_and_movies_stays_a_table(tmp_path):
    (tmp_path / "ratings.csv").write_text("user_id,item_id,ts\n1,a,1\n1,b,2\n2,a,3\n")
    (tmp_path / "movies.csv").write_text("item_id,title\na,Heat\nb,Ronin\n")
    assert detect_format(tmp_path) == "table"
    assert load(tmp_path, kcore=0).item_text[0]["title"] == "Heat"


def test_latin1_titles_and_genre_flags_are_read(tmp_path):
    (tmp_path / "ratings.dat").write_text("1::1::5::978300760\n1::2::3::978302109\n2::1::4::978301968\n")
    (tmp_path / "movies.dat").write_bytes(
        "1::Misérables, Les (1995)::Drama|Musical\n2::Kiss of Death (1995)::(no genres listed)\n".encode("latin-1")
    )
    ds = load(tmp_path, kcore=0)
    assert ds.item_text == [{"title": "Misérables, Les (1995)", "genres": "Drama, Musical"},
                            {"title": "Kiss of Death (1995)", "genres": ""}]  # fmt: skip
    k100 = tmp_path / "k100"
    k100.mkdir()
    (k100 / "u.data").write_text("1\t1\t5\t874965758\n1\t2\t3\t876893171\n2\t2\t4\t878542960\n")
    flags = ["0"] * 19
    flags[3] = flags[5] = "1"  # Animation, Comedy (no u.genre: the release's 19 names)
    (k100 / "u.item").write_bytes(
        ("1|Toy Story (1995)|01-Jan-1995||http://x|" + "|".join(flags) + "\n"
         "2|Café au lait (1993)|01-Jan-1993||http://y|" + "|".join(["0"] * 18 + ["1"]) + "\n").encode("latin-1")
    )  # fmt: skip
    ds = load(k100, kcore=0)
    assert ds.item_text == [{"title": "Toy Story (1995)", "genres": "Animation, Comedy"},
                            {"title": "Café au lait (1993)", "genres": "Western"}]  # fmt: skip
    assert [ds.item_ids[i] for i in ds.sequences[ds.users.index("1")]] == ["1", "2"]  # in time order


def test_without_the_movies_file_the_data_is_ids_only(tmp_path):
    (tmp_path / "ratings.dat").write_text("1::1::5::978300760\n1::2::3::978302109\n2::1::4::978301968\n")
    ds = load(tmp_path / "ratings.dat", kcore=0)
    assert not ds.has_text and ds.item_ids == ["1", "2"]
    assert "no movies.dat" in ds.notes[0]


RATINGS_1M = "1::1::5::978300760\n1::2::3::978302109\n"
MOVIES_1M = "1::Toy Story (1995)::Comedy\n2::Jumanji (1995)::Adventure\n"
BAD = {
    "a field short": ({"ratings.dat": RATINGS_1M + "2::1::978301968\n"},
                      "ratings.dat: line 3: expected 4 fields separated by '::' (user, item, rating, time), got "
                      "'2::1::978301968'"),
    "time not a number": ({"ratings.dat": RATINGS_1M + "\n2::1::4::yesterday\n"},
                          "ratings.dat: line 4: timestamp 'yesterday' is not Unix time (seconds)"),
    "u.data with commas": ({"u.data": "1,1,5,874965758\n"}, "u.data: line 1: expected 4 fields separated by 'tab'"),
    "a movies line without genres": ({"ratings.dat": RATINGS_1M, "movies.dat": "1::Toy Story (1995)\n"},
                                     "movies.dat: line 1: expected id::title::genres, got '1::Toy Story (1995)'"),
    "a movie twice": ({"ratings.dat": RATINGS_1M, "movies.dat": MOVIES_1M + "2::Jumanji::Comedy\n"},
                      "movies.dat: line 3: duplicate movie id '2'"),
    "a rated movie not in movies": ({"ratings.dat": RATINGS_1M + "2::3::4::978301968\n", "movies.dat": MOVIES_1M},
                                    "ratings.dat: user '2': item '3' is not in the item table"),
    "u.item flags": ({"u.data": "1\t1\t5\t874965758\n", "u.item": "1|Toy Story (1995)|x||y|" + "|".join("2" * 19)},
                     "u.item: line 1: expected id|title|release date|video release date|URL and 19 genre flags"),
    "movies.csv columns": ({"ratings.csv": "userId,movieId,rating,timestamp\n1,1,5,1\n1,2,5,2\n",
                            "movies.csv": "movieId,title,genres\n1,x,Drama\n2,y,y,y\n"},
                           "movies.csv: cannot parse table"),
    "one rating per user": ({"ratings.dat": RATINGS_1M.replace("1::2", "2::2")},
                            "ml: no user has 2 interactions or more; a model needs a history and a next item"),
    "empty": ({"ratings.dat": "\n"}, "ratings.dat: the file is empty"),
    "not a release": ({"log.csv": "user,item\n1,2\n", "--format": "movielens"},
                      "ml: not a MovieLens release (expected u.data, ratings.dat, ratings.csv); set --format"),
    "--items not found": ({"ratings.dat": RATINGS_1M, "--items": "movies.dat"}, "movies.dat: file not found"),
    "--items of another name": ({"ratings.dat": RATINGS_1M, "items.csv": "id\n1\n", "--items": "items.csv"},
                                "items.csv: a MovieLens item file is named u.item, movies.dat, movies.csv"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_bad_release_files_are_one_line_naming_the_line(case, tmp_path, capsys):
    files, expected = BAD[case]
    folder = tmp_path / "ml"
    folder.mkdir()
    options = []
    for name, text in files.items():
        if name.startswith("--"):
            options += [name, text if name == "--format" else str(folder / text)]
        else:
            (folder / name).write_text(text)
    runs = tmp_path / "runs"
    code, _ = cli(["run", "--data", str(folder), *options, "--until", "data", "--set", "data.kcore=0",
                   "--set", f"runs_dir={runs}"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    errors = [line for line in err if line.startswith("crabrec: error: ")]
    assert len(errors) == 1 and err[-1] == errors[0] and not any("Traceback" in line for line in err), err
    assert expected in errors[0], errors[0]
    assert not list(runs.rglob("stages/data.json"))


def test_items_without_a_description_embed_their_title_and_other_fields():
    records = [
        {"movie_title": "Toy Story", "year": "1995", "genres": "Comedy", "url": "http://a", "title": "Toy Story"},
        {"movie_title": "Heat", "year": "", "genres": "Crime", "url": "", "title": "Heat"},
    ]
    assert text_fields(records, ["title", "description"]) == ["title", "year", "genres"]
    assert item_texts(records, EmbedConfig()) == ["Toy Story. 1995. Comedy.", "Heat. Crime."]
    assert text_fields(records, ["title"]) == ["title"]  # chosen fields are kept as chosen
    assert item_texts(records, EmbedConfig(template="{title} ({genres})")) == ["Toy Story (Comedy)", "Heat (Crime)"]
    described = [{**records[0], "description": "toys"}, records[1]]
    assert text_fields(described, ["title", "description"]) == ["title", "description"]  # Amazon-like data


def test_columns_of_numbers_are_left_out_of_the_text_but_a_year(tmp_path, caplog):
    """Goodbooks' books.csv holds ids, ISBNs, counts and ratings beside its title and authors: to a text encoder they
    are digits that say nothing of the book, so they are left out (and named), but for the publication year. The
    embed stage of a run on such a table is recomputed once (its revision); other data keeps its embeddings."""
    from crabrec.config import load_config
    from crabrec.embed import numeric_fields
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    books = tmp_path / "books.csv"
    books.write_text(
        "book_id,goodreads_book_id,isbn13,authors,original_publication_year,title,average_rating,ratings_count,price\n"
        "1,2767052,9.78043902348e+12,Suzanne Collins,2008.0,The Hunger Games,4.34,\"4,780,653\",$7.99\n"
        "2,3,9.78043955481e+12,J.K. Rowling,1997,Harry Potter,4.44,4602479,\n"
    )  # fmt: skip
    (tmp_path / "ratings.csv").write_text("user_id,book_id\n" + "".join(f"{u},{1 + u % 2}\n" for u in range(6)))
    records = [{"authors": "Suzanne Collins", "original_publication_year": "2008.0", "title": "The Hunger Games",
                "goodreads_book_id": "2767052", "isbn13": "9.78043902348e+12", "average_rating": "4.34",
                "ratings_count": "4,780,653", "price": "$7.99"}]  # fmt: skip
    assert text_fields(records, ["title", "description"]) == ["title", "authors", "original_publication_year", "price"]
    assert numeric_fields(records, ["title", "description"]) == [
        "goodreads_book_id", "isbn13", "average_rating", "ratings_count"]  # fmt: skip
    assert numeric_fields(records, ["title", "authors"]) == []  # fields chosen are kept as chosen
    with caplog.at_level("INFO", logger="crabrec"):
        assert item_texts(records, EmbedConfig()) == ["The Hunger Games. Suzanne Collins. 2008.0. $7.99."]
    assert "columns of numbers left out: goodreads_book_id, isbn13, average_rating, ratings_count" in caplog.text

    def revision(**data) -> int:
        cfg = load_config(overrides={"data": data})
        return RunContext(config=cfg, stages=registry()).revision("embed")

    assert revision(path=str(tmp_path / "ratings.csv"), item_table=str(books)) == 1
    assert revision() == 0  # the embedded Office data: it has descriptions
    assert revision(path=str(shared_path("ml-100k") / "ml-100k.inter")) == 0  # title, release_year, class


def test_a_movielens_folder_runs_to_its_semantic_ids_with_genres_in_the_text(releases, tmp_path, capsys):
    runs = tmp_path / "runs"
    code, _ = cli(["run", "--data", str(releases["1m"]), "--until", "tokenize", "--set", f"runs_dir={runs}",
                   "--set", "embed.encoder=hashing-bow", "--set", "tokenize.codebook_size=16"])  # fmt: skip
    assert code == 0
    assert (runs / "ml-1m-quick" / "sid" / "codebook.json").is_file()
    assert "their text is title, genres" in capsys.readouterr().err


def test_the_files_read_beside_a_dataset_file_are_its_companions(tmp_path):
    from crabrec.data.loaders import companion_files

    for name in ("Toy.inter.json", "Toy.item.json", "ml.inter", "ml.item", "u.data", "u.item", "u.genre", "r.csv"):
        (tmp_path / name).write_text("x")
    assert companion_files(tmp_path / "Toy.inter.json") == [tmp_path / "Toy.item.json"]
    assert companion_files(tmp_path / "ml.inter") == [tmp_path / "ml.item"]
    assert companion_files(tmp_path / "u.data") == [tmp_path / "u.item", tmp_path / "u.genre"]
    assert companion_files(tmp_path / "ratings.dat") == companion_files(tmp_path / "r.csv") == []
    assert companion_files(tmp_path) == []


def test_a_run_from_a_ratings_file_reruns_its_data_when_the_movie_file_beside_it_changes(tmp_path, capsys):
    folder = tmp_path / "ml-1m"
    folder.mkdir()
    rows = [f"{u}::{i}::4::{978300000 + 10 * i}\n" for u in (1, 2) for i in range(1, 13)]
    (folder / "ratings.dat").write_text("".join(rows))
    movies = [f"{i}::Movie {i} (1995)::Crime\n" for i in range(1, 13)]
    (folder / "movies.dat").write_text("".join(movies))
    args = ["run", "--data", str(folder / "ratings.dat"), "--until", "data", "--set", "data.kcore=0",
            "--set", "data.split=leave_one_out", "--set", f"runs_dir={tmp_path / 'runs'}"]  # fmt: skip
    assert cli(args)[0] == 0 and cli(args)[0] == 0
    assert "[data] cached" in capsys.readouterr().err
    (folder / "movies.dat").write_text("".join(movies).replace("::Crime", "::Drama", 1))
    assert cli(args)[0] == 0
    assert "[data] done" in capsys.readouterr().err
