"""CRAB stage 2: vocabulary growth with tied embeddings, L_T (vectorized = literal), and γ·L_T per step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crabrec.config import CrabConfig, TrainConfig
from crabrec.crab.alignment import alignment_loss, expand_embeddings, hierarchy
from crabrec.crab.finetune import crab_loss, prepare_trainable
from crabrec.crab.rebalance import rebalance
from crabrec.models.decoder import N_SPECIAL, build_decoder, encode_rows, item_tokens
from crabrec.sid.codebook import Codebook


def small_rebalanced():
    """``(codebook, rebalance result)``: 3 levels of 6 tokens over random codes, a third of the used tokens split."""
    rng = np.random.default_rng(0)
    codes = np.unique(rng.integers(0, 6, (80, 3)), axis=0)
    n = len(codes)
    cb = Codebook(
        codes=codes,
        sizes=[6, 6, 6],
        item_ids=[str(i) for i in range(n)],
        codewords=[rng.normal(size=(6, 4)).astype(np.float32) for _ in range(3)],
    )
    cb.residuals = [rng.normal(size=(n, 4)).astype(np.float32) for _ in range(3)]
    freq = rng.integers(0, 30, n)
    return cb, rebalance(cb, freq, CrabConfig(ratio=0.34), 0, progress=False)


@pytest.fixture
def setup():
    cb, out = small_rebalanced()
    model = build_decoder(N_SPECIAL + cb.vocab_size, TrainConfig(hidden=16, layers=1, heads=2, ff=32), seed=0)
    return cb, out, model


def literal_lt(weight: torch.Tensor, cb: Codebook) -> torch.Tensor:
    total = torch.zeros(())
    for level in range(cb.semantic_levels - 1):
        for _, kids in cb.children(level).items():
            rows = weight[[N_SPECIAL + int(cb.offsets[level + 1]) + k for k in kids]]
            total = total + ((rows - rows.mean(0)) ** 2).sum(1).mean()
    return total


def test_alignment_loss_matches_literal_sum(setup):
    cb, out, _ = setup
    w = torch.randn(N_SPECIAL + out.codebook.vocab_size, 5)
    h = hierarchy(out.codebook)
    torch.testing.assert_close(alignment_loss(w, h), literal_lt(w, out.codebook))
    torch.testing.assert_close(alignment_loss(w, h, normalize=True), literal_lt(w, out.codebook) / h.n_parents)


def remap_tokens(old, new) -> np.ndarray:
    """Old vocabulary id -> new vocabulary id for the tokens both codebooks share."""
    out = np.arange(N_SPECIAL + old.vocab_size)
    for level in range(old.n_levels):
        ids = np.arange(old.sizes[level])
        out[N_SPECIAL + old.offsets[level] + ids] = N_SPECIAL + new.offsets[level] + ids
    return out


def test_expand_keeps_old_rows_and_copies_parents(setup):
    cb, out, model = setup
    old_w = model.get_input_embeddings().weight.detach().clone()
    expand_embeddings(model, cb, out.codebook, out.parent, seed=0, noise=0.0)
    new_w = model.get_input_embeddings().weight.detach()
    remap = remap_tokens(cb, out.codebook)
    assert torch.equal(new_w[remap], old_w)
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    new_cb = out.codebook
    for name, parent in out.parent.items():
        level = new_cb.prefixes.index(name[1])
        code, pcode = int(name[3:-1]), int(parent[3:-1])
        assert torch.equal(
            new_w[N_SPECIAL + new_cb.offsets[level] + code], old_w[N_SPECIAL + cb.offsets[level] + pcode]
        )


@pytest.mark.parametrize("params", ["lora", "full"])
def test_new_output_rows_change_after_one_step(setup, params):
    cb, out, model = setup
    expand_embeddings(model, cb, out.codebook, out.parent, seed=0)
    model, groups = prepare_trainable(model, CrabConfig(params=params))
    new = out.codebook
    tokens = item_tokens(new.token_ids())
    moved = [i for i in range(new.n_items) if not np.array_equal(new.codes[i], cb.codes[i])]
    rows = np.array(moved[:8])
    ids, mask, labels = encode_rows(np.array([[0, 1]] * len(rows)), np.array([2] * len(rows)), rows, tokens)
    new_ids = sorted({int(t) for i in rows for t in tokens[i]} - set(range(N_SPECIAL + cb.vocab_size)))
    head = model.get_output_embeddings().weight
    before = head.detach()[new_ids].clone()
    specials = head.detach()[:N_SPECIAL].clone()
    opt = torch.optim.AdamW(groups, lr=1e-2)
    loss = crab_loss(hierarchy(new), 0.2, False)(model, {"ids": ids, "mask": mask, "labels": labels})
    loss.backward()
    opt.step()
    assert not torch.allclose(model.get_output_embeddings().weight.detach()[new_ids], before)
    assert torch.equal(model.get_output_embeddings().weight.detach()[:N_SPECIAL], specials)


def test_gamma_lt_exact_per_optimizer_step_under_accumulation(setup):
    """With the recommendation loss zeroed, the accumulated gradient equals that of γ·L_T."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    cb, out, model = setup
    expand_embeddings(model, cb, out.codebook, out.parent, seed=0)
    h = hierarchy(out.codebook)
    gamma, steps = 0.2, 4
    AcceleratorState._reset_state(reset_partial_state=True)  # earlier tests may have set up a GPU state
    acc = Accelerator(gradient_accumulation_steps=steps, cpu=True)
    model = acc.prepare(model)
    weight = model.get_input_embeddings().weight
    loss_fn = crab_loss(h, gamma, False)
    for _ in range(steps):
        with acc.accumulate(model):
            lt_part = loss_fn(model, _dummy_batch(out.codebook)) - _zero_rec(model, out.codebook)
            acc.backward(lt_part)
    expected = torch.autograd.grad(gamma * alignment_loss(weight, h), weight)[0]
    torch.testing.assert_close(weight.grad, expected, rtol=1e-5, atol=1e-7)
    AcceleratorState._reset_state(reset_partial_state=True)  # this test forced the CPU; later ones may use a GPU


