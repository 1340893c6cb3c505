"""Codebook structure on hand-made examples, popularity, persistence, and the MiniOneRec import."""

from __future__ import annotations

import numpy as np
import pytest

from crabrec.errors import CrabError
from crabrec.sid.codebook import Codebook, gini, parse_index


@pytest.fixture
def cb() -> Codebook:
    # level-1 token 1 sits under two level-0 parents (0 and 1): not a tree
    codes = np.array([[0, 0, 0], [0, 1, 0], [1, 1, 1], [1, 2, 0], [2, 2, 1]])
    return Codebook(codes=codes, sizes=[3, 3, 2], item_ids=["i0", "i1", "i2", "i3", "i4"])


def test_names_and_vocab(cb):
    assert cb.prefixes == ["a", "b", "c"]
    assert cb.sid_string(2) == "<a_1><b_1><c_1>"
    assert cb.vocab_size == 8 and cb.offsets.tolist() == [0, 3, 6]
    assert cb.token_ids()[2].tolist() == [1, 4, 7]
    assert cb.token_names()[3] == "<b_0>"


def test_parents_children_multi_parent(cb):
    assert cb.children(0) == {0: [0, 1], 1: [1, 2], 2: [2]}
    assert cb.parents(1) == {0: [0], 1: [0, 1], 2: [1, 2]}
    assert cb.intersection(0, 1, 1).tolist() == [2]  # I(a_1) ∩ I(b_1)
    assert cb.intersection(0, 0, 1).tolist() == [1]
    assert cb.items_of(1, 1).tolist() == [1, 2]
    assert {k: v.tolist() for k, v in cb.token_items(1).items()} == {0: [0], 1: [1, 2], 2: [3, 4]}


def test_popularity_sums_and_groups(cb):
    freq = np.array([5, 1, 0, 2, 7])
    for level in range(3):
        assert cb.popularity(freq, level).sum() == freq.sum()
    assert cb.popularity(freq, 0).tolist() == [6, 2, 7]
    groups = cb.token_groups(freq, 0, share=0.34)  # ceil(0.34 * 3) = 2 tokens at each end
    assert groups["pop"].tolist() == [2, 0] and groups["unp"].tolist() == [0, 1]
    assert cb.collisions() == 0


def test_gini_known_values():
    assert gini(np.array([1, 1, 1, 1])) == pytest.approx(0.0)
    assert gini(np.array([0, 0, 0, 4])) == pytest.approx(0.75)


def test_save_load_roundtrip(cb, tmp_path):
    cb.codewords = [np.random.default_rng(0).normal(size=(s, 4)).astype(np.float32) for s in cb.sizes]
    cb.residuals = [np.ones((5, 4), np.float32) * i for i in range(3)]
    cb.save(tmp_path / "codebook.json")
    again = Codebook.load(tmp_path / "codebook.json")
    assert np.array_equal(again.codes, cb.codes) and again.sizes == cb.sizes and again.item_ids == cb.item_ids
    assert all(np.array_equal(a, b) for a, b in zip(again.codewords, cb.codewords))
    assert all(np.array_equal(a, b) for a, b in zip(again.residuals, cb.residuals))


def test_a_quantizers_residuals_are_stored_as_one_level_and_read_back_bit_for_bit(tmp_path):
    """Every level of a quantizer's residuals was written out: 4x the embeddings on disk, and read by every command
    that loads the codebook (3 s and 0.8 GB for 118k items, serving included). The deeper levels follow from level
    0, the codewords and the codes; a rebalanced codebook keeps only the rows it moved."""
    from crabrec.config import CrabConfig
    from crabrec.crab.rebalance import rebalance
    from crabrec.sid.rq_kmeans import residual_quantize

    x = np.random.default_rng(0).normal(size=(600, 16)).astype(np.float32)
    q = residual_quantize(x, 3, 8, seed=1, iters=5)
    base = Codebook(
        codes=q.codes,
        sizes=[8, 8, 8],
        item_ids=[f"i{i}" for i in range(600)],
        codewords=q.codewords,
        residuals=q.residuals,
    )
    base.save(tmp_path / "sid" / "codebook.json")
    stored = np.load(tmp_path / "sid" / "codebook.residuals.npz")
    assert sorted(stored.files) == ["level0", "level1", "level2", "rows1", "rows2"]
    assert stored["rows1"].size == stored["rows2"].size == 0 and stored["level1"].shape == (0, 16)
    again = Codebook.load(tmp_path / "sid" / "codebook.json")
    assert len(again.residuals) == 3
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(again.residuals, q.residuals))

    freq = np.random.default_rng(2).zipf(1.5, 600).astype(np.float64)
    moved = rebalance(again, freq, CrabConfig(ratio=0.3), seed=3, progress=False).codebook
    moved.save(tmp_path / "crab" / "codebook.json")
    stored = np.load(tmp_path / "crab" / "codebook.residuals.npz")
    assert 0 < stored["rows1"].size < 600
    back = Codebook.load(tmp_path / "crab" / "codebook.json")
    assert all(np.array_equal(a, b) for a, b in zip(back.residuals, moved.residuals))


