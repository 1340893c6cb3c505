"""Grouping a table's rows into user sequences with array operations equals a per-row reference: users in sorted
order of their ids, each user's rows by time with file order breaking ties, items in catalogue order."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crabrec.data.loaders import _catalogue_order, _group_interactions
from crabrec.errors import CrabError
from tests.conftest import shared_path


def reference(inter: pd.DataFrame, ts: np.ndarray | None, items: dict) -> tuple[list, list, list | None]:
    """One row at a time: sort (user id, time, row number), then append each row to its user's list."""
    item_ids = _catalogue_order(list(items))
    keys = sorted((str(u), 0.0 if ts is None else float(ts[r]), r) for r, u in enumerate(inter["user"].astype(str)))
    seqs: dict[str, list[int]] = {}
    times: dict[str, list[float]] = {}
    for user, t, r in keys:
        seqs.setdefault(user, []).append(item_ids.index(str(inter["item"].iloc[r])))
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
    user_names = np.array(["10", "9", "a", "Ä", "b ", "007", "7", "zz", "A", "ß"], dtype=object)
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
    with pytest.raises(CrabError, match=r"^t.csv: user 'a': item '8' is not in the item table$"):
        _group_interactions("t", "t", inter, "user", "item", np.array([1.0, 2.0, 1.0, 2.0]), {"1": {}}, "t.csv")


def test_movielens_100k_groups_as_the_reference():
    folder = shared_path("ml-100k")
    inter = pd.read_csv(folder / "ml-100k.inter", sep="\t", dtype=str).iloc[:20000]
    inter.columns = ["user", "item", "rating", "timestamp"]
    items = {str(i): {} for i in inter["item"].unique()}
    check(inter, inter["timestamp"].astype(float).to_numpy(), items)
