"""Own data in one command: plain tables with common column names, dates, an item table with its own id column,
ids-only tables, folders of tables; and every bad-data case as one line that names the option that fixes it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crabrec.config import DataConfig
from crabrec.data.loaders import load_dataset
from crabrec.data.reading import Origin
from crabrec.data.table import dataset_name, time_like, timestamps
from crabrec.errors import CrabError
from tests.conftest import cli

# 6 users x 12 items (a pair is left out when u + i is a multiple of 6), Unix seconds from 2020 on
RATINGS = [(u, i, 3, 1_600_000_000 + 100 * u + 10 * i) for u in range(1, 7) for i in range(1, 13) if (u + i) % 6]
EVENTS = [(u, i, t) for u, i, _, t in RATINGS]


def write(path: Path, header: str, rows, sep: str = ",") -> Path:
    path.write_text(header.replace(",", sep) + "\n" + "\n".join(sep.join(map(str, r)) for r in rows) + "\n")
    return path


def movies(path: Path, id_col: str = "movieId") -> Path:
    return write(path, f"{id_col},title", [(i, f"Movie {i} &amp; co") for i in range(1, 13)])


def load(path: Path, **kw) -> object:
    return load_dataset(DataConfig(path=str(path), kcore=0, **kw))


def test_movielens_style_columns_are_detected(tmp_path):
    ds = load(write(tmp_path / "ratings.csv", "userId,movieId,rating,timestamp", RATINGS),
              item_table=str(movies(tmp_path / "movies.csv")))  # fmt: skip
    assert ds.n_users == 6 and ds.n_items == 12 and ds.has_text
    assert ds.item_text[0]["title"] == "Movie 1 &amp; co"  # stored as given; shown unescaped by the recommender
    user1 = ds.users.index("1")
    assert [ds.item_ids[i] for i in ds.sequences[user1]] == [str(i) for i in range(1, 13) if i not in (5, 11)]


@pytest.mark.parametrize(("user", "item"), [("customer", "product"), ("Member", "Movie"), ("reader", "book")])
def test_columns_named_for_what_they_hold_without_id_are_detected(user, item, tmp_path):
    """``customer;product;date`` was `no user column`; such names come after every id name, so ``product_id``
    still wins over ``product``, and an item table's ``product`` (a name) never over its ``id``."""
    ds = load(write(tmp_path / "log.csv", f"{user},{item},date", EVENTS, sep=";"))
    assert ds.n_users == 6 and ds.n_items == 12
    both = load(write(tmp_path / "both.csv", f"{user},{item},{item}_id", [(u, f"name {i}", i) for u, i, _ in EVENTS]))
    assert sorted(both.item_ids, key=int) == [str(i) for i in range(1, 13)]
    table = write(tmp_path / "items.csv", f"id,{item}", [(i, f"name {i}") for i in range(1, 13)])
    named = load(write(tmp_path / "ids.csv", "user,item", [(u, i) for u, i, _ in EVENTS]), item_table=str(table))
    assert named.has_text and named.item_text[named.item_ids.index("1")][item] == "name 1"


def test_iso_dates_order_rows_like_unix_seconds(tmp_path):
    rows = [("a", "x", "2023-01-06 05:00:00"), ("a", "y", "2023-01-05T05:00:00"), ("a", "z", "2023-01-07"),
            ("b", "x", "2022-12-31 23:59:59"), ("b", "z", "2022-12-30")]  # fmt: skip
    ds = load(write(tmp_path / "log.csv", "user_id,item_id,date", rows))
    a = ds.users.index("a")
    assert [ds.item_ids[i] for i in ds.sequences[a]] == ["y", "x", "z"]
    assert ds.timestamps[a][1] == 1672981200.0  # 2023-01-06 05:00:00 UTC


@pytest.mark.parametrize(
    "name", ["order_date", "orderDate", "Purchase Time", "event_timestamp", "created_at", "date_added", "time_created"]
)
def test_a_column_named_for_a_time_by_its_last_word_orders_the_rows(name, tmp_path):
    """``order_date`` and the like were not detected: each user's rows were taken in file order, and the split was
    leave-one-out instead of the global time split, with no word said. A name whose first word says it is a time
    (Goodreads' ``date_added``) is one too."""
    rows = [("a", "x", "2023-01-06"), ("a", "y", "2023-01-05"), ("a", "z", "2023-01-07"), ("b", "x", "2022-12-31"),
            ("b", "z", "2022-12-30")]  # fmt: skip
    ds = load(write(tmp_path / "orders.csv", f"customer_id,product_id,{name}", rows))
    assert [ds.item_ids[i] for i in ds.sequences[ds.users.index("a")]] == ["y", "x", "z"]
    assert ds.timestamps[ds.users.index("b")].tolist() == [1672358400.0, 1672444800.0]  # 2022-12-30, -31 UTC


def test_columns_named_like_times_that_are_not_one_are_named(tmp_path, caplog):
    """Two candidates: an error asking for one. A duration (``watch_time``) or a text that is no time: a warning
    naming the column, the rows in file order. A column of TIME_NAMES wins over the others; ``time_col=null``
    keeps the file's order."""
    import logging

    rows = [("a", "x", "2023-01-06", "2023-01-02"), ("a", "y", "2023-01-05", "2023-01-01")]
    path = write(tmp_path / "two.csv", "user,item,order_date,ship_date", rows)
    with pytest.raises(CrabError, match=r"two.csv: several columns could be the time \(order_date, ship_date\); "
                                        r"choose one with --set data.time_col=<column>"):  # fmt: skip
        load(path)

    def order(ds) -> list[str]:
        return [ds.item_ids[i] for i in ds.sequences[0]]

    assert order(load(path, time_col="ship_date")) == ["y", "x"] and order(load(path, time_col=None)) == ["x", "y"]
    both = load(write(tmp_path / "both.csv", "user,item,timestamp,order_date", [("a", "x", 2, 1), ("a", "y", 1, 2)]))
    assert order(both) == ["y", "x"]  # by timestamp, not order_date
    for name, values in (("watch_time", (300, 20)), ("delivery_time", ("2 days", "1 day"))):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="crabrec"):
            ds = load(write(tmp_path / f"{name}.csv", f"user,item,{name}", [("a", "x", values[0]),
                                                                             ("a", "y", values[1])]))  # fmt: skip
        assert order(ds) == ["x", "y"] and ds.timestamps is None
        assert f"column {name} is named like a time but is not used as one" in caplog.text, name
        assert f"--set data.time_col={name} to use it" in caplog.text


def test_a_column_of_dates_under_another_name_is_the_time(tmp_path, caplog):
    """H&M's ``transactions_train.csv`` dates its rows in ``t_dat``: its rows were taken in file order, split
    leave-one-out, with no word said. A lone column of dates is the time (said in the log); two are neither (a
    warning), and ``time_col=null`` keeps the file's order."""
    import logging

    rows = [("2023-01-06", "a", "x"), ("2023-01-05", "a", "y"), ("2023-01-07", "a", "z"), ("2022-12-31", "b", "x"),
            ("2022-12-30", "b", "z")]  # fmt: skip
    path = write(tmp_path / "transactions_train.csv", "t_dat,customer_id,article_id", rows)
    with caplog.at_level(logging.INFO, logger="crabrec"):
        ds = load(path)
    assert [ds.item_ids[i] for i in ds.sequences[ds.users.index("a")]] == ["y", "x", "z"]
    assert ds.timestamps[ds.users.index("b")].tolist() == [1672358400.0, 1672444800.0]
    assert "column t_dat holds dates: read as the time (--set data.time_col=null to ignore it)" in caplog.text
    assert load(path, time_col=None).timestamps is None
    two = write(tmp_path / "two.csv", "t_dat,customer_id,article_id,dob", [(*r, "1990-01-01") for r in rows])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="crabrec"):
        assert load(two).timestamps is None
    assert "columns t_dat, dob hold dates; none is read as the time" in caplog.text
    numbers = write(tmp_path / "n.csv", "user,item,price", [("a", "x", "2023"), ("a", "y", "5")])
    assert load(numbers).timestamps is None  # numbers are no dates


def test_the_data_stage_is_recomputed_only_where_the_time_column_rule_changes_its_result(tmp_path):
    """Revision 1 of the data stage keys only a table whose time column is found by its name's last word."""
    from crabrec.config import load_config
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    def revision(path: Path | None, **data) -> int:
        cfg = load_config(overrides={"data": {"path": str(path) if path else None, **data}})
        return RunContext(config=cfg, stages=registry()).revision("data")

    orders = write(tmp_path / "orders.csv", "customer_id,product_id,order_date", EVENTS)
    plain = write(tmp_path / "ratings.csv", "userId,movieId,rating,timestamp", RATINGS)
    assert revision(orders) == 1
    added = write(tmp_path / "added.csv", "user_id,book_id,date_added", EVENTS)
    assert revision(added) == 1  # read in file order before the first-word rule
    dated = write(tmp_path / "dated.csv", "t_dat,customer_id,article_id", [("2023-01-06", 1, 2), ("2023-01-05", 1, 3)])
    assert revision(dated) == 1  # read in file order before a column of dates was the time
    assert revision(orders, time_col=None) == revision(orders, time_col="order_date") == 0
    assert revision(None) == revision(plain) == revision(tmp_path / "missing.csv") == 0


def _days(values: list[str], **kw) -> list[str]:
    import pandas as pd

    seconds = timestamps(pd.Series(values), Origin(Path("f.csv")), "date", **kw)
    return [str(d) for d in pd.to_datetime(seconds, unit="s")]


def test_dates_that_write_the_day_first_are_read_day_first():
    """``04/12/1997`` in a column that also holds ``25/12/1997`` is 4 December: each date was read month first when
    it could be, so a third of a day-first column was misread and each user's rows put out of order."""
    assert _days(["04/12/1997", "25/12/1997", "01/02/1998"]) == ["1997-12-04 00:00:00", "1997-12-25 00:00:00",
                                                                  "1998-02-01 00:00:00"]  # fmt: skip
    assert _days(["04/12/1997", "12/25/1997"]) == ["1997-04-12 00:00:00", "1997-12-25 00:00:00"]
    assert _days(["04.12.97 15:55", "25.1.98 10:00"]) == ["1997-12-04 15:55:00", "1998-01-25 10:00:00"]
    assert _days(["05-01-2020", "13-01-2020", "Jan 7, 2020", "2020-01-08"]) == [
        "2020-01-05 00:00:00", "2020-01-13 00:00:00", "2020-01-07 00:00:00", "2020-01-08 00:00:00"]  # fmt: skip
    assert _days(["01/01/2023", "02/02/2023"]) == ["2023-01-01 00:00:00", "2023-02-02 00:00:00"]  # same either way


def test_dates_whose_day_and_month_order_is_unknown_ask_for_the_format():
    with pytest.raises(
        CrabError,
        match=r"f.csv: date writes dates day first \(row 4: '25/12/1997'\) and month "
        r"first \(row 3: '12/25/1997'\); write them one way, or set data.time_format",
    ):
        _days(["04/12/1997", "12/25/1997", "25/12/1997"])
    with pytest.raises(CrabError, match=r"f.csv: date: no date tells whether the day or the month comes first \(row "
                                        r"2: '04/05/2023' has both at most 12\); set data.time_format \(e.g. --set "
                                        r"data.time_format=%d/%m/%Y for day first\)"):  # fmt: skip
        _days(["04/05/2023", "01/02/2023"])
    assert _days(["04/05/2023", "01/02/2023"], time_format="%d/%m/%Y") == ["2023-05-04 00:00:00",
                                                                          "2023-02-01 00:00:00"]  # fmt: skip
    assert _days(["20230106", "20221231"], time_format="%Y%m%d") == ["2023-01-06 00:00:00", "2022-12-31 00:00:00"]
    with pytest.raises(CrabError, match=r"row 3: date '2023-01-06' does not match data.time_format '%Y%m%d'; fix"):
        _days(["20230106", "2023-01-06"], time_format="%Y%m%d")
    with pytest.raises(ValueError, match=r"time_format\n.*expected a strftime format such as '%d/%m/%Y'"):
        DataConfig(time_format="dd/mm/yyyy")


def test_a_table_of_day_first_dates_orders_its_rows_as_the_same_iso_dates(tmp_path):
    """End to end, with the data stage recomputed for such a table only (revision 2; 3 with a time column found by
    its name)."""
    from crabrec.config import load_config
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    iso = [(u, i, f"2023-{1 + (u + i) % 12:02d}-{1 + (3 * u + i) % 28:02d}") for u, i, _, _ in RATINGS]
    day_first = [(u, i, f"{d[8:]}/{d[5:7]}/{d[:4]}") for u, i, d in iso]
    a = load(write(tmp_path / "iso.csv", "user,item,date", iso))
    b = load(write(tmp_path / "eu.csv", "user,item,date", day_first))
    assert [s.tolist() for s in a.sequences] == [s.tolist() for s in b.sequences]
    assert all(np.array_equal(x, y) for x, y in zip(a.timestamps, b.timestamps))

    def revision(path: Path) -> int:
        cfg = load_config(overrides={"data": {"path": str(path)}})
        return RunContext(config=cfg, stages=registry()).revision("data")

    named = write(tmp_path / "orders.csv", "user,item,order_date", day_first)
    assert (revision(tmp_path / "iso.csv"), revision(tmp_path / "eu.csv"), revision(named)) == (0, 2, 3)


@pytest.mark.parametrize("scale", [1, 1_000, 1_000_000, 1_000_000_000])
@pytest.mark.parametrize("start", [1_600_000_000, 880_000_000])  # 2020, and 1997 (ms below 1e12: read as seconds)
def test_unix_milliseconds_and_microseconds_read_as_seconds(tmp_path, scale, start):
    rows = [(u, i, t - 1_600_000_000 + start) for u, i, _, t in RATINGS]
    ds = load(write(tmp_path / "r.csv", "user,item,ts", [(u, i, t * scale) for u, i, t in rows]))
    seconds = load(write(tmp_path / "s.csv", "user,item,ts", rows))
    assert all(np.array_equal(a, b) for a, b in zip(ds.timestamps, seconds.timestamps))
    assert min(t.min() for t in ds.timestamps) == min(t for *_, t in rows)


def test_milliseconds_beside_a_stray_zero_and_of_the_1990s_are_milliseconds(tmp_path):
    """A 0 placeholder among milliseconds made every value seconds (the year 52,000), as did milliseconds of a date
    before 2001-09: the unit follows the median. Such tables get revision 1024 (their data stage recomputes)."""
    from crabrec.config import load_config
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    rows = [(u, i, t * 1000) for u, i, t in EVENTS]
    ds = load(write(tmp_path / "zero.csv", "user,item,timestamp", [*rows[:-1], (*rows[-1][:2], 0)]))
    assert sorted({float(t) for s in ds.timestamps for t in s})[:2] == [0.0, float(EVENTS[0][2])]
    old = write(tmp_path / "old.csv", "user,item,timestamp", [(u, i, (t - 700_000_000) * 1000) for u, i, t in EVENTS])
    assert min(t.min() for t in load(old).timestamps) == EVENTS[0][2] - 700_000_000  # 1997
    for path, want in ((old, 1024), (write(tmp_path / "new.csv", "user,item,timestamp", rows), 0)):
        cfg = load_config(overrides={"data": {"path": str(path)}})
        assert RunContext(config=cfg, stages=registry()).revision("data") == want


