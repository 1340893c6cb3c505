"""CRAB stage 1: the regularized K-means and the invariants of rebalancing (docs/METHOD.md, "CRAB stage 1")."""

from __future__ import annotations

import numpy as np
import pytest

from crabrec.config import CrabConfig, TokenizeConfig
from crabrec.crab.rebalance import rebalance
from crabrec.crab.reg_kmeans import (
    Units,
    enumerate_best,
    kmeanspp_init,
    lloyd,
    lloyd_reference,
    lpt_init,
    objective,
    reg_kmeans,
)
from crabrec.sid.build import build_codebook


def test_spec_unit_example_6_3_4():
    units = Units(r=np.zeros((4, 3)), n=np.ones(4), p=np.array([6.0, 3.0, 2.0, 1.0]))
    z = reg_kmeans(units, 2, lam=1.0)
    assert set(np.flatnonzero(z == z[0])) == {0}
    assert set(np.flatnonzero(z != z[0])) == {1, 2, 3}
    # the same answer from the iterative path (exact enumeration switched off)
    z2 = reg_kmeans(units, 2, lam=1.0, exact_limit=0)
    assert set(np.flatnonzero(z2 == z2[0])) == {0}


@pytest.mark.parametrize("seed", range(6))
def test_lloyd_never_worse_than_init_and_matches_exhaustive(seed):
    rng = np.random.default_rng(seed)
    j, m = int(rng.integers(4, 9)), int(rng.integers(2, 4))
    units = Units(r=rng.normal(size=(j, 3)), n=rng.integers(1, 5, j), p=rng.integers(0, 20, j).astype(float))
    lam = float(rng.choice([0.1, 1.0, 10.0]))
    for z0 in (lpt_init(units, m), kmeanspp_init(units, m, rng)):
        z = lloyd(units, z0, m, lam, rng)
        assert objective(units, z, m, lam) <= objective(units, z0, m, lam) + 1e-9
        assert all((z == c).any() for c in range(m))
    exact = enumerate_best(units, m, lam)
    brute = min((objective(units, np.array(a), m, lam), a) for a in np.ndindex(*([m] * j)) if len(set(a)) == m)
    assert objective(units, exact, m, lam) == pytest.approx(brute[0], abs=1e-9)
    iterative = reg_kmeans(units, m, lam, seed=seed, n_init=20, exact_limit=0)
    assert objective(units, iterative, m, lam) <= brute[0] + 0.05  # heuristic: close to the optimum


def test_lloyd_finds_the_next_move_with_arrays_as_the_step_per_unit_does():
    """A sweep looks ahead for the next unit that moves with array operations (the loads change only when one does):
    the same assignment, bit for bit, as the reference's Python step per unit, over random instances (ties from
    integer residuals and popularities, no balance weight, both starts, every iteration count)."""
    bad = []
    for seed in range(120):
        rng = np.random.default_rng(seed)
        j, m, d = int(rng.integers(3, 300)), int(rng.integers(2, 4)), int(rng.integers(1, 6))
        whole = seed % 3 == 0
        r = rng.integers(-2, 3, (j, d)).astype(float) if whole else rng.normal(size=(j, d))
        p = rng.integers(0, 4, j).astype(float) if whole else rng.zipf(1.5, j).astype(float)
        units = Units(r=r, n=rng.integers(1, 4, j), p=p)
        lam = float(rng.choice([0.0, 0.1, 1.0, 10.0]))
        z0 = lpt_init(units, m) if seed % 2 else kmeanspp_init(units, m, rng)
        iters = int(rng.choice([1, 2, 100]))
        got = lloyd(units, z0, m, lam, np.random.default_rng(seed), iters)
        if not np.array_equal(got, lloyd_reference(units, z0, m, lam, np.random.default_rng(seed), iters)):
            bad.append(seed)
    assert bad == []


