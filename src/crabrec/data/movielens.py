"""The ``movielens`` layout: GroupLens' MovieLens releases as they unpack (or still zipped), every version's own
file format.

- 100K: ``u.data`` (``user<TAB>item<TAB>rating<TAB>time``, no header) and ``u.item`` (``id|title|release
  date|video release date|URL`` and 19 genre flags, their names in ``u.genre``);
- 1M, 10M: ``ratings.dat`` (``user::item::rating::time``) and ``movies.dat`` (``id::title::Genre|Genre``);
- 20M, 25M, 32M, latest: ``ratings.csv`` (``userId,movieId,rating,timestamp``) and ``movies.csv``
  (``movieId,title,genres``).

Every rating is an interaction (the rating itself is ignored, as in the table layout, unless ``data.min_rating``
keeps only the higher ones); times are Unix seconds. An item's text is its ``title`` (with the year, as the files
spell it) and its ``genres`` ("Animation, Comedy"). The older files are Latin-1; they are read as UTF-8 when they
are. ``tags``, ``links``, ``users`` and the genome files are not read.
"""

from __future__ import annotations

import io
import itertools
import logging
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from crabrec.config import DataConfig
from crabrec.data.dataset import Dataset
from crabrec.data.loaders import _group_interactions
from crabrec.data.ratings import rated_at_least
from crabrec.data.reading import UNREADABLE, members_by_name
from crabrec.errors import CrabError, clip, listed, reason
from crabrec.io import not_found

log = logging.getLogger("crabrec")

# interactions file -> item file, per release family
RELEASES = {"u.data": "u.item", "ratings.dat": "movies.dat", "ratings.csv": "movies.csv"}
# ml-100k's u.genre, in flag order (used when u.genre is absent)
GENRES_100K = (
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary", "Drama", "Fantasy",
    "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western",
)  # fmt: skip
NO_GENRES = "(no genres listed)"
HEADER_MOVIES = ("movieId", "title", "genres")


class Release:
    """The files of one release: its folder, its ratings file (the item file beside it), or the ``.zip`` GroupLens
    ships (members found by file name, in whatever folder inside)."""

    def __init__(self, path: Path, item_table: str | None = None) -> None:
        self.path = path
        self.archive = zipfile.ZipFile(path) if path.suffix.lower() == ".zip" and zipfile.is_zipfile(path) else None
        if self.archive is not None:
            self.members = members_by_name(self.archive)
            self.folder = path.with_suffix("")
        else:
            self.folder = path if path.is_dir() else path.parent
            self.members = {p.name: str(p) for p in self.folder.iterdir() if p.is_file()}
        names = [path.name] if path.is_file() and self.archive is None else list(RELEASES)
        self.ratings = next((n for n in names if n in RELEASES and n in self.members), None)
        self.item_path = Path(item_table) if item_table else None

    def __enter__(self) -> Release:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.archive is not None:
            self.archive.close()

    @property
    def items(self) -> str | None:
        """The item file's name when it exists (the user's ``--items``, else the release's own)."""
        if self.item_path is not None:
            return self.item_path.name
        name = RELEASES.get(self.ratings or "")
        return name if name in self.members else None

    def _named_by_user(self, name: str) -> bool:
        return self.item_path is not None and name == self.item_path.name and name != self.ratings

    def where(self, name: str) -> str:
        """The file as messages name it: its path (inside an archive: the archive's path, then the member)."""
        if self._named_by_user(name):
            return str(self.item_path)
        return f"{self.path}/{self.members[name]}" if self.archive is not None else self.members[name]

    def open(self, name: str) -> IO[bytes]:
        if self._named_by_user(name):
            return open(self.item_path, "rb")  # noqa: SIM115 (the caller closes it)
        return self.archive.open(self.members[name]) if self.archive is not None else open(self.members[name], "rb")

    def read(self, name: str) -> bytes:
        with self.open(name) as f:
            return f.read()

    def header(self, name: str) -> list[str]:
        """The first line's comma-separated names (``ratings.csv``, ``movies.csv``)."""
        with self.open(name) as f:
            line = f.readline()
        return [c.strip() for c in line.decode("utf-8", "replace").removeprefix("\ufeff").split(",")]


def is_movielens(path: Path) -> bool:
    """A MovieLens ratings file (``u.data``, ``ratings.dat``); a folder or ``.zip`` holding one, or holding
    ``ratings.csv`` and ``movies.csv`` with the releases' own headers (tables named so otherwise are the table
    layout)."""
    if path.is_file() and path.suffix.lower() != ".zip":
        return path.name in ("u.data", "ratings.dat")
    try:
        with Release(path) as release:
            if release.archive is None and path.is_file():
                return False
            if release.ratings in ("u.data", "ratings.dat"):
                return True
            return all(
                name in release.members and set(columns) <= set(release.header(name))
                for name, columns in (("ratings.csv", ("userId", "movieId")), ("movies.csv", HEADER_MOVIES))
            )
    except UNREADABLE:
        return False  # (the layout that reads it says why)


def open_release(path: Path, item_table: str | None = None) -> Release:
    """The release at ``path`` (``item_table``: the item file named by the user), or a one-line error."""
    try:
        release = Release(path, item_table)
    except UNREADABLE as exc:
        raise CrabError(f"{path}: cannot read ({reason(exc)})") from None
    if release.ratings is None:
        raise CrabError(f"{path}: not a MovieLens release (expected {', '.join(RELEASES)}); set --format")
    if item_table and release.item_path.name not in RELEASES.values():
        raise CrabError(f"{item_table}: a MovieLens item file is named {', '.join(RELEASES.values())}")
    if item_table and not release.item_path.is_file():
        raise not_found(item_table)
    return release