def test_a_date_column_of_days_gives_way_to_a_finer_time_column(tmp_path):
    """KuaiRand's log has ``date`` (``20220408``, a number) and ``time_ms``. ``date`` was read as Unix seconds
    (1970-08-23, the order within a day lost). A ``date`` of days is read as dates, and a column named for a time
    holding times of those days orders the rows; ``data.time_col=date`` keeps the days (revision 16 + 512)."""
    from crabrec.config import load_config
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    events = [(u, i, 1_600_000_000 + (t - 1_600_000_000) * 1000) for u, i, t in EVENTS]  # over 8 days
    when = pd.to_datetime([t for _, _, t in events], unit="s", utc=True) + pd.Timedelta(hours=9)
    days_of = when.strftime("%Y%m%d").astype(int)
    rows = [(u, i, day, t * 1000, 1) for (u, i, t), day in zip(events, days_of)][::-1]  # latest first
    path = write(tmp_path / "log.csv", "user_id,video_id,date,time_ms,is_click", rows)
    ds, want = load(path), load(write(tmp_path / "flat.csv", "user,item,timestamp", events))
    assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    assert all(np.array_equal(a, b) for a, b in zip(ds.timestamps, want.timestamps))
    days = load(path, time_col="date")
    alone = load(write(tmp_path / "days.csv", "user_id,video_id,date", [r[:3] for r in rows]))
    assert [t.tolist() for t in alone.timestamps] == [t.tolist() for t in days.timestamps]
    assert {float(t % 86400) for s in days.timestamps for t in s} == {0.0}
    assert min(t.min() for t in days.timestamps) == pd.Timestamp(when.min().date(), tz="UTC").timestamp()
    cfg = load_config(overrides={"data": {"path": str(path)}})
    assert RunContext(config=cfg, stages=registry()).revision("data") == 16 + 512


def test_a_time_column_of_one_value_is_no_time(tmp_path, caplog):
    """A ``timestamp`` of ``0`` on every row (a placeholder) was read as the time: the global-time split then cut
    the samples in file order, the last users' items made the test set. Such a column is no time (a warning and a
    note; leave-one-out), and the table gets revision 8192."""
    from crabrec.config import load_config
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    path = write(tmp_path / "zeros.csv", "user,item,timestamp", [(u, i, 0) for u, i, _ in EVENTS])
    with caplog.at_level("WARNING", logger="crabrec"):
        ds = load(path)
    said = "column timestamp holds one value for every row (0), so it is not read as the time"
    assert ds.timestamps is None and said in caplog.text and any(said in n for n in ds.notes)
    assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in load(write(
        tmp_path / "r.csv", "user,item", [(u, i) for u, i, _ in EVENTS])).sequences]  # fmt: skip
    cfg = load_config(overrides={"data": {"path": str(path)}})
    assert RunContext(config=cfg, stages=registry()).revision("data") == 8192


def test_timestamp_parsing_known_answers():
    import pandas as pd

    got = timestamps(pd.Series(["1970-01-02", "1970-01-01 00:01:00+00:00"]), Origin(Path("f")), "t")
    assert got.tolist() == [86400.0, 60.0]


@pytest.mark.parametrize("cells", [
    [" 1600000000", "1.6e9 ", "+1600000001", "001600000002", "1600000003.50"],
    ["1600000000000", "0", "1600000001000"],
    ["1600000000", "nan"], ["1600000000", "inf"], ["1600000000", "x"], ["1600000000", ""],
])  # fmt: skip
def test_numbers_read_by_arrow_equal_those_read_by_pandas(cells):
    """A column of Arrow strings (how pandas reads a table) is cast by Arrow when every cell is a finite number; the
    seconds, or the error, are those of the object column's path (``pd.to_numeric``)."""
    pa = pytest.importorskip("pyarrow")
    from crabrec.data import times

    arrow = pd.Series(pd.arrays.ArrowStringArray(pa.array(cells)))
    plain = pd.Series(cells, dtype=object)
    assert (times._all_numbers(arrow) is not None) == all(c.strip() not in ("nan", "inf", "x", "") for c in cells)
    results = []
    for values in (arrow, plain):
        try:
            results.append(timestamps(values, Origin(Path("f"), 2), "t").tolist())
        except CrabError as exc:
            results.append(str(exc))
    assert results[0] == results[1]


def test_item_table_has_its_own_id_column(tmp_path):
    inter = write(tmp_path / "events.tsv", "user_id,item_id,timestamp", EVENTS, sep="\t")
    ds = load(inter, item_table=str(movies(tmp_path / "items.csv", id_col="id")))
    assert ds.has_text and ds.item_text[0]["title"].startswith("Movie")
    named = write(tmp_path / "named.csv", "sku,title", [(i, f"M{i}") for i in range(1, 13)])
    ds = load(inter, item_table=str(named), item_table_id_col="sku")
    assert ds.item_text[ds.item_ids.index("2")]["title"] == "M2"


def test_semicolon_and_parquet_tables(tmp_path):
    a = load(write(tmp_path / "a.csv", "user;item;timestamp", EVENTS, sep=";"))
    import pandas as pd

    pd.DataFrame(EVENTS, columns=["userId", "itemId", "time"]).to_parquet(tmp_path / "b.parquet")
    b = load(tmp_path / "b.parquet")
    assert a.n_users == b.n_users == 6 and [s.tolist() for s in a.sequences] == [s.tolist() for s in b.sequences]


def test_text_tables_named_txt_or_dat_and_columns_parted_by_spaces_read_as_the_csv(tmp_path):
    """``--data ratings.txt`` said "cannot tell the layout from the file name"; a file whose columns are parted by
    runs of spaces was one column. A spreadsheet is refused with how to export it."""
    csv = load(write(tmp_path / "r.csv", "user,item,timestamp", EVENTS))
    lines = ["user  item timestamp", *("  ".join(map(str, r)) for r in EVENTS)]
    for name, text in (("r.txt", (tmp_path / "r.csv").read_text()), ("r.dat", "\n".join(lines) + "\n")):
        (tmp_path / name).write_text(text)
        ds = load(tmp_path / name)
        assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in csv.sequences], name
        assert dataset_name(tmp_path / name) == "r"
    (tmp_path / "bad.txt").write_text("user item timestamp\n1 2 x\n")
    with pytest.raises(CrabError, match=r"bad.txt: row 2: timestamp 'x'"):  # line numbers as in a CSV
        load(tmp_path / "bad.txt")
    (tmp_path / "r.xlsx").write_bytes(b"PK\x03\x04")
    for kw in ({}, {"item_table": str(tmp_path / "r.xlsx")}):
        path = tmp_path / ("r.xlsx" if not kw else "r.csv")
        with pytest.raises(CrabError, match=r"r.xlsx: a spreadsheet workbook; crabrec reads tables as CSV, TSV, JSON "
                                            r"lines or Parquet: save the sheet as CSV \(UTF-8\)"):  # fmt: skip
            load(path, **kw)


def test_a_glance_at_a_table_reads_its_first_rows_in_every_format(tmp_path):
    import gzip

    import pandas as pd

    from crabrec.data.reading import read_table

    frame = pd.DataFrame(EVENTS, columns=["user", "item", "timestamp"]).astype(str)
    frame.to_parquet(tmp_path / "e.parquet")
    (tmp_path / "e.jsonl").write_text("".join(row.to_json() + "\n" for _, row in frame.iterrows()))
    csv = write(tmp_path / "e.csv", "user,item,timestamp", EVENTS)
    (tmp_path / "e.csv.gz").write_bytes(gzip.compress(csv.read_bytes()))
    for name in ("e.csv", "e.csv.gz", "e.jsonl", "e.parquet"):
        for n in (0, 3, 1000):
            got = read_table(tmp_path / name, first_rows=n)
            assert got.astype(str).equals(frame.iloc[:n]), (name, n)


def test_parquet_ids_read_as_a_csv_spells_them_and_nulls_are_named(tmp_path):
    import pandas as pd

    csv = load(write(tmp_path / "a.csv", "user,item,timestamp", EVENTS))
    frame = pd.DataFrame(EVENTS, columns=["user", "item", "timestamp"]).astype({"item": float})  # as with a null
    frame.to_parquet(tmp_path / "f.parquet")
    pd.DataFrame({"item": [float(i) for i in range(1, 13)], "title": [f"M{i}" for i in range(1, 12)] + [None]}
                 ).to_parquet(tmp_path / "items.parquet")  # fmt: skip
    ds = load(tmp_path / "f.parquet", item_table=str(tmp_path / "items.parquet"))
    assert ds.item_ids == csv.item_ids == [str(i) for i in range(1, 13)]  # "7", not "7.0"
    assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in csv.sequences]
    assert ds.item_text[11]["title"] == ""  # a null is no text, not "None"
    frame.loc[4, "item"] = None
    frame.to_parquet(tmp_path / "g.parquet")
    with pytest.raises(CrabError, match=r"g.parquet: row 5: empty item id in column 'item' \(1 of 60 rows\); fill it"):
        load(tmp_path / "g.parquet")
    users = pd.DataFrame(EVENTS, columns=["user", "item", "timestamp"]).astype({"user": "Int64"})
    users.loc[2, "user"] = None
    users.to_parquet(tmp_path / "h.parquet")
    with pytest.raises(CrabError, match=r"h.parquet: row 3: empty user id in column 'user' \(1 of 60 rows\); fill it"):
        load(tmp_path / "h.parquet")
    (tmp_path / "j.jsonl").write_text('{"user": "a", "item": "x"}\n{"user": "", "item": "y"}\n')
    with pytest.raises(CrabError, match=r"j.jsonl: row 2: empty user id"):  # JSON lines have no header line
        load(tmp_path / "j.jsonl")


def test_rows_with_an_empty_cell_are_left_out_when_asked(tmp_path, caplog):
    """``data.incomplete_rows=drop``: a row with an empty user, item or time cell (or a Parquet or JSON null) is left
    out, counted in the log and the dataset's notes; the others read as the file without those rows, and a later
    error still names a row by its line in the file."""
    import logging

    import pandas as pd

    holes = [list(r) for r in EVENTS]
    holes[2][0], holes[5][1], holes[9][2] = "", "", ""
    full = load(write(tmp_path / "full.csv", "user,item,timestamp", [r for n, r in enumerate(EVENTS)
                                                                     if n not in (2, 5, 9)]))  # fmt: skip
    path = write(tmp_path / "holes.csv", "user,item,timestamp", holes)
    with pytest.raises(CrabError, match=r"holes.csv: row 4: empty user id in column 'user' \(1 of 60 rows\); fill "
                                        r"it, or --set data.incomplete_rows=drop to leave out the rows with an empty "
                                        r"cell$"):  # fmt: skip
        load(path)
    frame = pd.DataFrame(holes, columns=["user", "item", "timestamp"]).replace("", None)
    frame.astype({"timestamp": "Float64"}).to_parquet(tmp_path / "holes.parquet")
    (tmp_path / "holes.jsonl").write_text("".join(row.to_json() + "\n" for _, row in frame.iterrows()))
    for name in ("holes.csv", "holes.parquet", "holes.jsonl"):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="crabrec"):
            ds = load(tmp_path / name, incomplete_rows="drop")
        assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in full.sequences], name
        assert all(np.array_equal(a, b) for a, b in zip(ds.timestamps, full.timestamps)), name
        note = "left out 3 of 60 rows with an empty cell in user, item, timestamp (data.incomplete_rows=drop)"
        assert note in caplog.text and note in ds.notes, name
    holes[20][2] = "soon"
    with pytest.raises(CrabError, match=r"holes.csv: row 22: timestamp 'soon' is not a number"):
        load(write(tmp_path / "holes.csv", "user,item,timestamp", holes), incomplete_rows="drop")
    rated = write(tmp_path / "rated.csv", "user,item,rating", [("", "x", 5), ("a", "x", "five")])
    with pytest.raises(CrabError, match=r"rated.csv: row 3: rating 'five' is not a number"):
        load(rated, incomplete_rows="drop", min_rating=4)
    with pytest.raises(CrabError, match=r"empty.csv: every row has an empty cell in user, item; no interaction"):
        load(write(tmp_path / "empty.csv", "user,item", [("", "x"), ("a", "")]), incomplete_rows="drop")


def test_an_item_tables_repeated_rows_are_read_once_when_they_are_the_same(tmp_path):
    inter = write(tmp_path / "events.csv", "user_id,item_id,timestamp", EVENTS)
    once = load(inter, item_table=str(movies(tmp_path / "items.csv")))
    rows = [(i, f"Movie {i} &amp; co") for i in range(1, 13)]
    twice = load(
        inter, item_table=str(write(tmp_path / "twice.csv", "movieId,title", rows + rows[3:5] + [(" 4", rows[3][1])]))
    )
    assert twice.item_ids == once.item_ids and twice.item_text == once.item_text
    with pytest.raises(CrabError, match=r"other.csv: rows 5 and 14: item id '4' is given twice, with different text"):
        load(inter, item_table=str(write(tmp_path / "other.csv", "movieId,title", rows + [(4, "Another")])))


def test_a_shop_export_reads_with_one_option(tmp_path):
    """UCI's Online Retail layout: ``CustomerID`` (empty on some rows), ``StockCode``, ``InvoiceDate`` written month
    first (``12/1/2010 8:26``): detected, read in time order, the rows without a customer left out when asked."""
    rows = [("536365", "85123A", "12/1/2010 8:26", "17850.0"), ("536366", "71053", "12/13/2010 8:28", "17850.0"),
            ("536367", "84406B", "12/2/2010 8:34", ""), ("536368", "22633", "1/4/2011 8:34", "13047.0"),
            ("536369", "85123A", "12/3/2010 9:00", "13047.0")]  # fmt: skip
    path = write(tmp_path / "retail.csv", "InvoiceNo,StockCode,InvoiceDate,CustomerID", rows)
    with pytest.raises(CrabError, match=r"row 4: empty user id in column 'CustomerID' \(1 of 5 rows\)"):
        load(path)
    ds = load(path, incomplete_rows="drop")
    assert ds.users == ["13047", "17850"]  # pandas wrote the ids as floats: read as the integers
    assert [[ds.item_ids[i] for i in s] for s in ds.sequences] == [["85123A", "22633"], ["85123A", "71053"]]
    assert str(pd.Timestamp(ds.timestamps[1][1], unit="s")) == "2010-12-13 08:28:00"


