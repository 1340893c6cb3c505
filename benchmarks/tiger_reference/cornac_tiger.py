"""Train cornac 3.0.1's TIGER on a bundle from ``export.py`` (run with the throw-away cornac environment).

    .venv-cornac/bin/python benchmarks/tiger_reference/cornac_tiger.py BUNDLE.npz OUT.json [--layers 4 ...]

cornac's own model, loop, batches, validation and beam search, with two seams only, both through overrides of its
documented hooks: its tokenizer returns the bundle's semantic IDs (the first levels; cornac's own collision level
then equals the bundle's last level, which is checked), and its validation sessions are the bundle's first
``--valid-samples`` validation rows. Writes per-epoch training loss (mean cross-entropy per SID token) and
validation NDCG@10, and test HR@10 / NDCG@10 on every test row (or the first ``--test-samples``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from cornac.models import TIGER
from settings import add_settings


class Rows:
    """The minimal training-set view cornac's TIGER reads: sessions over (user, item) rows, item features."""

    def __init__(self, b: dict[str, np.ndarray]) -> None:
        offsets, items = b["train_offsets"], b["train_items"]
        n_items = len(b["codes"])
        self.num_users = int(max(b["train_users"].max(), b["valid_user"].max(), b["test_user"].max())) + 1
        self.num_items = n_items
        self.uid_map = {u: u for u in range(self.num_users)}
        self.iid_map = {i: i for i in range(n_items)}
        self.min_rating = self.max_rating = self.global_mean = 1.0
        user = np.repeat(b["train_users"], np.diff(offsets))
        self.uir_tuple = (user, items, np.ones(len(items)))
        self.sessions = {int(u): list(range(offsets[k], offsets[k + 1])) for k, u in enumerate(b["train_users"])}
        self.item_feature = type("Features", (), {"features": b["embeddings"]})()

    def reset(self) -> None:
        pass


class BundleTIGER(TIGER):
    """cornac's TIGER on the bundle's SIDs and validation rows, logging each epoch."""

    def __init__(self, bundle: dict[str, np.ndarray], valid_samples: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.bundle, self.valid_samples, self.log, self._losses = bundle, valid_samples, [], []

    def _tokenize(self, torch, feats_t):  # noqa: ARG002 - the bundle's SIDs instead of cornac's tokenizer
        return self.bundle["codes"][:, :-1].copy()

    def _build_semantic_ids(self, codes):
        super()._build_semantic_ids(codes)
        if not np.array_equal(self.sid_table, self.bundle["codes"]):
            raise SystemExit("cornac's collision level differs from the bundle's: the SIDs would not be the same")

    def _make_lr_scheduler(self, torch, opt):  # the model exists now: log its training loss
        def hook(module, args, loss):
            if module.training:
                self._losses.append((float(loss.detach()) / module.num_levels, args[0].shape[0]))

        self.model.register_forward_hook(hook)
        self._epoch_start = time.perf_counter()
        return super()._make_lr_scheduler(torch, opt)

    def _val_sessions(self, val_set):  # noqa: ARG002
        b, n = self.bundle, self.valid_samples
        return [
            (int(b["valid_user"][r]), [int(i) for i in b["valid_history"][r, : b["valid_length"][r]]]
             + [int(b["valid_target"][r])])
            for r in range(min(n, len(b["valid_target"])))
        ]  # fmt: skip

    def _validate(self, val_sessions, metric):
        seconds = time.perf_counter() - self._epoch_start
        score = super()._validate(val_sessions, metric)
        loss = sum(v * n for v, n in self._losses) / max(1, sum(n for _, n in self._losses))
        self.log.append({"epoch": len(self.log) + 1, "loss": loss, "valid_ndcg@10": score, "train_seconds": seconds})
        print(json.dumps(self.log[-1]), flush=True)
        self._losses = []
        self._epoch_start = time.perf_counter()
        return score


def test_metrics(model: BundleTIGER, b: dict[str, np.ndarray], samples: int, k: int = 10) -> dict[str, float]:
    """HR@k / NDCG@k on the first ``samples`` test rows (0: every one), each ranked by cornac's own scoring."""
    hits, gains = [], []
    rows = len(b["test_target"])
    for r in range(min(samples, rows) if samples else rows):
        history = [int(i) for i in b["test_history"][r, : b["test_length"][r]]]
        scores = model.score(int(b["test_user"][r]), history)
        top = np.argsort(-scores, kind="stable")[:k]
        at = np.flatnonzero(top == b["test_target"][r])
        hits.append(float(len(at) > 0))
        gains.append(1.0 / np.log2(at[0] + 2) if len(at) else 0.0)
    return {f"HR@{k}": float(np.mean(hits)), f"NDCG@{k}": float(np.mean(gains))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=2024)
    add_settings(ap)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    b = dict(np.load(args.bundle))
    model = BundleTIGER(
        b, args.valid_samples, tokenizer="rkmeans", rqvae_num_levels=len(b["level_sizes"]) - 1,
        rqvae_codebook_size=int(b["level_sizes"][0]), d_model=args.d_model, d_ff=args.ff, num_heads=args.heads,
        d_kv=args.d_kv, num_enc_layers=args.layers, num_dec_layers=args.layers, dropout=args.dropout,
        max_len=int(b["max_history"]), n_epochs=args.epochs, learning_rate=args.lr, weight_decay=args.weight_decay,
        batch_size=args.batch, lr_schedule=args.schedule, warmup_steps=args.warmup, model_selection="best",
        val_metric="ndcg", val_eval_every=1, val_k=10, n_beams=args.beam, seed=args.seed, device="cpu",
    )  # fmt: skip
    start = time.perf_counter()
    model.fit(Rows(b), val_set=Rows(b))
    fit_seconds = time.perf_counter() - start
    best = max(model.log, key=lambda e: e["valid_ndcg@10"]) if model.log else {}
    result = {
        "implementation": "cornac 3.0.1",
        "settings": vars(args) | {"bundle": str(args.bundle), "out": str(args.out)},
        "epochs": model.log,
        "best_epoch": best.get("epoch"),
        "fit_seconds": fit_seconds,
        "parameters": sum(p.numel() for p in model.model.parameters()),
        "test": test_metrics(model, b, args.test_samples),
    }
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result["test"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
