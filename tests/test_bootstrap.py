"""Paired bootstrap CIs against MOR: per-user parts recompute the metrics exactly, hand-checked parts, invariants."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crabrec.metrics import group_unfairness, ranking_metrics
from crabrec.metrics.bootstrap import METRICS, PerUser, paired_bootstrap, per_user


def test_per_user_parts_by_hand():
    group = np.array([0, 0, 1, 1])  # items 0,1 in group 0; 2,3 in group 1
    rankings = np.array([[2, 0, -1], [1, 3, 2]])
    u = per_user(rankings, np.array([0, 3]), [np.array([0, 1]), np.array([2])], group, 2, k=2)
    assert u.hit.tolist() == [1.0, 1.0]
    assert u.gain.tolist() == pytest.approx([1 / np.log2(3), 1 / np.log2(3)])
    assert u.slots.tolist() == [[1.0, 1.0], [1.0, 1.0]]  # top-2 only: the third slot is cut
    assert u.history.tolist() == [[2.0, 0.0], [0.0, 1.0]]


def test_a_shared_sid_spreads_its_slot_over_its_items_groups():
    group = np.array([0, 1, 1])
    members = [np.array([0, 1]), np.array([1]), np.array([2])]  # item 0 stands in for items 0 and 1
    u = per_user(np.array([[0, 2]]), np.array([0]), [np.array([2])], group, 2, members, k=2)
    assert u.slots.tolist() == [[0.5, 1.5]]


def _random_parts(seed: int, n: int = 300, n_items: int = 40, groups: int = 5):
    rng = np.random.default_rng(seed)
    rankings = np.stack([rng.permutation(n_items)[:20] for _ in range(n)])
    targets = rng.integers(0, n_items, n)
    history = [rng.integers(0, n_items, rng.integers(1, 8)) for _ in range(n)]
    group = rng.integers(0, groups, n_items)
    return rankings, targets, history, group, groups


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_full_sample_equals_the_reference_metrics(seed):
    rankings, targets, history, group, g = _random_parts(seed)
    other = np.roll(rankings, 1, axis=1)
    out = paired_bootstrap(
        per_user(rankings, targets, history, group, g), per_user(other, targets, history, group, g), samples=50
    )
    flat = np.concatenate(history)
    for items, side in ((rankings, "base"), (other, "value")):
        ref = {**ranking_metrics(items, targets, (10,)), **group_unfairness(items, flat, group, g, (10,))}
        for m in METRICS:
            assert out[m][side] == pytest.approx(ref[m], abs=1e-12), m


def test_identical_methods_have_a_zero_interval_and_the_seed_fixes_it():
    rankings, targets, history, group, g = _random_parts(3)
    u = per_user(rankings, targets, history, group, g)
    same = paired_bootstrap(u, u, samples=200, seed=1)
    assert all(same[m]["delta"] == 0 and same[m]["ci"] == [0.0, 0.0] for m in METRICS)
    other = per_user(np.roll(rankings, 3, axis=1), targets, history, group, g)
    a, b, c = (paired_bootstrap(u, other, samples=200, seed=s) for s in (1, 1, 2))
    assert a == b and a != c
    for m in METRICS:
        lo, hi = a[m]["ci"]
        assert lo <= a[m]["delta"] <= hi, m


def test_pairing_narrows_the_interval_of_a_small_change():
    rankings, targets, history, group, g = _random_parts(4, n=400)
    base = per_user(rankings, targets, history, group, g)
    other = PerUser(base.hit.copy(), base.gain.copy(), base.slots.copy(), base.history)
    other.hit[:4] = 1 - other.hit[:4]  # four users change
    lo, hi = paired_bootstrap(base, other, samples=300)["HR@10"]["ci"]
    p = base.hit.mean()
    unpaired = 2 * 1.96 * np.sqrt(2 * p * (1 - p) / 400)  # the normal interval of two independent samples
    assert 0 < hi - lo < 0.3 * unpaired


def test_a_run_records_the_change_against_mor(tiny_run):
    mor = json.loads((tiny_run / "models" / "mor" / "metrics.json").read_text())
    assert "vs_mor" not in mor
    for method in ("crab", "rr", "sasrec", "tiger"):
        m = json.loads((tiny_run / "models" / method / "metrics.json").read_text())
        vs = m["vs_mor"]
        assert vs["bootstrap"]["users"] == m["test_rows"] and vs["bootstrap"]["paired"]
        for metric in METRICS:
            assert vs[metric]["value"] == pytest.approx(m[metric], abs=1e-12), (method, metric)
            assert vs[metric]["base"] == pytest.approx(mor[metric], abs=1e-12), (method, metric)
    assert "Change against MOR" in (tiny_run / "report.md").read_text()
