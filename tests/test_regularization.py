"""Decoder regularization (dropout hooks, label smoothing) and the learning-rate schedules of the training loop."""

from __future__ import annotations

import math

import numpy as np
import torch

from crabrec.config import TrainConfig
from crabrec.models.decoder import (
    N_SPECIAL,
    add_dropout,
    build_decoder,
    encode_rows,
    item_tokens,
    target_loss,
)
from crabrec.train.loop import Rows, train

TOKENS = item_tokens(np.arange(30).reshape(10, 3))


def _batch(n: int = 8, seed: int = 0):
    rng = np.random.default_rng(seed)
    return encode_rows(rng.integers(0, 10, (n, 4)), rng.integers(1, 5, n), rng.integers(0, 10, n), TOKENS)


def _decoder(**kw):
    return build_decoder(N_SPECIAL + 30, TrainConfig(hidden=16, layers=2, heads=2, ff=32, **kw), seed=0)


def test_dropout_acts_in_training_only_and_leaves_weights_alone():
    ids, mask, labels = _batch()
    plain, dropped = _decoder(), _decoder(dropout=0.3)
    for a, b in zip(plain.state_dict().values(), dropped.state_dict().values()):
        assert torch.equal(a, b)  # same seed, same weights: the hooks add no parameters
    plain.eval(), dropped.eval()
    torch.testing.assert_close(target_loss(plain, ids, mask, labels), target_loss(dropped, ids, mask, labels))
    dropped.train()
    torch.manual_seed(1)
    first = target_loss(dropped, ids, mask, labels)
    torch.manual_seed(2)
    assert not torch.equal(first, target_loss(dropped, ids, mask, labels))  # random masks differ in training
    # every residual branch and the embeddings are hooked, once even if add_dropout is called again
    hooked = [m for m in dropped.modules() if m._forward_hooks]
    add_dropout(dropped)
    assert len(hooked) == 1 + 2 * 2 and all(len(m._forward_hooks) == 1 for m in hooked)


def test_label_smoothing_matches_the_smoothed_cross_entropy():
    ids, mask, labels = _batch()
    model = _decoder(label_smoothing=0.1).train()
    logits = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)).logits
    gold = labels[:, 1:]
    keep = gold != -100
    logp = torch.log_softmax(logits[:, :-1].float(), -1)[keep]
    v = logp.shape[-1]
    by_hand = -(0.9 * logp.gather(1, gold[keep][:, None])[:, 0] + 0.1 * logp.sum(-1) / v).mean()
    torch.testing.assert_close(target_loss(model, ids, mask, labels), by_hand, atol=1e-5, rtol=1e-5)
    model.eval()  # evaluation losses are never smoothed
    nll = -logp.gather(1, gold[keep][:, None]).mean()
    torch.testing.assert_close(target_loss(model, ids, mask, labels), nll, atol=1e-5, rtol=1e-5)


def _lrs(tmp_path, scores: list[float], **cfg) -> tuple[list[float], int]:
    ids, mask, labels = _batch(16)
    model = _decoder()
    seen: list[float] = []
    it = iter(scores)

    def loss(m, batch):
        seen.append(m._opt.param_groups[0]["lr"])
        return target_loss(m, batch["ids"], batch["mask"], batch["labels"])

    orig = torch.optim.AdamW.__init__

    def spy(self, *a, **k):  # keep a handle on the optimizer to read its learning rate each step
        orig(self, *a, **k)
        model._opt = self

    torch.optim.AdamW.__init__ = spy
    try:
        config = TrainConfig(**{"batch_size": 8, "warmup_steps": 0, "lr": 0.01, **cfg})
        rows = Rows(16, lambda r: {"ids": ids[r], "mask": mask[r], "labels": labels[r]})
        result = train(model, rows, loss, lambda m: next(it), config, tmp_path, 0)
    finally:
        torch.optim.AdamW.__init__ = orig
    return seen, result.epochs_run


def test_plateau_schedule_shrinks_after_bad_epochs_only(tmp_path):
    lrs, epochs = _lrs(tmp_path, [0.1, 0.2, 0.1, 0.3, 0.0], epochs=5, patience=5, schedule="plateau")
    per_epoch = lrs[::2]  # 2 steps per epoch
    assert epochs == 5
    assert np.allclose(per_epoch, [0.01, 0.01, 0.01, 0.005, 0.005])


def test_cosine_and_inverse_sqrt_schedules(tmp_path):
    lrs, _ = _lrs(tmp_path / "c", [0.1] * 2, epochs=2, patience=5, schedule="cosine")
    assert np.allclose(lrs, [0.01 * 0.5 * (1 - math.cos(math.pi * (4 - s) / 4)) for s in range(4)])
    lrs, _ = _lrs(tmp_path / "i", [0.1] * 2, epochs=2, patience=5, schedule="inverse_sqrt", warmup_steps=0)
    assert np.allclose(lrs, [0.01 * math.sqrt(1 / (s + 1)) for s in range(4)])


def test_time_budget_stops_after_the_epoch_that_reaches_it(tmp_path):
    _, epochs = _lrs(tmp_path, [0.1] * 9, epochs=9, patience=9, max_minutes=1e-9)
    assert epochs == 1


def test_fast_dropout_rate_scale_gradient_and_seeding():
    from crabrec.models.dropout import BITS, FastDropout, dropout

    x = torch.ones(200, 500, requires_grad=True)
    torch.manual_seed(0)
    y = dropout(x, 0.3, True)
    kept = y != 0
    threshold = round(0.3 * BITS)
    scale = BITS / (BITS - threshold)
    assert abs(1 - kept.float().mean().item() - threshold / BITS) < 0.005  # 100,000 draws: the rate is p
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], scale))  # kept values scaled by 1/(1 − p')
    y.sum().backward()
    torch.testing.assert_close(x.grad, y.detach())  # d(sum y)/dx = the scaled mask
    torch.manual_seed(0)
    assert torch.equal(dropout(x, 0.3, True), y)  # the torch seed fixes the mask
    assert not torch.equal(dropout(x, 0.3, True), y)  # the next call draws a new one
    assert dropout(x, 0.3, False) is x and dropout(x, 0.0, True) is x
    assert torch.equal(dropout(x, 1.0, True), torch.zeros_like(x))
    module = FastDropout(0.3)
    assert module.eval()(x) is x


def test_tiger_dropout_modules_use_the_fast_mask():
    from crabrec.config import TigerSection
    from crabrec.models.dropout import FastDropout, use_fast_dropout
    from crabrec.models.tiger import build_tiger

    model = build_tiger([30], TigerSection(d_model=16, layers=1, heads=2, d_kv=8, ff=32, user_bins=4), seed=0)
    drops = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert drops and all(type(m) is FastDropout and m.p == 0.1 for m in drops)
    use_fast_dropout(model, torch.nn.Dropout)  # and back to torch's own modules
    back = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert len(back) == len(drops) and all(type(m) is torch.nn.Dropout and m.p == 0.1 for m in back)
