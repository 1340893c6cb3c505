"""Stages ``embed`` (item text -> ``embeddings.npy``) and ``tokenize`` (embeddings -> ``sid/codebook.json``)."""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from crabrec.config_paths import as_written
from crabrec.errors import CrabError
from crabrec.io import load_npy, write_json, write_npy
from crabrec.pipeline import RunContext, Stage

log = logging.getLogger("crabrec")


def run_embed(ctx: RunContext) -> dict[str, Any]:
    from crabrec.embed import Resume, encode, item_texts

    files = ctx.files
    items = files.load_items()
    if not items.get("has_text", True):
        return skip_embed(ctx, items)
    texts = item_texts(items["text"], ctx.cfg.embed)
    start = time.perf_counter()
    resume = Resume(files.embeddings_partial, ctx.running_key(), ctx.forced)
    vectors, kept = encode(texts, ctx.cfg.embed, resume=resume)
    seconds = time.perf_counter() - start
    encoder = as_written(ctx.config, "embed.encoder", ctx.cfg.embed.encoder)
    write_json(files.embedding_items, {"item_ids": items["item_ids"], "encoder": encoder})
    write_npy(files.embeddings, vectors)
    files.embeddings_partial.unlink(missing_ok=True)
    rate = {"items_per_s": round((len(texts) - kept) / seconds, 1)}
    return {"items": len(texts), "dim": int(vectors.shape[1]), **rate, **({"kept_from_before": kept} if kept else {})}


def check_embed(ctx: RunContext) -> None:
    """The encoder can be found and the item text gives each item a text (when the data stage has run)."""
    from crabrec.embed import HASH_ENCODER, item_texts, resolve_encoder

    cfg = ctx.config.embed
    if not ctx.files.items.is_file():  # the data stage has not run: whether there is text to encode is not known
        return  # (the stage resolves the encoder itself, before it writes anything, when there is text)
    items = ctx.files.load_items()
    if not items.get("has_text", True):
        return  # ids-only data: the stage encodes nothing, so it needs no encoder
    if cfg.encoder != HASH_ENCODER:
        resolve_encoder(cfg.encoder)
    item_texts(items["text"], cfg, warn=False)


def check_tokenize(ctx: RunContext) -> None:
    """An imported SID index is read and checked against the catalogue (when the data stage has run)."""
    from crabrec.sid.codebook import parse_index

    tok = ctx.config.tokenize
    if tok.quantizer == "import":
        if not tok.import_path:
            raise CrabError("tokenize.quantizer=import needs tokenize.import_path (a MiniOneRec index.json)")
        item_ids = ctx.files.load_items()["item_ids"] if ctx.files.items.is_file() else None
        parse_index(tok.import_path, item_ids)


def embed_revision(ctx: RunContext) -> int:
    """1 where the item text at the default fields leaves out columns of numbers (an item table's ids, counts and
    ratings, embedded as digits before :func:`crabrec.embed.numeric_fields`), judged on the item table's first rows;
    0 for every other dataset, whose embeddings never changed."""
    from crabrec.data.table import item_text_glance
    from crabrec.embed import numeric_fields

    cfg = ctx.config.embed
    if cfg.template:
        return 0
    return int(bool(numeric_fields(item_text_glance(ctx.config.data), cfg.fields)))


def skip_embed(ctx: RunContext, items: dict[str, Any]) -> dict[str, Any]:
    """An ids-only dataset: nothing to embed. The tokenize stage then imports its SIDs or quantizes SASRec's item
    embeddings (``tokenize.item_vectors=sasrec``), and says so if it is asked for text vectors."""
    imported = ctx.cfg.tokenize.quantizer == "import"
    reason = f"no item text: embed skipped{', semantic IDs imported' if imported else ''}"
    write_json(ctx.files.embedding_items, {"item_ids": items["item_ids"], "encoder": None, "skipped": reason})
    ctx.files.embeddings.unlink(missing_ok=True)
    return {"items": len(items["item_ids"]), "skipped": reason}