def load_movielens(path: Path, cfg: DataConfig) -> Dataset:
    with open_release(path, cfg.item_table) as release:
        try:
            return _load(path, release, cfg.missing_items == "drop", cfg.min_rating)
        except UNREADABLE as exc:
            raise CrabError(f"{path}: cannot read ({reason(exc)})") from None


def _load(path: Path, release: Release, drop_missing: bool, min_rating: float | None = None) -> Dataset:
    ratings, item_file = release.ratings, release.items
    where = release.where(ratings)
    if ratings == "ratings.csv":
        needed = ("userId", "movieId", "timestamp") + (("rating",) if min_rating is not None else ())
        inter = _csv(release, ratings, needed, "userId, movieId, rating, timestamp")
        inter = inter.rename(columns={"userId": "user", "movieId": "item"})
        line_of: Callable[[int], int] = lambda row: row + 2  # noqa: E731 (after the header)
    else:
        inter, line_of = _headerless(release, ratings, "\t" if ratings == "u.data" else "::")
    ts = _times(inter["timestamp"], where, line_of)
    if min_rating is not None:
        keep = rated_at_least(inter["rating"], min_rating, where, "rating", lambda row: f"{where}: line {line_of(row)}")
        inter, ts = inter[keep].reset_index(drop=True), ts[keep]
    items = _items(release, item_file) if item_file else {raw: {} for raw in inter["item"].unique()}
    name, source = release.folder.name or "movielens", path if release.archive is not None else release.folder
    ds = _group_interactions(name, source, inter, "user", "item", ts, items, where, drop_missing)
    expected_items = RELEASES[ratings]
    if item_file is None:
        ds.has_text = False
        ds.notes.append(f"no {expected_items}: ids-only data, semantic IDs come from SASRec's item embeddings")
    log.info(
        "%s: MovieLens, interactions from %s, %s", path, ratings,
        f"titles and genres from {item_file}" if item_file else f"no {expected_items}",
    )  # fmt: skip
    return ds


def _decode(release: Release, name: str) -> str:
    """The file's text: UTF-8 where it is, else Latin-1 (the older releases' encoding)."""
    data = release.read(name)
    if not data.strip():
        raise CrabError(f"{release.where(name)}: the file is empty")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _csv(release: Release, name: str, needed: tuple[str, ...], expected: str) -> pd.DataFrame:
    """``ratings.csv`` or ``movies.csv`` (a header line, then quoted CSV), every cell a string."""
    text = _decode(release, name)
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise CrabError(f"{release.where(name)}: cannot parse table ({reason(exc)})") from None
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise CrabError(
            f"{release.where(name)}: missing column(s) {', '.join(missing)}; expected {expected} "
            f"(found {listed(frame.columns)})"
        )
    return frame


def _headerless(release: Release, name: str, sep: str) -> tuple[pd.DataFrame, Callable[[int], int]]:
    """``user, item, rating, time`` rows without a header, separated by ``sep`` (one character or ``::``), and
    the 1-based line of a row."""
    text, path = _decode(release, name), release.where(name)
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


def _times(values: pd.Series, path: str, line_of: Callable[[int], int]) -> np.ndarray:
    numbers = pd.to_numeric(values.str.strip(), errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(numbers))
    if len(bad):
        row = int(bad[0])
        raise CrabError(
            f"{path}: line {line_of(row)}: timestamp {clip(repr(values.iloc[row]))} is not Unix time (seconds)"
        )
    return numbers


def _items(release: Release, name: str) -> dict[str, dict[str, str]]:
    """Item id -> ``{"title", "genres"}`` from ``u.item``, ``movies.dat`` or ``movies.csv``."""
    where = release.where(name)
    if name == "movies.csv":
        table = _csv(release, name, HEADER_MOVIES, ", ".join(HEADER_MOVIES))
        rows = zip(table["movieId"], table["title"], table["genres"].str.split("|"), strict=True)
        return _records(where, ((i, t, g, n) for n, (i, t, g) in enumerate(rows, start=2)))
    text = _decode(release, name)
    if name == "u.item":
        genres = _genre_names(release, "u.genre") if "u.genre" in release.members else GENRES_100K
        return _records(where, _u_item(where, text, genres))
    return _records(where, _movies_dat(where, text))


def _records(path: str, rows: Iterator[tuple[str, str, list[str], int]]) -> dict[str, dict[str, str]]:
    items: dict[str, dict[str, str]] = {}
    for raw_id, title, genres, line in rows:
        raw_id = str(raw_id).strip()
        if raw_id in items:
            raise CrabError(f"{path}: line {line}: duplicate movie id {clip(repr(raw_id))}")
        kept = [g.strip() for g in genres if g.strip() and g.strip() != NO_GENRES]
        items[raw_id] = {"title": str(title).strip(), "genres": ", ".join(kept)}
    return items


def _movies_dat(path: str, text: str) -> Iterator[tuple[str, str, list[str], int]]:
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        raw_id, _, rest = line.partition("::")
        title, sep, genres = rest.rpartition("::")
        if not sep or not raw_id.strip():
            raise CrabError(f"{path}: line {n}: expected id::title::genres, got {clip(repr(line))}")
        yield raw_id, title, genres.split("|"), n


def _genre_names(release: Release, name: str) -> tuple[str, ...]:
    """``u.genre``'s names in flag order (``name|index`` lines)."""
    pairs = [line.rsplit("|", 1) for line in _decode(release, name).splitlines() if line.strip()]
    try:
        return tuple(genre for genre, _ in sorted(pairs, key=lambda p: int(p[1])))
    except (ValueError, IndexError):
        raise CrabError(f"{release.where(name)}: expected 'genre|index' lines") from None


def _u_item(path: str, text: str, genres: tuple[str, ...]) -> Iterator[tuple[str, str, list[str], int]]:
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