def _dummy_batch(cb):
    tokens = item_tokens(cb.token_ids())
    ids, mask, labels = encode_rows(np.array([[0]]), np.array([1]), np.array([1]), tokens)
    return {"ids": ids, "mask": mask, "labels": labels}


def _zero_rec(model, cb):
    from crabrec.models.decoder import target_loss

    b = _dummy_batch(cb)
    return target_loss(model, b["ids"], b["mask"], b["labels"])


def test_crab_loss_reports_each_term_per_epoch_and_the_loop_logs_them(setup, tmp_path):
    """The fine-tune's log shows L_Rec and L_T apart (which one dominates), as means over the epoch's batches."""
    from crabrec.models.decoder import target_loss
    from crabrec.train.loop import Rows, train

    cb, out, model = setup
    expand_embeddings(model, cb, out.codebook, out.parent, seed=0)
    h = hierarchy(out.codebook)
    loss_fn = crab_loss(h, 0.2, False)
    batch = _dummy_batch(out.codebook)
    total = loss_fn(model, batch)
    rec = target_loss(model, batch["ids"], batch["mask"], batch["labels"])
    align = alignment_loss(model.get_input_embeddings().weight, h)
    torch.testing.assert_close(total, rec + 0.2 * align)
    terms = loss_fn.epoch_terms()
    assert terms == pytest.approx({"rec": rec.item(), "alignment": align.item()})
    assert loss_fn.epoch_terms() == {}  # reset: the next epoch starts from nothing
    assert crab_loss(h, 0.0, False).epoch_terms() == {}  # γ = 0: one term, nothing to split

    rows = Rows(n=4, make=lambda idx: _dummy_batch(out.codebook))
    cfg = TrainConfig(epochs=2, batch_size=2, lr=1e-3, warmup_steps=0)
    result = train(model, rows, loss_fn, lambda m: 0.0, cfg, tmp_path / "ft", seed=0)
    for entry in result.history:
        assert set(entry["terms"]) == {"rec", "alignment"}
        assert entry["loss"] == pytest.approx(entry["terms"]["rec"] + 0.2 * entry["terms"]["alignment"], rel=1e-6)


def test_crab_loss_keeps_its_running_sums_in_the_same_tensors(setup):
    """A step replayed from a CUDA graph runs no Python: it updates the tensors it recorded. So the loss keeps L_Rec's
    and L_T's sums and the batch count in tensors made once and updated in place, across steps and epochs."""
    cb, out, model = setup
    expand_embeddings(model, cb, out.codebook, out.parent, seed=0)
    loss_fn = crab_loss(hierarchy(out.codebook), 0.2, False)
    batch = _dummy_batch(out.codebook)
    loss_fn(model, batch)
    made = dict(loss_fn._sums)
    loss_fn(model, batch)
    first = loss_fn.epoch_terms()
    loss_fn(model, batch)
    assert all(loss_fn._sums[name] is tensor for name, tensor in made.items())
    assert loss_fn.epoch_terms() == pytest.approx(first)  # the same batch: the same means, after the reset
