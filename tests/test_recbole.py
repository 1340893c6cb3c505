"""RecBole's atomic files as its converted datasets and benchmarks write them: columns named as Yelp's and Last.fm's,
and a benchmark split whose rows list the items before theirs."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from crabrec.config import DataConfig, load_config
from crabrec.data.loaders import companion_files, load_dataset
from crabrec.data.splits import make_splits
from crabrec.errors import CrabError
from tests.conftest import cli, shared_path

HISTORY = 20  # RecBole's MAX_ITEM_LIST_LENGTH for the benchmark written here


def ml100k() -> tuple[list[list[str]], list[list[str]]]:
    src = shared_path("ml-100k")
    rows = [line.split("\t") for line in (src / "ml-100k.inter").read_text().splitlines()[1:]]
    items = [line.split("\t") for line in (src / "ml-100k.item").read_text().splitlines()[1:]]
    return rows, items


def load(path: Path, **kw) -> object:
    return load_dataset(DataConfig(path=str(path), kcore=0, **kw))


def sequences(ds) -> dict[str, list[str]]:
    return {u: [ds.item_ids[i] for i in s] for u, s in zip(ds.users, ds.sequences, strict=True)}


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    """MovieLens-100K written as RecBole's Yelp (``business_id``, ``date``) and Last.fm (``artist_id``, no time)
    conversions write their files, and as a sequential benchmark (``item_id_list``, train/valid/test)."""
    rows, items = ml100k()
    root = tmp_path_factory.mktemp("recbole")
    yelp, lastfm, bench, steam = root / "yelp", root / "lastfm", root / "bench", root / "steam"
    for d in (yelp, lastfm, bench, steam):
        d.mkdir()
    head = "review_id:token\tuser_id:token\tbusiness_id:token\tstars:float\tuseful:float\tdate:float\n"
    (yelp / "yelp.inter").write_text(
        head + "".join(f"r{n}\t{u}\tb{i}\t{r}\t0\t{t}\n" for n, (u, i, r, t) in enumerate(rows))
    )
    (yelp / "yelp.item").write_text(
        "business_id:token\titem_name:token_seq\tcity:token_seq\tlatitude:float\tcategories:token_seq\n"
        + "".join(f"b{i}\t{title}\tPhoenix\t33.4\t{genres}\n" for i, title, _, genres in items)
    )
    by_time = sorted(rows, key=lambda r: (int(r[0]), float(r[3])))  # stable: file order breaks ties
    (lastfm / "lastfm.inter").write_text(
        "user_id:token\tartist_id:token\tweight:float\n" + "".join(f"{u}\t{i}\t{r}\n" for u, i, r, _ in by_time)
    )
    (steam / "steam.inter").write_text(
        "user_id:token\tplay_hours:float\tproduct_id:token\ttimestamp:float\n"
        + "".join(f"{u}\t1.5\t{i}\t{t}\n" for u, i, _, t in rows)
    )
    (steam / "steam.item").write_text(
        "app_name:token\tgenres:token_seq\tid:token\tprice:float\n"
        + "".join(f"{title}\t{genres}\t{i}\t9.99\n" for i, title, _, genres in items)
    )
    seqs: dict[str, list[str]] = defaultdict(list)
    for u, i, _, _ in by_time:
        seqs[u].append(i)
    parts: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    for u, seq in seqs.items():
        for t in range(1, len(seq)):
            split = "train" if t < len(seq) - 2 else "valid" if t == len(seq) - 2 else "test"
            parts[split].append(f"{u}\t{' '.join(seq[max(0, t - HISTORY) : t])}\t{seq[t]}\n")
    for split, lines in parts.items():
        (bench / f"ml-100k.{split}.inter").write_text(
            "user_id:token\titem_id_list:token_seq\titem_id:token\n" + "".join(lines)
        )
    (bench / "ml-100k.item").write_text((shared_path("ml-100k") / "ml-100k.item").read_text())
    return {
        "yelp": yelp,
        "lastfm": lastfm,
        "bench": bench,
        "steam": steam,
        "ml-100k": shared_path("ml-100k") / "ml-100k.inter",
    }


def test_columns_named_as_recbole_conversions_name_them(converted):
    """Yelp's ``business_id`` and ``date``, Last.fm's ``artist_id`` and Steam's ``product_id`` (its item file keyed
    by ``id``) were 'missing column(s) item_id'."""
    base = load(converted["ml-100k"])
    yelp = load(converted["yelp"] / "yelp.inter")
    assert yelp.n_interactions == base.n_interactions == 100_000
    assert {u: [i.removeprefix("b") for i in s] for u, s in sequences(yelp).items()} == sequences(base)
    assert all(np.array_equal(a, b) for a, b in zip(yelp.timestamps, base.timestamps, strict=True))
    assert yelp.item_text[yelp.item_ids.index("b1")]["item_name"] == "Toy Story"
    lastfm = load(converted["lastfm"])  # no time column: each user's rows in file order
    assert lastfm.timestamps is None and sequences(lastfm) == sequences(base)
    assert not lastfm.has_text and lastfm.notes == [
        "no lastfm.item: ids-only data, semantic IDs come from SASRec's item embeddings"
    ]
    steam = load(converted["steam"])
    assert sequences(steam) == sequences(base) and steam.item_text[steam.item_ids.index("1")]["app_name"] == "Toy Story"
    five = load(converted["yelp"], keep_rows={"stars": ["5"]})  # data.keep_rows reads a RecBole file too
    fives = sum(1 for r in ml100k()[0] if r[2] == "5")
    assert five.notes[0] == f"kept {fives:,} of 100,000 rows: stars in 5 (data.keep_rows)"


def test_a_benchmark_split_is_its_own_samples_and_one_dataset(converted):
    """``ml-100k.train.inter`` was read alone, one interaction a row (each user's first item lost, no item text);
    the folder was 'expected exactly one *.inter file'. Its rows are the given split, here the atomic file's
    leave-one-out samples, and its users' sequences are the time-ordered atomic file's."""
    base = load(converted["ml-100k"])
    bench = converted["bench"]
    for given in (bench, bench / "ml-100k.train.inter", bench / "ml-100k.test.inter"):
        ds = load(given)
        assert sequences(ds) == sequences(base) and ds.timestamps is None and ds.has_text
        assert ds.notes[0] == (
            "ml-100k.train.inter, ml-100k.valid.inter, ml-100k.test.inter: each user's sequence rebuilt from "
            "item_id_list and item_id (99,057 rows); their rows are the train, valid and test samples "
            "(data.split=given)"
        )
    ours, loo = make_splits(ds, "auto", 10), make_splits(base, "leave_one_out", 10)
    assert ours.kind == "given" and [len(ours.train), len(ours.valid), len(ours.test)] == [97_171, 943, 943]
    for name in ("train", "valid", "test"):
        assert samples(getattr(ours, name), ds) == samples(getattr(loo, name), base)
    others = ["ml-100k.item", "ml-100k.test.inter", "ml-100k.valid.inter"]
    assert sorted(p.name for p in companion_files(bench / "ml-100k.train.inter")) == others


def samples(part, ds) -> set[tuple[str, tuple[str, ...], str]]:
    """Each sample as (user id, history item ids, target item id)."""
    return {
        (ds.users[u], tuple(ds.item_ids[i] for i in h), ds.item_ids[t])
        for u, h, t in zip(part.user, part.rows(), part.target, strict=True)
    }


def test_a_session_benchmark_keeps_its_test_sessions(converted, tmp_path):
    """A session benchmark's test sessions are other sessions than its train sessions: leave-one-out would test
    every session; the given split tests those of the test file."""
    for split in ("train", "valid", "test"):
        lines = (converted["bench"] / f"ml-100k.{split}.inter").read_text().splitlines(keepends=True)
        keep = [line for line in lines[1:] if int(line.split("\t")[0]) % 2 == (split == "train")]  # train: odd
        (tmp_path / f"s.{split}.inter").write_text(lines[0] + "".join(keep))
    ds = load(tmp_path)
    splits = make_splits(ds, "auto", 10)
    assert {int(ds.users[u]) % 2 for u in splits.train.user} == {1}
    assert {int(ds.users[u]) % 2 for u in splits.test.user} == {0} == {int(ds.users[u]) % 2 for u in splits.valid.user}
    (tmp_path / "s.valid.inter").unlink()  # no valid file: crabrec splits the rebuilt sequences
    assert load(tmp_path).given is None and load(tmp_path).notes[0].endswith(
        "no valid file: data.split splits the sequences"
    )
    (tmp_path / "s.item").write_text((converted["bench"] / "ml-100k.item").read_text())
    (tmp_path / "s.test.inter").unlink()  # one part alone: read with its dataset's item file
    alone = load(tmp_path / "s.train.inter")
    assert alone.has_text and alone.given is None and alone.name == "s.train"


def test_rows_that_do_not_follow_their_users_items_are_counted_and_bad_files_are_one_line(converted, tmp_path, capsys):
    lines = (converted["bench"] / "ml-100k.valid.inter").read_text().splitlines(keepends=True)
    user, history, item = lines[3].rstrip("\n").split("\t")
    lines[3] = f"{user}\t{' '.join(history.split()[::-1])}\t{item}\n"
    for split in ("train", "test"):
        (tmp_path / f"ml.{split}.inter").write_text((converted["bench"] / f"ml-100k.{split}.inter").read_text())
    (tmp_path / "ml.valid.inter").write_text("".join(lines))
    assert load(tmp_path).notes[1].startswith("1 of 99,057 rows list items that do not end with their user's earlier")
    lines[5] = "\t".join(["", *lines[5].split("\t")[1:]])
    (tmp_path / "ml.valid.inter").write_text("".join(lines))
    code, _ = cli(["data", "stats", "--data", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "Traceback" not in "\n".join(err)
    assert err[-1].endswith("ml.valid.inter: row 6: empty user_id; expected an id in every row")
    (tmp_path / "ml.valid.inter").write_text("user_id:token\titem_id:token\n1\t2\n")
    with pytest.raises(
        CrabError, match=r"ml.valid.inter: header: columns user_id, item_id; expected those of ml.train"
    ):
        load(tmp_path)
    (tmp_path / "other.inter").write_text("user_id:token\titem_id:token\n1\t2\n")
    with pytest.raises(CrabError, match=r"expected one dataset's \*.inter file, or a benchmark's .*set data.name"):
        load(tmp_path)


def test_revisions_recompute_what_crabrec_now_reads_otherwise(converted):
    """A cached data stage is kept unless its files read differently now: a benchmark (128), a time column named
    ``date`` (1); MovieLens' atomic file reads as before."""
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    def revision(path: Path) -> int:
        cfg = load_config(overrides={"data": {"path": str(path)}})
        return RunContext(config=cfg, stages=registry()).revision("data")

    assert revision(converted["ml-100k"]) == 0 and revision(converted["lastfm"]) == 0
    assert revision(converted["yelp"] / "yelp.inter") == 1
    assert revision(converted["bench"] / "ml-100k.train.inter") == 128 == revision(converted["bench"])


def test_a_bad_row_of_a_benchmark_of_interaction_rows_is_named_by_its_own_file_and_line(converted, tmp_path):
    """A benchmark split into files of interaction rows (no ``item_id_list``) is read as one table; a bad cell in
    its valid or test file was named after the train file, by its place among all three files' rows."""
    lines = converted["ml-100k"].read_text().splitlines(keepends=True)
    head, rows = lines[0], lines[1:]
    cut = {"train": rows[:90_000], "valid": rows[90_000:95_000], "test": rows[95_000:]}
    cells = cut["test"][6].split("\t")
    cut["test"][6] = "\t".join([*cells[:3], "later\n"])
    for split, part in cut.items():
        (tmp_path / f"ml.{split}.inter").write_text(head + "".join(part))
    with pytest.raises(CrabError) as err:
        load(tmp_path)
    assert str(err.value).startswith(f"{tmp_path / 'ml.test.inter'}: row 8: timestamp 'later' is not a number")
