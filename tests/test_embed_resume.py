"""A model's item encoding, a batch at a time: the same vectors as one call, and an interrupted one goes on from the
batches it kept (118,000 items take most of an hour on 2 CPU cores)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from crabrec import embed
from crabrec.config import EmbedConfig
from crabrec.embed import encode_batches

TEXTS = [f"item {i} " + "pen paper stapler ink " * (i % 7) for i in range(50)]


class Counting:
    """A stand-in model: each text's vector from its words; records the texts of every call and can stop one."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.calls: list[list[str]] = []
        self.stop_at = stop_at

    def encode(self, texts, batch_size, convert_to_numpy):
        if self.stop_at is not None and len(self.calls) == self.stop_at:
            raise KeyboardInterrupt
        self.calls.append(list(texts))
        return np.array([[len(t), t.count("pen"), hash(t) % 97] for t in texts], np.float32)


def test_batches_give_the_vectors_of_one_call_bit_for_bit():
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(embed.resolve_encoder("all-MiniLM-L6-v2"), device="cpu")
    texts = TEXTS[:40]
    one = model.encode(texts, batch_size=8, convert_to_numpy=True)
    assert np.array_equal(encode_batches(model, texts, EmbedConfig(batch_size=8), progress=False).vectors, one)


def test_an_interrupted_encoding_goes_on_from_its_kept_batches(tmp_path, caplog):
    cfg, saved = EmbedConfig(batch_size=8), tmp_path / "embeddings.partial.npz"
    whole = encode_batches(Counting(), TEXTS, cfg, progress=False).vectors
    stopped = Counting(stop_at=3)
    with pytest.raises(KeyboardInterrupt):
        encode_batches(stopped, TEXTS, cfg, progress=False, saved=saved, key="k")
    assert saved.is_file() and len(np.load(saved)["vectors"]) == 24  # the three finished batches

    again = Counting()
    with caplog.at_level(logging.INFO, logger="crabrec"):
        vectors, kept = encode_batches(again, TEXTS, cfg, progress=False, saved=saved, key="k")
    assert kept == 24 and "24 of 50 items encoded before; encoding on from there" in caplog.text
    assert np.array_equal(vectors, whole) and len(again.calls) == 4  # the batches left: 50 = 6 x 8 + 2
    assert sorted(t for call in stopped.calls + again.calls for t in call) == sorted(TEXTS)


@pytest.mark.parametrize("change", ["texts", "key", "batch_size", "fresh", "unreadable"])
def test_kept_batches_of_another_encoding_are_not_used(tmp_path, caplog, change):
    cfg, saved = EmbedConfig(batch_size=8), tmp_path / "embeddings.partial.npz"
    with pytest.raises(KeyboardInterrupt):
        encode_batches(Counting(stop_at=2), TEXTS, cfg, progress=False, saved=saved, key="k")
    texts = [*TEXTS[:-1], "another item"] if change == "texts" else TEXTS
    if change == "unreadable":
        saved.write_bytes(saved.read_bytes()[:100])  # cut short (copied from a full disk, say)
    cfg = EmbedConfig(batch_size=5) if change == "batch_size" else cfg
    model = Counting()
    with caplog.at_level(logging.INFO, logger="crabrec"):
        vectors, kept = encode_batches(
            model,
            texts,
            cfg,
            progress=False,
            saved=saved,
            key="other" if change == "key" else "k",
            fresh=change == "fresh",
        )
    said = {"fresh": "re-run forced", "unreadable": "unreadable"}.get(change, "another encoding's")
    assert f"embeddings.partial.npz: {said}; encoding from the start" in caplog.text
    assert kept == 0 and sum(len(call) for call in model.calls) == 50
    assert np.array_equal(vectors, encode_batches(Counting(), texts, cfg, progress=False).vectors)


def test_batches_are_kept_every_few_minutes(tmp_path, monkeypatch):
    """Not only on Ctrl-C: a killed process (out of memory, a lost machine) keeps what was last saved."""
    monkeypatch.setattr(embed, "SAVE_EVERY", 0.0)
    saved, seen = tmp_path / "embeddings.partial.npz", []
    real = embed.write_npz
    monkeypatch.setattr(embed, "write_npz", lambda path, **a: (seen.append(len(a["vectors"])), real(path, **a)))
    encode_batches(Counting(), TEXTS, EmbedConfig(batch_size=8), progress=False, saved=saved, key="k")
    assert seen == [8, 16, 24, 32, 40, 48]  # after every batch but the last (the caller writes the whole)
