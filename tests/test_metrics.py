"""Hand-computed metric examples (docs/METHOD.md, "Metrics")."""

from __future__ import annotations

import numpy as np
import pytest

from crabrec.metrics import group_unfairness, popular_share, ranking_metrics
from crabrec.metrics.fairness import slot_mass, subset_gu


def test_hr_ndcg_positions():
    rankings = np.array([[7, 1, 2], [3, 4, 7], [5, 6, 8], [9, 7, 1]])
    targets = np.array([7, 7, 7, 7])
    m = ranking_metrics(rankings, targets, ks=(1, 3))
    assert m["HR@1"] == pytest.approx(0.25)
    assert m["HR@3"] == pytest.approx(0.75)
    # positions 0, 2, miss, 1 -> 1 + 1/log2(4) + 0 + 1/log2(3)
    assert m["NDCG@3"] == pytest.approx((1 + 0.5 + 1 / np.log2(3)) / 4)
    assert m["NDCG@1"] == pytest.approx(0.25)


def test_worked_example_mgu_dgu():
    # items a=0 (g0), b=1 (g1), c=2 (g2), d=3 (g0)
    group = np.array([0, 1, 2, 0])
    histories = np.array([0, 1, 2, 0])  # [a, b] and [c, a]
    rankings = np.array([[0, 3], [1, 0]])  # [a, d] and [b, a]
    out = group_unfairness(rankings, histories, group, n_groups=3, ks=(2,))
    assert out["GH"] == pytest.approx([0.5, 0.25, 0.25])
    assert out["GP@2"] == pytest.approx([0.75, 0.25, 0.0])
    assert out["GU@2"] == pytest.approx([0.25, 0.0, -0.25])
    assert out["MGU@2"] == pytest.approx(0.1667, abs=1e-4)
    assert out["DGU@2"] == pytest.approx(0.5)


def test_collision_mass_is_split():
    members = [np.array([0, 1]), np.array([0, 1]), np.array([2])]
    mass = slot_mass(np.array([[0, 2], [1, -1]]), 3, members)
    assert mass.tolist() == [1.0, 1.0, 1.0]


def test_subset_gu_and_popular_share():
    rankings = np.array([[0, 1], [0, 2]])
    histories = np.array([1, 2, 2, 0])
    s = subset_gu(rankings, histories, np.array([True, False, False]), k=2)
    assert s["GP"] == pytest.approx(0.5) and s["GH"] == pytest.approx(0.25) and s["GU"] == pytest.approx(0.25)
    assert popular_share(rankings, np.array([True, False, False]), k=1) == pytest.approx(1.0)