@pytest.mark.parametrize("seed", range(4))
def test_enumeration_scores_first_labellings_only_and_returns_the_first_optimum(seed):
    """The lexicographically first optimum over every labelling, found by scoring labellings in unit order only
    (here in small chunks, some holding none of them)."""
    rng = np.random.default_rng(seed)
    j, m = int(rng.integers(4, 8)), int(rng.integers(2, 4))
    units = Units(r=rng.normal(size=(j, 2)).round(1), n=rng.integers(1, 3, j), p=rng.integers(0, 4, j).astype(float))
    values = {a: objective(units, np.array(a), m, 1.0) for a in np.ndindex(*([m] * j)) if len(set(a)) == m}
    best = min(values.values())
    first = next(a for a in sorted(values) if values[a] <= best + 1e-9)
    assert enumerate_best(units, m, 1.0, chunk=5).tolist() == list(first)


@pytest.fixture(scope="module")
def office_codebook():
    from crabrec.config import DataConfig, EmbedConfig
    from crabrec.data import compute_popularity, load_dataset, make_splits
    from crabrec.embed import encode, item_texts

    ds = load_dataset(DataConfig())
    splits = make_splits(ds, "auto", 10)
    freq = compute_popularity(splits.train, ds.n_items).freq
    x = encode(item_texts(ds.item_text, EmbedConfig()), EmbedConfig(encoder="hashing-bow")).vectors
    cb = build_codebook(TokenizeConfig(levels=3, codebook_size=64), x, ds.item_ids, seed=0)
    return cb, freq


def test_rebalance_invariants_on_office(office_codebook):
    cb, freq = office_codebook
    out = rebalance(cb, freq, CrabConfig(ratio=0.1), 0, progress=False)
    new = out.codebook
    assert new.codes.shape == cb.codes.shape  # every item keeps L tokens
    assert new.collisions() <= cb.collisions()  # splitting only refines
    assert len(np.unique(new.codes, axis=0)) >= len(np.unique(cb.codes, axis=0))
    for level in range(cb.semantic_levels):
        p_old, p_new = cb.popularity(freq, level), new.popularity(freq, level)
        split_ids = {int(t.split("_")[1][:-1]) for t in out.token_map if t.startswith(f"<{cb.prefixes[level]}_")}
        for old_name, new_names in out.token_map.items():
            if not old_name.startswith(f"<{cb.prefixes[level]}_"):
                continue
            ids = [int(n.split("_")[1][:-1]) for n in new_names]
            old_id = int(old_name.split("_")[1][:-1])
            assert p_new[ids].sum() == pytest.approx(p_old[old_id])  # P conserved
            assert all(len(new.items_of(level, t)) >= 1 for t in ids)  # no empty token
            assert 2 <= len(ids) <= 3
        untouched = [c for c in cb.used(level) if int(c) not in split_ids]
        assert np.allclose(p_new[untouched], p_old[untouched])  # unsplit tokens keep P
        assert new.sizes[level] == cb.sizes[level] + sum(
            len(v) - 1 for k, v in out.token_map.items() if k.startswith(f"<{cb.prefixes[level]}_")
        )
        # items keep their codes at other levels unless moved at this level only
    assert np.array_equal(new.codes[:, cb.semantic_levels :], cb.codes[:, cb.semantic_levels :])
    for row in out.report:
        assert row["after"]["max_over_mean"] <= row["before"]["max_over_mean"] + 1e-9
    # residual consistency survives the split: r^{l+1} = r^l - codeword_l[s^l]
    for level in range(cb.semantic_levels - 1):
        expected = new.residuals[level] - new.codewords[level][new.codes[:, level]]
        np.testing.assert_allclose(new.residuals[level + 1], expected, atol=1e-4)


def test_rebalance_is_deterministic_and_respects_levels(office_codebook):
    cb, freq = office_codebook
    a = rebalance(cb, freq, CrabConfig(levels=[1]), 3, progress=False)
    b = rebalance(cb, freq, CrabConfig(levels=[1]), 3, progress=False)
    assert np.array_equal(a.codebook.codes, b.codebook.codes)
    assert np.array_equal(a.codebook.codes[:, [0, 2]], cb.codes[:, [0, 2]])
    assert all(k.startswith("<b_") for k in a.token_map)
    assert len(a.token_map) == max(1, round(0.1 * len(cb.used(1))))


