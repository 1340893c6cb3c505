"""Debiasing baselines: RW weights, RR re-ranking, D²LR weights, and the shared weighted-loss plug-in."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crabrec.baselines import d2lr, reweight
from crabrec.baselines.rerank import choose_alpha, group_penalty, item_penalty, rerank
from crabrec.baselines.weighted import weighted_loss
from crabrec.config import TrainConfig
from crabrec.data.dataset import Samples
from crabrec.models.decoder import build_decoder, encode_rows, label_targets, target_loss
from crabrec.models.packing import build_chains, pack_batch


def samples(histories: list[list[int]], targets: list[int]) -> Samples:
    return Samples.from_rows(list(range(len(targets))), histories, targets, 10)


def test_rw_weights_hand_example():
    # items 0,1 in group 0 (unpopular), items 2,3 in group 1 (popular)
    group = np.array([0, 0, 1, 1])
    train = samples([[0, 1], [0, 2], [1, 3]], [2, 3, 2])
    # histories: 0,1,0,2,1,3 -> group 0: 4/6, group 1: 2/6; targets: all group 1 -> GH_ta = [0, 1]
    w = reweight.group_weights(train, group, 2)
    np.testing.assert_allclose(w, [1.0, 2 / 6])  # absent target group -> 1; over-represented group -> < 1
    np.testing.assert_allclose(reweight.group_weights(train, group, 2)[group], [1.0, 1.0, 1 / 3, 1 / 3])


def test_d2lr_weights_decay_with_position_and_clip():
    freq = np.array([100, 10, 0, 1000])
    w = d2lr.token_weights(freq, np.array([0, 0, 0]), np.array([0, 1, 2]), 3, 0.5, 50.0)
    assert w[0] < w[1] < w[2]  # propensity decays with position -> weights grow
    np.testing.assert_allclose(w[0], 1 / (0.1 * (1 - 0.5 / 3)))
    rare = d2lr.token_weights(freq, np.array([2]), np.array([2]), 3, 0.5, 50.0)
    assert rare[0] == 50.0  # 1/ρ = 2000 clipped
    fn = d2lr.token_weight_fn(freq, 3)
    item = torch.tensor([[-1, 0, 0, 0], [-1, 3, 3, 3]])
    level = torch.tensor([[-1, 0, 1, 2], [-1, 0, 1, 2]])
    out = fn(item, level)
    assert out[:, 0].eq(0).all()
    torch.testing.assert_close(out[item >= 0].mean(), torch.tensor(1.0))


@pytest.fixture
def tiny():
    rng = np.random.default_rng(1)
    tokens = rng.integers(2, 20, (12, 3))
    model = build_decoder(20, TrainConfig(hidden=16, layers=1, heads=2, ff=32), seed=0)
    hist = [list(rng.integers(0, 12, rng.integers(1, 5))) for _ in range(6)]
    return model, tokens, samples(hist, list(rng.integers(0, 12, 6)))


def test_weighted_loss_with_unit_weights_is_plain_loss(tiny):
    model, tokens, s = tiny
    ids, mask, labels = encode_rows(s.history, s.length, s.target, tokens)
    item, level = label_targets(labels, s.target)
    batch = {"ids": ids, "mask": mask, "labels": labels, "label_item": item, "label_level": level}
    ones = weighted_loss(lambda i, lv: (i >= 0).float())(model, batch)
    torch.testing.assert_close(ones, target_loss(model, ids, mask, labels))
    rw = weighted_loss(reweight.token_weight_fn(np.ones(12)))(model, batch)
    torch.testing.assert_close(rw, ones)


def test_rw_loss_is_per_sample_weighted_mean(tiny):
    model, tokens, s = tiny
    ids, mask, labels = encode_rows(s.history, s.length, s.target, tokens)
    item, level = label_targets(labels, s.target)
    w_item = np.linspace(0.5, 2.0, 12)
    batch = {"ids": ids, "mask": mask, "labels": labels, "label_item": item, "label_level": level}
    got = weighted_loss(reweight.token_weight_fn(w_item))(model, batch)
    per_row = target_loss(model, ids, mask, labels, reduction="none").mean(1)
    want = (torch.from_numpy(w_item[s.target]).float() * per_row).mean()
    torch.testing.assert_close(got, want)


def test_packed_batch_labels_carry_target_items(tiny):
    _, tokens, _ = tiny
    chain = samples([[1], [1, 2], [1, 2, 3]], [2, 3, 4])
    chain.user[:] = 0
    chains = build_chains(chain, 10)
    batch = pack_batch(chains, np.arange(len(chains.items)), tokens, 10)
    on = batch["labels"] != -100
    assert torch.equal(on, batch["label_item"] >= 0)
    assert torch.equal(torch.unique(batch["label_item"][on]), torch.tensor([2, 3, 4]))
    assert torch.equal(batch["label_level"][on], torch.tensor([0, 1, 2] * 3))


def test_rr_identity_at_zero_and_demotes_over_recommended():
    items = np.array([[0, 1, 2], [2, 0, 1]])
    scores = np.array([[-1.0, -1.1, -1.2], [-1.0, -1.05, -3.0]])
    group = np.array([1, 0, 0])  # item 0 popular
    u = group_penalty({1: np.array([-0.2, 0.2]), 10: np.array([-0.1, 0.1])})
    np.testing.assert_allclose(u, [-1.0, 1.0])
    pen = item_penalty(u, group, None)
    same, _ = rerank(items, scores, pen, 0.0)
    assert np.array_equal(same, items)
    moved, _ = rerank(items, scores, pen, 0.5)
    # row 0: D = 1.5, 0.55, 0.6 -> item 1, item 2, item 0
    assert moved[0].tolist() == [1, 2, 0]
    assert (np.argwhere(moved == 0)[:, 1] >= np.argwhere(items == 0)[:, 1]).all()


def test_rr_choose_alpha_respects_ndcg_floor():
    curve = [
        {"alpha": 0.0, "NDCG@10": 0.10, "DGU@10": 0.6},
        {"alpha": 0.1, "NDCG@10": 0.097, "DGU@10": 0.5},
        {"alpha": 0.5, "NDCG@10": 0.05, "DGU@10": 0.2},
    ]
    assert choose_alpha(curve, 0.05) == 0.1
    assert choose_alpha(curve, 0.0) == 0.0