def _compressed(path: Path, kind: str) -> Path:
    import bz2
    import gzip
    import lzma
    import zipfile

    data, out = path.read_bytes(), path.with_name(path.name + kind)
    if kind == ".zip":
        with zipfile.ZipFile(out, "w") as z:
            z.writestr(path.name, data)
    else:
        out.write_bytes({".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[kind](data))
    return out


@pytest.mark.parametrize("kind", [".gz", ".bz2", ".xz", ".zip"])
def test_compressed_tables_read_as_the_plain_ones(tmp_path, kind):
    plain = write(tmp_path / "ratings.csv", "userId,movieId,rating,timestamp", RATINGS)
    items = movies(tmp_path / "movies.csv")
    a = load(plain, item_table=str(items))
    b = load(_compressed(plain, kind), item_table=str(_compressed(items, kind)))
    assert b.name == "ratings" and b.item_text == a.item_text and b.users == a.users
    assert [s.tolist() for s in a.sequences] == [s.tolist() for s in b.sequences]


def test_a_byte_order_mark_and_windows_line_ends_read_as_the_plain_table(tmp_path):
    plain = write(tmp_path / "r.csv", "user_id,item_id,timestamp", EVENTS)
    odd = tmp_path / "odd.csv"
    odd.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes().replace(b"\n", b"\r\n"))
    a, b = load(plain), load(odd)
    assert a.users == b.users and [s.tolist() for s in a.sequences] == [s.tolist() for s in b.sequences]


def test_spaces_around_ids_and_after_commas_read_as_the_plain_table(tmp_path):
    """`u, i, t` with a space after each comma (and an item table written the same way, one id with a trailing
    space; a quoted title with a comma): the ids, the item table and the text read as the plain files'. JSON lines
    with spaces around its ids read the same."""
    plain = load(
        write(tmp_path / "r.csv", "user_id,item_id,timestamp", EVENTS), item_table=str(movies(tmp_path / "m.csv"))
    )
    spaced = tmp_path / "spaced.csv"
    spaced.write_text("user_id, item_id, timestamp\n" + "".join(f"{u}, {i}, {t}\n" for u, i, t in EVENTS))
    titles = "".join(f'{i}{" " if i == 3 else ""}, "Movie {i} &amp; co"\n' for i in range(1, 13))
    (tmp_path / "spaced_movies.csv").write_text("movieId, title\n" + titles)
    ds = load(spaced, item_table=str(tmp_path / "spaced_movies.csv"))
    assert ds.users == plain.users and ds.item_ids == plain.item_ids and ds.item_text == plain.item_text
    assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in plain.sequences]
    lines = [json.dumps({"user_id": f" {u}", "item_id": f"{i} ", "timestamp": t}) for u, i, t in EVENTS]
    (tmp_path / "r.jsonl").write_text("\n".join(lines) + "\n")
    ds = load(tmp_path / "r.jsonl", item_table=str(movies(tmp_path / "m.csv")))
    assert ds.users == plain.users and [s.tolist() for s in ds.sequences] == [s.tolist() for s in plain.sequences]


def test_json_lines_table_reads_as_the_csv(tmp_path):
    csv_ds = load(write(tmp_path / "r.csv", "user_id,item_id,timestamp", EVENTS))
    lines = [json.dumps({"user_id": u, "item_id": str(i), "timestamp": float(t), "extra": {"a": [1]}})
             for u, i, t in EVENTS]  # fmt: skip
    (tmp_path / "r.jsonl").write_text("\n".join(lines) + "\n\n")
    ds = load(tmp_path / "r.jsonl")
    assert ds.users == csv_ds.users and [s.tolist() for s in ds.sequences] == [s.tolist() for s in csv_ds.sequences]
    assert all(np.array_equal(a, b) for a, b in zip(ds.timestamps, csv_ds.timestamps))


