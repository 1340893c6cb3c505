"""The shared training loop: resuming a checkpoint only under the configuration that wrote it, never when forced."""

from __future__ import annotations

import numpy as np

from crabrec.config import TrainConfig
from crabrec.models.decoder import N_SPECIAL, build_decoder, encode_rows, item_tokens, target_loss
from crabrec.train.loop import Rows, train


def _run(tmp_path, epochs: int, fingerprint: str, fresh: bool = False) -> tuple[int, list[dict]]:
    rng = np.random.default_rng(0)
    tokens = item_tokens(np.arange(30).reshape(10, 3))
    model = build_decoder(N_SPECIAL + 30, TrainConfig(hidden=16, layers=1, heads=2, ff=32), seed=0)
    hist, length, target = rng.integers(0, 10, (32, 4)), rng.integers(1, 5, 32), rng.integers(0, 10, 32)
    steps = []

    def make(rows):
        ids, mask, labels = encode_rows(hist[rows], length[rows], target[rows], tokens)
        return {"ids": ids, "mask": mask, "labels": labels}

    def loss(m, batch):
        steps.append(1)
        return target_loss(m, batch["ids"], batch["mask"], batch["labels"])

    cfg = TrainConfig(epochs=epochs, batch_size=16, patience=5, warmup_steps=0)
    result = train(
        model, Rows(32, make), loss, lambda m: float(len(steps)), cfg, tmp_path, 0, fingerprint=fingerprint, fresh=fresh
    )
    return len(steps), result.history


def test_checkpoint_resumes_only_under_the_same_fingerprint(tmp_path):
    assert _run(tmp_path, 1, "config-a")[0] == 2  # 32 rows / 16 = 2 steps per epoch
    steps, history = _run(tmp_path, 2, "config-a")  # same configuration: epoch 1 is not redone
    assert steps == 2 and [h["epoch"] for h in history] == [1, 2]
    steps, history = _run(tmp_path, 2, "config-b")  # another configuration: its checkpoint is not reused
    assert steps == 4 and [h["epoch"] for h in history] == [1, 2]


def test_forced_rerun_trains_from_scratch(tmp_path):
    _run(tmp_path, 2, "config-a")
    steps, history = _run(tmp_path, 2, "config-a", fresh=True)  # same configuration, but `--force`: all epochs again
    assert steps == 4 and [h["epoch"] for h in history] == [1, 2]
    assert _run(tmp_path, 2, "config-a")[0] == 0  # the forced run's own checkpoint is resumed as usual


def test_keep_last_never_validates_and_keeps_the_last_epoch(tmp_path):
    """keep=last (CRAB's fine-tune, as the paper): every epoch runs, none is validated, the last one is the model;
    keep=best under a validation that only worsens stops early and keeps epoch 1."""
    import torch

    from crabrec.train.loop import training_summary

    def run(keep: str, out):
        tokens = item_tokens(np.arange(30).reshape(10, 3))
        model = build_decoder(N_SPECIAL + 30, TrainConfig(hidden=16, layers=1, heads=2, ff=32), seed=0)
        rng = np.random.default_rng(0)
        hist, length, target = rng.integers(0, 10, (32, 4)), rng.integers(1, 5, 32), rng.integers(0, 10, 32)

        def make(rows):
            ids, mask, labels = encode_rows(hist[rows], length[rows], target[rows], tokens)
            return {"ids": ids, "mask": mask, "labels": labels}

        calls = []

        def validate(m):
            calls.append(1)
            return 1.0 / len(calls)  # worse every epoch

        from crabrec.config import CrabConfig, Overlay

        loop = TrainConfig(batch_size=16, patience=2, warmup_steps=0)
        cfg = Overlay(loop, CrabConfig(epochs=4, lr=1e-3, keep=keep), ("epochs", "lr", "keep"))
        loss = lambda m, b: target_loss(m, b["ids"], b["mask"], b["labels"])  # noqa: E731
        result = train(model, Rows(32, make), loss, validate, cfg, out, 0)
        return model, result, calls

    model, result, calls = run("last", tmp_path / "last")
    assert calls == [] and [h["epoch"] for h in result.history] == [1, 2, 3, 4]
    assert all(h["valid_ndcg@10"] is None for h in result.history)
    summary = training_summary(result, tmp_path / "last")
    assert summary["best_epoch"] == 4 and summary["best_valid_ndcg@10"] is None
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "last" / "model")
    for name, p in model.state_dict().items():
        assert torch.equal(saved.state_dict()[name], p), name  # the model after the last epoch
    _, best, calls = run("best", tmp_path / "best")
    assert len(calls) == 3 and best.best_epoch == 1  # two bad epochs after the first: stopped after epoch 3
