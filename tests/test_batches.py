"""The vectorized batch builders equal the per-row reference builders exactly: TIGER's encoder inputs, the packed
decoder batch and the row form with its prompt, over random rows, with and without a user token or a prompt, padded to
a multiple or not."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from crabrec.data.dataset import PAD as HISTORY_PAD
from crabrec.data.dataset import Samples
from crabrec.models.decoder import N_SPECIAL, Prompt, encode_rows, item_tokens
from crabrec.models.packing import build_chains, pack_batch
from crabrec.models.tiger import encode_inputs
from crabrec.train.batch_reference import encode_rows_rows, pack_batch_rows, tiger_inputs_rows


def _equal(got: dict | tuple, want: dict | tuple) -> None:
    pairs = zip(got.values(), want.values()) if isinstance(got, dict) else zip(got, want)
    if isinstance(got, dict):
        assert list(got) == list(want)
    for a, b in pairs:
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("bins", [0, 7])
@pytest.mark.parametrize("multiple", [1, 16])
def test_tiger_inputs_equal_the_per_row_reference(seed, bins, multiple):
    rng = np.random.default_rng(seed)
    tokens = item_tokens(rng.integers(0, 40, (30, 4)))
    rows, h = int(rng.integers(1, 40)), int(rng.integers(1, 21))
    length = rng.integers(0 if bins else 1, h + 1, rows)
    history = np.full((rows, h), HISTORY_PAD, dtype=np.int64)  # PAD-padded at the end, as Samples holds them
    for r in range(rows):
        history[r, : length[r]] = rng.integers(0, 30, length[r])
    config = SimpleNamespace(crabrec_user_bins=bins, crabrec_user_offset=N_SPECIAL + 40)
    user = rng.integers(0, 1000, rows)
    args = (config, user, history, length, tokens, multiple)
    _equal(encode_inputs(*args), tiger_inputs_rows(*args))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("multiple", [(1, 1), (8, 32), (3, 5)])
def test_packed_batch_equals_the_per_chain_reference(seed, multiple):
    rng = np.random.default_rng(seed)
    h = int(rng.integers(1, 6))
    tokens = item_tokens(rng.integers(0, 40, (25, 3)))
    users, hists, targets = [], [], []
    for u in range(int(rng.integers(2, 12))):  # each user's sliding windows, as the splits make them
        seq = rng.integers(0, 25, int(rng.integers(2, 15)))
        for i in range(1, len(seq)):
            users.append(u)
            hists.append(seq[max(0, i - h) : i].tolist())
            targets.append(int(seq[i]))
    chains = build_chains(Samples.from_rows(users, hists, targets, h), h)
    index = rng.permutation(len(chains.items))[: int(rng.integers(1, len(chains.items) + 1))]
    _equal(pack_batch(chains, index, tokens, h, multiple), pack_batch_rows(chains, index, tokens, h, multiple))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("prompted", [False, True])
@pytest.mark.parametrize("multiple", [1, 32])
@pytest.mark.parametrize("with_target", [False, True])
def test_prompt_rows_equal_the_per_row_reference(seed, prompted, multiple, with_target):
    """The row form (an LLM backbone's prompts, the plain decoder's bare SIDs): left-padded, a separator between
    history items, the answer last; histories PAD-padded past their length and some of length 0."""
    rng = np.random.default_rng(seed)
    tokens = item_tokens(rng.integers(0, 40, (30, 3)))
    rows, h = int(rng.integers(1, 40)), int(rng.integers(1, 21))
    length = rng.integers(0, h + 1, rows)
    history = np.full((rows, h), HISTORY_PAD, dtype=np.int64)
    for r in range(rows):
        history[r, : length[r]] = rng.integers(0, 30, length[r])
    target = rng.integers(0, 30, rows) if with_target else None
    prompt = Prompt(head=(5, 6, 7), sep=(4,), tail=(8, 9), answer_end=(2,)) if prompted else Prompt()
    got = encode_rows(history, length, target, tokens, prompt, multiple)
    want = encode_rows_rows(history, length, target, tokens, prompt, multiple)
    assert (got[2] is None) == (want[2] is None) == (not with_target)
    _equal([t for t in got if t is not None], [t for t in want if t is not None])
