"""Grouping a table's rows into user sequences with array operations equals a per-row reference: users in sorted
order of their ids, each user's rows by time with file order breaking ties, items in catalogue order."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crabrec.config import DataConfig
from crabrec.data.loaders import _catalogue_order, _group_interactions, load_dataset
from crabrec.errors import CrabError
from tests.conftest import shared_path


def reference(inter: pd.DataFrame, ts: np.ndarray | None, items: dict) -> tuple[list, list, list | None]:
    """One row at a time: sort (user id, time, row number), then append each row to its user's list; an id is its
    text without the spaces around it."""
    item_ids = _catalogue_order(list(items))
    users = inter["user"].astype(str)
    keys = sorted((str(u).strip(), 0.0 if ts is None else float(ts[r]), r) for r, u in enumerate(users))
    seqs: dict[str, list[int]] = {}
    times: dict[str, list[float]] = {}
    for user, t, r in keys:
        seqs.setdefault(user, []).append(item_ids.index(str(inter["item"].iloc[r]).strip()))
        times.setdefault(user, []).append(t)
    return list(seqs), list(seqs.values()), list(times.values()) if ts is not None else None


def check(inter: pd.DataFrame, ts: np.ndarray | None, items: dict) -> None:
    ds = _group_interactions("t", "t", inter, "user", "item", ts, items, "t.csv")
    users, seqs, times = reference(inter, ts, items)
    assert ds.users == users
    assert [s.tolist() for s in ds.sequences] == seqs
    assert all(s.dtype == np.int64 for s in ds.sequences)
    if times is None:
        assert ds.timestamps is None
    else:
        assert [t.tolist() for t in ds.timestamps] == times


@pytest.mark.parametrize("with_time", [True, False])
def test_grouping_equals_the_row_by_row_reference(with_time):
    rng = np.random.default_rng(0)
    user_names = np.array(["10", "9", "a", "Ä", "b ", " b", "007", "7", "zz", "A", "ß"], dtype=object)  # b: 1 user
    items = {str(i): {"title": f"item {i}"} for i in (12, 3, 100, 7, 45, 8, 21)}
    n = 3000
    inter = pd.DataFrame(
        {
            "user": user_names[rng.integers(0, len(user_names), n)],
            "item": rng.choice(list(items), n),
        }
    )
    ts = rng.integers(0, 20, n).astype(np.float64) * 1e9 if with_time else None  # many ties
    check(inter, ts, items)


def test_integer_ids_of_a_parquet_table_group_as_their_text():
    inter = pd.DataFrame({"user": [3, 10, 3, 2, 10], "item": [1, 2, 2, 1, 1]})
    check(inter, np.array([5.0, 1.0, 4.0, 2.0, 1.0]), {"1": {}, "2": {}})


def test_an_item_outside_the_item_table_is_named_with_its_user():
    inter = pd.DataFrame({"user": ["b", "b", "a", "a"], "item": ["1", "9", "1", "8"]})
    with pytest.raises(
        CrabError,
        match=r"^t.csv: user 'a': item '8' is not in the item table \(2 items, 2 "
        r"interactions in all\); add it to the item table, or --set data.missing_items=drop .*$",
    ):
        _group_interactions("t", "t", inter, "user", "item", np.array([1.0, 2.0, 1.0, 2.0]), {"1": {}}, "t.csv")


@pytest.mark.parametrize("with_time", [True, False])
def test_dropping_unlisted_items_equals_grouping_the_listed_rows(with_time, caplog):
    """``missing_items=drop`` groups as if the rows with unlisted items were never there: a user left with none
    disappears, the others keep their listed rows in order (and their times); the count is logged and noted."""
    rng = np.random.default_rng(1)
    n = 2000
    inter = pd.DataFrame(
        {
            "user": rng.choice(["u1", "u2", "u3", "u4", "only-unlisted"], n),
            "item": rng.choice(["1", "2", "3", "x", "y"], n),
        }
    )
    inter.loc[inter["user"] == "only-unlisted", "item"] = "y"
    ts = rng.integers(0, 50, n).astype(np.float64) if with_time else None
    items = {"3": {}, "1": {}, "2": {}}
    listed = inter["item"].isin(items).to_numpy()
    ds = _group_interactions("t", "t", inter, "user", "item", ts, items, "t.csv", drop_missing=True)
    users, seqs, times = reference(inter[listed].reset_index(drop=True), None if ts is None else ts[listed], items)
    assert ds.users == users == ["u1", "u2", "u3", "u4"]
    assert [s.tolist() for s in ds.sequences] == seqs
    assert (ds.timestamps is None) if ts is None else ([t.tolist() for t in ds.timestamps] == times)
    note = f"dropped {(~listed).sum():,} interactions with 2 items not in the item table (data.missing_items=drop)"
    assert ds.notes == [note]
    assert note in caplog.text


def test_lcrec_sequences_drop_unlisted_items_the_same_way(tmp_path):
    """The LC-Rec layout ({user: [items]}) builds through another path: the same error, and the same dropping."""
    (tmp_path / "T.inter.json").write_text(json.dumps({"a": ["1", "9", "2"], "b": ["9", "9"], "c": ["2", "1"]}))
    (tmp_path / "T.item.json").write_text(json.dumps({"1": {"title": "one"}, "2": {"title": "two"}}))
    cfg = DataConfig(path=str(tmp_path), kcore=0)
    with pytest.raises(CrabError, match=r"T.inter.json: user 'a': item '9' is not in the item table \(1 item, 3 "):
        load_dataset(cfg)
    ds = load_dataset(cfg.model_copy(update={"missing_items": "drop"}))
    assert ds.users == ["a", "c"]
    assert [[ds.item_ids[i] for i in s] for s in ds.sequences] == [["1", "2"], ["2", "1"]]
    assert ds.notes == ["dropped 3 interactions with 1 item not in the item table (data.missing_items=drop)"]


def test_movielens_100k_groups_as_the_reference():
    folder = shared_path("ml-100k")
    inter = pd.read_csv(folder / "ml-100k.inter", sep="\t", dtype=str).iloc[:20000]
    inter.columns = ["user", "item", "rating", "timestamp"]
    items = {str(i): {} for i in inter["item"].unique()}
    check(inter, inter["timestamp"].astype(float).to_numpy(), items)
