"""SASRec: seeded initialisation, causal user states, full ranking over the catalogue."""

from __future__ import annotations

import numpy as np
import torch

from crabrec.models.sasrec import SASRecConfig, build_sasrec, rank_full, to_tensors

CONFIG = SASRecConfig(n_items=12, max_len=4, hidden=16, blocks=2, heads=2, dropout=0.2)


def test_same_seed_same_weights():
    a, b, c = build_sasrec(CONFIG, 7), build_sasrec(CONFIG, 7), build_sasrec(CONFIG, 8)
    pairs = list(zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert all(torch.equal(x, y) for x, y in pairs)
    assert not torch.equal(a.items.weight, c.items.weight)


def test_user_state_ignores_positions_after_length():
    model = build_sasrec(CONFIG, 0).eval()
    history, length = to_tensors(np.array([[3, 5, -1, -1], [3, 5, 9, 1]]), np.array([2, 2]), CONFIG.n_items)
    with torch.no_grad():
        state = model.user_state(history, length)
        alone = model.user_state(history[:1], length[:1])
    torch.testing.assert_close(state[0], state[1])  # causal: items 9 and 1 come later and are not seen
    torch.testing.assert_close(state[:1], alone)


def test_full_ranking_is_the_top_k_of_all_item_scores():
    model = build_sasrec(CONFIG, 1).eval()
    history, length = np.array([[0, 4, 2, -1], [7, -1, -1, -1]]), np.array([3, 1])
    top = rank_full(model, history, length, k=5)
    with torch.no_grad():
        scores = model.scores(*to_tensors(history, length, CONFIG.n_items))
    assert top.shape == (2, 5) and top.max() < CONFIG.n_items  # the padding row is never recommended
    np.testing.assert_array_equal(top, scores.argsort(dim=1, descending=True)[:, :5].numpy())


def test_declaring_the_causal_mask_changes_no_output():
    """The encoder is told its mask is causal (so PyTorch does not compare it on the host at every call): in training
    and in evaluation the outputs are those of the undeclared call, exactly."""
    model = build_sasrec(CONFIG, 0)
    history, length = to_tensors(np.array([[3, 5, -1, -1], [3, 5, 9, 1]]), np.array([2, 4]), CONFIG.n_items)
    x = model.items(history) * (CONFIG.hidden**0.5) + model.pos(torch.arange(4))[None]
    causal = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)
    pad = history == CONFIG.n_items
    for training in (True, False):  # evaluation ranks without gradients (PyTorch's fast path may apply)
        model.train(training)
        with torch.set_grad_enabled(training):
            torch.manual_seed(3)
            declared = model.blocks(x, mask=causal, src_key_padding_mask=pad, is_causal=True)
            torch.manual_seed(3)
            checked = model.blocks(x, mask=causal, src_key_padding_mask=pad)
        assert torch.equal(declared, checked)
