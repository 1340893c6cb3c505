"""Microsoft's MIND news data as it unpacks: parts of behaviors.tsv + news.tsv, read as a history then clicks."""

from __future__ import annotations

import datetime as dt
import zipfile
from pathlib import Path

import numpy as np
import pytest

from crabrec.config import DataConfig
from crabrec.data.loaders import companion_files, detect_format, load_dataset
from crabrec.errors import CrabError
from tests.conftest import cli, shared_path


def mind_time(seconds: float) -> str:
    """A Unix time as MIND writes it: ``11/15/2019 8:55:22 AM`` (no leading zeros in month, day and hour)."""
    t = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
    return (
        f"{t.month}/{t.day}/{t.year} {t.hour % 12 or 12}:{t.minute:02d}:{t.second:02d} {'AM' if t.hour < 12 else 'PM'}"
    )


def write_part(folder: Path, rows: list[str], news: list[str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "behaviors.tsv").write_text("".join(r + "\n" for r in rows))
    if news is not None:
        (folder / "news.tsv").write_text("".join(n + "\n" for n in news))
    return folder


def news_rows(ids) -> list[str]:
    return [
        f"{i}\tnews\tworld\tTitle {i}\tAbstract of {i}.\thttps://assets.msn.com/labs/mind/{i}.html\t[]\t[]" for i in ids
    ]


def load(path: Path, **kw) -> object:
    return load_dataset(DataConfig(path=str(path), kcore=kw.pop("kcore", 1), **kw))


@pytest.fixture(scope="module")
def ml_as_mind(tmp_path_factory) -> dict[str, Path]:
    """The shared MovieLens-100K written as two MIND parts: each user's first 60% of ratings (in time order) as the
    history of every impression, the next 20% as clicked impressions of the first week, the rest as those of the
    second; each impression shows the clicked item and four others (label 0)."""
    src = shared_path("ml-100k")
    lines = [line.split("\t") for line in (src / "ml-100k.inter").read_text().splitlines()[1:]]
    by_user: dict[str, list[tuple[int, int, str]]] = {}
    for row, (user, item, _, ts) in enumerate(lines):
        by_user.setdefault(user, []).append((int(ts), row, item))
    items = sorted({item for _, item, _, _ in lines}, key=int)
    root = tmp_path_factory.mktemp("mind")
    weeks: dict[str, list[tuple[int, str]]] = {"MINDsmall_train": [], "MINDsmall_dev": []}
    for user, rated in by_user.items():
        rated.sort()
        n = len(rated)
        history = " ".join(item for _, _, item in rated[: int(n * 0.6)])
        for k, (ts, row, item) in enumerate(rated[int(n * 0.6) :], start=int(n * 0.6)):
            others = [items[(items.index(item) + j * 97) % len(items)] for j in range(1, 5)]
            shown = [f"{o}-0" for o in others[:2]] + [f"{item}-1"] + [f"{o}-0" for o in others[2:]]
            week = "MINDsmall_train" if k < int(n * 0.8) else "MINDsmall_dev"
            weeks[week].append((row, f"{user}\t{mind_time(ts)}\t{history}\t{' '.join(shown)}"))
    out = {"recbole": src / "ml-100k.inter", "root": root / "MIND"}
    for week, rows in weeks.items():
        rows.sort()  # file order, as the ratings file lists them
        out[week] = write_part(
            root / "MIND" / week, [f"{n}\t{r}" for n, (_, r) in enumerate(rows, start=1)], news_rows(items)
        )
    return out


def test_two_weeks_of_movielens_written_as_mind_read_as_the_ratings_in_time_order(ml_as_mind):
    ours, ratings = load(ml_as_mind["root"], kcore=5), load(ml_as_mind["recbole"], kcore=5)
    assert detect_format(ml_as_mind["root"]) == "mind"
    assert (ours.n_users, ours.n_items) == (943, 1349) == (ratings.n_users, ratings.n_items)
    assert ours.users == ratings.users and ours.item_ids == ratings.item_ids
    assert all(np.array_equal(a, b) for a, b in zip(ours.sequences, ratings.sequences, strict=True))
    assert ours.timestamps is None and ours.name == "MIND"
    assert ours.item_text[0] == {"title": "Title 1", "description": "Abstract of 1.", "category": "news",
                                 "subcategory": "world"}  # fmt: skip


def test_a_part_reads_the_same_as_a_folder_its_zip_and_its_behaviors_file(ml_as_mind, tmp_path):
    part = ml_as_mind["MINDsmall_train"]
    archive = tmp_path / "MINDsmall_train.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name in ("behaviors.tsv", "news.tsv"):
            z.write(part / name, name)
    folder, zipped, file = load(part), load(archive), load(part / "behaviors.tsv")
    assert folder.name == zipped.name == file.name == "MINDsmall_train"
    for other in (zipped, file):
        assert other.users == folder.users and other.item_ids == folder.item_ids
        assert all(np.array_equal(a, b) for a, b in zip(other.sequences, folder.sequences, strict=True))
    assert companion_files(part / "behaviors.tsv") == [part / "news.tsv"]
    # a zip beside the folder it unpacks to is one part, not two
    both = tmp_path / "both"
    both.mkdir()
    (both / "MINDsmall_train").symlink_to(part)
    (both / "MINDsmall_train.zip").write_bytes(archive.read_bytes())
    assert load(both).n_interactions == folder.n_interactions


def test_history_then_clicks_in_time_order_with_known_answers(tmp_path, caplog):
    """u1's history (a b) then its clicks by time across two parts; u2's history differs between its impressions
    (the earliest one is read, and the log says so); a test part without labels adds its users' histories only."""
    news = news_rows("abcdefg")
    write_part(tmp_path / "d" / "week2", [
        "1\tu1\t11/16/2019 9:00:00 AM\ta b\te-1 f-0",
        "2\tu2\t11/16/2019 10:00:00 AM\tc d\tg-1",
    ], news)  # fmt: skip
    write_part(tmp_path / "d" / "week1", [
        "1\tu1\t11/9/2019 1:00:00 PM\ta b\tc-0 d-1 g-1",
        "2\tu1\t11/9/2019 1:00:00 AM\ta b\tf-1",
        "3\tu2\t11/10/2019 12:00:00 PM\tc\tf-0 e-1",
    ], news)  # fmt: skip
    write_part(tmp_path / "d" / "week3", [
        "1\tu3\t11/20/2019 9:00:00 AM\tg a\tb c",
        "2\tu1\t11/20/2019 9:00:00 AM\t\tf",
    ], news)  # fmt: skip
    with caplog.at_level("INFO", logger="crabrec"):
        ds = load(tmp_path / "d")
    seqs = {u: [ds.item_ids[i] for i in s] for u, s in zip(ds.users, ds.sequences, strict=True)}
    assert seqs == {"u1": ["a", "b", "f", "d", "g", "e"], "u2": ["c", "e", "g"], "u3": ["g", "a"]}
    assert any("2 users have different histories" in n for n in ds.notes)  # u2: c, then c d; u1: a b, then none
    assert any("week3/behaviors.tsv: its impressions carry no click labels" in n for n in ds.notes)


def test_a_table_named_behaviors_with_a_header_stays_a_table(tmp_path):
    (tmp_path / "behaviors.tsv").write_text("user\titem\ttimestamp\n" + "".join(
        f"u{u}\ti{(u + k) % 12}\t{1000 + k}\n" for u in range(12) for k in range(3)))  # fmt: skip
    assert detect_format(tmp_path / "behaviors.tsv") == "table" and detect_format(tmp_path) == "table"
    assert load(tmp_path / "behaviors.tsv").n_users == 12


BAD = {
    "fields": (["1\tu1\t11/9/2019 1:00:00 PM\ta b\tc-1", "2\tu1\t11/9/2019 2:00:00 PM\ta b"], [],
               "behaviors.tsv: line 2: expected 5 tab-separated fields (impression id, user id, time, history, "
               "impressions), got '2\\tu1\\t11/9/2019 2:00:00 PM\\ta b'"),
    "time": (["1\tu1\t11/9/2019 1:00:00 PM\ta b\tc-1", "2\tu1\t2019-11-09 14:00\ta b\td-1"], [],
             "behaviors.tsv: line 2: time '2019-11-09 14:00' is not written as MIND writes it (11/15/2019 8:55:22 AM)"),
    "labels": (["1\tu1\t11/9/2019 1:00:00 PM\ta b\tc-1 d", "2\tu2\t11/9/2019 2:00:00 PM\ta b\td-1"], [],
               "behaviors.tsv: some impressions carry a label (-0 or -1) and others none"),
    "no news": (["1\tu1\t11/9/2019 1:00:00 PM\ta b\tc-1"], ["no news"], "no news.tsv beside behaviors.tsv"),
    "unlisted": (["1\tu1\t11/9/2019 1:00:00 PM\ta b\tz-1"], [],
                 "user 'u1': item 'z' is not in the item table"),
    "columns": (["1\tu1\t11/9/2019 1:00:00 PM\ta b\tc-1"], ["--set", "data.columns=[a,user,t,h,item]"],
                "data.columns reads a table's columns; the mind layout is not a table (remove data.columns, or read "
                "it as one with --format table)"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_bad_mind_files_are_one_line_naming_the_file_and_line(case, tmp_path, capsys):
    rows, extra, expected = BAD[case]
    part = write_part(tmp_path / "p", rows, None if "no news" in extra else news_rows("abcdefg"))
    args = [a for a in extra if a != "no news"]
    code, _ = cli(["run", "--data", str(part), *args, "--until", "data", "--set", f"runs_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert err[-1].startswith("crabrec: error: ") and not any("Traceback" in line for line in err), err
    assert expected in err[-1], err[-1]


def test_news_without_a_title_is_named_by_its_line(tmp_path):
    part = write_part(tmp_path / "p", ["1\tu1\t11/9/2019 1:00:00 PM\ta b\tc-1"], [*news_rows("abc"), "d\tnews\tx\t\t"])
    with pytest.raises(CrabError, match=r"news.tsv: line 4: expected a news id and a title"):
        load(part)
