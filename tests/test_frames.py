"""``crabrec.run(data=DataFrame, items=DataFrame)``: tables given as objects are stored in the run folder and read as
the same table in a file is; their run folder is named after their content unless named; bad tables are one-line
errors that write nothing."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import crabrec
from crabrec.errors import CrabError
from tests.conftest import cli
from tests.test_python_run import tiny_overrides


@pytest.fixture(scope="module")
def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The first 150 users of the embedded Office data as an interactions table (integer ids, each user's items in
    order, a timestamp) and the item table of their items (title, description)."""
    from crabrec.data.loaders import embedded_path

    src = embedded_path()
    inter = dict(list(json.loads((src / "Office.inter.json").read_text()).items())[:150])
    texts = json.loads((src / "Office.item.json").read_text())
    rows = [(int(user), int(item), 1_400_000_000 + 86_400 * t) for user, seq in inter.items() for t, item in
            enumerate(seq)]  # fmt: skip
    data = pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"])
    used = sorted({item for _, item, _ in rows})
    items = pd.DataFrame(
        {
            "item_id": used,
            "title": [texts[str(i)].get("title", "") for i in used],
            "description": [texts[str(i)].get("description", "") for i in used],
        }
    )
    return data, items


def settings(tmp_path) -> dict:
    return {**tiny_overrides(), "runs_dir": str(tmp_path / "runs")}


def stored(run) -> dict[str, object]:
    """What the data and embed stages stored: the splits, the catalogue and the item vectors."""
    splits = np.load(run / "data" / "splits.npz")
    return {
        **{key: splits[key].tolist() for key in splits.files},
        "items": json.loads((run / "data" / "items.json").read_text())["item_ids"],
        "vectors": np.load(run / "embeddings.npy").tolist(),
    }


def test_a_dataframe_runs_as_the_same_table_in_a_file(tables, tmp_path):
    """DataFrames give the command's run on the same tables written as CSV files, to the last bit; the run folder
    holds them as Parquet, is named after their content, and a second call finds every stage finished."""
    data, items = tables
    data.to_csv(tmp_path / "ratings.csv", index=False)
    items.to_csv(tmp_path / "items.csv", index=False)
    sets = [a for key, value in settings(tmp_path).items() for a in ("--set", f"{key}={value}")]
    args = ["run", "--data", str(tmp_path / "ratings.csv"), "--items", str(tmp_path / "items.csv"), "--until", "embed"]
    assert cli([*args, *sets])[0] == 0
    run = crabrec.run(data=data, items=items, overrides=settings(tmp_path), until="embed")
    assert run.parent == tmp_path / "runs" and run.name.startswith("frame-") and run.name.endswith("-quick")
    assert stored(run) == stored(tmp_path / "runs" / "ratings-quick")
    stem = run.name.removesuffix("-quick")
    (folder,) = (run / "input").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == [f"{stem}.items.parquet", f"{stem}.parquet"]
    assert pd.read_parquet(folder / f"{stem}.parquet").equals(data)
    assert json.loads((run / "data" / "stats.json").read_text())["dataset"] == stem

    stamps = {p: p.stat().st_mtime_ns for p in [*(run / "stages").glob("*.json"), *folder.iterdir()]}
    assert crabrec.run(data=data.copy(), items=items, overrides=settings(tmp_path), until="embed") == run
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # the same tables: nothing written again
    # a named index is the same column; a pyarrow Table is the same table
    assert crabrec.run(data=data.set_index("user_id"), items=pa.Table.from_pandas(items), until="embed",
                       overrides=settings(tmp_path)) == run  # fmt: skip
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


def test_another_table_gets_another_folder_and_a_named_run_follows_its_table(tables, tmp_path):
    """Without a name, another table is another run folder (the first one's results stay); with ``name=``, the table
    is that run's data and a changed one recomputes, as an edited file does."""
    data, items = tables
    first = crabrec.run(data=data, items=items, overrides=settings(tmp_path), until="data")
    fewer = data[data["user_id"] != data["user_id"].iloc[0]]
    second = crabrec.run(data=fewer, items=items, overrides=settings(tmp_path), until="data")
    assert second != first and (first / "stages" / "data.json").is_file()
    assert len(stored_users(second)) == len(stored_users(first)) - 1

    named = crabrec.run(data=data, items=items, name="shop", overrides=settings(tmp_path), until="data")
    assert named == tmp_path / "runs" / "shop" and len(list((named / "input").glob("*/shop.parquet"))) == 1
    assert stored_users(named) == stored_users(first)
    crabrec.run(data=fewer, items=items, name="shop", overrides=settings(tmp_path), until="data")
    assert stored_users(named) == stored_users(second)
    (kept,) = (named / "input").iterdir()  # the tables before are gone once a stage finished on these
    assert pd.read_parquet(kept / "shop.parquet").equals(fewer.reset_index(drop=True))


def test_a_table_that_fails_leaves_the_run_as_it_was(tables, tmp_path):
    """A named run given a table its data stage refuses: the tables, config and results before stay, the new table
    goes; a new run whose table is refused leaves no folder."""
    data, items = tables
    run = crabrec.run(data=data, items=items, name="shop", overrides=settings(tmp_path), until="data")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    broken = data.rename(columns={"item_id": "thing", "user_id": "who"})
    with pytest.raises(CrabError, match="no user column"):
        crabrec.run(data=broken, items=items, name="shop", overrides=settings(tmp_path), until="data")
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    with pytest.raises(CrabError, match="no user column"):
        crabrec.run(data=broken, items=items, overrides=settings(tmp_path), until="data")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")) == ["shop"]
    # a row's error names the argument and counts its rows from 1, not a file that is gone
    empty = data.astype({"item_id": float})
    empty.loc[5, "item_id"] = None
    with pytest.raises(CrabError) as err:
        crabrec.run(data=empty, items=items, overrides=settings(tmp_path), until="data")
    assert str(err.value).startswith("data= (rows numbered from 1): row 6: empty item id in column 'item_id'")


