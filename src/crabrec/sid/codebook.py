"""The Codebook: item -> semantic ID, tokens per level, parents/children, token popularity ``P(c)``.

Codes are stored as an ``[n_items, L]`` integer array; level ``l`` token ``k`` is written ``<{prefix_l}_{k}>`` and has
the global vocabulary id ``offsets[l] + k``. SIDs need not form a tree: a token can have several parents.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crabrec.errors import CrabError, clip
from crabrec.io import load_npz, read_input_json, read_json, write_json, write_npz
from crabrec.sid.residuals import Residuals

TOKEN_RE = re.compile(r"<([a-z])_([0-9]+)>")
MAX_CODES = 65_536  # per level: an imported index with larger token numbers is refused (MiniOneRec uses 256)


def gini(values: np.ndarray) -> float:
    """Gini coefficient of non-negative values (0 = equal, -> 1 = concentrated)."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    n = len(v)
    if n == 0 or v.sum() == 0:
        return 0.0
    cum = np.cumsum(v)
    return float((n + 1 - 2 * (cum.sum() / cum[-1])) / n)


@dataclass
class Codebook:
    """Semantic IDs of a catalogue. ``codes[i, l]`` is item ``i``'s level-``l`` code."""

    codes: np.ndarray
    sizes: list[int]
    item_ids: list[str]
    prefixes: list[str] = field(default_factory=list)
    dedup_levels: int = 0
    codewords: list[np.ndarray] | None = None
    residuals: Sequence[np.ndarray] | None = None  # a list, or ``Residuals`` (one level kept, read when first used)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.codes = np.asarray(self.codes, dtype=np.int64)
        if self.codes.ndim != 2:
            raise CrabError(f"codebook: codes must be [n_items, levels], got shape {self.codes.shape}")
        if not self.prefixes:
            self.prefixes = [chr(97 + level) for level in range(self.n_levels)]
        if len(self.sizes) != self.n_levels or len(self.prefixes) != self.n_levels:
            raise CrabError("codebook: sizes/prefixes do not match the number of levels")
        if len(self.item_ids) != self.n_items:
            raise CrabError(f"codebook: {len(self.item_ids)} item ids for {self.n_items} rows of codes")
        for level in range(self.n_levels):
            col = self.codes[:, level]
            bad = np.flatnonzero((col < 0) | (col >= self.sizes[level]))
            if len(bad):
                item = clip(repr(self.item_ids[bad[0]]))
                raise CrabError(
                    f"codebook: item {item} has code {col[bad[0]]} at level {level}, outside [0, {self.sizes[level]})"
                )

    # ------------------------------------------------------------------ shape and names
    @property
    def n_items(self) -> int:
        return int(self.codes.shape[0])

    @property
    def n_levels(self) -> int:
        return int(self.codes.shape[1])

    @property
    def semantic_levels(self) -> int:
        """Levels produced by quantization (excluding the dedup level)."""
        return self.n_levels - self.dedup_levels

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)

    @property
    def vocab_size(self) -> int:
        return int(sum(self.sizes))

    def token_name(self, level: int, code: int) -> str:
        return f"<{self.prefixes[level]}_{int(code)}>"

    def token_names(self) -> list[str]:
        """Names of every vocabulary slot (global id order)."""
        return [self.token_name(level, k) for level in range(self.n_levels) for k in range(self.sizes[level])]

    def sid(self, item: int) -> tuple[int, ...]:
        return tuple(int(c) for c in self.codes[item])

    def sid_string(self, item: int) -> str:
        return "".join(self.token_name(level, c) for level, c in enumerate(self.codes[item]))

    def token_ids(self) -> np.ndarray:
        """``[n_items, L]`` global vocabulary ids."""
        return self.codes + self.offsets[None, :]

    # ------------------------------------------------------------------ structure
    def used(self, level: int) -> np.ndarray:
        return np.unique(self.codes[:, level])

    def items_of(self, level: int, code: int) -> np.ndarray:
        """``I(c)``: items whose level-``level`` token is ``code``."""
        return np.flatnonzero(self.codes[:, level] == code)

    def token_items(self, level: int) -> dict[int, np.ndarray]:
        """Every used level-``level`` token -> its items ``I(c)``."""
        col = self.codes[:, level]
        order = np.argsort(col, kind="stable")
        uniq, starts = np.unique(col[order], return_index=True)
        return {int(u): g for u, g in zip(uniq, np.split(order, starts[1:]))}

    def children(self, level: int) -> dict[int, list[int]]:
        """Level ``level`` token -> its level ``level+1`` children (tokens co-occurring on some item)."""
        pairs = np.unique(self.codes[:, level : level + 2], axis=0)
        out: dict[int, list[int]] = defaultdict(list)
        for p, c in pairs:
            out[int(p)].append(int(c))
        return dict(out)

    def parents(self, level: int) -> dict[int, list[int]]:
        """Level ``level`` token -> its level ``level-1`` parents (several when SIDs are not a tree)."""
        pairs = np.unique(self.codes[:, level - 1 : level + 1], axis=0)
        out: dict[int, list[int]] = defaultdict(list)
        for p, c in pairs:
            out[int(c)].append(int(p))
        return dict(out)

    def intersection(self, level: int, parent: int, child: int) -> np.ndarray:
        """``I(parent) ∩ I(child)`` for a level-``level`` parent and a level-``level+1`` child."""
        return np.flatnonzero((self.codes[:, level] == parent) & (self.codes[:, level + 1] == child))

    # ------------------------------------------------------------------ popularity
    def popularity(self, freq: np.ndarray, level: int) -> np.ndarray:
        """``P(c) = Σ_{i∈I(c)} f_i`` for every code slot of ``level`` (0 for unused slots)."""
        return np.bincount(self.codes[:, level], weights=np.asarray(freq, np.float64), minlength=self.sizes[level])

    def token_groups(self, freq: np.ndarray, level: int, share: float = 0.05) -> dict[str, np.ndarray]:
        """T_pop / T_neu / T_unp: top / middle / bottom ``share`` of used tokens by P (ties: lower id first)."""
        used = self.used(level)
        p = self.popularity(freq, level)[used]
        order = used[np.lexsort((used, -p))]
        k = math.ceil(share * len(used))
        return {"pop": order[:k], "neu": order[k : len(order) - k], "unp": order[len(order) - k :]}

    def collisions(self) -> int:
        """Items beyond the first that share a full SID."""
        from crabrec.sid.collisions import collision_count

        return collision_count(self.codes)

    def level_stats(self, freq: np.ndarray | None = None) -> list[dict[str, Any]]:
        rows = []
        for level in range(self.n_levels):
            used = self.used(level)
            row: dict[str, Any] = {
                "level": self.prefixes[level],
                "size": self.sizes[level],
                "used": len(used),
                "parents_per_token": None,
                "collisions_to_here": int(self.n_items - len(np.unique(self.codes[:, : level + 1], axis=0))),
            }
            if level > 0:
                row["parents_per_token"] = round(float(np.mean([len(v) for v in self.parents(level).values()])), 2)
            if freq is not None:
                row.update(self.popularity_profile(freq, level))
            rows.append(row)
        return rows

    def popularity_profile(self, freq: np.ndarray, level: int) -> dict[str, float]:
        """How concentrated ``P(c)`` is over the used tokens of ``level``: count, max, mean, max/mean, Gini and the
        share of the top 5% of tokens."""
        used = self.used(level)
        p = self.popularity(freq, level)[used]
        k = math.ceil(0.05 * len(used))
        return {
            "tokens": len(used),
            "max_p": float(p.max()),
            "mean_p": round(float(p.mean()), 3),
            "max_over_mean": round(float(p.max() / p.mean()), 3) if p.mean() > 0 else 0.0,
            "gini": round(gini(p), 4),
            "top5_share": round(float(np.sort(p)[::-1][:k].sum() / p.sum()), 4) if p.sum() > 0 else 0.0,
        }

    # ------------------------------------------------------------------ persistence
    def to_index(self) -> dict[str, list[str]]:
        """MiniOneRec ``index.json``: ``{item_id: ["<a_x>", "<b_y>", ...]}``."""
        return {
            raw: [self.token_name(level, c) for level, c in enumerate(row)]
            for raw, row in zip(self.item_ids, self.codes.tolist())
        }

    def save(self, path: str | Path) -> None:
        """``codebook.json`` (+ ``.codewords.npz`` / ``.residuals.npz`` beside it when present)."""
        path = Path(path)
        stem = path.with_suffix("")
        codewords = None if self.codewords is None else {f"level{i}": a for i, a in enumerate(self.codewords)}
        residuals = None
        if self.residuals is not None:
            residuals = Residuals.of(self.residuals, self.codewords, self.codes).arrays()
        for kind, arrays in (("codewords", codewords), ("residuals", residuals)):
            side = Path(f"{stem}.{kind}.npz")
            if arrays is None:
                side.unlink(missing_ok=True)  # never leave another codebook's arrays beside this one
            else:
                write_npz(side, **arrays)
        write_json(
            path,
            {
                "format": "crabrec.codebook/1",
                "prefixes": self.prefixes,
                "sizes": self.sizes,
                "dedup_levels": self.dedup_levels,
                "meta": self.meta,
                "item_ids": self.item_ids,
                "codes": self.codes.tolist(),
            },
        )

    @classmethod
    def load(cls, path: str | Path) -> Codebook:
        path = Path(path)
        if not path.is_file():
            raise CrabError(f"{path}: codebook not found")
        try:
            data = read_json(path)
            if not isinstance(data, dict) or data.get("format") != "crabrec.codebook/1":
                found = data.get("format") if isinstance(data, dict) else type(data).__name__
                raise CrabError(f"{path}: not a crabrec codebook (format {clip(repr(found))}); re-run its stage")
            stem = path.with_suffix("")
            cw = Path(f"{stem}.codewords.npz")
            rs = Path(f"{stem}.residuals.npz")
            codewords = _levels(load_npz(cw)) if cw.is_file() else None
            raw_codes = np.asarray(data["codes"])
            if raw_codes.dtype.kind not in "iu" and raw_codes.size:  # 2.5 or "3" is no code; int() would cut it
                found = clip(repr(raw_codes.ravel()[0]))
                raise ValueError(f"codes must be whole numbers, found {found} ({raw_codes.dtype})")
            sizes = data["sizes"]
            if not isinstance(sizes, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in sizes):
                raise ValueError(f"sizes must be whole numbers, got {clip(repr(sizes))}")
            codes = raw_codes.astype(np.int64).reshape(len(data["item_ids"]), len(sizes))
            residuals = Residuals.stored(rs, codewords, codes) if rs.is_file() else None
            return _checked_codebook(
                path,
                codes=codes,
                sizes=list(sizes),
                item_ids=[str(i) for i in data["item_ids"]],
                prefixes=list(data["prefixes"]),
                dedup_levels=int(data.get("dedup_levels", 0)),
                codewords=codewords,
                residuals=residuals,
                meta=dict(data.get("meta", {})),
            )
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError, OverflowError) as exc:
            raise CrabError(f"{path}: malformed codebook ({clip(str(exc), 160)}); re-run its stage") from None


