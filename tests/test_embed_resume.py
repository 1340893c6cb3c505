"""A model's item encoding, a batch at a time: the same vectors as one call, and an interrupted one goes on from the
batches it kept (118,000 items take most of an hour on 2 CPU cores)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from crabrec import embed
from crabrec.config import EmbedConfig
from crabrec.embed import Resume, encode_batches

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
        encode_batches(stopped, TEXTS, cfg, progress=False, resume=Resume(saved, "k"))
    assert saved.is_file() and len(np.load(saved)["vectors"]) == 24  # the three finished batches

    again = Counting()
    with caplog.at_level(logging.INFO, logger="crabrec"):
        vectors, kept = encode_batches(again, TEXTS, cfg, progress=False, resume=Resume(saved, "k"))
    assert kept == 24 and "24 of 50 items encoded before; encoding on from there" in caplog.text
    assert np.array_equal(vectors, whole) and len(again.calls) == 4  # the batches left: 50 = 6 x 8 + 2
    assert sorted(t for call in stopped.calls + again.calls for t in call) == sorted(TEXTS)


@pytest.mark.parametrize("change", ["texts", "key", "batch_size", "fresh", "unreadable"])
def test_kept_batches_of_another_encoding_are_not_used(tmp_path, caplog, change):
    cfg, saved = EmbedConfig(batch_size=8), tmp_path / "embeddings.partial.npz"
    with pytest.raises(KeyboardInterrupt):
        encode_batches(Counting(stop_at=2), TEXTS, cfg, progress=False, resume=Resume(saved, "k"))
    texts = [*TEXTS[:-1], "another item"] if change == "texts" else TEXTS
    if change == "unreadable":
        saved.write_bytes(saved.read_bytes()[:100])  # cut short (copied from a full disk, say)
    cfg = EmbedConfig(batch_size=5) if change == "batch_size" else cfg
    model, resume = Counting(), Resume(saved, "other" if change == "key" else "k", fresh=change == "fresh")
    with caplog.at_level(logging.INFO, logger="crabrec"):
        vectors, kept = encode_batches(model, texts, cfg, progress=False, resume=resume)
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
    encode_batches(Counting(), TEXTS, EmbedConfig(batch_size=8), progress=False, resume=Resume(saved, "k"))
    assert seen == [8, 16, 24, 32, 40, 48]  # after every batch but the last (the caller writes the whole)


def test_the_embed_stage_goes_on_after_an_interruption_and_removes_what_it_kept(small_office, tmp_path, monkeypatch):
    """Through the CLI with the bundled encoder: Ctrl-C in the third batch, then the same command again."""
    from sentence_transformers import SentenceTransformer

    from tests.conftest import cli

    base = ["run", "--data", str(small_office), "--name", "r", "--until", "embed", "--set", "data.kcore=2"]
    base += ["--set", "embed.batch_size=32", "--set", "embed.fields=[title]"]
    assert cli([*base, "--set", f"runs_dir={tmp_path / 'clean'}"])[0] == 0
    clean, run = tmp_path / "clean" / "r", tmp_path / "stopped" / "r"

    real, calls = SentenceTransformer.encode, []

    def stopping(self, texts, **kwargs):
        calls.append(len(texts))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, texts, **kwargs)

    monkeypatch.setattr(SentenceTransformer, "encode", stopping)
    assert cli([*base, "--set", f"runs_dir={tmp_path / 'stopped'}"])[0] == 130
    assert len(np.load(run / "embeddings.partial.npz")["vectors"]) == 64 and not (run / "embeddings.npy").exists()
    monkeypatch.setattr(SentenceTransformer, "encode", real)
    assert cli([*base, "--set", f"runs_dir={tmp_path / 'stopped'}"])[0] == 0
    assert not (run / "embeddings.partial.npz").exists()
    assert np.array_equal(np.load(run / "embeddings.npy"), np.load(clean / "embeddings.npy"))
