"""Items added to a trained run's catalogue without retraining (``crabrec.load(..., new_items=FILE)``,
``crabrec recommend --new-items``, ``crabrec serve --new-items``).

A generative model ranks semantic IDs, and a semantic ID is made from an item's text: an item that arrived after
training gets one from the run's own quantizer. Its text is encoded as the catalogue's was (the run's encoder and
text fields); each level takes the nearest codeword of the residual (an RQ-VAE run encodes with its trained RQ-VAE),
which for residual k-means is the quantizer's own rule: the catalogue's items get back their stored SIDs. Where the
codebook has a dedup level, the item takes the next free position among the items that share its tokens; where
none is free (or, without a dedup level, the SID is taken), it takes the nearest last-level codeword whose SID has
room. CRAB's rebalanced codebook keeps the base codebook's tree: where a token was split, the item joins the part
that holds its child token, or, for a child token no item had there (and at the last level, where items are split
one by one), the part whose items lie nearest to its residual.

A model trained before an item arrived has never generated its SID and rarely does, so, as in TIGER's cold-start
experiment, new items also take slots right after a generated SID whose first token they share (those sharing more
tokens first), at most ``round(new_share · k)`` of every top-k (:class:`NewItemSlots`).

The items live in the loaded recommender; only their text encoding is kept in the run (``new-items/``, the last
``CACHE_KEEP`` tables), so that loading the same table again does not encode it again. They have no interactions,
so they are in popularity group 0. ID-based methods (SASRec) and the popularity floors rank only the items they
were trained on.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crabrec.errors import CrabError, clip
from crabrec.runfiles import RunFiles
from crabrec.sid.codebook import Codebook

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

log = logging.getLogger("crabrec")
CACHE_KEEP = 4  # encodings of new-item tables a run keeps: the most recently loaded


@dataclass
class NewItems:
    """Items that join a run's catalogue: ids, text records, the vectors its codebook quantizes (text embeddings, or
    an RQ-VAE's latents) and their SIDs in the base codebook (CRAB's are derived when first asked for)."""

    source: str
    ids: list[str]
    records: list[dict[str, str]]
    vectors: np.ndarray
    codes: np.ndarray
    crab_codes: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def rebalanced_in(self, base: Codebook, crab: Codebook) -> np.ndarray:
        """Their SIDs in CRAB's rebalanced codebook ``crab`` of the run whose base codebook is ``base`` (derived once
        and kept)."""
        if not len(self):
            return self.codes
        if self.crab_codes is None:
            self.crab_codes = rebalanced_codes(base, crab, self)
        return self.crab_codes


def read(run_dir: str | Path, source: str | Path | pd.DataFrame | pa.Table, progress: bool = True) -> NewItems:
    """The items of the item table ``source`` (a file in the formats ``--items`` takes, a pandas DataFrame or a
    pyarrow Table, read as that table in a Parquet file) that the run's catalogue lacks, encoded and given semantic
    IDs as the run's own items were; items it already holds are left as they are."""
    from crabrec.config import load_saved
    from crabrec.data.loaders import _items_from_frame
    from crabrec.data.objects import arrow, is_table
    from crabrec.data.table import read_item_table
    from crabrec.embed import item_text, text_fields

    root, path = Path(run_dir), Path("new_items" if is_table(source) else source)  # a table object: named as given
    cfg = load_saved(root)
    files = RunFiles(root)
    catalogue = files.load_items()
    usable(files, cfg, str(path))
    table = arrow(source, "new_items").to_pandas() if is_table(source) else read_item_table(path)
    found = _items_from_frame(table, id_column(path, [str(c) for c in table.columns], cfg.data), path)
    known = set(map(str, catalogue["item_ids"]))
    ids = [i for i in found if i not in known]
    if len(ids) < len(found):
        log.info("%s: %d of its %d items are in the run's catalogue already; they stay as they are",
                 path, len(found) - len(ids), len(found))  # fmt: skip
    records = [found[i] for i in ids]
    base = files.load_codebook()
    if not ids:
        return NewItems(str(path), [], [], np.zeros((0, 0), np.float32), np.zeros((0, base.n_levels), np.int64))
    fields = text_fields(catalogue.get("text") or [], cfg.embed.fields)  # the fields the catalogue's text was made of
    texts = [item_text(rec, fields, cfg.embed) for rec in records]
    vectors = encoded(files, texts, cfg.embed, progress)
    if cfg.tokenize.quantizer == "rqvae":
        vectors = latents(files, vectors)
    codes, kept = base_codes(base, vectors)
    if not kept.all():
        left = [ids[i] for i in np.flatnonzero(~kept)]
        log.warning("%s: %d new item(s) find no semantic ID of their own (every one their first tokens lead to is "
                    "full) and are left out: %s", path, len(left), ", ".join(clip(repr(i), 40) for i in left[:5]))
    keep = np.flatnonzero(kept)
    log.info("%s: %d new item(s) join the catalogue of %d", path, len(keep), len(known))
    return NewItems(str(path), [ids[i] for i in keep], [records[i] for i in keep], vectors[keep], codes[keep])