def test_spaces_around_header_names_a_comment_line_and_excels_sep_hint(tmp_path):
    """``user , item , timestamp`` kept the spaces in its column names, and the ids-only catalogue kept the space after
    each id: "item '1' is not in the item table ... has '1 '". A first line ``# exported ...`` made the file read as
    one line per user (61 lines left out, silently), and Excel's ``sep=;`` was the header: both are one-line errors."""
    want = load(write(tmp_path / "r.csv", "user,item,timestamp", EVENTS))
    spaced = write(tmp_path / "s.csv", "user , item , timestamp", EVENTS, sep=" , ")
    ds = load(spaced)
    assert ds.users == want.users and [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    body = "user,item,timestamp\n" + "".join(",".join(map(str, r)) + "\n" for r in EVENTS)
    (tmp_path / "c.csv").write_text("# exported 2024\n" + body)
    with pytest.raises(CrabError, match=r"c.csv: line 1 \(# exported 2024\) is a comment, not a header line; delete"):
        load(tmp_path / "c.csv")
    (tmp_path / "e.csv").write_text("sep=;\n" + body.replace(",", ";"))
    with pytest.raises(CrabError, match=r"e.csv: line 1 \(sep=;\) is Excel's delimiter hint \(the columns are parted"):
        load(tmp_path / "e.csv")


def test_ids_written_as_whole_numbers_with_a_zero_fraction_match_the_integers(tmp_path):
    """pandas writes a float column of integer ids as ``7.0``: an item table so written matched none of the
    interactions' ``7`` ("item '1' is not in the item table ... the item table has '1.0'"). A column whose every id is
    a whole number so written reads as integers, in either file (revision 2048); ``1.5`` among them keeps them all."""
    from crabrec.config import load_config
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    inter = write(tmp_path / "r.csv", "user,item,timestamp", EVENTS)
    floats = write(tmp_path / "f.csv", "user,item,timestamp", [(f"{u}.0", f"{i}.0", t) for u, i, t in EVENTS])
    want = load(inter, item_table=str(movies(tmp_path / "m.csv", id_col="item")))
    items = write(tmp_path / "items.csv", "item,title", [(f"{i}.0", f"Movie {i} &amp; co") for i in range(1, 13)])
    for path, table in ((inter, items), (floats, tmp_path / "m.csv")):
        ds = load(path, item_table=str(table))
        assert (ds.users, ds.item_ids, ds.item_text) == (want.users, want.item_ids, want.item_text)
        cfg = load_config(overrides={"data": {"path": str(path), "item_table": str(table)}})
        assert RunContext(config=cfg, stages=registry()).revision("data") == 2048
    mixed = write(tmp_path / "x.csv", "user,item", [(1, "1.0"), (1, "1.5"), (2, "2.0"), (2, "1.0")])
    assert load(mixed).item_ids == ["1.0", "1.5", "2.0"]
    holes = write(tmp_path / "h.csv", "Customer ID,item", [("", 1), *((f"{u}.0", i) for u, i, _ in EVENTS)])
    assert load(holes, incomplete_rows="drop").users == want.users  # UCI Online Retail: a float column with blanks


def test_a_table_that_is_not_utf8_is_read_as_windows_1252_with_a_warning(tmp_path, caplog):
    inter = write(tmp_path / "r.csv", "user,item,timestamp", EVENTS)
    items = tmp_path / "items.csv"
    items.write_bytes(("item,title\n" + "".join(f"{i},Caf\u00e9 \u2013 {i}\n" for i in range(1, 13))).encode("cp1252"))
    with caplog.at_level("WARNING", logger="crabrec"):
        ds = load(inter, item_table=str(items))
    assert ds.item_text[0]["title"] == "Caf\u00e9 \u2013 1"
    assert "items.csv: not UTF-8 (byte 0xe9 at offset 16): read as Windows-1252" in caplog.text


def test_ids_only_table_and_folder(tmp_path):
    ds = load(write(tmp_path / "only.csv", "user_id,item_id", [r[:2] for r in RATINGS]))
    assert not ds.has_text and ds.timestamps is None
    folder = tmp_path / "ml"
    folder.mkdir()
    write(folder / "ratings.csv", "userId,movieId,rating,timestamp", RATINGS)
    movies(folder / "movies.csv")
    ds = load(folder)
    assert ds.has_text and ds.n_items == 12 and ds.name == "ratings"


def test_dataset_names():
    assert dataset_name(Path("ratings.csv")) == "ratings"
    assert dataset_name(Path("ml-100k.inter")) == "ml-100k"
    assert dataset_name(Path("Office.inter.json")) == "Office"
    assert dataset_name(Path("data")) == "data"


def test_one_command_run_names_the_run_after_the_data(tmp_path, capsys):
    inter = write(tmp_path / "ratings.csv", "userId,movieId,rating,timestamp", RATINGS)
    args = ["run", "--data", str(inter), "--items", str(movies(tmp_path / "movies.csv")), "--until", "data",
            "--set", f"runs_dir={tmp_path / 'runs'}", "--set", "data.kcore=0"]  # fmt: skip
    assert cli(args)[0] == 0
    err = capsys.readouterr().err
    assert "columns user=userId, item=movieId, time=timestamp" in err
    assert "split global_time (the data has timestamps" in err
    items = json.loads((tmp_path / "runs" / "ratings-quick" / "data" / "items.json").read_text())
    assert items["has_text"] and len(items["item_ids"]) == 12


# ---------------------------------------------------------------------------------------------- bad data

BAD = {  # name -> (files to write {name: (header, rows)}, extra CLI args, what the one-line error must say)
    "no user column": ({"d.csv": ("who,item_id", [(1, 2)])}, [], "--set data.user_col=<column>"),
    "no item column": ({"d.csv": ("user_id,what", [(1, 2)])}, [], "--set data.item_col=<column>"),
    "user_col set, absent": ({"d.csv": ("user,item", [(1, 2)])}, ["--set", "data.user_col=uid"], "data.user_col='uid'"),
    "item_col set, absent": ({"d.csv": ("user,item", [(1, 2)])}, ["--set", "data.item_col=sku"], "data.item_col='sku'"),
    "time_col set, absent": ({"d.csv": ("user,item", [(1, 2)])}, ["--set", "data.time_col=when"], "data.time_col"),
    "not a date": ({"d.csv": ("user,item,date", [(1, 2, "yesterday"), (1, 3, "today")])}, [],
                   "row 2: date 'yesterday' is neither Unix time nor a date"),
    "date typo among numbers": ({"d.csv": ("user,item,ts", [(1, 2, 5), (1, 3, "6x"), (2, 2, 7)])}, [],
                                "data.time_col=null"),
    "a number among dates": ({"d.csv": ("user,item,date", [(1, 2, "2014-01-02"), (1, 3, 1001)])}, [],
                             "row 3: date '1001' is a number, but 1 of the 2 rows are dates"),
    "control characters in the header": ({"d.csv": ("who\x1b[2J,item", [(1, 2)])}, [], "found who\\x1b[2J, item"),
    "empty user id": ({"d.csv": ("user,item", [(1, 2), ("", 3)])}, [], "row 3: empty user id"),
    "empty item id": ({"d.csv": ("user,item", [(1, 2), (1, "")])}, [], "row 3: empty item id"),
    "item table without id": ({"d.csv": ("user,item", [(1, 2)]), "i.csv": ("name,title", [(2, "x")])},
                              ["--items", "{i.csv}"], "--set data.item_table_id_col=<column>"),
    "item_table_id_col absent": ({"d.csv": ("user,item", [(1, 2)]), "i.csv": ("item,title", [(2, "x")])},
                                 ["--items", "{i.csv}", "--set", "data.item_table_id_col=sku"],
                                 "data.item_table_id_col='sku': no such column"),
    "item table missing": ({"d.csv": ("user,item", [(1, 2)])}, ["--items", "{nope.csv}"], "file not found"),
    "duplicate item row": ({"d.csv": ("user,item", [(1, 2)]), "i.csv": ("item,title", [(2, "x"), (2, "y")])},
                           ["--items", "{i.csv}"], "rows 2 and 3: item id '2' is given twice, with different text"),
    "item not in item table": ({"d.csv": ("user,item", [(1, 2), (1, 9)]), "i.csv": ("item,title", [(2, "x")])},
                               ["--items", "{i.csv}"], "item '9' is not in the item table"),
    "item id written another way": ({"d.csv": ("user,item", [(1, 2), (1, 9)]), "i.csv": ("item,title", [("2", "x"),
                                    ("9.0", "y")])}, ["--items", "{i.csv}"],
                                    "item '9' is not in the item table; the item table has '9.0': ids are matched as "
                                    "text, write them the same way in both files"),
    "two interaction tables": ({"a.csv": ("user,item", [(1, 2)]), "b.csv": ("userId,itemId", [(1, 2)])},
                               ["--data", "{.}"], "name it with --data FILE"),
    "two item tables": ({"a.csv": ("user,item", [(1, 2)]), "b.csv": ("item,title", [(2, "x")]),
                         "c.csv": ("item,name", [(2, "y")])}, ["--data", "{.}"], "name one with --items FILE"),
    "unknown file type": ({"d.xml": ("user,item", [(1, 2)])}, ["--data", "{d.xml}"],
                          "set --format (--format table for a delimited text file)"),
    "spreadsheet": ({"d.xlsx": ("user,item", [(1, 2)])}, ["--data", "{d.xlsx}"], "save the sheet as CSV (UTF-8)"),
    "empty folder": ({}, ["--data", "{.}"], "no known layout found"),
    "header only": ({"d.csv": ("user,item", [])}, [], "d.csv: no rows after the header (user, item)"),
    "item table header only": ({"d.csv": ("user,item", [(1, 2)]), "i.csv": ("item,title", [])},
                               ["--items", "{i.csv}"], "i.csv: no rows after the header (item, title)"),
    "not a table": ({"d.csv": ("user,item", [('"unclosed', 2)])}, [], "cannot parse table"),
    "a column named twice": ({"d.csv": ("user,item,item", [(1, 2, 3)])}, [], "header: column 'item' is given twice"),
    "not JSON lines": ({"d.jsonl": ('{"user": 1, "item": 2}', [("{oops",)])}, ["--data", "{d.jsonl}"],
                       "d.jsonl: line 2: not JSON"),
    "JSON line not an object": ({"d.jsonl": ('{"user": 1, "item": 2}', [("[1, 2]",)])}, ["--data", "{d.jsonl}"],
                                "d.jsonl: line 2: expected an object of columns, got list"),
    "not gzip": ({"d.csv.gz": ("user,item", [(1, 2)])}, ["--data", "{d.csv.gz}"], "d.csv.gz: cannot decompress"),
    "unknown key without section": ({"d.csv": ("user,item", [(1, 2)])}, ["--set", "user_col=u"],
                                    "did you mean data.user_col?"),
    "misspelt key": ({"d.csv": ("user,item", [(1, 2)])}, ["--set", "data.itme_col=u"], "data.item_col"),
    "misspelt section": ({"d.csv": ("user,item", [(1, 2)])}, ["--set", "dtaa.item_col=u"],
                         "--set: dtaa.item_col: unknown key (did you mean data.item_col?)"),
    "one JSON object": ({"d.csv": ("user,item", [(1, 2)]), "d.json": ('{\n "u1": [1, 2]', [("}",)])},
                        ["--data", "{d.json}"], "d.json: one JSON object, not a table; expected one object per line"),
    "JSON array of numbers": ({"d.json": ("[1, 2]", [])}, ["--data", "{d.json}"],
                              "d.json: array element 0: expected an object of columns, got int"),
    "no header line": ({"d.csv": ("7,12,5,1600000000", [(7, 13, 4, 1600000100)])}, [],
                       "d.csv: no user column: its first line (7, 12, 5, 1600000000) looks like a row, not a header; "
                       "name the columns with --set data.columns=[user,item,rating,timestamp]"),
    "columns miscounted": ({"d.csv": ("7,12,1600000000", [(7, 13, 1600000100)])},
                           ["--set", "data.columns=[user,item,rating,timestamp]"],
                           "d.csv: line 1 has 3 field(s) (7, 12, 1600000000), data.columns names 4"),
    "a column named twice in columns": ({"d.csv": ("7,12", [(7, 13)])}, ["--set", "data.columns=[user,user]"],
                                        "d.csv: data.columns: column 'user' is given twice"),
    "columns of a headerless row": ({"d.csv": ("7,12,x", [(7, 13, 1600000100), (8, 12, 1600000200)])},
                                    ["--set", "data.columns=[user,item,timestamp]"],
                                    "d.csv: row 1: timestamp 'x' is not a number"),
    "columns for JSON lines": ({"d.jsonl": ('{"user": 1, "item": 2}', [])},
                               ["--data", "{d.jsonl}", "--set", "data.columns=[user,item]"],
                               "d.jsonl: data.columns names the columns of a CSV or TSV file without a header line"),
    "columns for a folder": ({"d.csv": ("user,item", [(7, 13)])}, ["--data", "{.}", "--set", "data.columns=[u,i]"],
                             "data.columns names the columns of one file, or of a folder's tables without a header"),
    "quiet and verbose": ({"d.csv": ("user,item", [(1, 2)])}, ["-q", "-v"], "give one of them"),
}  # fmt: skip


def test_json_files_of_lines_or_of_an_array_read_as_tables(tmp_path):
    """Yelp's layout: reviews as JSON lines in a .json file, businesses as an array with a name and no title."""
    reviews = tmp_path / "yelp_academic_dataset_review.json"
    reviews.write_text("".join(
        json.dumps({"review_id": f"r{n}", "user_id": f"u{u}", "business_id": f"b{i}", "date": f"2020-01-0{t + 1}"})
        + "\n" for n, (u, i, t) in enumerate((u, i, t) for u in range(3) for t, i in enumerate((1, 2, 3, 1)))
    ))  # fmt: skip
    business = tmp_path / "business.json"
    business.write_text(json.dumps([{"business_id": f"b{i}", "name": f"Cafe {i}", "categories": "Food, Coffee",
                                     "attributes": {"WiFi": "free"}} for i in (1, 2, 3)], indent=2))  # fmt: skip
    ds = load(reviews, item_table=str(business))
    assert (ds.n_users, ds.n_items) == (3, 3)
    assert [ds.item_ids[i] for i in ds.sequences[0]] == ["b1", "b2", "b3", "b1"]
    assert ds.item_text[0]["title"] == "Cafe 1" and ds.item_text[0]["attributes"] == "WiFi: free"
    from crabrec.config import EmbedConfig
    from crabrec.embed import item_texts

    assert item_texts(ds.item_text, EmbedConfig())[0] == "Cafe 1. Food, Coffee. WiFi: free."


def test_json_lines_named_without_an_extension_read_as_json_lines(tmp_path):
    """Adressa ships its events as JSON lines in files named by day (``one_week/20170101``): "cannot tell the layout
    from the file name". A file without an extension whose first line is a JSON object is read as JSON lines; a bad
    row is named by its line."""
    path = tmp_path / "20170101"
    path.write_text("".join(json.dumps({"userId": f"cx:{u}", "id": f"a{i}", "time": t}) + "\n" for u, i, t in EVENTS))
    ds = load(path, item_col="id")
    want = load(write(tmp_path / "r.csv", "user,item,timestamp", [(f"cx:{u}", f"a{i}", t) for u, i, t in EVENTS]))
    assert ds.users == want.users and [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace('"time": ', '"time": "soon", "x": ')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CrabError, match=r"20170101: row 3: time 'soon' is not a number"):
        load(path, item_col="id")


def test_a_json_object_with_one_array_of_rows_reads_that_array(tmp_path):
    """The Million Playlist Dataset's slices are one object, ``{"info": {...}, "playlists": [{"pid": 0, "tracks":
    [{"track_uri": ..., "pos": 0}, ...]}, ...]}``: it was "one JSON object, not a table". The one array of objects is
    the table; its playlists' tracks are records, named in the error and read once the columns are named."""
    by_user: dict[int, list[int]] = {}
    for u, i, _ in EVENTS:
        by_user.setdefault(u, []).append(i)

    def tracks(items: list[int]) -> list[dict]:
        return [{"pos": k, "track_uri": f"spotify:track:{i}", "track_name": f"Song {i}"} for k, i in enumerate(items)]

    playlists = [{"name": f"list {u}", "pid": u, "tracks": tracks(items)} for u, items in by_user.items()]
    path = tmp_path / "mpd.slice.0-999.json"
    path.write_text(json.dumps({"info": {"slice": "0-999"}, "playlists": playlists}, indent=2))
    with pytest.raises(CrabError, match=r"found name, pid, tracks; tracks holds records of pos, track_uri, track_name"):
        load(path)
    ds = load(path, user_col="pid", item_col="track_uri")
    assert [[ds.item_ids[j] for j in s] for s in ds.sequences] == [
        [f"spotify:track:{i}" for i in items] for items in by_user.values()
    ]


def test_a_file_without_a_header_line_reads_with_named_columns(tmp_path):
    headed = load(write(tmp_path / "h.csv", "user,item,rating,timestamp", RATINGS))
    bare = write(tmp_path / "bare.tsv", "\t".join(map(str, RATINGS[0])), RATINGS[1:], sep="\t")
    ds = load(bare, columns=["user", "item", "rating", "timestamp"])
    assert ds.users == headed.users and ds.item_ids == headed.item_ids
    assert all(np.array_equal(a, b) for a, b in zip(ds.sequences, headed.sequences, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(ds.timestamps, headed.timestamps, strict=True))


def test_an_empty_file_is_named_as_such(tmp_path, capsys):
    (tmp_path / "d.csv").write_bytes(b"")
    code, _ = cli(["run", "--data", str(tmp_path / "d.csv"), "--until", "data", "--set", f"runs_dir={tmp_path}"])
    assert code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.endswith("d.csv: the file is empty; expected a header line, then the rows"), last


@pytest.mark.parametrize("case", list(BAD))
def test_bad_data_is_one_line_naming_the_fix(case, tmp_path, capsys):
    files, extra, expected = BAD[case]
    folder = tmp_path / "in"
    folder.mkdir()
    for name, (header, rows) in files.items():
        write(folder / name, header, rows)
    args = [a.replace("{", str(folder) + "/").replace("}", "").replace("/.", "") for a in extra]
    data = [] if "--data" in args else ["--data", str(folder / "d.csv")]
    code, _ = cli(["run", *data, *args, "--until", "data", "--set", f"runs_dir={tmp_path / 'runs'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    errors = [line for line in err if line.startswith("crabrec: error: ")]
    assert len(errors) == 1 and err[-1] == errors[0] and not any("Traceback" in line for line in err), err
    assert expected in errors[0], errors[0]
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("stages/data.json"))


def test_a_run_on_other_data_never_replaces_a_runs_results(tmp_path, capsys, monkeypatch):
    """Two files of the same name in two folders get the same default run name: the second command is refused,
    naming both files, and the first run is left as it was. The same file (edited, or named another way) reruns."""
    monkeypatch.chdir(tmp_path)
    for year in ("2023", "2024"):
        (tmp_path / year).mkdir()
        write(tmp_path / year / "ratings.csv", "userId,movieId,rating,timestamp", RATINGS)
    args = ["--set", "data.kcore=0", "--until", "data"]
    assert cli(["run", "--data", "2023/ratings.csv", *args])[0] == 0
    run = tmp_path / "runs" / "ratings-quick"
    before = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    assert cli(["run", "--data", "2024/ratings.csv", *args])[0] == 2
    err = capsys.readouterr().err
    assert f"runs/ratings-quick: holds the results of a run on {tmp_path}/2023/ratings.csv; --data " in err
    assert f"({tmp_path}/2024/ratings.csv) would replace them: name this run with --name, or delete " in err
    assert {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()} == before
    assert cli(["run", "--data", "2024/ratings.csv", "--name", "r2024", *args])[0] == 0
    assert cli(["run", "--data", "./2023/ratings.csv", *args])[0] == 0  # the same file
    write(tmp_path / "2023" / "ratings.csv", "userId,movieId,rating,timestamp", RATINGS[:-3])
    assert cli(["run", "--data", "2023/ratings.csv", *args])[0] == 0
    assert "[data] done" in capsys.readouterr().err  # edited: recomputed, as before


def test_an_amazon_2023_review_file_is_read_by_parent_asin(tmp_path):
    """Amazon Reviews 2023 ships ``asin`` (a variant) and ``parent_asin`` (the product its metadata describes) in each
    review: the item column is ``parent_asin`` (``asin`` was taken, and every review was then missing from the
    metadata). Where the item table lacks the first item-like column, the one it shares is used. The data stage of
    a table with both columns is recomputed once (revision 4)."""
    from crabrec.config import load_config
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    reviews = [{"user_id": f"U{u}", "asin": f"B{i}-{u % 3}", "parent_asin": f"B{i}", "timestamp": t * 1000}
               for u, i, t in EVENTS]  # fmt: skip
    (tmp_path / "Office.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reviews))
    meta = [{"parent_asin": f"B{i}", "title": f"Pen {i}", "features": ["blue"]} for i in range(1, 13)]
    (tmp_path / "meta.jsonl").write_text("".join(json.dumps(m) + "\n" for m in meta))
    for item_table in (str(tmp_path / "meta.jsonl"), None):
        ds = load(tmp_path / "Office.jsonl", item_table=item_table)
        assert sorted(ds.item_ids) == sorted(f"B{i}" for i in range(1, 13))
    shop = write(tmp_path / "orders.csv", "user,sku,product_code,timestamp", [(u, f"s{i}", i, t) for u, i, t in EVENTS])
    products = write(tmp_path / "products.csv", "product_code,title", [(i, f"P{i}") for i in range(1, 13)])
    ds = load(shop, item_table=str(products))
    assert ds.item_text[ds.item_ids.index("3")]["title"] == "P3"
    with pytest.raises(CrabError, match=r"item 's\d+' is not in the item table"):  # data.item_col is taken as set
        load(shop, item_col="sku", item_table=str(tmp_path / "products.csv"))

    def revision(path: Path, **data) -> int:
        cfg = load_config(overrides={"data": {"path": str(path), **data}})
        return RunContext(config=cfg, stages=registry()).revision("data")

    assert revision(tmp_path / "Office.jsonl") == revision(tmp_path / "Office.jsonl", time_col=None) == 4
    assert revision(tmp_path / "Office.jsonl", item_col="asin") == revision(shop) == 0


def test_a_missing_value_written_out_is_no_id_and_a_time_column_named_in_one_word_orders_the_rows(tmp_path):
    """Diginetica's ``train-item-views.csv`` writes an anonymous user as ``NA`` and its day in ``eventdate``: every
    anonymous view was read as one user's (here 50 of 60 rows), and the rows were taken in file order. ``NA``,
    ``null``, ``None`` ... are now empty cells (an error naming the other user column, or left out with
    ``data.incomplete_rows=drop``), and a column whose one-word name ends in ``date`` or ``time`` is the time. The
    data stage of such a table is recomputed once (revision 8, +1 for the time column found by its name)."""
    from crabrec.config import load_config
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    rows = [(u, "NA" if u % 5 else u, i, f"2020-01-{31 - i:02d}") for u, i, _ in EVENTS]  # later items first in time
    path = write(tmp_path / "views.csv", "sessionId;userId;itemId;eventdate", rows, sep=";")
    with pytest.raises(CrabError, match=r"views.csv: row 2: user id 'NA' \(a missing value\) in column 'userId' \(50 "
                                        r"of 60 rows\); fill it, use another column \(--set data.user_col=sessionId\), "
                                        r"or --set data.incomplete_rows=drop"):  # fmt: skip
        load(path)
    kept = load(path, incomplete_rows="drop")
    assert kept.users == ["5"] and kept.n_interactions == 10  # session 5's rows only
    ds = load(path, user_col="sessionId")
    assert ds.n_users == 6 and [ds.item_ids[i] for i in ds.sequences[0]][:3] == ["12", "10", "9"]  # by eventdate
    assert time_like(["eventdate", "purchasetime", "last_update", "order_date"], ()) == ["eventdate", "purchasetime",
                                                                                       "order_date"]  # fmt: skip
    with pytest.raises(CrabError, match=r"log.csv: row 3: item id 'None' \(a missing value\) in column 'item' \(1 of "):
        load(write(tmp_path / "log.csv", "user,item", [(1, 2), (1, "None")]))

    def revision(path: Path, **data) -> int:
        cfg = load_config(overrides={"data": {"path": str(path), **data}})
        return RunContext(config=cfg, stages=registry()).revision("data")

    assert revision(path) == 9 and revision(path, time_col=None) == 8
    assert revision(path, user_col="sessionId") == 1


def test_keep_rows_reads_only_the_events_asked_for(tmp_path, shared):
    """Retailrocket's ``events.csv`` holds views, cart additions and purchases in one ``event`` column (Taobao's
    ``behavior``: pv, cart, fav, buy): ``data.keep_rows`` keeps the rows whose column holds one of the values, compared
    without case or a number's spelling, before anything else reads the rows (an empty cell of a row left out is no
    error; a later error still names a row by its line)."""
    kinds = ["view", "addtocart", "transaction"]
    rows = [(t, u, kinds[(u + i) % 3], i) for u, i, t in EVENTS]
    path = write(tmp_path / "events.csv", "timestamp,visitorid,event,itemid", rows)
    ds = load(path, keep_rows={"event": ["Transaction", "addtocart "]})
    want = load(write(tmp_path / "bought.csv", "timestamp,visitorid,event,itemid", [r for r in rows if r[2] != "view"]))
    assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    assert ds.notes[0] == "kept 48 of 60 rows: event in Transaction, addtocart  (data.keep_rows)"
    flags = pd.DataFrame({"user": [u for u, _, _ in EVENTS], "item": [i for _, i, _ in EVENTS],
                          "bought": [float(i % 2) for _, i, _ in EVENTS]})  # fmt: skip
    flags.to_parquet(tmp_path / "flags.parquet")  # 1.0 in the file, 1 in the setting
    assert load(tmp_path / "flags.parquet", keep_rows={"bought": [1]}).n_interactions == 30
    holes = [list(r) for r in rows]
    holes[1][1] = ""  # a view: left out before the empty cell is looked at
    holes[3][0] = "soon"  # a transaction
    with pytest.raises(CrabError, match=r"holes.csv: row 5: timestamp 'soon' is not a number"):
        load(write(tmp_path / "holes.csv", "timestamp,visitorid,event,itemid", holes), keep_rows={"event": ["buy",
             "transaction"]})  # fmt: skip
    with pytest.raises(CrabError, match=r"events.csv: data.keep_rows: no row has event in \['buy'\] \(event holds "):
        load(path, keep_rows={"event": "buy"})
    with pytest.raises(CrabError, match=r"data.keep_rows: no column 'kind' \(found timestamp, visitorid, event, "):
        load(path, keep_rows={"kind": ["buy"]})
    with pytest.raises(CrabError, match=r"data.keep_rows reads a table's columns; the movielens layout"):
        load(shared("ml-100k") / "ml-100k.inter", keep_rows={"rating": [5]}, format="movielens")


def test_one_line_per_user_with_a_list_of_records_reads_as_one_row_per_record(tmp_path):
    """UCSD's Steam reviews hold one line per user, ``{'user_id': ..., 'reviews': [{'item_id': ...}, ...]}``, written
    as Python dict literals: they were 'not JSON', and as JSON 'no item column'. A line may be a dict literal (read
    with ast.literal_eval), and a column of lists of records gives one row per record when the table lacks a user or
    item column that the records hold; a later error names the row by its line."""
    by_user: dict[int, list] = {}
    for u, i, t in EVENTS:
        by_user.setdefault(u, []).append({"item_id": str(i), "posted": t, "recommend": True})
    lines = [{"user_id": f"u{u}", "user_url": f"http://x/{u}", "reviews": recs} for u, recs in by_user.items()]
    (tmp_path / "reviews.json").write_text("".join(repr(rec) + "\n" for rec in lines))  # True, single quotes
    (tmp_path / "reviews.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    flat = load(write(tmp_path / "flat.csv", "user_id,item_id", [(f"u{u}", i) for u, i, _ in EVENTS]))
    for name in ("reviews.json", "reviews.jsonl"):
        ds = load(tmp_path / name)
        assert ds.users == flat.users and [s.tolist() for s in ds.sequences] == [s.tolist() for s in flat.sequences]
    by_item = [
        {"item_id": i, "ratings": [{"user_id": u, "ts": t} for u, j, t in EVENTS if j == i]} for i in range(1, 13)
    ]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in by_item))
    ds = load(tmp_path / "items.jsonl", time_col="ts")
    want = load(write(tmp_path / "timed.csv", "user,item,timestamp", EVENTS))
    assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    nested = pd.DataFrame(lines).assign(tags=[["a", "b"]] * len(lines))  # a list column beside: read as text
    nested.to_parquet(tmp_path / "reviews.parquet")  # Parquet: a list of structs
    ds = load(tmp_path / "reviews.parquet")
    assert ds.users == flat.users and [s.tolist() for s in ds.sequences] == [s.tolist() for s in flat.sequences]
    lines[3]["reviews"][1]["item_id"] = ""
    (tmp_path / "hole.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    with pytest.raises(CrabError, match=r"hole.jsonl: row 4: empty item id in column 'item_id'"):
        load(tmp_path / "hole.jsonl")
    (tmp_path / "sets.jsonl").write_text("{'user': 'u1', 'item': 'a', 'tags': {'x'}}\n{'user': 'u1', 'item': 'b'}\n")
    assert load(tmp_path / "sets.jsonl").n_interactions == 2  # a set in a literal: its text (it was a traceback)
    (tmp_path / "bad.json").write_text("{'user_id': 'u1', 'reviews': [}\n")
    with pytest.raises(CrabError, match=r"bad.json: line 1: not JSON"):
        load(tmp_path / "bad.json")


def test_otto_sessions_with_their_events_as_records_read_as_one_row_per_event(tmp_path):
    """OTTO's ``train.jsonl`` holds one line per session, ``{"session": 0, "events": [{"aid": .., "ts": .., "type":
    "clicks"}]}`` (times in milliseconds): it was 'no user column (... found session, events)'. ``session`` and
    OTTO's ``aid`` are known names; ``data.keep_rows`` filters on a record's field; a file named for a split is named
    after its folder; a missing column's error names the fields of the records."""
    flat = load(write(tmp_path / "flat.csv", "user,item,timestamp", EVENTS))
    otto = tmp_path / "otto"
    otto.mkdir()
    kinds = ("clicks", "carts")
    by_user: dict[int, list] = {}
    for n, (u, i, t) in enumerate(EVENTS):
        by_user.setdefault(u, []).append({"aid": i, "ts": t * 1000, "type": kinds[n % 2]})
    lines = [json.dumps({"session": u, "events": recs}) + "\n" for u, recs in by_user.items()]
    (otto / "train.jsonl").write_text("".join(lines))
    ds = load(otto / "train.jsonl")
    assert ds.name == "otto" and ds.users == flat.users
    assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in flat.sequences]
    assert ds.timestamps is not None and [t.tolist() for t in ds.timestamps] == [t.tolist() for t in flat.timestamps]
    clicks = load(otto / "train.jsonl", keep_rows={"type": ["clicks"]})
    assert clicks.n_interactions == sum(1 for n in range(len(EVENTS)) if n % 2 == 0)
    (otto / "train.jsonl").write_text("".join(lines[:4]))  # OTTO's folder: later sessions in test.jsonl
    (otto / "test.jsonl").write_text("".join(lines[4:]))
    ds = load(otto)
    assert ds.name == "otto" and [s.tolist() for s in ds.sequences] == [s.tolist() for s in flat.sequences]
    renamed = "".join(ln.replace('"session"', '"sess"').replace('"aid"', '"article"') for ln in lines)
    (tmp_path / "renamed.jsonl").write_text(renamed)
    with pytest.raises(CrabError, match=r"found sess, events; events holds records of article, ts, type\); name it"):
        load(tmp_path / "renamed.jsonl")
    assert load(tmp_path / "renamed.jsonl", user_col="sess", item_col="article").users == flat.users


def test_a_column_of_clicks_that_holds_zeros_is_warned_about_and_noted(tmp_path, caplog):
    """Tenrec's and KuaiRand's tables hold a row for every item shown, ``click`` 0 or 1: every row was read as an
    interaction, silently. Such a column named like feedback warns (and notes) how many rows are 0 and how to keep
    the others; with ``data.keep_rows`` set, or a column of ones only, nothing is said."""
    rows = [(u, i, t, int(i % 3 > 0), 1) for u, i, t in EVENTS]
    path = write(tmp_path / "shown.csv", "user_id,item_id,timestamp,is_click,like", rows)
    zeros = sum(1 for r in rows if r[3] == 0)
    with caplog.at_level("WARNING", logger="crabrec"):
        ds = load(path)
    said = f"is_click is 0 in {zeros} of {len(rows)} rows ({zeros / len(rows):.0%}): every row is read as"
    assert said in caplog.text and "--set 'data.keep_rows={is_click: [1]}'" in caplog.text
    assert any(said in n for n in ds.notes) and "like is 0" not in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="crabrec"):
        ds = load(path, keep_rows={"is_click": ["1"]})
    assert ds.n_interactions == len(rows) - zeros and "is 0 in" not in caplog.text
    caplog.clear()  # Goodreads' is_read, true or false: the suggested filter is written as the column writes it
    shelved = tmp_path / "shelves.jsonl"
    shelved.write_text(
        "".join(json.dumps({"user_id": r[0], "book_id": r[1], "is_read": r[3] == 1}) + "\n" for r in rows)
    )
    with caplog.at_level("WARNING", logger="crabrec"):
        load(shelved)
    assert f"is_read is false in {zeros} of" in caplog.text and "data.keep_rows={is_read: [true]}" in caplog.text
    assert load(shelved, keep_rows={"is_read": ["true"]}).n_interactions == len(rows) - zeros


def test_a_column_of_event_kinds_is_noted_with_the_filter_that_keeps_some(tmp_path, caplog):
    """Retailrocket's ``event`` (view, addtocart, transaction) and REES46's ``event_type``: every kind is read as an
    interaction, as a session recommender wants; the log and the notes say so and how to keep the purchases. Not
    with ``data.keep_rows`` set, nor for a column of one kind or of many values."""
    kinds = ["view", "view", "addtocart", "transaction"]
    rows = [(t, u, kinds[(u + i) % 4], i, u * i) for u, i, t in EVENTS]
    path = write(tmp_path / "events.csv", "timestamp,visitorid,event,itemid,type", rows)
    shares = pd.Series([r[2] for r in rows]).value_counts(normalize=True)
    with caplog.at_level("INFO", logger="crabrec"):
        ds = load(path)
    assert list(shares.index) == ["view", "transaction", "addtocart"]  # the most common first
    said = (f"column event holds 3 kinds of event (view {shares['view']:.0%}, transaction {shares['transaction']:.0%}, "
            f"addtocart {shares['addtocart']:.0%}): each is read as an interaction; keep some with --set "
            "'data.keep_rows={event: [transaction]}'")  # fmt: skip
    assert said in caplog.text and said in ds.notes and "column type" not in caplog.text  # type: 60 values
    caplog.clear()
    with caplog.at_level("INFO", logger="crabrec"):
        ds = load(path, keep_rows={"event": ["transaction"]})
    assert "kinds of event" not in caplog.text and ds.n_interactions == (shares["transaction"] * len(rows)).round()
    one = write(tmp_path / "views.csv", "user,item,event_type", [(u, i, "view") for u, i, _ in EVENTS])
    assert not [n for n in load(one).notes if "kinds of event" in n]
    tied = write(tmp_path / "tied.csv", "user,item,event_type", [(u, i, "bc"[(u + i) % 2]) for u, i, _ in EVENTS[:4]])
    assert any("event_type holds 2 kinds of event (b 50%, c 50%)" in n for n in load(tied).notes)  # ties by name


def test_a_folder_of_several_item_tables_names_the_interactions_without_one(tmp_path):
    """Retailrocket's item properties come in two parts beside a category tree: none is an item table, and the
    error names how to read the events alone (ids only), as well as --items."""
    write(tmp_path / "events.csv", "timestamp,visitorid,event,itemid", [(t, u, "view", i) for u, i, t in EVENTS])
    for name in ("item_properties_part1.csv", "item_properties_part2.csv"):
        write(tmp_path / name, "timestamp,itemid,property,value", [(1, i, "available", 1) for i in range(1, 13)])
    write(tmp_path / "category_tree.csv", "categoryid,parentid", [(1, 2)])
    with pytest.raises(CrabError, match=r"several item tables \(category_tree.csv, item_properties_part1.csv, "
                       r"item_properties_part2.csv\); name one with --items FILE, or read the interactions without "
                       r"one \(ids only\) with --data .*events.csv$"):  # fmt: skip
        load(tmp_path)
    assert load(tmp_path / "events.csv").n_interactions == len(EVENTS)


def test_unnested_records_of_different_fields_fill_the_gaps_and_override_the_row():
    """One row per record: a field a record lacks is empty (or the row's column of that name), a record's field
    over the row's column of the same name, rows without records left out, each row keeping its line's label."""
    from crabrec.data.reading import unnested

    frame = pd.DataFrame(
        {"user": ["a", "b", "c"], "src": ["web", "app", "web"],
         "events": [[{"item": 1, "src": "ad"}, {"item": 2}], [], [{"item": 3, "kind": "buy"}]]},
        index=[5, 6, 7],
    )  # fmt: skip
    table, col = unnested(frame, Origin(Path("e.jsonl"), 1), lambda k: "item" in k)
    assert col == "events" and table.index.tolist() == [5, 5, 7]
    assert table.to_dict("list") == {
        "user": ["a", "a", "c"], "src": ["ad", "web", "web"], "item": ["1", "2", "3"], "kind": ["", "", "buy"]
    }  # fmt: skip


def test_a_yelp_folder_reads_its_reviews_with_its_businesses(tmp_path):
    """Yelp's dataset unpacks to five JSON-lines ``.json`` files: the folder was 'no known layout found'. A folder
    without other tables reads its JSON-lines files as tables; of the two with user and item columns the one named
    for reviews holds the interactions (``tip.json`` is the other), of the two keyed by ``business_id`` the one named
    ``business`` the items (``checkin.json`` is the other); ``user.json`` has no item column. An item's JSON object
    (``attributes``) is its ``key: value`` pairs in the text."""
    from crabrec.data.loaders import joined_record

    yelp = tmp_path / "yelp"
    yelp.mkdir()

    def lines(name: str, rows: list[dict]) -> Path:
        path = yelp / f"yelp_academic_dataset_{name}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    when = lambda t: pd.Timestamp(t, unit="s").strftime("%Y-%m-%d %H:%M:%S")  # noqa: E731
    review = lines("review", [{"review_id": f"r{n}", "user_id": f"u{u}", "business_id": f"b{i}", "stars": 4.0,
                               "text": "Good.", "date": when(t)} for n, (u, i, t) in enumerate(EVENTS)])  # fmt: skip
    lines("tip", [{"user_id": "u1", "business_id": "b2", "text": "Nice", "date": when(EVENTS[0][2])}])
    lines("user", [{"user_id": f"u{u}", "name": "Sam", "review_count": 3} for u in range(1, 7)])
    lines("checkin", [{"business_id": f"b{i}", "date": "2016-04-26 19:49:16"} for i in range(1, 13)])
    business = lines("business", [{"business_id": f"b{i}", "name": f"Cafe {i}", "categories": "Coffee, Tea",
                                   "attributes": {"WiFi": "free", "Parking": {"garage": False}, "Hours": None}}
                                  for i in range(1, 13)])  # fmt: skip
    ds = load(yelp)
    want = load(review, item_table=str(business))
    assert (ds.users, ds.item_ids, ds.item_text) == (want.users, want.item_ids, want.item_text)
    assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences] and ds.n_interactions == 60
    assert ds.item_text[0]["title"] == "Cafe 1" and ds.item_text[0]["attributes"] == "WiFi: free"
    assert joined_record('{"Brand": "Pilot", "Color": ["Black", "Blue"], "n": null, "sub": {"a": 1}}') == (
        "Brand: Pilot, Color: Black, Blue"
    )
    assert joined_record("{not json}") is None and joined_record("plain") is None and joined_record({}) == ""


def test_an_item_table_without_a_header_line_reads_its_first_column_as_the_id(tmp_path):
    """MicroLens ships its titles as ``1,Video about cats`` lines, no header: the folder was "no item id column
    (... found 1, Video about cats 1)". An item table whose first line is a row is read without a header, the item
    id first and the title second, in a folder or named with --items; the embed stage's glance reads it so too."""
    from crabrec.data.table import item_text_glance

    folder = tmp_path / "microlens"
    folder.mkdir()
    write(folder / "MicroLens-100k_pairs.csv", "user,item,timestamp", EVENTS)
    titles = folder / "MicroLens-100k_title_en.csv"
    titles.write_text("".join(f'{i},"Cats, part {i}"\n' for i in range(1, 13)))
    ds = load(folder)
    assert ds.n_items == 12 and ds.item_text[ds.item_ids.index("1")]["title"] == "Cats, part 1"
    assert load(folder / "MicroLens-100k_pairs.csv", item_table=str(titles)).item_text == ds.item_text
    glance = item_text_glance(DataConfig(path=str(folder), kcore=0))
    assert [g["title"] for g in glance[:2]] == ["Cats, part 1", "Cats, part 2"]


def test_a_folder_of_tables_with_the_same_columns_reads_them_as_one_table(tmp_path):
    """REES46's e-commerce events ship a file a month (``2019-Oct.csv``, ``2019-Nov.csv``, the same columns): the
    folder was "expected one interaction table ..., found 2". Tables with the same columns are parts of one table,
    beside an item table too; a bad row is named by its own file and line."""
    folder = tmp_path / "rees46"
    folder.mkdir()
    header = "event_time,event_type,product_id,user_id"
    when = lambda t: pd.Timestamp(t, unit="s").strftime("%Y-%m-%d %H:%M:%S UTC")  # noqa: E731
    rows = [(when(t), "view", i, u) for u, i, t in EVENTS]
    write(folder / "2019-Oct.csv", header, rows[::2])
    write(folder / "2019-Nov.csv", header, rows[1::2])
    want = load(write(tmp_path / "all.csv", header, rows))
    ds = load(folder)
    assert ds.name == "rees46" and ds.users == want.users
    assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    write(folder / "products.csv", "product_id,title", [(i, f"Phone {i}") for i in range(1, 13)])
    assert load(folder).item_text[0]["title"] == "Phone 1"
    write(folder / "2019-Oct.csv", header, [*rows[:2:2], (when(1), "view", "", 1), *rows[4::2]])
    with pytest.raises(CrabError, match=r"2019-Oct.csv: row 3: empty item id in column 'product_id'"):
        load(folder)


def test_parquet_parts_beside_a_parquet_item_table_are_a_folder_of_tables(tmp_path):
    """``part-0.parquet``, ``part-1.parquet`` and ``items.parquet`` in one folder were read as one Parquet dataset,
    whose columns were the item table's: "no user column (found item_id, title)". Parquet files of different columns
    are a folder of tables: the parts of the same columns are the interactions, the other the items."""
    folder = tmp_path / "pq"
    folder.mkdir()
    frame = pd.DataFrame(EVENTS, columns=["user_id", "item_id", "timestamp"])
    frame.iloc[::2].to_parquet(folder / "part-0.parquet")
    frame.iloc[1::2].to_parquet(folder / "part-1.parquet")
    pd.DataFrame({"item_id": range(1, 13), "title": [f"Movie {i}" for i in range(1, 13)]}).to_parquet(
        folder / "items.parquet"
    )
    ds = load(folder)
    want = load(write(tmp_path / "r.csv", "user,item,timestamp", EVENTS))
    assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    assert ds.item_text[0]["title"] == "Movie 1"


def test_a_hetrec_folder_of_dat_tables_names_its_two_interaction_tables(tmp_path):
    """HetRec's Last.fm ships tab-separated ``.dat`` tables with headers: the folder was 'no known layout found'. Its
    tables are read by their headers; two hold user and item columns (plays, and tags with times), so the error
    names both, and one of them given with ``--data`` reads with ``artists.dat`` (keyed by ``id``)."""
    lastfm = tmp_path / "hetrec2011-lastfm-2k"
    lastfm.mkdir()
    write(lastfm / "user_artists.dat", "userID,artistID,weight", [(u, i, 3) for u, i, _ in EVENTS], sep="\t")
    write(lastfm / "user_taggedartists-timestamps.dat", "userID,artistID,tagID,timestamp",
          [(u, i, 1, t * 1000) for u, i, t in EVENTS], sep="\t")  # fmt: skip
    write(lastfm / "user_friends.dat", "userID,friendID", [(1, 2), (2, 1)], sep="\t")
    write(lastfm / "artists.dat", "id,name,url", [(i, f"Band {i}", "http://www.last.fm/x") for i in range(1, 13)],
          sep="\t")  # fmt: skip
    write(lastfm / "tags.dat", "tagID,tagValue", [(1, "rock")], sep="\t")
    with pytest.raises(CrabError, match=r"found 2: user_artists.dat, user_taggedartists-timestamps.dat; name it"):
        load(lastfm)
    ds = load(lastfm / "user_taggedartists-timestamps.dat", item_table=str(lastfm / "artists.dat"))
    want = load(write(tmp_path / "r.csv", "user,item,timestamp", EVENTS))
    assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    assert ds.item_text[0]["title"] == "Band 1"


def test_book_crossing_folder_reads_its_ratings_with_its_books_and_leaves_its_users_table_out(tmp_path):
    """Book-Crossing ships ``BX-Book-Ratings.csv``, ``BX-Books.csv`` and ``BX-Users.csv`` (semicolons, every cell
    quoted, Latin-1, no times): the folder was 'expected one interaction table ..., found 2', the users table having
    a user column too. The one table with user and item columns holds the interactions."""
    bx = tmp_path / "bx"
    bx.mkdir()

    def quoted(path: Path, header: tuple, rows) -> None:
        lines = [";".join(f'"{c}"' for c in r) for r in (header, *rows)]
        path.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))

    isbn = {i: f"0{i:09d}" for i in range(1, 13)}
    quoted(bx / "BX-Book-Ratings.csv", ("User-ID", "ISBN", "Book-Rating"), [(u, isbn[i], 0) for u, i, _ in EVENTS])
    quoted(bx / "BX-Books.csv", ("ISBN", "Book-Title", "Book-Author"), [(isbn[i], f"Caf\u00e9 {i}", "A") for i in isbn])
    quoted(bx / "BX-Users.csv", ("User-ID", "Location", "Age"), [(u, "m\u00fcnchen, germany", 30) for u in range(1, 7)])
    ds = load(bx)
    assert ds.name == "BX-Book-Ratings" and ds.n_items == 12 and ds.timestamps is None
    assert [[ds.item_ids[j] for j in s] for s in ds.sequences] == [
        [isbn[i] for v, i, _ in EVENTS if v == u] for u in range(1, 7)
    ]
    assert ds.item_text[0]["Book-Title"] == "Caf\u00e9 1"


