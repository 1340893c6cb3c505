"""Stages ``embed`` (item text -> ``embeddings.npy``) and ``tokenize`` (embeddings -> ``sid/codebook.json``)."""

from __future__ import annotations

import time
from typing import Any

from crabrec.errors import CrabError
from crabrec.io import load_npy, write_json, write_npy
from crabrec.pipeline import RunContext, Stage


def run_embed(ctx: RunContext) -> dict[str, Any]:
    from crabrec.embed import encode, item_texts

    files = ctx.files
    items = files.load_items()
    if not items.get("has_text", True):
        return skip_embed(ctx, items)
    texts = item_texts(items["text"], ctx.cfg.embed)
    start = time.perf_counter()
    vectors = encode(texts, ctx.cfg.embed)
    seconds = time.perf_counter() - start
    write_json(files.embedding_items, {"item_ids": items["item_ids"], "encoder": ctx.cfg.embed.encoder})
    write_npy(files.embeddings, vectors)
    return {"items": len(texts), "dim": int(vectors.shape[1]), "items_per_s": round(len(texts) / seconds, 1)}


def skip_embed(ctx: RunContext, items: dict[str, Any]) -> dict[str, Any]:
    """An ids-only dataset: nothing to embed. Fine with imported SIDs, an error for every other quantizer."""
    quantizer = ctx.cfg.tokenize.quantizer
    if quantizer != "import":
        raise CrabError(
            f"{items.get('name') or 'the dataset'}: the dataset has no item text, so tokenize.quantizer={quantizer} "
            "has nothing to quantize; use tokenize.quantizer=import with tokenize.import_path=<index.json>"
        )
    reason = "no item text: embed skipped, semantic IDs imported"
    write_json(ctx.files.embedding_items, {"item_ids": items["item_ids"], "encoder": None, "skipped": reason})
    ctx.files.embeddings.unlink(missing_ok=True)
    return {"items": len(items["item_ids"]), "skipped": reason}


def run_tokenize(ctx: RunContext) -> dict[str, Any]:
    from crabrec.sid.build import build_codebook

    files = ctx.files
    item_ids = files.load_items()["item_ids"]
    if not files.has_embeddings():
        return save_codebook(ctx, build_codebook(ctx.cfg.tokenize, None, item_ids, ctx.cfg.seed))
    embeddings = load_npy(files.embeddings)
    if embeddings.ndim != 2 or len(embeddings) != len(item_ids):
        raise CrabError(
            f"{files.embeddings}: shape {embeddings.shape}, expected ({len(item_ids)}, dim); "
            "re-run `crabrec embed --force`"
        )
    codebook = build_codebook(
        ctx.cfg.tokenize, embeddings, item_ids, ctx.cfg.seed, files / "sid/rqvae", str(files.embeddings)
    )
    return save_codebook(ctx, codebook)


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
    reads=("embed", "tokenize.quantizer"),
    needs=("data",),
    artifacts=("embeddings.items.json",),  # + embeddings.npy unless the dataset has no text (checked by tokenize)
    describe="item text -> vectors (frozen encoder); skipped for ids-only data",
)


TOKENIZE_STAGE = Stage(
    name="tokenize",
    fn=run_tokenize,
    reads=("tokenize", "seed"),
    needs=("data", "embed"),
    artifacts=("sid/codebook.json", "sid/index.json"),
    describe="embeddings -> semantic IDs (codebook)",
)
