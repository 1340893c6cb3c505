"""Each item's residual entering every level of a codebook, held as one level and the rows that differ.

Residual quantization makes ``r_l = r_{l-1} - w_{l-1}[c_{l-1}]``: every deeper level follows from the first, the
codewords ``w`` and the codes ``c``. :class:`Residuals` keeps the first level and, of each deeper level, only the
rows the recursion does not give bit for bit (none for a quantizer's own residuals, the moved items for a rebalanced
codebook, a whole level where there are no codewords to recompute it from), and computes a level when it is read:
a catalogue of a million items holds one level's worth (1.7 GB at 384 dimensions) instead of every level's. A
codebook's ``.residuals.npz`` holds the same arrays (``level0``, then ``rows{l}`` and ``level{l}``; a level without
``rows{l}``, as older files write every level, is the whole level) and is read when first used: only CRAB's
rebalancing reads residuals, never ranking or serving.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from crabrec.errors import CrabError, clip
from crabrec.io import load_npz

WHOLE = None  # the rows of a level kept whole


class Residuals(Sequence):
    """``count`` levels of ``[n_items, ...]`` residuals: ``first``, and per deeper level ``changed[l] = (rows,
    values)`` (``rows`` None: ``values`` is the whole level)."""

    def __init__(
        self,
        first: np.ndarray | None,
        codewords: list[np.ndarray] | None,
        codes: np.ndarray,
        count: int,
        changed: dict[int, tuple[np.ndarray | None, np.ndarray]] | None = None,
        source: Path | None = None,
    ) -> None:
        self.first, self.codewords, self.codes, self.count = first, codewords, codes, count
        self.changed = dict(changed or {})
        self.source, self.stamp = source, None
        if source is not None:  # read when first used; a file replaced meanwhile is not mixed in
            stat = source.stat()
            self.stamp = (stat.st_size, stat.st_mtime_ns)

    @classmethod
    def stored(cls, path: Path, codewords: list[np.ndarray] | None, codes: np.ndarray) -> Residuals:
        """A codebook's ``.residuals.npz``, read when first used."""
        return cls(None, codewords, codes, 0, source=path)

    @classmethod
    def of(cls, levels: Sequence[np.ndarray], codewords: list[np.ndarray] | None, codes: np.ndarray) -> Residuals:
        """``levels`` (any sequence of arrays) as the first level and the rows the recursion does not give."""
        if isinstance(levels, Residuals) and levels.follows(codewords, codes):
            return levels
        first, changed, previous = None, {}, None
        for level, current in enumerate(levels):
            current = np.asarray(current)
            if level == 0:
                first = current
            else:
                try:
                    expected = _next(previous, codewords or [], codes, level, current.dtype, current.shape[1:])
                    rows = np.flatnonzero((expected != current).reshape(len(current), -1).any(1))
                    changed[level] = (rows, current[rows])
                except (IndexError, ValueError):  # no codewords, or none that fit: the level is kept whole
                    changed[level] = (WHOLE, current)
            previous = current
        return cls(first, codewords, codes, 0 if first is None else len(levels), changed)

    def follows(self, codewords: list[np.ndarray] | None, codes: np.ndarray) -> bool:
        """Whether these residuals were taken with these codewords and codes (then they need not be compared)."""
        same_words = self.codewords is codewords or (
            self.codewords is not None
            and codewords is not None
            and len(self.codewords) == len(codewords)
            and all(a is b or np.array_equal(a, b) for a, b in zip(self.codewords, codewords))
        )
        return same_words and (self.codes is codes or np.array_equal(self.codes, codes))

    def extended(self, codewords: list[np.ndarray], codes: np.ndarray) -> Residuals:
        """One level more (a dedup level's residual: the last level's less its codeword), under these codewords and
        codes, which extend this one's."""
        self._read()
        return Residuals(self.first, codewords, codes, self.count + 1, self.changed)

    def arrays(self) -> dict[str, np.ndarray]:
        """What a ``.residuals.npz`` holds."""
        self._read()
        out = {"level0": self.first}
        dtype, width = self.first.dtype, self.first.shape[1:]
        for level in range(1, self.count):
            rows, values = self.changed.get(level, (np.zeros(0, np.int64), np.zeros((0, *width), dtype)))
            if rows is not None:
                out[f"rows{level}"] = rows
            out[f"level{level}"] = values
            dtype, width = values.dtype, values.shape[1:]
        return out

    def __iter__(self) -> Iterator[np.ndarray]:
        self._read()
        current = self.first
        for level in range(self.count):
            if level:
                current = self._level(level, current)
            yield current

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return list(self)[index]
        count = len(self)
        if not -count <= index < count:
            raise IndexError(f"level {index} of {count}")
        for level, current in enumerate(self):
            if level == index % count:
                return current
        raise IndexError(index)

    def __len__(self) -> int:
        self._read()
        return self.count

    def _level(self, level: int, previous: np.ndarray) -> np.ndarray:
        rows, values = self.changed.get(level, (None, None))
        if values is not None and rows is WHOLE:
            return values
        dtype, width = (previous.dtype, previous.shape[1:]) if values is None else (values.dtype, values.shape[1:])
        out = _next(previous, self.codewords or [], self.codes, level, dtype, width)
        if values is not None:
            out[rows] = values
        return out

    def _read(self) -> None:
        if self.source is None or self.first is not None:
            return
        path = self.source
        stat = path.stat() if path.is_file() else None
        if stat is None or (stat.st_size, stat.st_mtime_ns) != self.stamp:
            raise CrabError(f"{path}: changed since its codebook was read; run the command again")
        arrays = load_npz(path)
        try:
            count = sum(name.startswith("level") for name in arrays)
            first = arrays["level0"]
            changed = {level: (arrays.get(f"rows{level}"), arrays[f"level{level}"]) for level in range(1, count)}
            if len(first) != len(self.codes):
                raise ValueError(f"level 0 has {len(first)} rows for {len(self.codes)} items")
            width = first.shape[1:]
            for level in range(1, count):  # every level will compute (checked without computing it)
                rows, values = changed[level]
                if rows is WHOLE and len(values) != len(self.codes):
                    raise ValueError(f"level {level} has {len(values)} rows for {len(self.codes)} items")
                if rows is not WHOLE:
                    if rows.dtype.kind not in "iu" or len(rows) != len(values):
                        raise ValueError(f"level {level}: {len(rows)} changed rows for {len(values)} values")
                    n, outside = len(self.codes), rows[(rows < 0) | (rows >= len(self.codes))]
                    if len(outside):
                        raise IndexError(f"index {outside[0]} of level {level}'s rows is beyond its {n} items")
                    fits(self.codewords or [], self.codes, level, width, values.shape[1:])
                width = values.shape[1:]
            self.first, self.changed, self.count = first, changed, count
        except (KeyError, IndexError, ValueError) as exc:
            self.first = None
            raise CrabError(f"{path}: malformed residuals ({clip(str(exc), 160)}); re-run its stage") from None


