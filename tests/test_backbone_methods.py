"""CRAB, RW and D²LR on a pretrained backbone (``--backbone``), with the tiny random Llama of ``test_backbone``
standing in for the LLM: CRAB's tokenizer and embedding rows, L_T on the backbone's SID rows, the frozen vocabulary,
and every method trained and evaluated end to end through the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from crabrec.config import CrabConfig
from crabrec.crab.alignment import alignment_loss, expand_embeddings, hierarchy
from crabrec.crab.finetune import crab_loss, prepare_trainable
from crabrec.crab.rebalance import rebalance
from crabrec.errors import CrabError
from crabrec.models.backbone import (
    decoder_io,
    load_backbone,
    load_tokenizer,
    rebalanced_tokenizer,
    sid_token_names,
)
from crabrec.models.decoder import encode_rows, label_targets

from .conftest import ROOT, TINY, cli
from .test_backbone import small_codebook, tiny_llm


@pytest.fixture
def rebalanced(tmp_path):
    """A backbone holding the SID tokens of a small codebook, merged as MOR saves it, and a rebalancing of it."""
    from crabrec.models.backbone import export_backbone

    cb = small_codebook()
    rng = np.random.default_rng(0)
    cb.residuals = [rng.normal(size=(cb.n_items, 4)).astype(np.float32) for _ in range(3)]
    llm = tiny_llm(tmp_path / "llm")
    model, tokenizer, base = load_backbone(llm, list(cb.sizes), seed=0)
    export_backbone(tokenizer)(model, tmp_path / "mor")
    out = rebalance(cb, rng.integers(0, 30, cb.n_items), CrabConfig(ratio=0.5), 0, progress=False)
    return cb, out, llm, tmp_path / "mor", base


def load_mor(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path)


def test_rebalanced_tokenizer_keeps_each_level_contiguous_and_the_rows_follow_the_names(rebalanced):
    cb, out, llm, mor, base = rebalanced
    new = out.codebook
    assert new.vocab_size > cb.vocab_size
    tokenizer = rebalanced_tokenizer(llm, base, list(new.sizes))
    io = decoder_io(new, tokenizer)  # checks every SID token is present and contiguous
    assert io.base == base
    assert tokenizer.convert_ids_to_tokens(list(range(base, base + new.vocab_size))) == sid_token_names(new.sizes)

    model = load_mor(mor)
    old_tok = load_tokenizer(mor)
    before = model.get_input_embeddings().weight.detach().clone()
    expand_embeddings(model, cb, new, out.parent, seed=0, noise=0.0, base=base)
    after = model.get_input_embeddings().weight.detach()
    assert after.shape[0] == len(tokenizer)
    assert torch.equal(after[:base], before[:base])  # the pretrained vocabulary is untouched
    for name in sid_token_names(cb.sizes):  # an old SID token keeps its row under its name
        assert torch.equal(after[tokenizer.convert_tokens_to_ids(name)], before[old_tok.convert_tokens_to_ids(name)])
    for name, parent in out.parent.items():  # a new token starts as its original token
        assert torch.equal(after[tokenizer.convert_tokens_to_ids(name)], before[old_tok.convert_tokens_to_ids(parent)])
    assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


def test_a_backbone_tokenizer_with_sid_tokens_of_its_own_is_a_clear_error(rebalanced):
    _, out, _, mor, base = rebalanced
    with pytest.raises(CrabError, match="without SID tokens of its own"):
        rebalanced_tokenizer(mor, base, list(out.codebook.sizes))


def test_crab_step_on_a_backbone_trains_sid_rows_only_and_lt_sees_them(rebalanced):
    cb, out, llm, mor, base = rebalanced
    new = out.codebook
    tokenizer = rebalanced_tokenizer(llm, base, list(new.sizes))
    model = load_mor(mor)
    expand_embeddings(model, cb, new, out.parent, seed=0, base=base)
    model, groups = prepare_trainable(model, CrabConfig(), base)
    h = hierarchy(new, base)
    weight = model.get_input_embeddings().weight
    literal = torch.zeros(())
    for level in range(new.semantic_levels - 1):  # L_T by names, through the tokenizer
        for kids in _named_children(new, level).values():
            rows = weight[tokenizer.convert_tokens_to_ids(kids)]
            literal = literal + ((rows - rows.mean(0)) ** 2).sum(1).mean()
    torch.testing.assert_close(alignment_loss(weight, h), literal)

    io = decoder_io(new, tokenizer)
    hist, n, target = np.array([[0, 1], [2, 3]]), np.array([2, 2]), np.array([4, 5])
    ids, mask, labels = encode_rows(hist, n, target, io.tokens, io.train_prompt)
    vocab = weight.detach()[:base].clone()
    sids = weight.detach()[base:].clone()
    lora = {k: v.detach().clone() for k, v in model.named_parameters() if "lora_B" in k}
    opt = torch.optim.AdamW(groups, lr=1e-2)
    crab_loss(h, 0.2, False)(model, {"ids": ids, "mask": mask, "labels": labels}).backward()
    opt.step()
    after = model.get_input_embeddings().weight.detach()
    assert torch.equal(after[:base], vocab)
    assert not torch.allclose(after[base:], sids)
    assert model.get_base_model().get_output_embeddings().weight.data_ptr() == weight.data_ptr()
    assert lora and any(not torch.equal(v, dict(model.named_parameters())[k]) for k, v in lora.items())


def _named_children(cb, level: int) -> dict:
    letters = cb.prefixes
    out = {}
    for parent, kids in cb.children(level).items():
        if len(kids) > 1:
            out[(letters[level], parent)] = [f"<{letters[level + 1]}_{k}>" for k in kids]
    return out


def test_backbone_rows_label_every_answer_token_with_the_target():
    """RW and D²LR weigh a backbone's answer (SID tokens, then its end tokens) by the target item."""
    cb = small_codebook()
    ids, mask, labels = encode_rows(
        np.array([[0, 1]]), np.array([2]), np.array([3]), cb.token_ids() + 100, _prompt_with_two_end_tokens()
    )
    item, level = label_targets(labels, np.array([3]))
    on = labels[0] != -100
    assert (item[0][on] == 3).all() and level[0][on].tolist() == [0, 1, 2, 3, 4]


