"""The ``movielens`` layout: GroupLens' MovieLens releases as they unpack, every version's own file format.

- 100K: ``u.data`` (``user<TAB>item<TAB>rating<TAB>time``, no header) and ``u.item`` (``id|title|release
  date|video release date|URL`` and 19 genre flags, their names in ``u.genre``);
- 1M, 10M: ``ratings.dat`` (``user::item::rating::time``) and ``movies.dat`` (``id::title::Genre|Genre``);
- 20M, 25M, 32M, latest: ``ratings.csv`` (``userId,movieId,rating,timestamp``) and ``movies.csv``
  (``movieId,title,genres``).

Every rating is an interaction (the rating itself is ignored, as in the table layout); times are Unix seconds. An
item's text is its ``title`` (with the year, as the files spell it) and its ``genres`` ("Animation, Comedy"). The
older files are Latin-1; they are read as UTF-8 when they are. ``tags``, ``links``, ``users`` and the genome files
are not read.
"""

from __future__ import annotations

import io
import itertools
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from crabrec.config import DataConfig
from crabrec.data.dataset import Dataset
from crabrec.data.loaders import _group_interactions
from crabrec.data.reading import read_table
from crabrec.errors import CrabError, clip, reason

log = logging.getLogger("crabrec")

# interactions file -> item file, per release family
RELEASES = {"u.data": "u.item", "ratings.dat": "movies.dat", "ratings.csv": "movies.csv"}
# ml-100k's u.genre, in flag order (used when u.genre is absent)
GENRES_100K = (
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary", "Drama", "Fantasy",
    "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western",
)  # fmt: skip
NO_GENRES = "(no genres listed)"


def is_movielens(path: Path) -> bool:
    """A MovieLens ratings file (``u.data``, ``ratings.dat``), or a folder holding one, or holding ``ratings.csv``
    and ``movies.csv`` with the releases' own headers (a folder of tables named so otherwise is the table layout)."""
    if path.is_file():
        return path.name in ("u.data", "ratings.dat")
    if (path / "u.data").is_file() or (path / "ratings.dat").is_file():
        return True
    return all(
        (path / name).is_file() and set(columns) <= set(read_table(path / name, header_only=True).columns)
        for name, columns in (("ratings.csv", ("userId", "movieId")), ("movies.csv", ("movieId", "title", "genres")))
    )


def release_files(path: Path, item_table: str | None = None) -> tuple[Path, Path]:
    """``(ratings file, item file)`` (``item_table``: the item file named by the user); the item file may not
    exist."""
    ratings = path if path.is_file() else next((path / n for n in RELEASES if (path / n).is_file()), path / "-")
    if ratings.name not in RELEASES:
        raise CrabError(f"{path}: not a MovieLens release (expected {', '.join(RELEASES)}); set --format")
    items = Path(item_table) if item_table else ratings.parent / RELEASES[ratings.name]
    if item_table and items.name not in RELEASES.values():
        raise CrabError(f"{items}: a MovieLens item file is named {', '.join(RELEASES.values())}")
    if item_table and not items.is_file():
        raise CrabError(f"{items}: file not found")
    return ratings, items


def load_movielens(path: Path, cfg: DataConfig) -> Dataset:
    ratings, item_path = release_files(path, cfg.item_table)
    folder = ratings.parent
    if ratings.name == "ratings.csv":
        inter = read_table(ratings)
        missing = [c for c in ("userId", "movieId", "timestamp") if c not in inter.columns]
        if missing:
            raise CrabError(
                f"{ratings}: missing column(s) {', '.join(missing)}; expected userId, movieId, rating, timestamp "
                f"(found {', '.join(map(str, inter.columns))})"
            )
        inter = inter.rename(columns={"userId": "user", "movieId": "item"})
        line_of: Callable[[int], int] = lambda row: row + 2  # noqa: E731 (after the header)
    else:
        inter, line_of = _headerless(ratings, "\t" if ratings.name == "u.data" else "::")
    ts = _times(inter["timestamp"], ratings, line_of)
    items = _items(item_path) if item_path.is_file() else {raw: {} for raw in inter["item"].unique()}
    ds = _group_interactions(folder.name or "movielens", folder, inter, "user", "item", ts, items, str(ratings))
    if not item_path.is_file():
        ds.has_text = False
        ds.notes.append(f"no {item_path.name}: ids-only data, semantic IDs come from SASRec's item embeddings")
    log.info(
        "%s: MovieLens, interactions from %s, %s", folder, ratings.name,
        f"titles and genres from {item_path.name}" if item_path.is_file() else f"no {item_path.name}",
    )  # fmt: skip
    return ds