def test_a_time_column_found_by_its_name_may_write_dates_as_numbers(tmp_path):
    """``order_date`` holding ``20230106``: too small for Unix time, it was passed over as a duration and the rows
    taken in file order. Dates written as numbers are read as dates (revision 1 + 16 for such a table)."""
    from crabrec.config import load_config
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    rows = [
        ("a", "x", 20230106),
        ("a", "y", 20230105),
        ("a", "z", 20230107),
        ("b", "x", 20221231),
        ("b", "z", 20221230),
    ]
    path = write(tmp_path / "orders.csv", "customer_id,sku,order_date", rows)
    ds = load(path)
    assert [ds.item_ids[i] for i in ds.sequences[ds.users.index("a")]] == ["y", "x", "z"]
    assert ds.timestamps[ds.users.index("a")][1] == 1672963200.0  # 2023-01-06 00:00 UTC
    durations = write(tmp_path / "watch.csv", "user,item,watch_time", [("a", "x", 20230106), ("a", "y", 45)])
    assert load(durations).timestamps is None  # not every value a date: passed over, as before
    cfg = load_config(overrides={"data": {"path": str(path)}})
    assert RunContext(config=cfg, stages=registry()).revision("data") == 17


def test_columns_parted_by_double_colons_read_as_movielens_writes_them(tmp_path):
    """MovieLens 1M and 10M part their columns by ``::``; such a file named otherwise was one column (its error
    suggested data.user_col). It is read as a table, headerless with data.columns; a headerless first line with a
    value twice is a row, not a header that names a column twice."""
    want = load(write(tmp_path / "r.csv", "user,item,rating,timestamp", RATINGS))
    headed = write(tmp_path / "ratings.txt", "user::item::rating::timestamp", RATINGS, sep="::")
    assert [s.tolist() for s in load(headed).sequences] == [s.tolist() for s in want.sequences]
    bare = tmp_path / "ml1m.dat"
    bare.write_text("".join("::".join(map(str, r)) + "\n" for r in RATINGS))
    with pytest.raises(CrabError, match=r"ml1m.dat: its first line \(1, 1, 3, 1600000110\) looks like a row"):
        load(bare)
    assert load(bare, columns=["user", "item", "rating", "timestamp"]).n_interactions == want.n_interactions


