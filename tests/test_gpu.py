"""GPU execution (skipped without CUDA): decoding on the GPU agrees with the CPU, and the training loop puts the
model and its batches on the GPU. The whole suite also runs on a GPU machine (the end-to-end run then trains there)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crabrec.config import TrainConfig
from crabrec.decode.beam import beam_search
from crabrec.decode.trie import SidTrie
from crabrec.models.decoder import N_SPECIAL, build_decoder, encode_rows, item_tokens, target_loss
from crabrec.sid.codebook import Codebook

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _setup(seed: int = 0):
    rng = np.random.default_rng(seed)
    codes = np.unique(rng.integers(0, 16, (300, 3)), axis=0)
    cb = Codebook(codes=codes, sizes=[16] * 3, item_ids=[str(i) for i in range(len(codes))])
    model = build_decoder(N_SPECIAL + cb.vocab_size, TrainConfig(hidden=64, layers=2, heads=4, ff=128), seed=seed)
    return rng, cb, model.eval()


@pytest.mark.parametrize("shared_prefix", [True, False])
def test_beam_search_on_gpu_matches_cpu(shared_prefix):
    rng, cb, model = _setup()
    trie, tokens = SidTrie.build(cb), item_tokens(cb.token_ids())
    ids, mask, _ = encode_rows(rng.integers(0, cb.n_items, (16, 8)), rng.integers(1, 9, 16), None, tokens)
    cpu = beam_search(model, trie, ids, mask, 20, shared_prefix=shared_prefix)
    gpu = beam_search(model.cuda(), trie, ids.cuda(), mask.cuda(), 20, shared_prefix=shared_prefix)
    assert gpu[0].is_cuda
    torch.testing.assert_close(gpu[1].cpu(), cpu[1], rtol=1e-3, atol=1e-3)
    agree = (gpu[0].cpu() == cpu[0]).float().mean()
    assert agree > 0.95  # TF32/bf16-free fp32 on both, but kernels sum in another order: rare near-tie swaps


def test_training_loop_runs_on_gpu(tmp_path):
    from crabrec.config import TrainConfig
    from crabrec.train.loop import Rows, train

    rng, cb, model = _setup(1)
    tokens = item_tokens(cb.token_ids())
    hist, length, target = rng.integers(0, cb.n_items, (256, 6)), rng.integers(1, 7, 256), rng.integers(0, 20, 256)
    seen: list[torch.device] = []

    def make(rows):
        ids, mask, labels = encode_rows(hist[rows], length[rows], target[rows], tokens)
        return {"ids": ids, "mask": mask, "labels": labels}

    def loss(m, batch):
        seen.append(batch["ids"].device)
        return target_loss(m, batch["ids"], batch["mask"], batch["labels"])

    cfg = TrainConfig(epochs=3, batch_size=64, lr=3e-3, warmup_steps=2)
    result = train(model, Rows(256, make), loss, lambda m: float(len(seen)), cfg, tmp_path, seed=0)
    assert all(d.type == "cuda" for d in seen) and result.epochs_run == 3
    assert next(model.parameters()).is_cuda
    assert result.history[-1]["loss"] < result.history[0]["loss"]
    assert (tmp_path / "model" / "model.safetensors").is_file()


def test_saved_models_are_loaded_onto_the_gpu_for_evaluation(tmp_path):
    from crabrec.rankers import load_generator

    _, cb, model = _setup(2)
    model.save_pretrained(tmp_path / "model")
    assert next(load_generator(tmp_path / "model", cb).parameters()).is_cuda


def test_cuda_graphs_replay_tiger_steps_and_train_the_eager_model(tmp_path, caplog):
    """cuda_graphs on a GPU: TIGER's steps are recorded once per shape and replayed, and the model trained is the
    eager one (to the rounding of the optimizer's on-device step counts)."""
    from safetensors.torch import load_file

    from crabrec.config import TigerSection
    from crabrec.models.tiger import build_tiger, encode_inputs, make_labels, tiger_loss
    from crabrec.train.loop import Rows, train

    sizes = [8, 8, 3]
    rng = np.random.default_rng(0)
    offsets = np.cumsum([0, *sizes[:-1]])
    tokens = item_tokens(np.stack([rng.integers(0, s, 40) + o for s, o in zip(sizes, offsets)], axis=1))
    hist, length, target = rng.integers(0, 40, (256, 3)), rng.integers(1, 4, 256), rng.integers(0, 40, 256)
    section = TigerSection(d_model=32, layers=2, heads=2, d_kv=16, ff=64, dropout=0.0, user_bins=0, init="random")
    weights = {}
    for graphs in (False, True):
        model = build_tiger(sizes, section, seed=1)

        def make(rows, model=model):
            ids, mask = encode_inputs(model.config, rows, hist[rows], length[rows], tokens, 16)
            return {"ids": ids, "mask": mask, "labels": make_labels(target[rows], tokens)}

        cfg = TrainConfig(epochs=3, batch_size=64, lr=3e-3, warmup_steps=2, cuda_graphs=graphs)
        with caplog.at_level("INFO", logger="crabrec"):
            result = train(model, Rows(256, make), tiger_loss, lambda m: 0.0, cfg, tmp_path / str(graphs), 0)
        assert result.history[-1]["loss"] < result.history[0]["loss"]
        weights[graphs] = load_file(tmp_path / str(graphs) / "model" / "model.safetensors")
    assert any("1 graphs recorded, 11 steps replayed, 1 eager" in r.getMessage() for r in caplog.records)
    for name, value in weights[False].items():
        torch.testing.assert_close(weights[True][name], value, rtol=1e-3, atol=1e-4)


def test_a_bfloat16_backbone_trains_under_autocast_validates_and_saves_float32(tmp_path):
    """``train.backbone_dtype=bfloat16`` on a GPU: the frozen weights bfloat16, LoRA and the SID rows float32, trained
    under the loop's bf16 autocast; validation decodes beams with the model as trained; the saved model is float32
    and decodes the same beams."""
    from safetensors.torch import load_file

    from crabrec.models.backbone import decoder_io, export_backbone, load_backbone, tiny_backbone
    from crabrec.rankers import load_generator
    from crabrec.train.loop import Rows, train

    rng = np.random.default_rng(3)
    codes = np.unique(rng.integers(0, 6, (40, 3)), axis=0)
    cb = Codebook(codes=codes, sizes=[6, 6, 6], item_ids=[str(i) for i in range(len(codes))])
    model, tokenizer, _ = load_backbone(tiny_backbone(tmp_path / "llm"), list(cb.sizes), seed=0, dtype="bfloat16")
    io = decoder_io(cb, tokenizer)
    trie = SidTrie.build(cb)
    hist, length, target = rng.integers(0, cb.n_items, (128, 4)), rng.integers(1, 5, 128), np.full(128, 7)
    probe = encode_rows(hist[:8], length[:8], None, io.tokens, io.test_prompt)
    beams = []

    def make(rows):
        ids, mask, labels = encode_rows(hist[rows], length[rows], target[rows], io.tokens, io.train_prompt)
        return {"ids": ids, "mask": mask, "labels": labels}

    def validate(m) -> float:
        device = next(m.parameters()).device
        sid, _ = beam_search(m, trie, probe[0].to(device), probe[1].to(device), 8, io.base)
        beams.append(sid.cpu())
        return 0.0

    loss = lambda m, b: target_loss(m, b["ids"], b["mask"], b["labels"])  # noqa: E731
    cfg = TrainConfig(epochs=2, batch_size=32, lr=2e-2, warmup_steps=0)
    result = train(model, Rows(128, make), loss, validate, cfg, tmp_path / "out", 0, export=export_backbone(tokenizer))
    assert result.history[-1]["loss"] < result.history[0]["loss"] and beams
    params = dict(model.named_parameters())
    assert {p.dtype for p in params.values() if p.requires_grad} == {torch.float32}
    assert {p.dtype for p in params.values() if not p.requires_grad} == {torch.bfloat16}
    saved = tmp_path / "out" / "model"
    assert {w.dtype for w in load_file(saved / "model.safetensors").values()} == {torch.float32}
    merged = load_generator(saved, cb)
    assert next(merged.parameters()).is_cuda
    sid, _ = beam_search(merged, trie, probe[0].cuda(), probe[1].cuda(), 8, io.base)
    assert sid.shape == beams[-1].shape


def test_a_bfloat16_backbones_row_steps_replay_as_cuda_graphs_and_train_as_eager_ones(tmp_path, caplog):
    """cuda_graphs on an LLM backbone's prompt rows (frozen weights bfloat16, under autocast): each padded shape is
    recorded once and replayed, nothing fails to record, and the losses follow the eager run's."""
    from crabrec.models.backbone import decoder_io, load_backbone, tiny_backbone
    from crabrec.models.decoder import answer_width
    from crabrec.train.loop import Rows, train

    rng = np.random.default_rng(3)
    codes = np.unique(rng.integers(0, 6, (40, 3)), axis=0)
    cb = Codebook(codes=codes, sizes=[6, 6, 6], item_ids=[str(i) for i in range(len(codes))])
    path = tiny_backbone(tmp_path / "llm")
    n = cb.n_items
    hist, length, target = rng.integers(0, n, (128, 4)), rng.integers(1, 5, 128), rng.integers(0, n, 128)
    losses = {}
    for graphs in (False, True):
        model, tokenizer, _ = load_backbone(path, list(cb.sizes), seed=0, dtype="bfloat16")
        io = decoder_io(cb, tokenizer)

        def make(rows, io=io):
            ids, mask, labels = encode_rows(hist[rows], length[rows], target[rows], io.tokens, io.train_prompt, 32)
            return {"ids": ids, "mask": mask, "labels": labels, "answer_width": answer_width(labels)}

        def loss(m, b):
            return target_loss(m, b["ids"], b["mask"], b["labels"], width=b["answer_width"])

        cfg = TrainConfig(epochs=3, batch_size=32, lr=1e-2, warmup_steps=0, cuda_graphs=graphs)
        with caplog.at_level("INFO", logger="crabrec"):
            result = train(model, Rows(128, make), loss, lambda m: 0.0, cfg, tmp_path / str(graphs), 0)
        losses[graphs] = [h["loss"] for h in result.history]
    said = [r.getMessage() for r in caplog.records]
    assert not [m for m in said if "recording a training step failed" in m], said
    done = [m for m in said if "graphs recorded" in m]
    assert done and " 0 steps replayed" not in done[-1], done
    np.testing.assert_allclose(losses[True], losses[False], rtol=2e-2)