def run_tokenize(ctx: RunContext) -> dict[str, Any]:
    from crabrec.sid.build import build_codebook

    files, tok = ctx.files, ctx.cfg.tokenize
    items = files.load_items()
    item_ids, source = items["item_ids"], vector_source(ctx)
    if source != tok.item_vectors:
        log.info("%s: no item text, so the semantic IDs cluster SASRec's item embeddings", items.get("name") or "data")
    wants_text = source != "sasrec"
    parts: list[tuple[str, np.ndarray]] = []  # (where from, vectors)
    if wants_text and files.has_embeddings():
        parts.append((str(files.embeddings), load_npy(files.embeddings)))
    elif wants_text and not (source == "text" and tok.quantizer == "import"):  # only imported SIDs need no vectors
        raise CrabError(
            f"{items.get('name') or 'the dataset'}: the dataset has no item text, so "
            f"tokenize.quantizer={tok.quantizer} on item_vectors={source} has nothing to quantize; use "
            "tokenize.quantizer=import with tokenize.import_path=<index.json>, or tokenize.item_vectors=sasrec"
        )
    if source != "text":
        parts.append((str(files.weights("sasrec")), sasrec_vectors(files)))
    for name, part in parts:
        if part.ndim != 2 or len(part) != len(item_ids):
            raise CrabError(f"{name}: shape {part.shape}, expected ({len(item_ids)}, dim); re-run its stage (--force)")
    if not parts:  # ids-only data with imported SIDs
        return save_codebook(ctx, build_codebook(tok, None, item_ids, ctx.cfg.seed))
    vectors = parts[0][1] if len(parts) == 1 else join_vectors([p for _, p in parts])
    where = " + ".join(name for name, _ in parts)
    summary = save_codebook(ctx, build_codebook(tok, vectors, item_ids, ctx.cfg.seed, files / "sid/rqvae", where))
    return summary if source == "text" else summary | {"item_vectors": source, "dim": int(vectors.shape[1])}


def vector_source(ctx: RunContext) -> str:
    """What the quantizer clusters: ``tokenize.item_vectors``, except that ids-only data (no item text) with the
    default ``text`` and a clustering quantizer uses SASRec's item embeddings instead of failing."""
    tok = ctx.config.tokenize
    if tok.item_vectors != "text" or tok.quantizer == "import" or not ctx.files.items.is_file():
        return tok.item_vectors
    return "text" if ctx.files.load_items().get("has_text", True) else "sasrec"


def sasrec_vectors(files) -> np.ndarray:
    """The trained SASRec's item embeddings ``[n_items, hidden]`` (its last row, the padding, left out)."""
    from safetensors.numpy import load_file

    path = files.weights("sasrec") / "model.safetensors"
    try:
        table = load_file(str(path))["items.weight"]
    except (OSError, KeyError) as exc:
        raise CrabError(
            f"{path}: no SASRec item embeddings ({exc}); re-run `crabrec train {files.root} --method sasrec`"
        ) from None
    return table[:-1].astype(np.float32)


def join_vectors(parts: list[np.ndarray]) -> np.ndarray:
    """Each part scaled to unit-length rows, then side by side: every source weighs the same in the distances."""
    unit = [p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12) for p in parts]
    return np.hstack(unit).astype(np.float32)


def vectors_stage(ctx: RunContext) -> tuple[str, ...]:
    """``tokenize`` also needs the trained SASRec when its SASRec item embeddings are clustered."""
    return ("sasrec",) if vector_source(ctx) != "text" else ()


def save_codebook(ctx: RunContext, cb) -> dict[str, Any]:
    files = ctx.files
    cb.save(files.codebook())
    write_json(files.sid_file("index.json"), cb.to_index())
    stats = cb.level_stats(files.load_popularity().freq)
    write_json(files.sid_file("stats.json"), stats)
    return {
        "quantizer": cb.meta["quantizer"],
        "levels": cb.n_levels,
        "used": "/".join(str(r["used"]) for r in stats),
        "collisions_before_dedup": cb.meta["collisions_before_dedup"],
        "collisions": cb.meta["collisions"],
    }


EMBED_STAGE = Stage(
    name="embed",
    fn=run_embed,
    check=check_embed,
    reads=("embed", "tokenize.quantizer"),
    needs=("data",),
    revised=embed_revision,
    artifacts=("embeddings.items.json",),  # + embeddings.npy unless the dataset has no text (checked by tokenize)
    describe="item text -> vectors (frozen encoder); skipped for ids-only data",
)


TOKENIZE_STAGE = Stage(
    name="tokenize",
    fn=run_tokenize,
    check=check_tokenize,
    reads=("tokenize", "seed"),
    needs=("data", "embed"),
    needs_if=vectors_stage,
    artifacts=("sid/codebook.json", "sid/index.json"),
    describe="embeddings -> semantic IDs (codebook)",
)
