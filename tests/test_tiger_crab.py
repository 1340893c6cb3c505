"""TIGER+CRAB: TIGER grown to the rebalanced codebook scores what it scored before, and its fine-tune trains exactly
the SID rows (input and per-level output) plus LoRA on T5's attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crabrec.config import CrabConfig, TigerSection
from crabrec.crab.alignment import hierarchy
from crabrec.crab.finetune import crab_loss, prepare_trainable
from crabrec.models.decoder import N_SPECIAL, item_tokens
from crabrec.models.tiger import build_tiger, encode_inputs, make_labels, rebalanced_tiger, tiger_loss
from crabrec.sid.codebook import Codebook
from tests.test_crab_finetune import small_rebalanced

USERS = 5


def small_codebooks():
    old, out = small_rebalanced()
    return old, out.codebook, out.parent


def small_tiger(codebook: Codebook, head: str):
    size = TigerSection(d_model=16, layers=1, heads=2, d_kv=8, ff=32, user_bins=USERS, head=head, init="random")
    return build_tiger(codebook.sizes, size, seed=0)


def token_columns(old: Codebook, new: Codebook) -> tuple[np.ndarray, np.ndarray]:
    """Vocabulary ids of the tokens both codebooks have, in the old and in the new layout."""
    before, after = [], []
    for level in range(old.n_levels):
        codes = np.arange(old.sizes[level])
        before += list(N_SPECIAL + old.offsets[level] + codes)
        after += list(N_SPECIAL + new.offsets[level] + codes)
    return np.array(before), np.array(after)


def logits(model, codebook: Codebook, items: np.ndarray) -> torch.Tensor:
    """The model's logits at every decoder position for users 0..k reading items[:-1] and generating items[-1]."""
    tokens = item_tokens(codebook.token_ids())
    k = len(items) - 1
    history = np.tile(items[:-1], (k, 1))
    ids, mask = encode_inputs(model.config, np.arange(k), history, np.full(k, k), tokens)
    labels = make_labels(np.full(k, items[-1]), tokens)
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, labels=labels).logits


@pytest.mark.parametrize("head", ["level", "level-tied", "tied"])
def test_grown_tiger_scores_the_kept_tokens_as_before_and_each_new_token_as_its_parent(head):
    old, new, parent = small_codebooks()
    model = small_tiger(old, head).eval()
    kept = [i for i in range(old.n_items) if np.array_equal(old.codes[i], new.codes[i])]
    items = np.array(kept[:4])
    before = logits(model, old, items)
    rebalanced_tiger(model, old, new, parent, seed=0, noise=0.0)
    after = logits(model, new, items)
    assert model.config.crabrec_level_sizes == list(new.sizes)
    assert model.config.crabrec_user_offset == N_SPECIAL + new.vocab_size == model.config.vocab_size - USERS
    was, now = token_columns(old, new)
    torch.testing.assert_close(after[..., now], before[..., was])
    for name, source in parent.items():  # with no noise a split token's children score as the token did
        level = new.prefixes.index(name[1])
        child = N_SPECIAL + new.offsets[level] + int(name[3:-1])
        origin = N_SPECIAL + new.offsets[level] + int(source[3:-1])
        torch.testing.assert_close(after[:, level, child], after[:, level, origin])
    if head != "tied":  # a per-level softmax: every position's own level, new tokens included, and nothing else
        ends = N_SPECIAL + np.cumsum([0, *new.sizes])
        for level in range(new.n_levels):
            open_ = after[0, level] > torch.finfo(after.dtype).min
            assert open_.nonzero().flatten().tolist() == list(range(ends[level], ends[level + 1]))


def test_tiger_fine_tune_trains_the_sid_rows_and_lora_only():
    """One step of the fine-tune's loss: the SID rows of the embedding table and of the untied per-level output layer
    move (a split token's children can be told apart), the special and user-token rows and every non-LoRA weight
    stay, and LoRA sits on T5's attention projections."""
    old, new, parent = small_codebooks()
    model = small_tiger(old, "level")
    rebalanced_tiger(model, old, new, parent, seed=0, noise=1e-3)
    end = N_SPECIAL + new.vocab_size
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if "shared" not in n and "lm_head" not in n}
    tables = {"shared": model.shared.weight.detach().clone(), "lm_head": model.lm_head.weight.detach().clone()}
    model, groups = prepare_trainable(model, CrabConfig(params="lora"), N_SPECIAL, end)
    names = [n for n, _ in model.named_modules() if n.endswith("lora_A")]
    assert {n.split(".")[-2] for n in names} == {"q", "k", "v", "o"}
    tokens = item_tokens(new.token_ids())
    rows = np.arange(16)
    ids, mask = encode_inputs(model.config, rows, np.tile(rows[:3], (16, 1)), np.full(16, 3), tokens)
    batch = {"ids": ids, "mask": mask, "labels": make_labels(rows, tokens)}
    opt = torch.optim.AdamW(groups, lr=1e-2)
    crab_loss(hierarchy(new), 0.2, False, rec=tiger_loss)(model, batch).backward()
    opt.step()
    base = model.get_base_model()
    for name, start in tables.items():
        now = getattr(base, name).weight.detach()
        assert torch.equal(now[:N_SPECIAL], start[:N_SPECIAL]) and torch.equal(now[end:], start[end:]), name
        new_rows = [N_SPECIAL + new.offsets[lv] + code for lv in range(new.n_levels)
                    for code in range(old.sizes[lv], new.sizes[lv])]  # fmt: skip
        assert not torch.allclose(now[new_rows], start[new_rows]), name
    for name, value in base.named_parameters():
        key = name.replace(".base_layer", "")
        if key in frozen:
            assert torch.equal(value.detach(), frozen[key]), name
