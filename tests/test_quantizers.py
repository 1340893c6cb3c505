"""RQ-KMeans, balanced RQ-KMeans, RQ-VAE and the dedup level: determinism, residual consistency, balance."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from crabrec.config import TokenizeConfig
from crabrec.errors import CrabError
from crabrec.sid.build import build_codebook, effective_codebook_size
from crabrec.sid.collisions import collision_count, dedup_level
from crabrec.sid.rq_kmeans import balanced_assign, residual_quantize


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(12, 16))
    v = centers[rng.integers(0, 12, 300)] + 0.3 * rng.normal(size=(300, 16))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_rqkmeans_deterministic_and_residuals_consistent(x):
    a = residual_quantize(x, 3, 16, seed=7)
    b = residual_quantize(x, 3, 16, seed=7)
    assert np.array_equal(a.codes, b.codes)
    assert all(np.array_equal(p, q) for p, q in zip(a.codewords, b.codewords))
    for level in range(2):
        expected = a.residuals[level] - a.codewords[level][a.codes[:, level]]
        np.testing.assert_allclose(a.residuals[level + 1], expected, atol=1e-6)
    np.testing.assert_array_equal(a.residuals[0], x)


def test_balanced_assignment_sizes(x):
    q = residual_quantize(x, 2, 16, seed=1, balanced=True)
    for level in range(2):
        sizes = np.bincount(q.codes[:, level], minlength=16)
        assert sizes.max() - sizes.min() <= 1 and sizes.sum() == 300
    # capacity rule on a tiny case: 5 points, 2 centroids -> sizes 3 and 2
    pts = np.array([[0.0], [0.1], [0.2], [0.3], [5.0]])
    assign = balanced_assign(pts, np.array([[0.0], [5.0]]))
    assert np.bincount(assign).tolist() == [3, 2] and assign[4] == 1


def test_dedup_level_ordinals():
    codes = np.array([[1, 2], [1, 2], [0, 0], [1, 2], [0, 1]])
    assert dedup_level(codes).tolist() == [0, 1, 0, 2, 0]
    assert collision_count(codes) == 2


def test_build_codebook_dedups_to_zero_collisions(x):
    cfg = TokenizeConfig(levels=2, codebook_size=4)
    cb = build_codebook(cfg, x, [str(i) for i in range(len(x))], seed=3)
    assert cb.meta["collisions_before_dedup"] > 0
    assert cb.collisions() == 0 and cb.dedup_levels == 1 and cb.n_levels == 3
    assert len(cb.residuals) == 3 and cb.prefixes == ["a", "b", "c"]
    again = build_codebook(cfg, x, [str(i) for i in range(len(x))], seed=3)
    assert np.array_equal(cb.codes, again.codes)


def test_rqvae_trains_and_residuals_consistent(x, tmp_path):
    from crabrec.sid.rq_vae import RQVAE, train_rqvae

    cfg = TokenizeConfig(levels=2, rqvae_hidden=[32], rqvae_latent_dim=8, rqvae_epochs=30, rqvae_batch_size=128)
    model, history = train_rqvae(x, cfg, 8, seed=0, progress=False)
    assert history[-1] < history[0]
    q = model.encode_all(x)
    np.testing.assert_allclose(q.residuals[1], q.residuals[0] - q.codewords[0][q.codes[:, 0]], atol=1e-5)
    model.save(tmp_path)
    again = RQVAE.load(tmp_path).encode_all(x)
    assert np.array_equal(again.codes, q.codes)


def test_small_catalogue_warns_and_shrinks(caplog):
    with caplog.at_level(logging.WARNING, logger="crabrec"):
        k = effective_codebook_size(100, TokenizeConfig(levels=3, codebook_size=256))
    assert k == 10 and "larger than the catalogue" in caplog.text


def test_nan_embeddings_rejected(x):
    bad = x.copy()
    bad[5, 0] = np.nan
    with pytest.raises(CrabError, match="row 5: item '5' has a non-finite value"):
        build_codebook(TokenizeConfig(levels=2, codebook_size=4), bad, [str(i) for i in range(len(x))], seed=0)
