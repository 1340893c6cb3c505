"""Repeated interactions (``data.repeats``): listening logs and shop orders meet the same item again; a run keeps
them, collapses back-to-back ones, or keeps each user's first, and ``data stats`` and the report say how many there
are and how many test targets repeat an item of their history."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from crabrec.config import DataConfig
from crabrec.data import compute_popularity, load_dataset, make_splits
from crabrec.data.repeats import back_to_back, seen_before
from crabrec.data.stats import dataset_stats, format_stats
from crabrec.errors import CrabError
from tests.conftest import cli

# a: x x y x z w (times 1..6); b: y y y; c: z w (its rows out of time order in the file)
ROWS = [("a", "x", 1), ("a", "x", 2), ("a", "y", 3), ("b", "y", 1), ("a", "x", 4), ("b", "y", 2), ("b", "y", 3),
        ("c", "w", 9), ("a", "z", 5), ("c", "z", 8), ("a", "w", 6)]  # fmt: skip


@pytest.fixture
def plays(tmp_path):
    path = tmp_path / "plays.csv"
    path.write_text("user,item,timestamp\n" + "".join(f"{u},{i},{t}\n" for u, i, t in ROWS))
    return path


def items_of(ds, user: str) -> list[str]:
    return [ds.item_ids[i] for i in ds.sequences[ds.users.index(user)]]


@pytest.mark.parametrize(
    ("how", "a", "b", "times", "left_out"),
    [
        ("keep", "xxyxzw", "yyy", [1, 2, 3, 4, 5, 6], 0),
        ("collapse", "xyxzw", None, [1, 3, 4, 5, 6], 3),  # b keeps one y, too few for a history and a next item
        ("first", "xyzw", None, [1, 3, 5, 6], 4),
    ],
)
def test_repeats_are_kept_collapsed_or_cut_to_each_users_first(plays, how, a, b, times, left_out, caplog):
    with caplog.at_level(logging.INFO, logger="crabrec"):
        ds = load_dataset(DataConfig(path=str(plays), kcore=0, repeats=how))
    assert items_of(ds, "a") == list(a) and items_of(ds, "c") == ["z", "w"]
    assert (items_of(ds, "b") == list(b)) if b else "b" not in ds.users
    assert ds.timestamps[ds.users.index("a")].tolist() == times
    notes = [n for n in ds.notes if "repeated" in n]
    if left_out:
        assert notes == [f"{left_out} repeated interactions left out ({left_out / len(ROWS):.1%}; data.repeats={how}: "
                         + ("an item met again right after itself counts once)" if how == "collapse" else
                            "each item once per user)")]  # fmt: skip
        assert notes[0] in caplog.text
    else:
        assert notes == []


def test_repeat_flags_match_a_direct_count():
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 7, size=rng.integers(1, 12)) for _ in range(200)]
    again, adjacent = [], []
    for s in seqs:
        again += [int(s[j]) in set(s[:j].tolist()) for j in range(len(s))]
        adjacent += [j > 0 and s[j] == s[j - 1] for j in range(len(s))]
    assert seen_before(seqs).tolist() == again and back_to_back(seqs).tolist() == adjacent


def test_stats_count_repeats_and_the_test_targets_they_put_in_a_history(plays):
    """Hand count (keep): 4 of 11 interactions repeat an earlier item of their user (a: x, x; b: y, y), 3 of them
    right after the same item; leave-one-out test targets: a's w (history x x y x z), b's y (history y y),
    c's w (history z): 1 of 3 in its history."""
    cfg = DataConfig(path=str(plays), kcore=0, split="leave_one_out")
    ds = load_dataset(cfg)
    splits = make_splits(ds, cfg.split, cfg.max_history)
    stats = dataset_stats(ds, splits, compute_popularity(splits.train, ds.n_items, 2, 0.2), "keep")
    assert stats["repeats"] == {
        "setting": "keep", "window": 10, "repeated": 4, "back_to_back": 3, "test_targets_in_history": 0.3333
    }  # fmt: skip
    text = format_stats(stats)
    assert ("repeats            4 interactions (36.4%) meet an item their user met before, 3 right after itself; "
            "data.repeats=collapse or first leaves them out") in text  # fmt: skip
    assert "test in history    33.3% of test targets are among the 10 items before them" in text
    fresh = load_dataset(DataConfig(path=str(plays), kcore=0, repeats="first"))
    fresh_splits = make_splits(fresh, "leave_one_out", 10)
    pop = compute_popularity(fresh_splits.train, fresh.n_items, 2, 0.2)
    assert "repeats " not in format_stats(dataset_stats(fresh, fresh_splits, pop, "first"))


def test_data_stats_prints_the_repeats(plays, capsys):
    assert cli(["data", "stats", "--data", str(plays), "--set", "data.kcore=0"]) == (0, "")
    assert "test in history" in capsys.readouterr().out
    assert cli(["data", "stats", "--data", str(plays), "--set", "data.kcore=0", "--set", "data.repeats=first"])[0] == 0
    out = capsys.readouterr().out
    assert "test in history" not in out and "4 repeated interactions left out" in out


def test_a_layout_that_ships_its_split_refuses_the_setting(shared):
    path = shared("minionerec_amazon18")
    with pytest.raises(CrabError, match=r"data.repeats=first: this layout ships its own split"):
        load_dataset(DataConfig(path=str(path), train_on_available=True, repeats="first"))