def _decode(path: Path) -> str:
    """The file's text: UTF-8 where it is, else Latin-1 (the older releases' encoding)."""
    data = path.read_bytes()
    if not data.strip():
        raise CrabError(f"{path}: the file is empty")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _headerless(path: Path, sep: str) -> tuple[pd.DataFrame, Callable[[int], int]]:
    """``user, item, rating, time`` rows without a header, separated by ``sep`` (one character or ``::``), and
    the 1-based line of a row."""
    text = _decode(path)
    if sep == "::":
        text = text.replace("::", "\t")  # every field is a number: pandas' C parser reads tabs fast

    def line_of(row: int) -> int:
        rows = (n for n, line in enumerate(text.splitlines(), start=1) if line.strip())
        return next(itertools.islice(rows, row, None), row + 1)

    shown = "tab" if sep == "\t" else sep
    expected = f"expected 4 fields separated by {shown!r} (user, item, rating, time)"
    try:
        frame = pd.read_csv(io.StringIO(text), sep="\t", header=None, dtype=str, keep_default_na=False, names=range(5))
    except pd.errors.ParserError as exc:
        raise CrabError(f"{path}: {expected} ({reason(exc)})") from None
    bad = np.flatnonzero(((frame != "").sum(axis=1) != 4).to_numpy() | (frame[3] == "").to_numpy())
    if len(bad):
        line = line_of(int(bad[0]))
        got = text.splitlines()[line - 1].replace("\t", sep)
        raise CrabError(f"{path}: line {line}: {expected}, got {clip(repr(got))}")
    frame = frame.iloc[:, :4]
    frame.columns = ["user", "item", "rating", "timestamp"]
    return frame, line_of


def _times(values: pd.Series, path: Path, line_of: Callable[[int], int]) -> np.ndarray:
    numbers = pd.to_numeric(values.str.strip(), errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(numbers))
    if len(bad):
        row = int(bad[0])
        raise CrabError(
            f"{path}: line {line_of(row)}: timestamp {clip(repr(values.iloc[row]))} is not Unix time (seconds)"
        )
    return numbers


def _items(path: Path) -> dict[str, dict[str, str]]:
    """Item id -> ``{"title", "genres"}`` from ``u.item``, ``movies.dat`` or ``movies.csv``."""
    if path.name == "movies.csv":
        table = read_table(path)
        missing = [c for c in ("movieId", "title", "genres") if c not in table.columns]
        if missing:
            raise CrabError(
                f"{path}: missing column(s) {', '.join(missing)}; expected movieId, title, genres "
                f"(found {', '.join(map(str, table.columns))})"
            )
        rows = zip(table["movieId"], table["title"], table["genres"].str.split("|"), strict=True)
        return _records(path, ((i, t, g, n) for n, (i, t, g) in enumerate(rows, start=2)))
    text = _decode(path)
    if path.name == "u.item":
        names = _genre_names(path.parent / "u.genre")
        return _records(path, _u_item(path, text, names))
    return _records(path, _movies_dat(path, text))


def _records(path: Path, rows: Iterator[tuple[str, str, list[str], int]]) -> dict[str, dict[str, str]]:
    items: dict[str, dict[str, str]] = {}
    for raw_id, title, genres, line in rows:
        raw_id = str(raw_id).strip()
        if raw_id in items:
            raise CrabError(f"{path}: line {line}: duplicate movie id {clip(repr(raw_id))}")
        kept = [g.strip() for g in genres if g.strip() and g.strip() != NO_GENRES]
        items[raw_id] = {"title": str(title).strip(), "genres": ", ".join(kept)}
    return items


def _movies_dat(path: Path, text: str) -> Iterator[tuple[str, str, list[str], int]]:
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        raw_id, _, rest = line.partition("::")
        title, sep, genres = rest.rpartition("::")
        if not sep or not raw_id.strip():
            raise CrabError(f"{path}: line {n}: expected id::title::genres, got {clip(repr(line))}")
        yield raw_id, title, genres.split("|"), n


def _genre_names(path: Path) -> tuple[str, ...]:
    """``u.genre``'s names in flag order (``name|index`` lines), or the 100K release's 19."""
    if not path.is_file():
        return GENRES_100K
    pairs = [line.rsplit("|", 1) for line in _decode(path).splitlines() if line.strip()]
    try:
        return tuple(name for name, _ in sorted(pairs, key=lambda p: int(p[1])))
    except (ValueError, IndexError):
        raise CrabError(f"{path}: expected 'genre|index' lines") from None


def _u_item(path: Path, text: str, genres: tuple[str, ...]) -> Iterator[tuple[str, str, list[str], int]]:
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("|")
        flags = fields[-len(genres) :]
        if len(fields) < 2 + len(genres) or any(f not in ("0", "1") for f in flags):
            raise CrabError(
                f"{path}: line {n}: expected id|title|release date|video release date|URL and {len(genres)} genre "
                f"flags (0 or 1), got {clip(repr(line))}"
            )
        yield fields[0], fields[1], [g for g, f in zip(genres, flags, strict=True) if f == "1"], n
