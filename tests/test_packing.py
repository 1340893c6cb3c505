"""Packed training: for a one-layer decoder the loss and gradients equal the row-by-row form exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crabrec.config import TrainConfig
from crabrec.data.dataset import Samples
from crabrec.models.decoder import N_SPECIAL, build_decoder, encode_rows, target_loss
from crabrec.models.packing import build_chains, pack_batch


def windows(seqs: list[list[int]], h: int) -> Samples:
    users, hists, targets = [], [], []
    for u, seq in enumerate(seqs):
        for i in range(1, len(seq)):
            users.append(u)
            hists.append(seq[max(0, i - h) : i])
            targets.append(seq[i])
    return Samples.from_rows(users, hists, targets, h)


def test_chains_rebuild_users():
    s = windows([[1, 2, 3, 4, 5], [6, 7]], h=2)
    ch = build_chains(s, 2)
    assert [c.tolist() for c in ch.items] == [[1, 2, 3, 4, 5], [6, 7]]
    assert [t.tolist() for t in ch.is_target] == [[False, True, True, True, True], [False, True]]
    # a window that does not continue the chain (truncated start) starts a new chain
    s2 = Samples.from_rows([0, 0], [[1, 2], [8, 9]], [3, 4], 2)
    assert [c.tolist() for c in build_chains(s2, 2).items] == [[1, 2, 3], [8, 9, 4]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_packed_equals_rows_for_one_layer(seed):
    rng = np.random.default_rng(seed)
    h, width = 3, 3
    tokens = N_SPECIAL + rng.integers(0, 30, (20, width))
    seqs = [rng.integers(0, 20, int(rng.integers(3, 12))).tolist() for _ in range(4)]
    s = windows(seqs, h)
    model = build_decoder(N_SPECIAL + 30, TrainConfig(hidden=16, layers=1, heads=2, ff=32), seed=seed)
    params = list(model.parameters())
    ids, mask, labels = encode_rows(s.history, s.length, s.target, tokens)
    rows_loss = target_loss(model, ids, mask, labels)
    rows_grad = torch.autograd.grad(rows_loss, params)
    chains = build_chains(s, h)
    b = pack_batch(chains, np.arange(len(chains.items)), tokens, h)
    packed_loss = target_loss(model, b["ids"], b["mask"], b["labels"], position_ids=b["positions"])
    packed_grad = torch.autograd.grad(packed_loss, params)
    torch.testing.assert_close(packed_loss, rows_loss, rtol=1e-5, atol=1e-6)
    for a, c in zip(packed_grad, rows_grad):
        torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-6)
    # packing covers the same labelled tokens with far fewer input tokens
    assert int((b["labels"] != -100).sum()) == int((labels != -100).sum())
    assert int((b["ids"] != 0).sum()) < int((ids != 0).sum())


def test_packed_batches_padded_to_a_multiple_train_as_the_unpadded_ones():
    """train.cuda_graphs pads packed batches to a multiple of 8 chains and 32 tokens (few shapes to record): the
    added chains and tokens label nothing and are attended by nothing, so the loss and gradients are unchanged."""
    rng = np.random.default_rng(3)
    h, width = 3, 3
    tokens = N_SPECIAL + rng.integers(0, 30, (20, width))
    s = windows([rng.integers(0, 20, int(rng.integers(3, 12))).tolist() for _ in range(5)], h)
    model = build_decoder(N_SPECIAL + 30, TrainConfig(hidden=16, layers=2, heads=2, ff=32), seed=0)
    params = list(model.parameters())
    chains = build_chains(s, h)
    out = []
    for multiple in ((1, 1), (8, 32)):
        b = pack_batch(chains, np.arange(len(chains.items)), tokens, h, multiple)
        loss = target_loss(model, b["ids"], b["mask"], b["labels"], position_ids=b["positions"])
        out.append((b["ids"].shape, loss, torch.autograd.grad(loss, params), b))
    (shape, want, want_grads, plain), (padded_shape, got, got_grads, padded) = out
    assert shape[0] == 5 and padded_shape == (8, -(-shape[1] // 32) * 32) and padded_shape[1] > shape[1]
    assert torch.isfinite(padded["mask"]).any(-1).all()  # every position, added ones included, attends somewhere
    assert (padded["label_item"][5:] == -1).all() and int((padded["labels"] != -100).sum()) == int(
        (plain["labels"] != -100).sum()
    )
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    for a, c in zip(got_grads, want_grads):
        torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-6)