def test_residuals_hold_one_level_and_give_every_level_as_the_lists_did():
    """A quantizer kept every level in memory (12.6 GB at tokenize for 1.1M items of 384 dimensions); the levels
    below the first are computed when read, bit for bit what the quantizer subtracted."""
    from crabrec.sid.residuals import Residuals
    from crabrec.sid.rq_kmeans import residual_quantize

    x = np.random.default_rng(4).normal(size=(300, 8)).astype(np.float32)
    q = residual_quantize(x, 3, 6, seed=0, iters=4)
    assert isinstance(q.residuals, Residuals) and q.residuals.changed == {} and len(q.residuals) == 3
    r, expected = x.copy(), []
    for level in range(3):
        expected.append(r)
        r = r - q.codewords[level][q.codes[:, level]]
    assert all(np.array_equal(a, b) for a, b in zip(q.residuals, expected))
    assert np.array_equal(q.residuals[-1], expected[2]) and len(q.residuals[1:]) == 2
    with pytest.raises(IndexError):
        q.residuals[3]
    moved = [expected[0], expected[1].copy(), expected[2].astype(np.float64)]
    moved[1][[5, 9]] += 1.0  # two moved items (the level below keeps its old values: they differ there too)
    again = Residuals.of(moved, q.codewords, q.codes)
    assert again.changed[1][0].tolist() == [5, 9] and again.changed[2][0].tolist() == [5, 9]
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(again, moved))
    whole = Residuals.of(moved, None, q.codes)  # no codewords to compute a level from: every level kept whole
    assert [rows for rows, _ in whole.changed.values()] == [None, None]
    assert all(np.array_equal(a, b) for a, b in zip(whole, moved))


def test_residuals_are_read_when_first_used_and_a_bad_file_is_named(cb, tmp_path):
    cb.codewords = [np.zeros((s, 4), np.float32) for s in cb.sizes]
    cb.residuals = [np.full((5, 4), i, np.float32) for i in range(3)]
    cb.save(tmp_path / "codebook.json")
    side = tmp_path / "codebook.residuals.npz"
    side.write_bytes(b"not a zip")  # loading the codebook does not read it: serving never needs it
    loaded = Codebook.load(tmp_path / "codebook.json")
    assert loaded.residuals is not None and np.array_equal(loaded.codes, cb.codes)
    with pytest.raises(CrabError, match="codebook.residuals.npz: changed since its codebook was read"):
        side.write_bytes(b"changed again")
        loaded.residuals[0]
    np.savez(side, level0=np.zeros((5, 4), np.float32), rows1=np.array([7]), level1=np.zeros((1, 4), np.float32))
    with pytest.raises(CrabError, match=r"codebook.residuals.npz: malformed residuals \(index 7"):
        list(Codebook.load(tmp_path / "codebook.json").residuals)
    np.savez(side, level0=np.zeros((5, 4)), level1=np.zeros((4, 4)))  # an older run's file: every level in full
    with pytest.raises(CrabError, match="level 1 has 4 rows for 5 items"):
        list(Codebook.load(tmp_path / "codebook.json").residuals)


def test_index_export_import_roundtrip(cb, tmp_path):
    import json

    (tmp_path / "index.json").write_text(json.dumps(cb.to_index()))
    again = parse_index(tmp_path / "index.json", cb.item_ids)
    assert np.array_equal(again.codes, cb.codes)
    with pytest.raises(CrabError, match="item 'zz' of the dataset has no SID"):
        parse_index(tmp_path / "index.json", [*cb.item_ids, "zz"])


def test_import_minionerec_index(shared):
    path = shared("minionerec_amazon18", "index", "Office_Products.index.json")
    cb = parse_index(path, [str(i) for i in range(3459)])
    assert cb.collisions() == 15
    assert [r["used"] for r in cb.level_stats()] == [88, 256, 256]
    assert cb.level_stats()[1]["parents_per_token"] == pytest.approx(9.7, abs=0.05)