def test_ratio_zero_splits_nothing(office_codebook):
    """crab.ratio = 0 is the control: the codebook comes back unchanged (codes, sizes, codewords), nothing is split."""
    cb, freq = office_codebook
    out = rebalance(cb, freq, CrabConfig(ratio=0.0), 0, progress=False)
    assert out.token_map == {} and out.parent == {}
    assert np.array_equal(out.codebook.codes, cb.codes) and out.codebook.sizes == cb.sizes
    for old, new in zip(cb.codewords, out.codebook.codewords, strict=True):
        np.testing.assert_array_equal(old, new)
    assert [row["split"] for row in out.report] == [0] * cb.semantic_levels


def _same_codebooks(ours, reference) -> None:
    """The same split, bit for bit: codes, sizes, codewords, every level of residuals, and what the residuals file
    holds."""
    from crabrec.sid.residuals import Residuals

    assert np.array_equal(ours.codes, reference.codes) and ours.sizes == reference.sizes
    for a, b in zip(ours.codewords or [], reference.codewords or [], strict=True):
        assert np.array_equal(a, b) and a.dtype == b.dtype
    assert len(ours.residuals) == len(reference.residuals)
    for a, b in zip(ours.residuals, reference.residuals, strict=True):
        assert np.array_equal(a, b, equal_nan=True) and a.dtype == b.dtype
    stored = Residuals.of(ours.residuals, ours.codewords, ours.codes).arrays()
    expected = Residuals.of(reference.residuals, reference.codewords, reference.codes).arrays()
    assert stored.keys() == expected.keys()
    assert all(np.array_equal(stored[k], expected[k]) for k in stored)


@pytest.mark.parametrize(
    "settings",
    [{"ratio": 0.3}, {"ratio": 0.3, "levels": [1]}, {"ratio": [0.5, 0.0, 0.3]}, {"ratio": 0.2, "levels": [0, 2]}],
)
def test_rebalancing_one_level_at_a_time_equals_every_level_held(office_codebook, tmp_path, settings):
    """The residuals are held one level at a time while tokens split (a million items: one or two levels, not all
    four): the rebalanced codebook equals the reference's, which holds every level and adds each move to every
    deeper level at once, bit for bit, whether the input's residuals are a list, read back from its file, or a
    rebalanced codebook's (rows that differ from the recursion), and with a dedup level below."""
    from crabrec.crab.rebalance import EveryLevel
    from crabrec.sid.codebook import Codebook

    cb, freq = office_codebook
    cfg = CrabConfig(**settings)
    once = rebalance(cb, freq, cfg, 5, progress=False)
    _same_codebooks(once.codebook, rebalance(cb, freq, cfg, 5, progress=False, held=EveryLevel).codebook)
    assert once.codebook.dedup_levels == cb.dedup_levels and len(cb.residuals) == 4  # the dedup level's too
    once.codebook.save(tmp_path / "codebook.json")
    again = Codebook.load(tmp_path / "codebook.json")  # residuals read from the file: first level, differing rows
    cfg2 = CrabConfig(ratio=0.25)
    _same_codebooks(rebalance(again, freq, cfg2, 1, progress=False).codebook,
                    rebalance(again, freq, cfg2, 1, progress=False, held=EveryLevel).codebook)  # fmt: skip


def test_rebalancing_residuals_without_codewords_keeps_every_level(office_codebook):
    """Residuals without codewords (ids-only data clusters on the model's token vectors) move nothing: each level is
    kept whole, as the reference keeps it."""
    from crabrec.crab.rebalance import EveryLevel
    from crabrec.sid.codebook import Codebook

    cb, freq = office_codebook
    levels = [np.asarray(r, np.float64) for r in cb.residuals]
    plain = Codebook(codes=cb.codes, sizes=list(cb.sizes), item_ids=cb.item_ids, prefixes=cb.prefixes,
                     dedup_levels=cb.dedup_levels, residuals=levels)  # fmt: skip
    cfg = CrabConfig(ratio=0.3)
    ours = rebalance(plain, freq, cfg, 2, progress=False).codebook
    _same_codebooks(ours, rebalance(plain, freq, cfg, 2, progress=False, held=EveryLevel).codebook)
    assert ours.codewords is None and all(r.dtype == np.float32 for r in ours.residuals)