def _prompt_with_two_end_tokens():
    from crabrec.models.decoder import Prompt

    return Prompt(head=(1, 2), sep=(3,), tail=(4,), answer_end=(5, 6))


def test_crab_rw_and_d2lr_train_and_evaluate_on_a_tiny_backbone(small_office, tmp_path, capsys):
    llm = tiny_llm(tmp_path / "llm")
    common = ["--set", f"data.path={small_office}", "--set", f"runs_dir={tmp_path / 'runs'}", "--name", "bb", *TINY,
              "--set", "train.epochs=1", "--set", "train.batch_size=64", "--set", "evaluate.max_samples=60",
              "--set", "train.valid_samples=40", "--backbone", str(llm)]  # fmt: skip
    for method in ("crab", "rw", "d2lr"):
        code, _ = cli(["train", "--method", method, *common])
        assert code == 0, capsys.readouterr().err
    run = tmp_path / "runs" / "bb"
    new = json.loads((run / "crab" / "codebook.json").read_text())
    tokenizer = load_tokenizer(run / "models" / "crab" / "model")
    base = tokenizer.convert_tokens_to_ids("<a_0>")
    names = sid_token_names(new["sizes"])
    assert tokenizer.convert_ids_to_tokens(list(range(base, base + len(names)))) == names
    assert sum(new["sizes"]) > sum(json.loads((run / "sid" / "codebook.json").read_text())["sizes"])
    for method in ("mor", "crab", "rw", "d2lr"):
        metrics = json.loads((run / "models" / method / "metrics.json").read_text())
        assert 0.0 <= metrics["HR@10"] <= 1.0 and metrics["DGU@10"] >= 0.0
        assert metrics["test_rows"] == 60  # evaluate.max_samples of the 135 test users
    assert json.loads((run / "models" / "rw" / "group_weights.json").read_text())["beta"] == 1.0

    code, _ = cli(["train", "--method", "tiger", *common])
    assert code == 2 and "--backbone: for the methods built on the MOR decoder" in capsys.readouterr().err


def test_crab_on_a_backbone_without_item_text_clusters_on_the_backbone_sid_rows(beauty_slice, tmp_path):
    from .conftest import ids_only_args

    args = [*ids_only_args(beauty_slice, tmp_path), "--set", "train.epochs=1", "--set", "evaluate.max_samples=40",
            "--set", "train.valid_samples=30", "--backbone", str(tiny_llm(tmp_path / "llm"))]  # fmt: skip
    assert cli(["train", "--method", "crab", *args])[0] == 0
    run = tmp_path / "ids"
    summary = json.loads((run / "stages" / "rebalance.json").read_text())["summary"]
    assert summary["vectors"].startswith("MOR token embeddings") and summary["split"] > 0
    assert 0.0 <= json.loads((run / "models" / "crab" / "metrics.json").read_text())["HR@10"] <= 1.0


def test_the_office_llm_config_and_the_smoke_layer_merge_in_order():
    """`-c configs/office_llm.yaml -c configs/smoke.yaml`: the later layer wins key by key. The layered run itself
    (every method of Table 1 on a tiny random Llama) is the GPU playbook's dry run, tests/test_gpu_playbook.py."""
    from crabrec.config import load_config

    layered = load_config([str(ROOT / "configs" / "office_llm.yaml"), str(ROOT / "configs" / "smoke.yaml")])
    assert layered.train.lr == 0.003 and layered.train.weight_decay == 0.01 and layered.crab.gamma == 0.2
