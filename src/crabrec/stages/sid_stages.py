"""Stages ``embed`` (item text -> ``embeddings.npy``) and ``tokenize`` (embeddings -> ``sid/codebook.json``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from crabrec.data.dataset import Splits
from crabrec.io import load_npy, load_npz, read_json, write_json, write_npy
from crabrec.pipeline import RunContext, Stage


def load_items(ctx: RunContext) -> dict[str, Any]:
    return read_json(ctx.path("data", "items.json"))


def load_freq(ctx: RunContext) -> np.ndarray:
    return load_npz(ctx.path("data", "popularity.npz"))["freq"]


def load_splits(ctx: RunContext) -> Splits:
    return Splits.load(ctx.path("data", "splits.npz"))


def run_embed(ctx: RunContext) -> dict[str, Any]:
    import time

    from crabrec.embed import encode, item_texts

    items = load_items(ctx)
    if not items.get("has_text", True):
        return skip_embed(ctx, items)
    texts = item_texts(items["text"], ctx.cfg.embed)
    start = time.perf_counter()
    vectors = encode(texts, ctx.cfg.embed)
    seconds = time.perf_counter() - start
    write_json(ctx.path("embeddings.items.json"), {"item_ids": items["item_ids"], "encoder": ctx.cfg.embed.encoder})
    write_npy(ctx.path("embeddings.npy"), vectors)
    return {"items": len(texts), "dim": int(vectors.shape[1]), "items_per_s": round(len(texts) / seconds, 1)}


def skip_embed(ctx: RunContext, items: dict[str, Any]) -> dict[str, Any]:
    """An ids-only dataset: nothing to embed. Fine with imported SIDs, an error for every other quantizer."""
    from crabrec.errors import CrabError

    if ctx.cfg.tokenize.quantizer != "import":
        raise CrabError(
            f"{ctx.cfg.data.path}: the dataset has no item text, so tokenize.quantizer={ctx.cfg.tokenize.quantizer} "
            "has nothing to quantize; use tokenize.quantizer=import with tokenize.import_path=<index.json>"
        )
    reason = "no item text: embed skipped, semantic IDs imported"
    write_json(ctx.path("embeddings.items.json"), {"item_ids": items["item_ids"], "encoder": None, "skipped": reason})
    ctx.path("embeddings.npy").unlink(missing_ok=True)
    return {"items": len(items["item_ids"]), "skipped": reason}


def has_embeddings(ctx: RunContext) -> bool:
    """Whether the run embedded its item text (an ids-only dataset has no ``embeddings.npy``)."""
    return ctx.path("embeddings.npy").is_file() or "skipped" not in read_json(ctx.path("embeddings.items.json"))


def run_tokenize(ctx: RunContext) -> dict[str, Any]:
    from crabrec.sid.build import build_codebook

    items = load_items(ctx)
    if not has_embeddings(ctx):
        cb = build_codebook(ctx.cfg.tokenize, None, items["item_ids"], ctx.cfg.seed)
        return save_codebook(ctx, cb)
    embeddings = load_npy(ctx.path("embeddings.npy"))
    bad = np.flatnonzero(~np.isfinite(embeddings).all(axis=1)) if embeddings.ndim == 2 else []
    if embeddings.ndim != 2 or len(embeddings) != len(items["item_ids"]) or len(bad):
        from crabrec.errors import CrabError

        what = (
            f"row {bad[0]} (item {items['item_ids'][bad[0]]!r}) and {len(bad) - 1} more contain NaN/inf"
            if len(bad)
            else f"shape {embeddings.shape}, expected ({len(items['item_ids'])}, dim)"
        )
        raise CrabError(f"{ctx.path('embeddings.npy')}: {what}; re-run `crabrec embed --force`")
    cb = build_codebook(ctx.cfg.tokenize, embeddings, items["item_ids"], ctx.cfg.seed, ctx.path("sid", "rqvae"))
    return save_codebook(ctx, cb)


def save_codebook(ctx: RunContext, cb) -> dict[str, Any]:
    cb.save(ctx.path("sid", "codebook.json"))
    write_json(ctx.path("sid", "index.json"), cb.to_index())
    stats = cb.level_stats(load_freq(ctx))
    write_json(ctx.path("sid", "stats.json"), stats)
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
    sections=("embed",),
    needs=("data",),
    artifacts=("embeddings.items.json",),  # + embeddings.npy unless the dataset has no text (checked by tokenize)
    describe="item text -> vectors (frozen encoder); skipped for ids-only data",
)
TOKENIZE_STAGE = Stage(
    name="tokenize",
    fn=run_tokenize,
    sections=("tokenize",),
    needs=("data", "embed"),
    artifacts=("sid/codebook.json", "sid/index.json"),
    describe="embeddings -> semantic IDs (codebook)",
)