def _checked_codebook(path: Path, **fields: Any) -> Codebook:
    """A codebook built from a file's fields; its consistency errors name the file."""
    try:
        return Codebook(**fields)
    except CrabError as exc:
        raise CrabError(f"{path}: {str(exc).removeprefix('codebook: ')}; re-run its stage") from None


def _levels(arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [arrays[f"level{i}"] for i in range(len(arrays))]


def parse_index(path: str | Path, item_ids: list[str] | None) -> Codebook:
    """Import a MiniOneRec ``index.json`` (``{item: ["<a_x>", "<b_y>", "<c_z>"]}``) aligned to ``item_ids`` (None:
    every item of the index, in its order: the file checked on its own)."""
    path = Path(path)
    raw = read_input_json(path)
    if not isinstance(raw, dict) or not raw:
        got = "an empty object" if isinstance(raw, dict) else type(raw).__name__
        raise CrabError(f"{path}: expected an object {{item_id: [token, ...]}}, got {got}")
    item_ids = list(raw) if item_ids is None else item_ids
    missing = [i for i in item_ids if i not in raw]
    if missing:
        raise CrabError(
            f"{path}: item {clip(repr(missing[0]))} of the dataset has no SID ({len(missing)} missing in all)"
        )
    prefixes: list[str] | None = None
    codes = []
    for item in item_ids:
        tokens = raw[item]
        parsed = [TOKEN_RE.fullmatch(t) for t in tokens if isinstance(t, str)] if isinstance(tokens, list) else []
        if not isinstance(tokens, list) or not tokens or len(parsed) != len(tokens) or None in parsed:
            raise CrabError(
                f"{path}: item {clip(repr(item))}: expected a list of tokens like '<a_12>', got {clip(repr(tokens))}"
            )
        pre = [m.group(1) for m in parsed]  # type: ignore[union-attr]
        if prefixes is None:
            prefixes = pre
        elif pre != prefixes:
            raise CrabError(f"{path}: item {clip(repr(item))}: token levels {pre} differ from {prefixes}")
        numbers = [m.group(2) for m in parsed]  # type: ignore[union-attr]
        if any(len(n) > 6 or int(n) >= MAX_CODES for n in numbers):
            raise CrabError(
                f"{path}: item {clip(repr(item))}: token number too large in {clip(repr(tokens))} (max {MAX_CODES - 1})"
            )
        codes.append([int(n) for n in numbers])
    arr = np.asarray(codes, dtype=np.int64)
    sizes = [max(256, int(arr[:, level].max()) + 1) for level in range(arr.shape[1])]
    return Codebook(
        codes=arr, sizes=sizes, item_ids=list(item_ids), prefixes=prefixes or [], meta={"source": str(path)}
    )
