"""CRAB stage 1: split over-popular tokens, level by level, top-down (docs/METHOD.md, "CRAB stage 1").

At each semantic level the top ``ratio`` of used tokens by popularity ``P(c)`` are split into
``M = clamp(round(P(c)/mean P), 2, max_split)`` tokens. The units moved together are the child tokens restricted to
the parent (``I(c) ∩ I(b)``, multi-parent aware) or, at the last semantic level, the items themselves. The most
popular cluster keeps the old id; the others get new ids continuing the level's index (``<b_256>``, ...) in
decreasing popularity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crabrec.config import CrabConfig
from crabrec.crab.reg_kmeans import Units, reg_kmeans
from crabrec.errors import CrabError
from crabrec.progress import progress as bar
from crabrec.sid.codebook import Codebook
from crabrec.sid.residuals import CHUNK, WHOLE, Residuals, fits


@dataclass
class Rebalanced:
    codebook: Codebook
    token_map: dict[str, list[str]]
    parent: dict[str, str]
    report: list[dict[str, Any]] = field(default_factory=list)


def _ratio(cfg: CrabConfig, level: int) -> float:
    return cfg.ratio[level] if isinstance(cfg.ratio, list) else cfg.ratio


def check_levels(cfg: CrabConfig, semantic_levels: int) -> None:
    """``crab.ratio`` (one value, or one per semantic level) and ``crab.levels`` fit a codebook of that many levels."""
    if isinstance(cfg.ratio, list) and len(cfg.ratio) != semantic_levels:
        raise CrabError(
            f"crab.ratio: {len(cfg.ratio)} values for a codebook of {semantic_levels} semantic levels; "
            "give one value, or one per level"
        )
    bad = [lv for lv in cfg.levels or [] if not 0 <= lv < semantic_levels]
    if bad:
        raise CrabError(f"crab.levels {bad}: expected semantic levels 0..{semantic_levels - 1}")


def token_residuals(token_ids: np.ndarray, table: np.ndarray) -> list[np.ndarray]:
    """Per-item residuals from token vectors, for codebooks without text embeddings.

    An item is the sum of its tokens' vectors, x = Σ_l e(c_l), with each token's vector as its level's codeword, so
    the residual entering level ``l`` is Σ_{l' ≥ l} e(c_l'): the same recursion as residual quantization.
    ``token_ids`` is ``[N, L]`` rows of ``table``."""
    parts = table[token_ids].astype(np.float32)  # [N, L, d]
    tails = np.flip(np.cumsum(np.flip(parts, 1), 1), 1)
    return [np.ascontiguousarray(tails[:, level]) for level in range(token_ids.shape[1])]


class LevelResiduals:
    """The residuals of a codebook being rebalanced, held one level at a time: the items' residuals entering the
    level being split (:meth:`rows`), and the moves of items to a new token (:meth:`move`), which shift their
    residuals at every deeper level by the old codeword less the new one. Each deeper level is computed from the
    input codebook's own when its turn comes (:meth:`next_level`), with the moved items' shifts added in the order
    they were made, and compared with the recursion of the rebalanced codewords a chunk of rows at a time: the
    result keeps the first level and the rows that differ (:class:`~crabrec.sid.residuals.Residuals`), not every
    level (a million items: 1.7 GB a level at 384 dimensions). ``codewords`` and ``codes`` are the rebalanced
    codebook's, which the caller updates in place as tokens split (a level's are final once it is done)."""

    def __init__(self, residuals: Sequence[np.ndarray], codewords: list[np.ndarray] | None, codes: np.ndarray):
        self.codewords, self.codes, self.count = codewords, codes, len(residuals)
        self.source = iter(residuals)  # the input's levels, computed one after another
        self.first = self.input = np.asarray(next(self.source), np.float32)  # the input's rows of this level
        self.level = 0
        self.moved = np.zeros(0, np.int64)  # items whose rows at this level differ from the input's (sorted) ...
        self.values = self.first[:0]  # ... and those rows
        self.shifts: list[tuple[np.ndarray, np.ndarray]] = []  # (items, shift), in the order they were made
        self.changed: dict[int, tuple[np.ndarray | None, np.ndarray]] = {}

    def rows(self, items: np.ndarray) -> np.ndarray:
        """The residuals of ``items`` entering the current level."""
        return self._patched(self.input, self.moved, self.values, items)

    def move(self, items: np.ndarray, shift: np.ndarray) -> None:
        """``items`` moved to a new token at the current level: their residuals at every deeper level shift."""
        self.shifts.append((items, shift))

    def next_level(self) -> None:
        """The current level is done (its codes and codewords are final): go on to the next."""
        self.level += 1
        if self.level >= self.count:
            return
        upcoming = np.asarray(next(self.source), np.float32)
        moved = np.unique(np.concatenate([items for items, _ in self.shifts])) if self.shifts else self.moved
        values = upcoming[moved]
        for items, shift in self.shifts:  # each deeper level gets every move above it, in order
            values[np.searchsorted(moved, items)] += shift
        self.changed[self.level] = self._differing(upcoming, moved, values)
        self.input, self.moved, self.values = upcoming, moved, values

    def result(self) -> Residuals:
        """Every level, as the rebalanced codebook's residuals."""
        while self.level < self.count - 1:
            self.next_level()
        return Residuals(self.first, self.codewords, self.codes, self.count, self.changed)

    def _differing(self, upcoming: np.ndarray, moved: np.ndarray, values: np.ndarray):
        """``(rows, values)`` of the next level that the recursion from the current one does not give bit for bit
        (``rows`` None: the whole level, where there are no codewords to compute it from)."""
        level = self.level
        try:
            fits(self.codewords or [], self.codes, level, self.input.shape[1:], upcoming.shape[1:])
        except (IndexError, ValueError):
            whole = upcoming.copy() if len(moved) else upcoming
            whole[moved] = values
            return WHOLE, whole
        words, found = self.codewords[level - 1], []
        for start in range(0, len(upcoming), CHUNK):
            span = np.arange(start, min(start + CHUNK, len(upcoming)))
            expected = self.rows(span) - words[self.codes[span, level - 1]]
            given = self._patched(upcoming, moved, values, span)
            rows = np.flatnonzero((expected != given).reshape(len(span), -1).any(1))
            found.append((rows + start, given[rows]))
        return np.concatenate([r for r, _ in found]), np.concatenate([v for _, v in found])

    @staticmethod
    def _patched(level: np.ndarray, moved: np.ndarray, values: np.ndarray, items: np.ndarray) -> np.ndarray:
        """``level[items]`` with the rows of ``moved`` items taken from ``values``."""
        out = level[items]
        if len(moved):
            at = np.minimum(np.searchsorted(moved, items), len(moved) - 1)
            hit = moved[at] == items
            out[hit] = values[at[hit]]
        return out


