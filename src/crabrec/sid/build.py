"""Build a :class:`Codebook` from item embeddings with the configured quantizer (or import one)."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import numpy as np

from crabrec.config import TokenizeConfig
from crabrec.errors import CrabError
from crabrec.sid.codebook import Codebook, parse_index
from crabrec.sid.collisions import collision_count, dedup_level
from crabrec.sid.residuals import Residuals
from crabrec.sid.rq_kmeans import Quantized, residual_quantize

log = logging.getLogger("crabrec")


def effective_codebook_size(n_items: int, cfg: TokenizeConfig) -> int:
    """``cfg.codebook_size``, or a smaller default (2·⌈N^(1/L)⌉) with a warning when the catalogue is smaller."""
    if cfg.codebook_size <= n_items:
        return cfg.codebook_size
    k = max(2, min(n_items, 2 * math.ceil(n_items ** (1.0 / cfg.levels))))
    log.warning(
        "tokenize.codebook_size %d is larger than the catalogue (%d items); using %d codes per level instead",
        cfg.codebook_size,
        n_items,
        k,
    )
    return k


def empirical_residuals(x: np.ndarray, codes: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """RQ residuals when only SIDs are known: codeword = mean residual of the token (docs/METHOD.md, "CRAB stage 1")."""
    residual = np.asarray(x, np.float32)
    residuals, codewords = [], []
    for level in range(codes.shape[1]):
        residuals.append(residual.copy())
        k = int(codes[:, level].max()) + 1
        sums = np.zeros((k, residual.shape[1]), np.float64)
        np.add.at(sums, codes[:, level], residual)
        counts = np.bincount(codes[:, level], minlength=k)[:, None]
        means = (sums / np.maximum(counts, 1)).astype(np.float32)
        codewords.append(means)
        residual = residual - means[codes[:, level]]
    return residuals, codewords


def build_codebook(
    cfg: TokenizeConfig,
    embeddings: np.ndarray | None,
    item_ids: list[str],
    seed: int,
    model_dir: Path | None = None,
    source: str = "embeddings",
) -> Codebook:
    """Quantize, then add the dedup level if requested and needed; collision rates go into ``meta``.

    ``embeddings=None`` (an ids-only dataset) works with ``quantizer=import`` only; the codebook then has no
    per-item residuals (CRAB stage 1 takes its vectors from the trained model instead)."""
    if embeddings is None:
        if cfg.quantizer != "import":
            raise CrabError(f"tokenize.quantizer={cfg.quantizer} needs item embeddings; this dataset has none")
    elif not np.isfinite(embeddings).all():
        bad = int(np.flatnonzero(~np.isfinite(embeddings).all(1))[0])
        raise CrabError(f"{source}: row {bad}: item {item_ids[bad]!r} has a non-finite value (NaN or inf)")
    start = time.perf_counter()
    prefixes: list[str] = []
    if cfg.quantizer == "import":
        if not cfg.import_path:
            raise CrabError("tokenize.quantizer=import needs tokenize.import_path (a MiniOneRec index.json)")
        imported = parse_index(cfg.import_path, item_ids)
        if embeddings is None:
            q = Quantized(imported.codes, None, None)
        else:
            residuals, codewords = empirical_residuals(embeddings, imported.codes)
            q = Quantized(imported.codes, codewords, residuals)
        sizes, prefixes = imported.sizes, imported.prefixes
    else:
        k = effective_codebook_size(len(item_ids), cfg)
        if cfg.quantizer == "rqvae":
            from crabrec.sid.rq_vae import train_rqvae

            model, history = train_rqvae(embeddings, cfg, k, seed)
            if model_dir is not None:
                model.save(model_dir)
            q = model.encode_all(embeddings)
            log.info("rq-vae: loss %.4f -> %.4f over %d epochs", history[0], history[-1], len(history))
        else:
            q = residual_quantize(
                embeddings, cfg.levels, k, seed, cfg.kmeans_iters, cfg.kmeans_init, balanced=cfg.quantizer == "balanced"
            )
        sizes = [k] * cfg.levels
        distinct = len({tuple(row) for row in q.codes.tolist()})
        if len(item_ids) > 1 and distinct == 1:
            raise CrabError(
                f"tokenize.quantizer={cfg.quantizer}: every item got the same semantic ID (the quantizer collapsed); "
                "check its settings (rqvae_hidden, rqvae_lr, rqvae_epochs) or use rqkmeans"
            )
    before = collision_count(q.codes)
    codes, dedup = q.codes, 0
    residuals = None if q.residuals is None else Residuals.of(q.residuals, q.codewords, q.codes)
    codewords = None if q.codewords is None else list(q.codewords)
    if cfg.dedup == "extra_level" and before > 0:
        extra = dedup_level(q.codes)
        codes = np.concatenate([codes, extra[:, None]], 1)
        if residuals is not None and codewords is not None:  # the dedup level's: the last level's less its codeword
            codewords.append(np.zeros((int(extra.max()) + 1, codewords[-1].shape[1]), np.float32))
            residuals = residuals.extended(codewords, codes)
        sizes = [*sizes, int(extra.max()) + 1]
        prefixes = [*prefixes, chr(97 + len(prefixes))] if prefixes else []
        dedup = 1
    meta = {
        "quantizer": cfg.quantizer,
        "collisions_before_dedup": before,
        "collision_rate_before_dedup": round(before / len(item_ids), 6),
        "collisions": collision_count(codes),
    }
    log.debug("tokenize: %s in %.1fs", cfg.quantizer, time.perf_counter() - start)
    return Codebook(
        codes=codes,
        sizes=sizes,
        item_ids=list(item_ids),
        prefixes=prefixes,
        dedup_levels=dedup,
        codewords=codewords,
        residuals=residuals,
        meta=meta,
    )


def format_level_table(rows: list[dict]) -> str:
    cols = [
        ("level", 5),
        ("size", 5),
        ("used", 5),
        ("parents_per_token", 8),
        ("collisions_to_here", 10),
        ("max_p", 8),
        ("mean_p", 8),
        ("max_over_mean", 8),
        ("gini", 7),
        ("top5_share", 8),
    ]
    heads = {
        "parents_per_token": "parents",
        "collisions_to_here": "collide",
        "max_over_mean": "max/mean",
        "top5_share": "top5%P",
    }
    lines = ["  ".join(heads.get(c, c).rjust(w) for c, w in cols)]
    for row in rows:
        cells = []
        for c, w in cols:
            v = row.get(c)
            cells.append(("-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)).rjust(w))
        lines.append("  ".join(cells))
    return "\n".join(lines)