CHUNK = 65_536  # rows subtracted at a time: no [n_items, d] array of chosen codewords is made


def less_codewords(residual: np.ndarray, words: np.ndarray, codes: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out = residual - words[codes]``, a chunk of rows at a time (``out`` may be ``residual``: in place); the
    values are those of the one subtraction, bit for bit."""
    for start in range(0, len(residual), CHUNK):
        rows = slice(start, start + CHUNK)
        out[rows] = residual[rows] - words[codes[rows]]
    return out


def _next(previous: np.ndarray, codewords: list[np.ndarray], codes: np.ndarray, level: int, dtype, width: tuple):
    """The residual entering ``level``: the one entering ``level - 1`` less its chosen codeword, as ``dtype`` with
    rows of shape ``width`` (ValueError or IndexError when the codewords do not fit)."""
    if len(codes) != len(previous):
        raise ValueError(f"level {level - 1} has {len(previous)} rows for {len(codes)} items")
    fits(codewords, codes, level, previous.shape[1:], width)
    return less_codewords(previous, codewords[level - 1], codes[:, level - 1], np.empty((len(previous), *width), dtype))


def fits(codewords: list[np.ndarray], codes: np.ndarray, level: int, before: tuple, width: tuple) -> None:
    """That level ``level`` (rows of shape ``width``) follows from the level before it (rows of shape ``before``)
    by its codewords: ValueError or IndexError when they do not fit."""
    if len(codewords) < level or codes.shape[1] < level:
        raise IndexError(f"no codewords or codes to compute level {level} from")
    words, chosen = codewords[level - 1], codes[:, level - 1]
    found = np.broadcast_shapes(before, words.shape[1:])
    if found != width:
        raise ValueError(f"level {level}'s rows have shape {width}, its recursion gives {found}")
    if len(chosen) and (chosen.min() < -len(words) or chosen.max() >= len(words)):
        raise IndexError(f"level {level - 1} has codes beyond its {len(words)} codewords")