def encoded(files: RunFiles, texts: list[str], embed, progress: bool = True) -> np.ndarray:
    """The text vectors of ``texts`` by the run's encoder (``embed``: its settings): kept from an earlier load of
    the same texts with the same settings (bit for bit what encoding them gives: the same texts in the same
    batches), else encoded now and kept. A run folder that cannot be written is left as it is."""
    from crabrec.embed import encode
    from crabrec.io import load_npy, write_npy

    digest = hashlib.sha256(embed.model_dump_json().encode())
    for text in texts:
        digest.update(b"\0" + text.encode("utf-8", "surrogatepass"))
    path = files.new_items_cache / f"{digest.hexdigest()[:32]}.npy"
    if path.is_file():
        try:
            vectors = load_npy(path)
            if vectors.ndim == 2 and len(vectors) == len(texts) and vectors.dtype == np.float32:
                os.utime(path)  # the most recently loaded are kept
                log.info("%d new items: their encoding kept from an earlier load (%s)", len(texts), path)
                return vectors
        except (CrabError, OSError):
            pass  # encoded again, and replaced
    vectors = encode(texts, embed, progress=progress).vectors
    try:
        write_npy(path, vectors)
        kept = sorted(files.new_items_cache.glob("*.npy"), key=lambda p: p.stat().st_mtime)
        for old in kept[:-CACHE_KEEP]:
            old.unlink(missing_ok=True)
    except (CrabError, OSError) as exc:  # a run folder mounted read-only: encoded at every load
        log.debug("new items' encoding not kept: %s", exc)
    return vectors


def id_column(path: Path, columns: list[str], data, hint: str = "") -> str:
    """The item table's id column: the one the run's item table used, else the run's item column's name, else a
    known item-id name (``hint``: what else the error suggests)."""
    from crabrec.data.table import ITEM_NAMES, find_column

    for name in (data.item_table_id_col, data.item_col):
        if name in columns:
            return name
    found = find_column(columns, "item", "item", (*ITEM_NAMES, "id"))
    if found is None:
        shown = ", ".join(clip(c, 40) for c in columns[:8])
        raise CrabError(f"{path}: no item id column (looked for item_id, item, id, ...; found {shown}); name the id "
                        f"column item_id{hint}")  # fmt: skip
    return found


def usable(files: RunFiles, cfg, source: str) -> None:
    """That the run's semantic IDs come from item text, the only thing a new item brings."""
    if not files.has_embeddings():
        raise CrabError(f"{source}: new items cannot join this run: its items have no text (ids only), which its "
                        "semantic IDs would be made from")  # fmt: skip
    if cfg.tokenize.item_vectors != "text":
        raise CrabError(f"{source}: new items cannot join this run: its semantic IDs quantize SASRec's item "
                        f"embeddings (tokenize.item_vectors={cfg.tokenize.item_vectors}), which new items do not "
                        "have")  # fmt: skip


def latents(files: RunFiles, vectors: np.ndarray) -> np.ndarray:
    """Text embeddings through the run's trained RQ-VAE encoder (the space its codebook quantizes)."""
    import torch

    from crabrec.runfiles import load_checked
    from crabrec.sid.rq_vae import RQVAE

    folder = files.codebook().parent / "rqvae"
    model = load_checked(folder / "rqvae.safetensors", lambda: RQVAE.load(folder))
    with torch.no_grad():
        return model.encoder(torch.from_numpy(np.asarray(vectors, np.float32))).numpy()