def stored_users(run) -> list:
    return np.load(run / "data" / "users.npz", allow_pickle=False)["ids"].tolist()


def test_ids_of_strings_and_numbers_read_as_strings(tables, tmp_path):
    """A column of strings and integers (ids gathered from two sources) holds strings, as a CSV file of it reads:
    the same table, and so the same run folder, as the column of strings."""
    data, items = tables
    strings = data.astype({"item_id": str})
    mixed = data.astype({"item_id": object})
    mixed.loc[mixed.index % 2 == 0, "item_id"] = strings["item_id"]
    assert {type(v) for v in mixed["item_id"]} == {int, str}
    run = crabrec.run(data=strings, items=items, overrides=settings(tmp_path), until="data")
    assert crabrec.run(data=mixed, items=items, overrides=settings(tmp_path), until="data") == run


class Arrowish:
    """A table of another library, as crabrec sees one: an object whose ``to_arrow()`` gives its pyarrow Table."""

    def __init__(self, table):
        self.table = table

    def to_arrow(self):
        if self.table is None:
            raise ValueError("no table")
        return self.table


def test_a_table_with_to_arrow_is_its_pyarrow_table(tables, tmp_path):
    """A table that gives a pyarrow Table with ``to_arrow()`` (a polars DataFrame) is that table: the same run."""
    data, items = tables
    run = crabrec.run(data=data, items=items, overrides=settings(tmp_path), until="data")
    assert crabrec.run(data=Arrowish(pa.Table.from_pandas(data)), items=Arrowish(pa.Table.from_pandas(items)),
                       overrides=settings(tmp_path), until="data") == run  # fmt: skip


def test_a_polars_dataframe_is_the_same_table(tables, tmp_path):
    """polars (not a dependency; where it is installed): its DataFrame, long strings and all, is the same run."""
    pl = pytest.importorskip("polars")
    data, items = tables
    run = crabrec.run(data=data, items=items, overrides=settings(tmp_path), until="data")
    assert crabrec.run(data=pl.from_pandas(data), items=pl.from_pandas(items), overrides=settings(tmp_path),
                       until="data") == run  # fmt: skip


def test_items_alone_as_a_dataframe_join_a_data_file(tables, tmp_path):
    """A DataFrame of items beside a data file: the run is named after the file and stores the items table."""
    data, items = tables
    data.to_csv(tmp_path / "ratings.csv", index=False)
    run = crabrec.run(data=tmp_path / "ratings.csv", items=items, overrides=settings(tmp_path), until="data")
    assert run == tmp_path / "runs" / "ratings-quick"
    assert [p.name for p in (run / "input").glob("*/*")] == ["items.parquet"]
    assert json.loads((run / "data" / "items.json").read_text())["has_text"]


@pytest.mark.parametrize(
    "given, expect",
    [
        ({"data": [("u1", "i1")]}, "data: expected a file or folder path, a pandas DataFrame, a pyarrow Table or a"),
        ({"items": {"i1": "a pen"}}, "items: expected a file or folder path, a pandas DataFrame, a pyarrow Table"),
        ({"data": pd.Series(["a"])}, "(polars); got pandas."),
        ({"data": Arrowish(["a"])}, "data: tests.test_frames.Arrowish.to_arrow() gave list, not a pyarrow Table"),
        ({"data": Arrowish(None)}, "data: tests.test_frames.Arrowish.to_arrow() failed (no table)"),
        ({"data": pd.DataFrame({"user": ["a", "b"], "item": ["x", [3]]})}, "data: column 'item' of the"),
        ({"data": pd.DataFrame([["a", "x"]], columns=["user", "user"])}, "the column 'user' twice"),
        ({"data": pd.DataFrame(index=range(3))}, "data: the table has no columns"),
        ({"data": pd.DataFrame(columns=["user", "item"])}, "data: the table has no rows"),
        ({"data": pd.DataFrame([["a", "x"]])}, "data: the DataFrame's columns are named 0, 1, not by what they hold"),
        ({"data": pd.DataFrame({"user": ["a"], "item": ["x"]}), "run_dir": "runs/x"}, "drop data= (overrides apply)"),
    ],
)
def test_a_bad_table_is_a_one_line_error_that_writes_nothing(given, expect, tmp_path):
    with pytest.raises(CrabError) as err:
        crabrec.run(overrides={"runs_dir": str(tmp_path / "runs")}, **given)
    assert expect in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "runs").exists()


def test_a_named_run_on_other_data_is_refused_before_the_table_is_stored(tables, small_office, tmp_path):
    """``name=`` of a run made from a data file: refused, and its folder gets no table."""
    data, items = tables
    sets = [a for key, value in settings(tmp_path).items() for a in ("--set", f"{key}={value}")]
    assert cli(["run", "--data", str(small_office), "--name", "kept", "--until", "data", *sets])[0] == 0
    before = sorted(p.name for p in (tmp_path / "runs" / "kept").iterdir())
    with pytest.raises(CrabError, match="holds the results of a run on"):
        crabrec.run(data=data, items=items, name="kept", overrides=settings(tmp_path), until="data")
    assert sorted(p.name for p in (tmp_path / "runs" / "kept").iterdir()) == before
