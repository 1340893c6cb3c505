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
