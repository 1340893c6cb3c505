"""Item text written in the interaction table itself (Last.fm-1K's artist and track names, Online Retail's
``Description``), read when there is no item table."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from pathlib import Path

import pytest

from crabrec.config import DataConfig, load_config
from crabrec.data.loaders import load_dataset
from tests.conftest import shared_path


def load(path: Path, **kw):
    return load_dataset(DataConfig(path=str(path), kcore=0, **kw))


@pytest.fixture(scope="module")
def lastfm(tmp_path_factory) -> Path:
    """MovieLens-100K as Last.fm-1K's ``userid-timestamp-artid-artname-traid-traname.tsv`` writes its plays: no
    header, ISO times, MusicBrainz ids, each movie a track whose artist is named for its first genre."""
    src = shared_path("ml-100k")
    rows = [line.split("\t") for line in (src / "ml-100k.inter").read_text().splitlines()[1:]]
    items = {r[0]: r for r in (line.split("\t") for line in (src / "ml-100k.item").read_text().splitlines()[1:])}
    track = {i: str(uuid.uuid5(uuid.NAMESPACE_URL, f"track/{i}")) for i in items}
    artist = {i: str(uuid.uuid5(uuid.NAMESPACE_URL, f"artist/{items[i][3].split()[0]}")) for i in items}
    path = tmp_path_factory.mktemp("lastfm") / "userid-timestamp-artid-artname-traid-traname.tsv"
    with path.open("w") as f:
        for u, i, _, t in sorted(rows, key=lambda r: (int(r[0]), -float(r[3]))):  # each user's newest play first
            when = dt.datetime.fromtimestamp(float(t), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            f.write(
                f"user_{int(u):06d}\t{when}\t{artist[i]}\t{items[i][3].split()[0]} Band\t{track[i]}\t{items[i][1]}\n"
            )
    return path


def test_a_play_log_names_its_tracks(lastfm):
    """Last.fm-1K's first line was 'no user column (… found user_000001, 1998-03-13T01:15:36Z, …)'; it is a row, and
    named, its artist and track names are the item text (the data was ids-only)."""
    with pytest.raises(Exception, match=r"looks like a row, not a header; name the columns with --set "
                                        r"data.columns=\[user,timestamp,item,column4,column5,column6\]"):  # fmt: skip
        load(lastfm)
    ds = load(lastfm, columns=["user", "timestamp", "artist", "artist_name", "item", "track"])
    base = load_dataset(DataConfig(path=str(shared_path("ml-100k") / "ml-100k.inter"), kcore=0))
    assert ds.has_text and ds.n_interactions == 100_000 and ds.n_items == base.n_items
    toy = ds.item_text[ds.item_ids.index(str(uuid.uuid5(uuid.NAMESPACE_URL, "track/1")))]
    assert toy == {"artist_name": "Animation Band", "track": "Toy Story"}
    assert ds.notes == [
        "item text from the interactions' columns artist_name, track (one value per item; names can be weak item "
        "text: compare --set tokenize.item_vectors=text+sasrec on validation)"
    ]
    by_artist = load(lastfm, columns=["user", "timestamp", "item", "artist_name", "track_id", "track"])
    assert by_artist.has_text and {rec["artist_name"] for rec in by_artist.item_text} >= {"Animation Band"}
    assert all(set(rec) == {"artist_name"} for rec in by_artist.item_text)  # an artist's tracks vary: no attribute


def write(path: Path, header: str, rows) -> Path:
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


ROWS = [(u, i, 1_600_000_000 + 10 * u + i) for u in range(1, 9) for i in range(1, 11) if (u + i) % 3]


def test_only_columns_of_words_with_one_value_per_item_that_tell_items_apart(tmp_path, caplog):
    titles = {i: f"Product number {i} in blue" for i in range(1, 11)}
    rows = [(u, i, t, titles[i], ["DE", "FR"][u % 2], f"B00{i:04d}", ["fast", "slow"][(u + i) % 2]) for u, i, t in ROWS]
    ds = load(
        write(tmp_path / "retail.csv", "customer_id,stock_code,timestamp,Description,country,barcode,shipping", rows)
    )
    assert {raw: rec for raw, rec in zip(ds.item_ids, ds.item_text, strict=True)} == {
        str(i): {"Description": titles[i]} for i in range(1, 11)
    }
    genres = [(u, i, t, ["Comedy", "Drama"][i % 2]) for u, i, t in ROWS]  # one value per item, two texts in all
    with caplog.at_level(logging.INFO, logger="crabrec"):
        ids_only = load(write(tmp_path / "genres.csv", "user,item,timestamp,genre", genres))
    assert not ids_only.has_text and "give 0 of 10 items a text of their own: ids-only data" in caplog.text
    with_table = write(tmp_path / "with.csv", "user,item,timestamp,Description", [(*r, "Title") for r in ROWS])
    (tmp_path / "items.csv").write_text("item,title\n" + "".join(f"{i},{titles[i]}\n" for i in range(1, 11)))
    assert load(with_table, item_table=str(tmp_path / "items.csv")).item_text[0] == {"title": titles[1]}


def test_the_data_stage_recomputes_tables_that_may_hold_item_text(tmp_path):
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    def revision(path: Path, **data) -> int:
        cfg = load_config(overrides={"data": {"path": str(path), **data}})
        return RunContext(config=cfg, stages=registry()).revision("data")

    words = write(tmp_path / "words.csv", "user,item,timestamp,name", [(*r, f"Item {r[1]}") for r in ROWS])
    plain = write(tmp_path / "plain.csv", "user,item,timestamp,rating", [(*r, 4) for r in ROWS])
    (tmp_path / "items.csv").write_text("item,title\n1,Pens\n")
    assert revision(words) == 256 and revision(plain) == 0
    assert revision(words, item_table=str(tmp_path / "items.csv")) == 0


def test_text_columns_read_cells_of_lists():
    """A Parquet list column (cells that cannot be hashed) is read as its text, not an error."""
    import numpy as np
    import pandas as pd

    from crabrec.data.inline_text import text_columns

    frame = pd.DataFrame(
        {"user": ["a", "a", "b"], "item": ["x", "y", "x"], "tags": [np.array(["Pens", "Blue"]), np.array(["Ink"]),
         np.array(["Pens", "Blue"])], "count": ["1", "2", "3"]}
    )  # fmt: skip
    assert text_columns(frame, ("user", "item")) == ["tags"]