class EveryLevel:
    """The reference for :class:`LevelResiduals`: every level held (a copy each), each move added to every deeper
    level at once."""

    def __init__(self, residuals: Sequence[np.ndarray], codewords: list[np.ndarray] | None, codes: np.ndarray):
        self.levels, self.level = [np.array(r, dtype=np.float32) for r in residuals], 0

    def rows(self, items: np.ndarray) -> np.ndarray:
        return self.levels[self.level][items]

    def move(self, items: np.ndarray, shift: np.ndarray) -> None:
        for deeper in range(self.level + 1, len(self.levels)):
            self.levels[deeper][items] += shift

    def next_level(self) -> None:
        self.level += 1

    def result(self) -> list[np.ndarray]:
        return self.levels


def rebalance(
    cb: Codebook, freq: np.ndarray, cfg: CrabConfig, seed: int, progress: bool = True, held=LevelResiduals
) -> Rebalanced:
    """Return a new codebook whose over-popular tokens are split; the input codebook is not modified. ``held``: how
    the residual levels are held while tokens split (:class:`LevelResiduals`; the tests pass every level held
    whole, the reference)."""
    if cb.residuals is None:
        raise CrabError("rebalance: the codebook has no per-item residuals (re-run tokenize)")
    freq = np.asarray(freq, np.float64)
    if len(freq) != cb.n_items:
        raise CrabError(f"rebalance: {len(freq)} item frequencies for a codebook of {cb.n_items} items")
    check_levels(cfg, cb.semantic_levels)
    levels = cfg.levels if cfg.levels is not None else list(range(cb.semantic_levels))
    codes = cb.codes.copy()
    sizes = list(cb.sizes)
    codewords = [np.array(c, dtype=np.float32) for c in cb.codewords] if cb.codewords is not None else None
    residuals = held(cb.residuals, codewords, codes)  # the input codebook's stay as they were
    token_map: dict[str, list[str]] = {}
    parent: dict[str, str] = {}
    report = []
    work = Codebook(codes=codes, sizes=sizes, item_ids=cb.item_ids, prefixes=cb.prefixes, dedup_levels=cb.dedup_levels)
    for level in range(cb.semantic_levels):
        if level not in levels:
            residuals.next_level()
            continue
        before = work.popularity_profile(freq, level)
        used = work.used(level)
        pop = work.popularity(freq, level)
        mean_p = float(pop[used].mean())
        share = _ratio(cfg, level)
        n_split = max(1, round(share * len(used))) if share > 0 else 0
        order = used[np.lexsort((used, -pop[used]))]
        selected = [int(c) for c in order[:n_split] if pop[c] > 0]
        split_count, created = 0, 0
        last = level == cb.semantic_levels - 1
        for c in bar(selected, f"rebalance level {cb.prefixes[level]}", show=progress):
            items = np.flatnonzero(codes[:, level] == c)
            if last:
                unit_of = np.arange(len(items))
            else:
                _, unit_of = np.unique(codes[items, level + 1], return_inverse=True)
                unit_of = unit_of.reshape(-1)
            j = int(unit_of.max()) + 1
            m = min(max(2, round(pop[c] / mean_p)), cfg.max_split, j) if mean_p > 0 else 0
            if m < 2:
                continue
            n = np.bincount(unit_of, minlength=j).astype(np.float64)
            p = np.bincount(unit_of, weights=freq[items], minlength=j)
            rows = residuals.rows(items)
            rsum = np.zeros((j, rows.shape[1]))
            np.add.at(rsum, unit_of, rows)
            units = Units(r=rsum / n[:, None], n=n, p=p)
            z = reg_kmeans(units, m, cfg.lam, seed + 7919 * level + c, cfg.n_init, cfg.max_iter, cfg.exact_limit)
            cluster_p = np.bincount(z, weights=p, minlength=m)
            first_unit = np.array([np.flatnonzero(z == k)[0] for k in range(m)])
            ranked = np.lexsort((first_unit, -cluster_p)).tolist()  # numbering independent of the solver's labels
            new_ids = {ranked[0]: c}  # the most popular cluster keeps the token, the others get fresh ids in order
            for cluster in ranked[1:]:
                new_ids[cluster] = sizes[level]
                sizes[level] += 1
                created += 1
            item_cluster = z[unit_of]
            old_cw = codewords[level][c].copy() if codewords is not None else None
            if codewords is not None:
                extra = sizes[level] - len(codewords[level])
                if extra > 0:
                    codewords[level] = np.concatenate(
                        [codewords[level], np.zeros((extra, codewords[level].shape[1]), np.float32)]
                    )
            for cluster, token in new_ids.items():
                members = items[item_cluster == cluster]
                codes[members, level] = token
                if token != c and codewords is not None and old_cw is not None:
                    centroid = rows[item_cluster == cluster].mean(0)
                    codewords[level][token] = centroid
                    residuals.move(members, (old_cw - centroid).astype(np.float32))
            old_name = cb.token_name(level, c)
            token_map[old_name] = [cb.token_name(level, t) for t in sorted(new_ids.values())]
            for token in new_ids.values():
                if token != c:
                    parent[cb.token_name(level, token)] = old_name
            split_count += 1
        residuals.next_level()
        work = Codebook(
            codes=codes, sizes=sizes, item_ids=cb.item_ids, prefixes=cb.prefixes, dedup_levels=cb.dedup_levels
        )
        after = work.popularity_profile(freq, level)
        report.append(
            {
                "level": cb.prefixes[level],
                "selected": len(selected),
                "split": split_count,
                "created": created,
                "before": before,
                "after": after,
            }
        )
    meta = {
        **cb.meta,
        "rebalanced": True,
        "rebalance": {
            "ratio": cfg.ratio,
            "levels": levels,
            "lam": cfg.lam,
            "max_split": cfg.max_split,
            "seed": seed,
        },
    }
    out = Codebook(
        codes=codes,
        sizes=sizes,
        item_ids=list(cb.item_ids),
        prefixes=list(cb.prefixes),
        dedup_levels=cb.dedup_levels,
        codewords=codewords,
        residuals=residuals.result(),
        meta=meta,
    )
    return Rebalanced(codebook=out, token_map=token_map, parent=parent, report=report)


def format_report(report: list[dict[str, Any]]) -> str:
    lines = ["level  split  created  tokens      max P          max/mean        Gini            top-5% share"]
    for r in report:
        b, a = r["before"], r["after"]
        lines.append(
            f"{r['level']:>5}  {r['split']:>5}  {r['created']:>7}  {b['tokens']:>4}->{a['tokens']:<4}  "
            f"{b['max_p']:>6g}->{a['max_p']:<6g}  {b['max_over_mean']:>6g}->{a['max_over_mean']:<6g}  "
            f"{b['gini']:.3f}->{a['gini']:.3f}     {b['top5_share']:.3f}->{a['top5_share']:.3f}"
        )
    return "\n".join(lines)
