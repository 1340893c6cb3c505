"""Loaders on real rows, k-core, splits and popularity groups with hand-computed answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crabrec.config import DataConfig
from crabrec.data import compute_popularity, load_dataset, make_splits
from crabrec.data.dataset import Dataset, Samples, Splits
from crabrec.data.kcore import kcore
from crabrec.errors import CrabError


def test_embedded_office_loads_with_no_path():
    ds = load_dataset(DataConfig())
    assert (ds.n_users, ds.n_items, ds.n_interactions) == (4905, 2420, 53258)
    assert ds.item_ids[:3] == ["0", "1", "2"]
    assert ds.item_text[0]["title"].startswith("VTECH CS6114")
    assert ds.timestamps is None
    # first user of the file is "0": [0, 1, 2, 3, 4]
    assert ds.users[0] == "0" and ds.sequences[0].tolist() == [0, 1, 2, 3, 4]


def test_lcrec_layout(toy_lcrec):
    ds = load_dataset(DataConfig(path=str(toy_lcrec), kcore=0))
    assert ds.n_users == 6 and ds.n_items == 4 and ds.n_interactions == 17
    assert ds.sequences[ds.users.index("u4")].tolist() == [3, 1, 0]


def test_minionerec_layout_uses_given_split(shared):
    path = shared("minionerec_amazon18")
    with pytest.raises(CrabError, match="no train split"):
        load_dataset(DataConfig(path=str(path)))
    ds = load_dataset(DataConfig(path=str(path), train_on_available=True))
    splits = make_splits(ds, "auto", 10)
    assert splits.kind == "given"
    assert len(splits.valid) == 4866 and len(splits.test) == 4866
    assert ds.n_items == 3459
    # first valid row: A994, history [2122, 243, 811, 812] -> 2280 (raw ids are the catalogue order here)
    first = splits.valid.take(np.array([0]))
    assert first.rows() == [[2122, 243, 811, 812]] and first.target.tolist() == [2280]
    assert splits.test.length.max() <= 10


def test_recbole_layout_ml100k(shared):
    path = shared("ml-100k")
    ds = load_dataset(DataConfig(path=str(path), kcore=0))
    assert (ds.n_users, ds.n_items, ds.n_interactions) == (943, 1682, 100000)
    assert ds.timestamps is not None
    assert all(np.all(np.diff(t) >= 0) for t in ds.timestamps)
    assert "title" in ds.item_text[0] and ds.item_text[ds.item_ids.index("1")]["title"] == "Toy Story"
    splits = make_splits(ds, "auto", 10)
    assert splits.kind == "global_time"
    assert len(splits.train) + len(splits.valid) + len(splits.test) == 100000 - 943  # 99,057 windows
    assert len(splits.train) == int(0.8 * 99057)


def test_recbole_without_an_item_file_is_ids_only_and_its_empty_cells_are_no_ids(shared, tmp_path):
    """RecBole's gowalla or tmall-buy ship only ``.inter``: it was '<name>.item: file not found'. An empty or NA user
    or item cell was read as an id; it is an error naming its line, or left out with ``data.incomplete_rows=drop``
    (such files recompute their data stage: revision 8)."""
    from crabrec.config import load_config
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    lines = (shared("ml-100k") / "ml-100k.inter").read_text().splitlines()[:3001]
    (tmp_path / "ml.inter").write_text("\n".join(lines) + "\n")
    with_items = load_dataset(DataConfig(path=str(shared("ml-100k") / "ml-100k.inter"), kcore=0))
    ds = load_dataset(DataConfig(path=str(tmp_path / "ml.inter"), kcore=0))
    assert not ds.has_text and ds.notes == [
        "no ml.item: ids-only data, semantic IDs come from SASRec's item embeddings"
    ]
    assert set(ds.item_ids) <= set(with_items.item_ids) and ds.timestamps is not None
    lines[5] = "\t".join(["NA", *lines[5].split("\t")[1:]])
    lines[9] = "\t".join(["", *lines[9].split("\t")[1:]])
    (tmp_path / "ml.inter").write_text("\n".join(lines) + "\n")
    with pytest.raises(
        CrabError, match=r"ml.inter: row 6: user id 'NA' \(a missing value\) in column 'user_id' \(2 of "
    ):
        load_dataset(DataConfig(path=str(tmp_path / "ml.inter"), kcore=0))
    kept = load_dataset(DataConfig(path=str(tmp_path / "ml.inter"), kcore=0, incomplete_rows="drop"))
    (tmp_path / "without.inter").write_text("\n".join(lines[:5] + lines[6:9] + lines[10:]) + "\n")
    without = load_dataset(DataConfig(path=str(tmp_path / "without.inter"), kcore=0))
    assert kept.users == without.users and [s.tolist() for s in kept.sequences] == [
        s.tolist() for s in without.sequences
    ]
    lines[20] = "\t".join([*lines[20].split("\t")[:3], "soon"])
    (tmp_path / "ml.inter").write_text("\n".join(lines) + "\n")
    with pytest.raises(CrabError, match=r"ml.inter: row 21: timestamp 'soon' is not a number \(the other rows"):
        load_dataset(DataConfig(path=str(tmp_path / "ml.inter"), kcore=0, incomplete_rows="drop"))
    cfg = load_config(overrides={"data": {"path": str(tmp_path / "ml.inter")}})
    assert RunContext(config=cfg, stages=registry()).revision("data") == 8


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_plain_table_layout(tmp_path, suffix):
    inter = pd.DataFrame(
        {"user": ["a", "a", "a", "b", "b"], "item": ["x", "y", "z", "y", "x"], "timestamp": [3, 1, 2, 5, 4]}
    )
    items = pd.DataFrame({"item": ["x", "y", "z"], "title": ["X", "Y", "Z"], "description": ["", "dy", "dz"]})
    ipath, tpath = tmp_path / f"inter{suffix}", tmp_path / f"items{suffix}"
    if suffix == ".csv":
        inter.to_csv(ipath, index=False)
        items.to_csv(tpath, index=False)
    else:
        inter.to_parquet(ipath)
        items.to_parquet(tpath)
    ds = load_dataset(DataConfig(path=str(ipath), item_table=str(tpath), kcore=0))
    seqs = {u: [ds.item_ids[i] for i in s] for u, s in zip(ds.users, ds.sequences)}
    assert seqs == {"a": ["y", "z", "x"], "b": ["x", "y"]}  # sorted by timestamp
    assert ds.item_text[ds.item_ids.index("y")]["description"] == "dy"


def test_kcore_is_iterative():
    # item 2 has 1 interaction -> dropped; then user 2 drops below k=2; then item 3 drops below k=2
    seqs = [np.array([0, 1]), np.array([0, 1]), np.array([2, 3]), np.array([3, 0])]
    keep, out, _ = kcore(seqs, n_items=4, k=2)
    # after removing item 2, user 2 = [3] (len 1 < 2) -> dropped; item 3 now has 1 -> dropped; user 3 = [0] dropped
    assert keep == [0, 1]
    assert [s.tolist() for s in out] == [[0, 1], [0, 1]]


def _toy_dataset(seqs, times=None) -> Dataset:
    n_items = int(max(max(s) for s in seqs)) + 1
    return Dataset(
        name="t",
        source="t",
        item_ids=[str(i) for i in range(n_items)],
        item_text=[{} for _ in range(n_items)],
        users=[f"u{i}" for i in range(len(seqs))],
        sequences=[np.array(s) for s in seqs],
        timestamps=[np.array(t, float) for t in times] if times else None,
    )


def test_leave_one_out_split():
    splits = make_splits(_toy_dataset([[0, 1, 2, 3], [4, 5]]), "leave_one_out", max_history=2)
    assert splits.train.rows() == [[0]] and splits.train.target.tolist() == [1]
    assert splits.valid.rows() == [[0, 1]] and splits.valid.target.tolist() == [2]
    assert splits.test.rows() == [[1, 2], [4]] and splits.test.target.tolist() == [3, 5]


def test_global_time_split_sorts_by_target_time():
    ds = _toy_dataset(
        [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 0, 1]],
        [[0, 1, 3, 5, 7, 9], [0, 2, 4, 6, 8, 10]],
    )
    splits = make_splits(ds, "global_time", max_history=10)
    # 10 windows; target times 1,3,5,7,9 (u0) and 2,4,6,8,10 (u1) -> 8 train, 1 valid, 1 test
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (8, 1, 1)
    assert splits.valid.target.tolist() == [5] and splits.valid.rows() == [[0, 1, 2, 3, 4]]
    assert splits.test.target.tolist() == [1] and splits.test.user.tolist() == [1]
    with pytest.raises(CrabError, match="needs timestamps"):
        make_splits(_toy_dataset([[0, 1, 2]]), "global_time")


def test_popularity_groups_hand_computed():
    train = Samples.from_rows([0] * 6, [[0]] * 6, [2, 2, 2, 1, 1, 0], max_history=1)
    pop = compute_popularity(train, n_items=5, n_groups=5, popular_share=0.2)
    assert pop.freq.tolist() == [1, 2, 3, 0, 0]
    # ascending by (f, id): 3, 4, 0, 1, 2 -> ranks [2, 3, 4, 0, 1]
    assert pop.group.tolist() == [2, 3, 4, 0, 1]
    assert pop.popular.tolist() == [False, False, True, False, False]
    pop2 = compute_popularity(train, n_items=5, n_groups=2)
    assert pop2.group.tolist() == [0, 1, 1, 0, 0]
    assert pop.top_share(0.2) == pytest.approx(3 / 6)


def test_office_groups_are_equal_size():
    ds = load_dataset(DataConfig())
    splits = make_splits(ds, "auto", 10)
    pop = compute_popularity(splits.train, ds.n_items)
    assert np.bincount(pop.group).tolist() == [484] * 5
    assert pop.freq.sum() == len(splits.train)
    # groups are monotone in frequency
    assert all(pop.freq[pop.group == g].max() <= pop.freq[pop.group == g + 1].min() for g in range(4))


def test_splits_roundtrip(tmp_path):
    splits = make_splits(_toy_dataset([[0, 1, 2, 3], [4, 5, 6]]), "leave_one_out", 3)
    splits.save(tmp_path / "s.npz")
    again = Splits.load(tmp_path / "s.npz")
    assert again.kind == splits.kind
    for name in ("train", "valid", "test"):
        a, b = getattr(splits, name), getattr(again, name)
        assert np.array_equal(a.history, b.history) and np.array_equal(a.target, b.target)