def test_an_item_table_may_be_one_json_object_keyed_by_item_id(tmp_path):
    """``{"B001": {"title": ...}, ...}`` (LC-Rec's and MiniOneRec's item files) on one line was one row with a
    column per item, and the error listed them all; it is a table with an ``id`` column holding the keys."""
    inter = write(tmp_path / "events.csv", "user_id,item_id,timestamp", EVENTS)
    want = load(inter, item_table=str(movies(tmp_path / "items.csv")))
    keyed = {str(i): {"title": f"Movie {i} &amp; co", "id": "ignored"} for i in range(1, 13)}
    for indent in (None, 1):
        (tmp_path / "items.json").write_text(json.dumps(keyed, indent=indent))
        ds = load(inter, item_table=str(tmp_path / "items.json"))
        assert ds.item_ids == want.item_ids and [t["title"] for t in ds.item_text] == [
            t["title"] for t in want.item_text
        ]


def test_interactions_may_be_one_json_object_of_each_users_items(tmp_path):
    """``{"u1": ["B001", "B002"], ...}`` (LC-Rec's ``.inter.json`` under another name): each user's items in order."""
    by_user: dict[str, list[str]] = {}
    for u, i, _ in EVENTS:
        by_user.setdefault(str(u), []).append(str(i))
    (tmp_path / "histories.json").write_text(json.dumps(by_user))
    want = load(write(tmp_path / "r.csv", "user,item", [(u, i) for u, i, _ in EVENTS]))
    ds = load(tmp_path / "histories.json")
    assert ds.users == want.users and [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    (tmp_path / "nested.json").write_text(json.dumps({"u1": ["i1", ["i2"]], "u2": ["i1", "i3"]}))
    with pytest.raises(CrabError, match=r"nested.json: no user column"):  # lists of ids only
        load(tmp_path / "nested.json")


def test_an_item_tables_lists_of_words_are_text_not_json(tmp_path):
    """Amazon 2023's metadata writes descriptions, features and categories as lists: their text was the JSON
    (``["Office", "Pens"]``, embedded with its brackets). A list of words is the words joined by commas, in JSON
    lines and Parquet alike; such tables recompute their data stage (revision 32)."""
    from crabrec.config import load_config
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    inter = write(tmp_path / "events.csv", "user_id,item_id,timestamp", EVENTS)
    meta = [{"item_id": i, "title": f"Pen {i}", "description": [f"A pen {i}.", "Blue ink"], "categories": ["Office",
             "Pens"], "images": [], "details": {"Brand": "Acme"}} for i in range(1, 13)]  # fmt: skip
    (tmp_path / "meta.jsonl").write_text("".join(json.dumps(m) + "\n" for m in meta))
    pd.DataFrame(meta).drop(columns=["images"]).to_parquet(tmp_path / "meta.parquet")  # details: a struct
    for name in ("meta.jsonl", "meta.parquet"):
        text = load(inter, item_table=str(tmp_path / name)).item_text[0]
        assert text["description"] == "A pen 1., Blue ink" and text["categories"] == "Office, Pens", name
        assert text["details"] == "Brand: Acme", name  # an object: its key: value pairs (revision 4096)
    assert load(inter, item_table=str(tmp_path / "meta.jsonl")).item_text[0]["images"] == ""
    cfg = load_config(overrides={"data": {"path": str(inter), "item_table": str(tmp_path / "meta.jsonl")}})
    assert RunContext(config=cfg, stages=registry()).revision("data") == 32 + 4096
    # Amazon 2014's metadata: category paths, a list of lists, written as a Python literal
    paths = [
        {"asin": i, "title": f"Pen {i}", "categories": [["Office", "Pens"], ["Office", "Ink"]]} for i in range(1, 13)
    ]
    (tmp_path / "meta_Office.json").write_text("".join(repr(m) + "\n" for m in paths))
    assert load(inter, item_table=str(tmp_path / "meta_Office.json")).item_text[0]["categories"] == "Office, Pens, Ink"


def test_an_item_tables_python_literals_of_lists_and_dicts_are_text(tmp_path):
    """pandas writes a column of lists or dicts to CSV as Python literals: Food.com's ``RAW_recipes.csv`` has
    ``tags`` and ``ingredients`` as ``['winter squash', 'mixed spice']``, which were embedded with their brackets and
    quotes. They read as JSON's lists and objects do (never evaluated as code); the folder pairs
    ``RAW_interactions.csv`` (``recipe_id``) with ``RAW_recipes.csv`` (``id``)."""
    from crabrec.config import EmbedConfig
    from crabrec.embed import item_texts

    food = tmp_path / "food"
    food.mkdir()
    write(
        food / "RAW_interactions.csv", "user_id,recipe_id,date,rating", [(u, i, "2005-09-16", 5) for u, i, _ in EVENTS]
    )
    recipes = pd.DataFrame({
        "name": [f"soup {i}" for i in range(1, 13)], "id": range(1, 13),
        "tags": [["60-minutes-or-less", f"tag {i}"] for i in range(1, 13)],
        "ingredients": [["winter squash", "mixed spice"]] * 12, "extra": [{"Brand": "Acme", "n": None}] * 12,
        "code": ["[__import__('os')]"] * 12,
    })  # fmt: skip
    recipes.to_csv(food / "RAW_recipes.csv", index=False)
    ds = load(food)
    text = ds.item_text[ds.item_ids.index("1")]
    assert (text["tags"], text["ingredients"], text["extra"]) == ("60-minutes-or-less, tag 1", "winter squash, "
                                                                  "mixed spice", "Brand: Acme")  # fmt: skip
    assert text["code"] == "[__import__('os')]"  # not a literal: kept as written, never run
    cfg = EmbedConfig(fields=["name", "tags", "ingredients"])
    assert item_texts([text], cfg) == ["soup 1. 60-minutes-or-less, tag 1. winter squash, mixed spice."]


def test_a_folder_of_parquet_parts_is_one_table(tmp_path):
    """Spark, Dask and pandas write a table as a folder of parts (``part-0000N.parquet``, ``_SUCCESS``, hidden
    ``.crc`` files, perhaps partition folders such as ``event=view/``): it was 'expected one interaction table ...
    found 3'. Such a folder is one table, given as --data or inside a folder of tables."""
    want = load(write(tmp_path / "all.csv", "user,item,timestamp", EVENTS))
    frame = pd.DataFrame(EVENTS, columns=["user", "item", "timestamp"]).astype(str)
    spark = tmp_path / "ratings.parquet"
    spark.mkdir()
    for k in range(3):
        frame.iloc[k::3].to_parquet(spark / f"part-0000{k}-x.snappy.parquet", index=False)
    (spark / "_SUCCESS").write_text("")
    (spark / ".part-00000-x.snappy.parquet.crc").write_bytes(b"\0")
    frame.assign(event=["view", "buy"] * 30).to_parquet(tmp_path / "hive", partition_cols=["event"], index=False)
    for path in (spark, tmp_path / "hive"):
        ds = load(path)
        assert ds.users == want.users and [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    assert load(tmp_path / "hive", keep_rows={"event": "buy"}).n_interactions == 30
    shop = tmp_path / "shop"
    shop.mkdir()
    spark.rename(shop / "ratings.parquet")
    movies(shop / "movies.csv")
    assert load(shop).has_text and load(shop).n_interactions == want.n_interactions
    with pytest.raises(CrabError, match=r"ratings.parquet: data.columns names the columns of a CSV or TSV file"):
        load(shop / "ratings.parquet", columns=["user", "item"])


def test_a_zip_archive_is_read_when_it_holds_one_table_and_named_when_it_holds_several(tmp_path, capsys):
    """Kaggle's downloads are ``archive.zip``: one table inside was 'cannot tell the layout from the file name'; it
    is read as that table. Several tables inside are a one-line error that names them and says what to give."""
    import zipfile

    want = load(write(tmp_path / "ratings.csv", "user,item,timestamp", EVENTS))
    movies(tmp_path / "movies.csv")
    with zipfile.ZipFile(tmp_path / "archive.zip", "w") as z:
        z.write(tmp_path / "ratings.csv", "ratings.csv")
        z.writestr("__MACOSX/._ratings.csv", b"\0")
    assert [s.tolist() for s in load(tmp_path / "archive.zip").sequences] == [s.tolist() for s in want.sequences]
    with zipfile.ZipFile(tmp_path / "two.zip", "w") as z:
        z.write(tmp_path / "ratings.csv", "ratings.csv")
        z.write(tmp_path / "movies.csv", "movies.csv")
    with pytest.raises(CrabError, match=r"two.zip: a zip archive of 2 files \(ratings.csv, movies.csv\); .* unzip it"):
        load(tmp_path / "two.zip")
    import tarfile

    with tarfile.open(
        tmp_path / "yelp_dataset.tar.gz", "w:gz"
    ) as t:  # Yelp ships a tar: it was "cannot tell the layout"
        t.add(tmp_path / "ratings.csv", "ratings.csv")
    with pytest.raises(
        CrabError, match=r"yelp_dataset.tar.gz: a tar archive; unpack it \(tar -xf yelp_dataset.tar.gz\)"
    ):
        load(tmp_path / "yelp_dataset.tar.gz")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-16-le"])
def test_a_table_saved_as_unicode_text_reads_by_its_byte_order_mark(tmp_path, encoding):
    """Excel's "Unicode Text" is UTF-16 with a byte-order mark, tab-separated: it was read as Windows-1252, its column
    names full of NUL characters ('empty item id in column '\\x00i\\x00t...'). UTF-16 without a mark (utf-16-le
    here) is told by the NUL byte of each ASCII character of its header."""
    want = load(write(tmp_path / "r.csv", "user,item,timestamp", EVENTS))
    text = "user\titem\ttimestamp\n" + "".join("\t".join(map(str, r)) + "\n" for r in EVENTS)
    bom = {"utf-16-be": "\ufeff"}.get(encoding, "")  # utf-16 and utf-32 write their own
    (tmp_path / "unicode.txt").write_bytes((bom + text).encode(encoding))
    (tmp_path / "lines.jsonl").write_bytes("".join(json.dumps(dict(zip(("user", "item", "timestamp"), r))) + "\n"
                                                   for r in EVENTS).encode("utf-16"))  # fmt: skip
    for name in ("unicode.txt", "lines.jsonl"):
        ds = load(tmp_path / name)
        assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences], name


def test_a_folder_of_train_valid_and_test_tables_is_one_table(tmp_path):
    """Amazon Reviews 2023's benchmark splits are ``Office.train.csv``, ``Office.valid.csv`` and ``Office.test.csv``
    (the last two with a ``history`` column): the folder was 'expected one interaction table ... found 3'. The three
    are read as one table, which crabrec splits itself: leave-one-out gives back the files' last-item split."""
    from crabrec.data import make_splits

    rows = sorted(EVENTS, key=lambda r: (r[0], r[2]))
    last = {u: [r for r in rows if r[0] == u] for u in {r[0] for r in rows}}
    train = [r for u in last for r in last[u][:-2]]
    valid, test = [(*last[u][-2], "B1 B2") for u in last], [(*last[u][-1], "B1 B2 B3") for u in last]
    folder = tmp_path / "last_out"
    folder.mkdir()
    write(folder / "Office.train.csv", "user_id,parent_asin,timestamp", train)
    write(folder / "Office.valid.csv", "user_id,parent_asin,timestamp,history", valid)
    write(folder / "Office.test.csv", "user_id,parent_asin,timestamp,history", test)
    movies(folder / "items.csv", "parent_asin")
    ds = load(folder)
    want = load(write(tmp_path / "all.csv", "user_id,parent_asin,timestamp", EVENTS))
    assert (
        ds.name == "Office"
        and ds.has_text
        and [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    )
    splits = make_splits(ds, "leave_one_out", 10)
    assert sorted(ds.item_ids[t] for t in splits.test.target) == sorted(str(r[1]) for r in test)
    (folder / "Office.valid.csv").unlink()
    assert load(folder).n_interactions == len(train) + len(test)


def test_a_bad_row_of_a_split_table_is_named_by_its_own_file_and_line(tmp_path):
    """Rows read from a dataset's train, valid and test tables were named by their place among all three tables'
    rows, after the folder's name (``last_out: row 303``), a line no file has. Each row is named by its own file and
    line, whatever the check that finds it; sessions of no user are named by their file and line too."""
    folder = tmp_path / "last_out"
    folder.mkdir()
    parts = {"train": EVENTS[:40], "valid": EVENTS[40:50], "test": EVENTS[50:]}

    def written(split: str, row: int, cells: tuple, header: str = "user_id,parent_asin,timestamp") -> None:
        for name, rows in parts.items():
            rows = [cells if name == split and n == row else r for n, r in enumerate(rows)]
            write(folder / f"Office.{name}.csv", header, rows)

    for split, row, cells, kw, said in (
        ("test", 2, (1, 2, "soon"), {}, "timestamp 'soon' is not a number"),
        ("valid", 0, ("", 2, 1_600_000_000), {}, "empty user id in column 'user_id'"),
        ("test", 5, (1, 2, "2020-01-01"), {}, "timestamp '2020-01-01' is not a number"),
        ("train", 7, (1, 2, 1_600_000_000, "x"), {"min_rating": 3}, "rating 'x' is not a number"),
    ):
        header = "user_id,parent_asin,timestamp" + (",rating" if kw else "")
        if kw:
            parts = {k: [(*r, 4) for r in v] for k, v in parts.items()}
        written(split, row, cells, header)
        with pytest.raises(CrabError) as err:
            load(folder, **kw)
        assert str(err.value).startswith(f"{folder / f'Office.{split}.csv'}: row {row + 2}: "), str(err.value)
        assert said in str(err.value)
        parts = {"train": EVENTS[:40], "valid": EVENTS[40:50], "test": EVENTS[50:]}
    for name in parts:  # sessions: each row a session's items, then the item after them
        write(folder / f"Office.{name}.csv", "prev_items,next_item", [('"[1, 2]"', 3), ('"[2, 3]"', 4)])
    sessions = load(folder)
    assert sessions.users == sorted(f"Office.{name}.csv:{n}" for name in parts for n in (2, 3))
    assert all(s.tolist() for s in sessions.sequences) and sessions.n_interactions == 18


def test_a_header_line_the_csv_module_cannot_split_is_one_line(tmp_path):
    """A binary file named ``.txt`` whose first line holds a lone carriage return raised csv.Error (a traceback)."""
    (tmp_path / "noise.txt").write_bytes(b"a,b\rc,d\nu1,i1\n")
    with pytest.raises(CrabError, match=r"noise.txt: cannot parse its header line \(new-line character seen"):
        load(tmp_path / "noise.txt")


def test_a_web_address_is_named_as_such(tmp_path):
    """``--data https://.../ml-1m.zip`` said 'https:/files...: dataset path not found'."""
    local = str(write(tmp_path / "r.csv", "user,item", [(1, 2)]))
    web = "https://files.grouplens.org/datasets/movielens/ml-1m.zip"
    for args in ({"path": web}, {"path": local, "item_table": "s3://bucket/items.csv"}):
        with pytest.raises(CrabError, match=r"a web address; crabrec reads local files: download it first"):
            load_dataset(DataConfig(kcore=0, **args))
    with pytest.raises(CrabError, match=r"nothere.csv: dataset path not found$"):
        load(tmp_path / "nothere.csv")


def test_a_first_line_that_is_a_row_is_shown_cut_short_and_the_fix_fits_the_file(tmp_path):
    """A headerless file's first line is echoed cell by cell, each cut to 40 characters and the whole to 200 (a
    MIND behaviors line holds hundreds of ids); an item table, which has no data.columns, is told to add a header,
    and lists and links tell a row as numbers do."""
    long = " ".join(f"N{i}" for i in range(400))
    inter = write(tmp_path / "d.tsv", f"1\tU1\t{long}", [(2, "U2", long)], sep="\t")
    with pytest.raises(CrabError) as err:
        load(inter)
    shown = str(err.value).split("its first line (")[1].split(") looks like a row")[0]
    assert len(shown) <= 200 and shown.startswith("1, U1, N0 N1 N2") and "N399" not in shown
    assert "data.columns=[user,item,column3] (one name per column" in str(err.value)  # as many names as cells
    pairs = write(tmp_path / "Beauty.txt", "1 1", [(1, 2), (2, 1), (2, 3)], sep=" ")  # SASRec's 'user item' lines
    with pytest.raises(CrabError, match=r"data.columns=\[user,item\] \(one name per column"):
        load(pairs)
    assert load(pairs, columns=["user", "item"]).n_users == 2
    rows = [(1, "2014-04-07T10:54:09.868Z", 214536500, 0), (2, "2014-04-07T13:56:37.614Z", 214662742, 0),
            (2, "2014-04-07T13:57:19.373Z", 214536502, 0)]  # fmt: skip
    clicks = write(tmp_path / "yoochoose-clicks.dat", "1,2014-04-07T10:51:09.277Z,214536502,0", rows)
    with pytest.raises(CrabError, match=r"data.columns=\[user,timestamp,item,rating\] \(one name"):
        load(clicks)  # a session, an ISO time, the item, its category: the names follow what the cells hold
    assert load(clicks, columns=["user", "timestamp", "item", "rating"]).n_users == 2
    write(tmp_path / "r.csv", "user,item,time", [("u1", "N1", 1), ("u1", "N2", 2)])
    first = "N1\tnews\tTitle\thttps://x.example/N1\t[]\t[]"
    news = write(tmp_path / "news.tsv", first, [("N2", "a", "b", "c", "[]", "[]")], sep="\t")
    with pytest.raises(CrabError, match=r"news.tsv: its first line \(N1, news, Title, https://x.example/N1, \[\], "
                       r"\[\]\) looks like a row, not a header; add a header line \(to an item table"):  # fmt: skip
        load(tmp_path / "r.csv", item_table=str(news))


def test_names_guessed_for_a_row_follow_what_its_cells_hold():
    from crabrec.data.reading import guess_columns

    assert guess_columns(["196", "242", "881250949"]) == ["user", "item", "timestamp"]
    assert guess_columns(["7", "12", "4.5", "1600000000000"]) == ["user", "item", "rating", "timestamp"]
    assert guess_columns(["u1", "i1", "23/05/2021", "x", "99"]) == ["user", "item", "timestamp", "column4", "column5"]
    # Amazon's ratings-only files: an ISBN is an item, the Unix time comes last
    assert guess_columns(["A39HTATAQ9V7YF", "0205616461", "5.0", "1369699200"]) == [
        "user",
        "item",
        "rating",
        "timestamp",
    ]
    assert guess_columns(["A39HTATAQ9V7YF", "1304351475", "5.0", "1369699200"]) == [
        "user",
        "item",
        "rating",
        "timestamp",
    ]
    assert guess_columns(["0205616461", "A39HTATAQ9V7YF", "5.0", "1369699200"]) == [
        "item",
        "user",
        "rating",
        "timestamp",
    ]
    assert guess_columns(["B00004U9V2", "A1YJWEXHQBWK2B", "5.0", "1369699200"])[:2] == ["item", "user"]
    # check-ins: Gowalla's (user, time, latitude, longitude, place) and Foursquare's (user, venue, ..., date)
    assert guess_columns(["196", "2010-10-19T23:55:27Z", "30.2359091167", "-97.7951395833", "22847"]) == [
        "user", "timestamp", "column3", "column4", "item"]  # fmt: skip
    four = ["470", "49bbd6c0f964a520f4531fe3", "4bf58dd8d48988d127951735", "Arts & Crafts Store", "40.71981037548",
            "-74.00258103213994", "-240", "Tue Apr 03 18:00:09 +0000 2012"]  # fmt: skip
    assert guess_columns(four) == ["user", "item", *(f"column{n}" for n in range(3, 8)), "timestamp"]
    assert guess_columns(["7"]) == ["user"] and guess_columns(["1304351475", "u7", "i7"])[:2] == ["user", "item"]


@pytest.mark.parametrize("sep", [" ", ";", "|", ", "])
def test_a_column_of_ids_joined_into_one_text_reads_as_lists(tmp_path, sep):
    """``user_id,item_ids`` with ``1 2 3`` (or ``1;2;3``, ``1|2|3``, ``"1, 2, 3"``) in a cell: the file was "no item
    column", and naming the column read each whole list as one item. A column named for items whose cells are ids
    joined by one separator reads as lists; a user with one item is a list of one. Names with spaces are no lists."""
    from crabrec.data.reading import joined_ids

    by_user: dict[int, list[int]] = {}
    for u, i, _ in EVENTS:
        by_user.setdefault(u, []).append(i)
    by_user[7] = [5]  # one item
    rows = [(u, f'"{sep.join(map(str, items))}"') for u, items in by_user.items()]
    ds = load(write(tmp_path / "lists.csv", "user_id,item_ids", rows))
    flat = load(write(tmp_path / "flat.csv", "user,item", [(u, i) for u, items in by_user.items() for i in items]))
    assert ds.users == flat.users and [s.tolist() for s in ds.sequences] == [s.tolist() for s in flat.sequences]
    assert joined_ids(["Toy Story", "Heat"]) is None and joined_ids(["B01 B02", "N7"]) == " "
    assert joined_ids(["[1, 2]"]) is None and joined_ids(["12"]) is None


def test_one_row_per_user_with_a_list_of_items_reads_as_one_row_per_item(tmp_path):
    """A table of sequences (``user_id,item_ids`` with ``[1, 2, 3]``; Amazon-M2's ``prev_items`` as NumPy prints
    them; a JSON-lines or Parquet list) reads as the long table of the same interactions, in list order. The list
    column was "no item column", or, named with data.item_col, each whole list one item id."""
    long = load(write(tmp_path / "long.csv", "user,item", [(e[0], e[1]) for e in EVENTS]))
    seqs: dict[int, list[int]] = {}
    for u, i, _ in EVENTS:
        seqs.setdefault(u, []).append(i)
    (tmp_path / "seqs.csv").write_text("user_id,item_ids\n" + "".join(f'{u},"{s}"\n' for u, s in seqs.items()))
    (tmp_path / "m2.csv").write_text("session_id,prev_items\n" + "".join(
        f"{u},[{' '.join(repr(str(i)) for i in s)}]\n" for u, s in seqs.items()))  # fmt: skip
    pd.DataFrame({"user_id": list(seqs), "items": list(seqs.values())}).to_parquet(tmp_path / "seqs.parquet")
    for name in ("seqs.csv", "m2.csv", "seqs.parquet"):
        ds = load(tmp_path / name)
        assert ds.users == long.users and ds.item_ids == long.item_ids, name
        assert all(np.array_equal(a, b) for a, b in zip(ds.sequences, long.sequences, strict=True)), name
    # Amazon-M2's sessions: no user column, each row a session's items then the one after them
    (tmp_path / "sessions_train.csv").write_text("prev_items,next_item,locale\n" + "".join(
        f"[{' '.join(repr(str(i)) for i in s[:-1])}],{s[-1]},DE\n" for s in seqs.values()))  # fmt: skip
    sessions = load(tmp_path / "sessions_train.csv")
    assert sessions.users == [str(n) for n in range(2, 2 + len(seqs))]  # each session named by its line
    assert all(np.array_equal(a, b) for a, b in zip(sessions.sequences, long.sequences, strict=True))
    (tmp_path / "bad.csv").write_text('user_id,item_ids\n1,"[1, 2]"\n2,7\n')
    with pytest.raises(CrabError, match=r"bad.csv: row 3: column 'item_ids' holds '7', not a list of item ids"):
        load(tmp_path / "bad.csv")


def test_a_table_whose_item_column_holds_lists_recomputes_its_data_stage(tmp_path):
    """Revision bit 64: the item column holds lists of ids (a crabrec before read each list as one id)."""
    from crabrec.data.table import table_revision

    (tmp_path / "seqs.csv").write_text('user,item\n1,"[1, 2]"\n2,"[2, 3]"\n')
    assert table_revision(DataConfig(path=str(tmp_path / "seqs.csv"))) == 64
    assert table_revision(DataConfig(path=str(write(tmp_path / "long.csv", "user,item", EVENTS)))) == 0


def test_order_lines_beside_a_table_of_orders_read_as_each_orders_users_items(tmp_path, caplog):
    """Instacart ships its lines without users (``order_products__prior.csv``: ``order_id``, ``product_id``) and the
    users in ``orders.csv`` (``order_id``, ``user_id``, ``order_number``); the folder was "several item tables". The
    lines take their order's user and follow the orders table's rows: each user's items as the plain table has them,
    though the line tables list the orders by id. With a time in the orders table (Olist's), the time orders them."""
    folder = tmp_path / "instacart"
    folder.mkdir()
    rng = np.random.default_rng(0)
    orders = [(u, [i for v, i, _ in EVENTS if v == u][n : n + 2]) for u in range(1, 7) for n in range(0, 10, 2)]
    ids = rng.permutation(len(orders)) + 100
    write(folder / "orders.csv", "order_id,user_id,eval_set,order_number,order_dow,order_hour_of_day",
          [(ids[k], u, "prior", k % 5 + 1, 3, 12) for k, (u, _) in enumerate(orders)])  # fmt: skip
    lines = sorted((ids[k], i, n + 1, 0) for k, (_, items) in enumerate(orders) for n, i in enumerate(items))
    prior, train = [r for r in lines if r[0] % 3], [r for r in lines if not r[0] % 3]  # an order's lines in one
    write(folder / "order_products__prior.csv", "order_id,product_id,add_to_cart_order,reordered", prior)
    write(folder / "order_products__train.csv", "order_id,product_id,add_to_cart_order,reordered", train)
    write(folder / "products.csv", "product_id,product_name,aisle_id", [(i, f"Bananas {i}", 1) for i in range(1, 13)])
    write(folder / "aisles.csv", "aisle_id,aisle", [(1, "fresh fruits")])
    want = load(write(tmp_path / "plain.csv", "user_id,product_id", [(u, i) for u, items in orders for i in items]))
    ds = load(folder)
    assert ds.users == want.users and ds.timestamps is None
    assert [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    assert ds.item_text[0]["product_name"] == "Bananas 1"
    assert any("joined to orders.csv by order_id" in note for note in ds.notes)
    with pytest.raises(CrabError, match=r"prior.csv: no user column .*; or give its folder, --data .*instacart, to "
                       r"read order_products__prior.csv, order_products__train.csv joined to orders.csv by order_id$"):
        load(folder / "order_products__prior.csv")
    write(folder / "order_products__train.csv", "order_id,product_id,add_to_cart_order,reordered",
          [*train, (1, 5, 1, 0), (2, 6, 1, 0)])  # fmt: skip
    assert [s.tolist() for s in load(folder).sequences] == [s.tolist() for s in want.sequences]
    assert "left out 2 line(s) of orders that orders.csv does not list (the first: " in caplog.text
    assert "order_products__train.csv: row " in caplog.text
    with open(folder / "orders.csv", "a") as f:
        f.write(f"{ids[3]},9,prior,6,3,12\n")
    with pytest.raises(CrabError, match=rf"orders.csv: order_id '{ids[3]}' is on rows 5 and 32: expected one row per"):
        load(folder)
    write(folder / "orders.csv", "order_id,user_id,eval_set,order_number,order_dow,order_hour_of_day",
          [(ids[k], "" if k == 7 else u, "prior", k % 5 + 1, 3, 12) for k, (u, _) in enumerate(orders)])  # fmt: skip
    said = r"orders.csv: row 9: empty user id in column 'user_id' \(1 order\(s\), 2 line\(s\)\); fill it, or --set "
    with pytest.raises(CrabError, match=said + "data.incomplete_rows=drop to leave out their lines"):
        load(folder)
    assert load(folder, incomplete_rows="drop").n_interactions == want.n_interactions - 2
    when = {int(ids[k]): 1_600_000_000 + 10 * (k % 5) for k in range(len(orders))}  # the same order, by time
    shuffled = [(i, u, when[int(i)]) for i, (u, _) in zip(ids, orders, strict=True)][::-1]
    write(folder / "orders.csv", "order_id,customer_id,order_purchase_timestamp", shuffled)
    ds = load(folder)
    assert ds.timestamps is not None and [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]


ONE_FORMAT = ["%a %b %d %H:%M:%S %z %Y", "%a, %d %b %Y %H:%M:%S %z", "%b %d, %Y", "%m/%d/%Y %H:%M", "%d.%m.%Y %H:%M:%S",
              "%m/%d/%y", "%B %d, %Y"]  # fmt: skip


@pytest.mark.parametrize("fmt", ONE_FORMAT)
def test_dates_read_in_their_one_format_equal_those_read_one_by_one(fmt):
    """A column of dates that is not ISO 8601 is read in the format of its first value when that reads the first
    1,000 values (Goodreads' ``Mon Aug 01 13:41:57 -0700 2016``: 17 times faster); every date, a stray one in
    another format and a value that is no date included, is what reading each value on its own gives."""
    from crabrec.data import times

    seconds = 800_000_000 + np.arange(3000) * 250_013
    text = pd.to_datetime(seconds, unit="s", utc=True).tz_convert("America/Los_Angeles").strftime(fmt).tolist()
    text = pd.Series([*text, "2016-08-01 10:00", "no date", text[0]], index=np.arange(3003) + 7)
    dayfirst = fmt.startswith("%d")
    fast = times._each(text, dayfirst)
    one_by_one = pd.to_datetime(text, errors="coerce", utc=True, format="mixed", dayfirst=dayfirst)
    assert fast.index.equals(text.index) and fast.isna().tolist() == one_by_one.isna().tolist()
    assert np.array_equal(times._seconds(fast.fillna(pd.Timestamp(0, tz="UTC"))),
                          times._seconds(one_by_one.fillna(pd.Timestamp(0, tz="UTC"))))  # fmt: skip
    assert fast.isna().sum() == 1


def test_a_web_server_logs_dates_are_read():
    """``01/Aug/2016:13:41:57 -0700`` (a web server log's), which pandas does not read, is a known format."""
    from crabrec.data import times

    seconds = 800_000_000 + np.arange(1500) * 250_013
    dates = pd.to_datetime(seconds, unit="s", utc=True).tz_convert("America/Los_Angeles")
    text = pd.Series(dates.strftime("%d/%b/%Y:%H:%M:%S %z"))
    assert pd.to_datetime(text.iloc[:1], errors="coerce", utc=True, format="mixed").isna().all()
    assert np.array_equal(times._seconds(times._each(text, True)), seconds.astype(np.float64))


def test_goodreads_folder_reads_its_interactions_beside_its_reviews(tmp_path):
    """Goodreads' genre sets ship interactions, reviews (a part of them) and books as JSON lines, its dates as
    ``Mon Aug 01 13:41:57 -0700 2016``: the folder was "found 2". The table named for interactions holds them."""
    folder = tmp_path / "goodreads"
    folder.mkdir()
    when = lambda t: pd.Timestamp(t, unit="s", tz="UTC").tz_convert("US/Pacific").strftime("%a %b %d %H:%M:%S %z %Y")  # noqa: E731

    def lines(name: str, rows: list[dict]) -> None:
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))

    rows = [{"user_id": f"u{u}", "book_id": str(i), "date_added": when(t), "read_at": ""} for u, i, t in EVENTS[::-1]]
    lines("goodreads_interactions_poetry.json", rows)
    lines("goodreads_reviews_poetry.json", [{**r, "review_text": "Fine"} for r in rows[::4]])
    lines("goodreads_books_poetry.json", [{"book_id": str(i), "title": f"Poems {i}"} for i in range(1, 13)])
    ds = load(folder, time_col="date_added")
    want = load(write(tmp_path / "plain.csv", "user_id,book_id,timestamp", [(f"u{u}", i, t) for u, i, t in EVENTS]))
    assert ds.users == want.users and [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    assert [t.tolist() for t in ds.timestamps] == [t.tolist() for t in want.timestamps]
    assert ds.item_text[0]["title"] == "Poems 1"


def test_foursquare_check_ins_read_by_their_venue_and_utc_time(tmp_path):
    """Foursquare's check-ins (``userId, venueId, ..., utcTimestamp``, written ``Tue Apr 03 18:00:09 +0000 2012``):
    the venue was "no item column"; ``venue_id`` and ``place_id`` are item columns."""
    when = lambda t: pd.Timestamp(t, unit="s", tz="UTC").strftime("%a %b %d %H:%M:%S +0000 %Y")  # noqa: E731
    rows = [(u, f"4b{i:022x}", "Bar", 40.7, -74.0, -240, when(t)) for u, i, t in EVENTS[::-1]]
    header = "userId,venueId,venueCategory,latitude,longitude,timezoneOffset,utcTimestamp"
    ds = load(write(tmp_path / "dataset_TSMC2014_NYC.csv", header, rows))
    want = load(write(tmp_path / "plain.csv", "user,item,timestamp", [(u, f"4b{i:022x}", t) for u, i, t in EVENTS]))
    ids = lambda d: [[d.item_ids[k] for k in s] for s in d.sequences]  # noqa: E731 (numbered in file order)
    assert ds.users == want.users and ids(ds) == ids(want)
    assert [t.tolist() for t in ds.timestamps] == [t.tolist() for t in want.timestamps]


def test_a_folder_of_tables_without_a_header_line_says_so(tmp_path):
    """YOOCHOOSE's ``yoochoose-clicks.dat`` and ``yoochoose-buys.dat`` have no header line, and different columns:
    the folder was "no known layout found"; it names them and how to read one (whose error suggests the names)."""
    rows = [(u, pd.Timestamp(t, unit="s").strftime("%Y-%m-%dT%H:%M:%S.277Z"), 214536000 + i, 0) for u, i, t in EVENTS]
    write(tmp_path / "yoochoose-clicks.dat", "1,2014-04-07T10:51:09.277Z,214536502,0", rows)
    write(tmp_path / "yoochoose-buys.dat", "420374,2014-04-06T18:44:58.314Z,214537888,12462,1", rows[:5])
    with pytest.raises(CrabError, match=r"its tables have no header line and differ in their number of columns "
                       r"\(yoochoose-buys.dat, yoochoose-clicks.dat\): give one table with --data FILE"):  # fmt: skip
        load(tmp_path)
    with pytest.raises(CrabError, match=r"yoochoose-buys.dat: its first line has 5 columns and data.columns names 4"):
        load(tmp_path, columns=["session", "timestamp", "item", "category"])
    with pytest.raises(CrabError, match=r"name the columns with --set data.columns=\[user,timestamp,item,"):
        load(tmp_path / "yoochoose-clicks.dat")
    ds = load(tmp_path / "yoochoose-clicks.dat", columns=["session", "timestamp", "item", "category"])
    assert ds.n_interactions == len(EVENTS) + 1 and ds.timestamps is not None


def test_a_folder_of_parts_without_a_header_line_reads_as_one_table_of_the_columns_named(tmp_path):
    """Spark writes a table as ``part-...csv`` files without a header line (gzipped or not, beside ``_SUCCESS``):
    the folder was "found 0", and ``data.columns`` was refused for a folder. It suggests the names, and with them
    reads the parts as one table; a part of another width is named."""
    folder = tmp_path / "spark"
    folder.mkdir()
    for n, part in enumerate((EVENTS[::2], EVENTS[1::2])):
        with gzip.open(folder / f"part-0000{n}-8f2b-c000.csv.gz", "wt") as f:
            f.write("".join(f"{u},{i},{t}\n" for u, i, t in part))
    (folder / "_SUCCESS").write_text("")
    with pytest.raises(CrabError, match=r"spark: its tables have no header line \(part-00000-8f2b-c000.csv.gz, "
                       r"part-00001-8f2b-c000.csv.gz\); name their columns with --set "
                       r"data.columns=\[user,item,timestamp\]"):  # fmt: skip
        load(folder)
    ds = load(folder, columns=["user", "item", "timestamp"])
    want = load(write(tmp_path / "plain.csv", "user,item,timestamp", EVENTS))
    assert ds.users == want.users and [s.tolist() for s in ds.sequences] == [s.tolist() for s in want.sequences]
    write(folder / "part-00002-8f2b-c000.csv", "1,2,3,4", [])
    with pytest.raises(CrabError, match=r"part-00002-8f2b-c000.csv: its first line has 4 columns and data.columns"):
        load(folder, columns=["user", "item", "timestamp"])
    (folder / "part-00002-8f2b-c000.csv").unlink()
    write(folder / "items.csv", "item_id,title", [(1, "A")])
    with pytest.raises(CrabError, match=r"data.columns names the columns of one file, or of a folder's tables"):
        load(folder, columns=["user", "item", "timestamp"])


def test_order_lines_that_could_join_to_two_tables_of_users_are_an_error_naming_both(tmp_path):
    write(tmp_path / "lines.csv", "order_id,product_id,store_id", [(1, 5, 9)])
    write(tmp_path / "orders.csv", "order_id,user_id", [(1, 7)])
    write(tmp_path / "store_members.csv", "store_id,member_id", [(9, 7)])
    said = r"\(lines.csv\) join to several tables of users \(orders.csv by order_id, store_members.csv by store_id\)"
    with pytest.raises(CrabError, match=said + "; name the interactions with --data FILE"):
        load(tmp_path)


def test_a_folder_of_daily_json_lines_files_reads_as_one_table(tmp_path):
    """Adressa ships a JSON-lines file a day, named by its date without an extension, whose rows leave keys out (an
    event on a front page has no article ``id``): the folder was "no known layout found". Files of JSON lines with
    the same user, item and time columns are parts of one table, whichever keys their first rows hold; with no item
    column found, the error names the columns to choose from."""
    folder = tmp_path / "one_week"
    folder.mkdir()
    for day in range(3):
        story = lambda i: {"id": f"a{i}", "title": f"Story {i}"} if i % 5 else {}  # noqa: E731 (front pages: no id)
        rows = [{"eventId": t, "userId": f"cx:{u}", "time": t, **story(i)} for u, i, t in EVENTS if u % 3 == day]
        (folder / f"2017010{day + 1}").write_text("".join(json.dumps(r) + "\n" for r in rows))
    said = r"no table among 20170101, 20170102, 20170103 has an item column \(looked for item, .*; 20170101 has "
    with pytest.raises(CrabError, match=said + r"eventId, userId, time, id, title\); name it with --set data.item_col"):
        load(folder)
    ds = load(folder, item_col="id", incomplete_rows="drop")
    kept = [(f"cx:{u}", f"a{i}", t) for u, i, t in EVENTS if i % 5]
    want = load(write(tmp_path / "plain.csv", "userId,id,time", kept), item_col="id")
    ids = lambda d: [[d.item_ids[k] for k in s] for s in d.sequences]  # noqa: E731
    assert ds.users == want.users and ds.n_interactions == len(kept) and ids(ds) == ids(want)