def nearest(x: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Each row's nearest codeword (squared L2), as the quantizer's faiss index finds it."""
    import faiss

    index = faiss.IndexFlatL2(words.shape[1])
    index.add(np.ascontiguousarray(words, dtype=np.float32))
    _, found = index.search(np.ascontiguousarray(x, dtype=np.float32), 1)
    return found[:, 0].astype(np.int64)


def semantic_codes(codebook: Codebook, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, last)``: the semantic levels' codes of ``vectors`` (at each level the nearest codeword, then the
    residual less it) and the residual entering the last semantic level."""
    if codebook.codewords is None:
        raise CrabError("the run's codebook has no codewords to place new items; re-run tokenize (--force tokenize)")
    residual = np.array(vectors, dtype=np.float32)
    codes, last = [], residual
    for level in range(codebook.semantic_levels):
        words = codebook.codewords[level]
        if words.shape[1:] != residual.shape[1:]:
            raise CrabError(f"the new items' vectors have {residual.shape[1]} dimensions; the codebook's level "
                            f"{level} has {words.shape[1]}")  # fmt: skip
        chosen, last = nearest(residual, words), residual
        codes.append(chosen)
        residual = residual - words[chosen]
    return np.stack(codes, 1), last


def base_codes(codebook: Codebook, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, kept)``: the new items' full SIDs in ``codebook`` and whether each got one of its own. A SID is
    full when as many items share its tokens as its dedup level has positions (one, without a dedup level); an item
    whose nearest SID is full takes the nearest last-level codeword whose SID has room, and is left out only when
    none has."""
    from collections import Counter

    semantic, last = semantic_codes(codebook, vectors)
    room = codebook.sizes[-1] if codebook.dedup_levels else 1
    taken = Counter(map(tuple, codebook.codes[:, : codebook.semantic_levels].tolist()))
    words = codebook.codewords[codebook.semantic_levels - 1]
    position = np.zeros(len(semantic), np.int64)
    kept = np.ones(len(semantic), bool)
    moved = 0
    for i, row in enumerate(semantic.tolist()):
        sid = tuple(row)
        if taken[sid] >= room:
            order = np.argsort(((words - last[i]) ** 2).sum(1), kind="stable").tolist()
            sid = next((s for c in order if taken[s := (*sid[:-1], c)] < room), None)
            if sid is None:
                kept[i] = False
                continue
            semantic[i, -1], moved = sid[-1], moved + 1
        position[i] = taken[sid]
        taken[sid] += 1
    if moved:
        log.info("%d new item(s) get the nearest last-level token whose SID has room (their nearest one's is full: "
                 "%d item(s) share its tokens)", moved, room)  # fmt: skip
    return (np.concatenate([semantic, position[:, None]], 1) if codebook.dedup_levels else semantic), kept


def rebalanced_codes(base: Codebook, crab: Codebook, new: NewItems) -> np.ndarray:
    """The new items' SIDs in CRAB's rebalanced codebook, level by level from the top, as the split placed the
    catalogue: a split token's part is the one holding the item's child token (split units are child tokens), else
    the part whose items' mean residual is nearest; unsplit tokens and the dedup level stay as in ``base``."""
    if crab.codewords is None or crab.residuals is None:
        raise CrabError("CRAB's rebalanced codebook has no codewords or residuals to place new items; re-run "
                        "rebalance (--force rebalance)")  # fmt: skip
    out = new.codes.copy()
    residual = np.array(new.vectors, dtype=np.float32)
    last = base.semantic_levels - 1
    for level in range(base.semantic_levels):
        old, now = base.codes[:, level], crab.codes[:, level]
        pairs = np.unique(np.stack([old, now], 1), axis=0)
        split = {int(c) for c, count in zip(*np.unique(pairs[:, 0], return_counts=True)) if count > 1}
        moved = [i for i in range(len(new)) if int(new.codes[i, level]) in split]
        if moved:
            child = {} if level == last else dict(zip(zip(old.tolist(), base.codes[:, level + 1].tolist()),
                                                      now.tolist()))  # fmt: skip
            levels, means = crab.residuals[level], {}
            for i in moved:
                c = int(new.codes[i, level])
                key = (c, int(new.codes[i, level + 1])) if level < last else None
                if key in child:
                    out[i, level] = child[key]
                    continue
                family = pairs[pairs[:, 0] == c, 1]
                if c not in means:  # each part's mean residual at this level
                    means[c] = np.stack([levels[now == t].mean(0) for t in family])
                out[i, level] = int(family[int(np.argmin(((means[c] - residual[i]) ** 2).sum(1)))])
        residual = residual - crab.codewords[level][out[:, level]]
    return out


class WithNewItems(RunFiles):
    """A run's files as a ranker reads them, with ``added`` items appended to its catalogue: to its items, its
    codebooks and its popularity (no interactions: group 0, never popular)."""

    def __init__(self, root: str | Path, added: NewItems) -> None:
        super().__init__(root)
        self.added = added

    def load_items(self) -> dict[str, Any]:
        items = super().load_items()
        text = items.get("text") if isinstance(items.get("text"), list) else []
        text = text + [{}] * (len(items["item_ids"]) - len(text))
        return {**items, "item_ids": [*items["item_ids"], *self.added.ids], "text": [*text, *self.added.records]}

    def load_popularity(self):
        from crabrec.data.popularity import Popularity

        pop = super().load_popularity()
        n = len(self.added)
        return Popularity(np.concatenate([pop.freq, np.zeros(n, pop.freq.dtype)]),
                          np.concatenate([pop.group, np.zeros(n, pop.group.dtype)]),
                          np.concatenate([pop.popular, np.zeros(n, bool)]), pop.n_groups)  # fmt: skip

    def load_codebook(self, rebalanced: bool = False) -> Codebook:
        cb = super().load_codebook(rebalanced)
        added = self.added.rebalanced_in(super().load_codebook(), cb) if rebalanced else self.added.codes
        return Codebook(
            codes=np.concatenate([cb.codes, added]),
            sizes=list(cb.sizes),
            item_ids=[*cb.item_ids, *self.added.ids],
            prefixes=list(cb.prefixes),
            dedup_levels=cb.dedup_levels,
            meta=cb.meta,
        )


class NewItemSlots:
    """A ranker whose lists give new items slots after the generated SIDs whose first ``depth`` tokens they share
    (those sharing more tokens first), at most ``round(share · k)`` of every top-k: TIGER's cold-start rule, as a
    model trained before an item arrived rarely generates its SID itself. An item so placed is scored as that SID
    (never above the slot before it); items of the history and unavailable ones are not placed, and one the search
    generated keeps its own place. ``depth`` 1, the first token, recommended the held-out items of
    ``bench_new_items.py`` most often on validation for every method, share and draw (more tokens rarely match a
    generated SID)."""

    def __init__(self, base, first_new: int, share: float, depth: int = 1) -> None:
        self.base, self.share, self.depth = base, share, depth
        self.trie, self.width, self.block = base.trie, base.width, base.block
        self.new_sid = {item: self.sid(item) for item in range(first_new, len(self.trie.item_sid))}  # built once
        self.by_prefix = self.prefixes(set())

    def prefixes(self, out: set[int]) -> dict[tuple[int, ...], list[int]]:
        """The new items not in ``out``, by their SIDs' first ``depth`` tokens."""
        found: dict[tuple[int, ...], list[int]] = {}
        for item, sid in self.new_sid.items():
            if item not in out:
                found.setdefault(sid[: self.depth], []).append(item)
        return found

    def set_unavailable(self, items: np.ndarray) -> bool:
        """Leave ``items`` out of the new items placed, and out of the base ranker's lists where it can (else the
        rows exclude them, which placing honours too)."""
        self.by_prefix = self.prefixes(set(np.asarray(items).tolist()))
        return bool(getattr(self.base, "set_unavailable", lambda _: False)(items))

    def sid(self, item: int) -> tuple[int, ...]:
        return tuple(self.trie.sids[self.trie.item_sid[item]].tolist())

    def matching(self, item: int) -> list[int]:
        """The new items that share the first ``depth`` tokens of ``item``'s SID, those sharing more first."""
        sid = self.sid(item)
        found = self.by_prefix.get(sid[: self.depth], [])

        def shared(new: int) -> int:
            return next((t for t, (a, b) in enumerate(zip(sid, self.new_sid[new])) if a != b), len(sid))

        return sorted(found, key=shared, reverse=True) if len(found) > 1 else found

    def rank(self, rows, desc: str = "ranking", progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
        items, scores = self.base.rank(rows, desc=desc, progress=progress)
        if self.share <= 0 or not self.by_prefix:
            return items, scores
        out_items, out_scores = np.full_like(items, -1), np.full_like(scores, -np.inf)
        for r in range(len(items)):
            seen = () if rows.seen is None else set(rows.seen[r].tolist())
            row = self.placed(items[r].tolist(), scores[r].tolist(), seen)
            out_items[r, : len(row)] = [item for item, _ in row]
            out_scores[r, : len(row)] = [score for _, score in row]
        return out_items, out_scores

    def placed(self, items: list[int], scores: list[float], seen) -> list[tuple[int, float]]:
        """One list: the search's items, each followed by the new items that share its prefix, as the cap allows."""
        out: list[tuple[int, float]] = []
        waiting: list[tuple[int, float]] = []
        taken, inserted = set(items), 0

        def place() -> None:
            nonlocal inserted
            while waiting and len(out) < self.width and inserted < int(self.share * (len(out) + 1) + 0.5):
                item, score = waiting.pop(0)
                out.append((item, min(score, out[-1][1]) if out else score))
                inserted += 1

        for item, score in zip(items, scores):
            if item < 0 or len(out) >= self.width:
                break
            place()
            if len(out) >= self.width:
                break
            out.append((item, score))
            for new in self.matching(item):
                if new not in taken and new not in seen:
                    waiting.append((new, score))
                    taken.add(new)
        place()
        return out
