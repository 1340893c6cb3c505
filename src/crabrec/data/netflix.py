"""The ``netflix`` layout: the Netflix Prize training data as Kaggle ships it (``combined_data_1.txt`` to
``combined_data_4.txt``) or as Netflix did (``training_set/mv_0000001.txt`` ..., one file a movie), with
``movie_titles.csv``.

The ratings are grouped by movie: a line ``ID:`` starts a movie's ratings, then one rating a line,
``customer,rating,date`` (``1488844,3,2005-09-06``). ``movie_titles.csv`` (``.txt`` in the original) has no header:
``ID,year,title``, the title unquoted and perhaps holding commas, in Latin-1; the year may be ``NULL``.

Every rating is an interaction (``data.min_rating`` keeps the higher ones). The times are days, so a user's ratings
of one day keep their file order (by movie). An item's text is its ``title`` and ``year``. ``probe.txt`` (ratings
the training data already holds) and ``qualifying.txt`` (no ratings) are not read.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd

from crabrec.config import DataConfig
from crabrec.data.dataset import Dataset
from crabrec.data.loaders import _group_interactions
from crabrec.data.ratings import rated_at_least
from crabrec.data.table import dataset_name
from crabrec.errors import CrabError, clip, reason

log = logging.getLogger("crabrec")

MOVIE_LINE = re.compile(r"\s*(\d+):\s*")  # the line that starts a movie's ratings
TITLES = ("movie_titles.csv", "movie_titles.txt")
NO_RATINGS = ("probe.txt", "qualifying.txt")  # the pairs to predict, as the prize shipped them
CHUNK_ROWS = 2_000_000  # the lines read at a time: the four Kaggle files hold 100 million ratings
EXPECTED = "expected a movie line 'ID:' or a rating 'customer,rating,date' (e.g. 1488844,3,2005-09-06)"


def _starts_a_movie(path: Path) -> bool:
    """Whether the file's first line is a movie line (``1:``), as no table's is."""
    try:
        with open(path, "rb") as f:
            head = f.readline(256).decode("latin-1")
    except OSError:
        return False
    return bool(MOVIE_LINE.fullmatch(head.rstrip("\r\n")))


def rating_files(path: Path) -> list[Path]:
    """The rating files of ``path``: itself, when it is one; in a folder, ``combined_data_*.txt`` (in their number's
    order), else the ``mv_*.txt`` files in it or in ``training_set/``; [] when none starts as a Netflix file."""
    if path.is_file():
        return [path] if _starts_a_movie(path) else []
    if not path.is_dir():
        return []
    found = sorted(path.glob("combined_data_*.txt"), key=_number)
    if not found:
        folder = path / "training_set" if (path / "training_set").is_dir() else path
        found = sorted(folder.glob("mv_*.txt"), key=_number)
    return found if found and _starts_a_movie(found[0]) else []


def _number(path: Path) -> tuple[int, str]:
    digits = re.findall(r"\d+", path.name)
    return (int(digits[-1]) if digits else 0, path.name)


def titles_file(path: Path) -> Path | None:
    """``movie_titles.csv`` (or ``.txt``) in the folder given or beside it, or beside the rating file given or its
    folder (``training_set/``)."""
    folders = [path, path.parent] if path.is_dir() else [path.parent, path.parent.parent]
    return next((f / name for f in folders for name in TITLES if (f / name).is_file()), None)


def is_netflix(path: Path) -> bool:
    return bool(rating_files(path))


def load_netflix(path: Path, cfg: DataConfig) -> Dataset:
    files = rating_files(path)
    if not files:
        raise CrabError(
            f"{path}: not Netflix Prize data (expected combined_data_*.txt or training_set/mv_*.txt, each starting "
            "with a movie line '1:'); set --format"
        )
    unrated = [f for f in files if f.name.lower() in NO_RATINGS]
    if unrated:
        raise CrabError(
            f"{unrated[0]}: Netflix's {unrated[0].stem} set lists pairs to predict, without ratings; give the training "
            "data (combined_data_*.txt, training_set/, or their folder)"
        )
    frames = [_ratings(f) for f in files]
    inter = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    where = str(path)
    if cfg.min_rating is not None:  # (every rating was read as a number, or its line was an error)
        keep = rated_at_least(inter["rating"], cfg.min_rating, where, "rating", lambda row: where)
        inter = inter[keep].reset_index(drop=True)
    ts = inter["day"].to_numpy(dtype=np.float64) * 86_400.0
    titles = titles_file(path)
    items = _titles(titles) if titles else {str(raw): {} for raw in pd.unique(inter["item"])}
    ds = _group_interactions(
        dataset_name(path), path, inter, "user", "item", ts, items, where, cfg.missing_items == "drop"
    )
    if titles is None:
        ds.has_text = False
        ds.notes.append("no movie_titles.csv: ids-only data, semantic IDs come from SASRec's item embeddings")
    log.info(
        "%s: Netflix Prize, ratings from %s, %s", path, ", ".join(f.name for f in files) if len(files) < 5
        else f"{len(files):,} files", f"titles from {titles.name}" if titles else "no movie_titles.csv",
    )  # fmt: skip
    return ds


def _ratings(path: Path) -> pd.DataFrame:
    """One rating file as rows (user, item, rating, day; numbers): each rating's movie is the last movie line above
    it."""
    out, movie, line = [], None, 1
    try:
        chunks = pd.read_csv(
            path, header=None, names=["user", "rating", "date"], dtype=str, keep_default_na=False,
            skip_blank_lines=False, chunksize=CHUNK_ROWS, encoding="latin-1",
        )  # fmt: skip
        for chunk in chunks:
            rows, movie = _chunk(chunk, path, line, movie)
            out.append(rows)
            line += len(chunk)
    except pd.errors.ParserError as exc:  # "Expected 3 fields in line 7, saw 4"
        found = re.search(r"line (\d+), saw (\d+)", str(exc))
        where = f"line {found[1]}: {EXPECTED}, got {found[2]} fields" if found else f"{EXPECTED} ({reason(exc)})"
        raise CrabError(f"{path}: {where}") from None
    except OSError as exc:
        raise CrabError(f"{path}: cannot read ({reason(exc)})") from None
    return pd.concat(out, ignore_index=True) if len(out) > 1 else out[0]


def _chunk(chunk: pd.DataFrame, path: Path, line: int, movie: float | None) -> tuple[pd.DataFrame, float | None]:
    """The ratings of a chunk of lines starting at line ``line``, the movie in force before it being ``movie``;
    returns them and the movie in force after it."""
    first = chunk["user"].str.strip()
    blank = (first == "") & (chunk["rating"] == "") & (chunk["date"] == "")
    heads = first.str.fullmatch(r"\d+:") & (chunk["rating"] == "") & (chunk["date"] == "")
    ids = pd.to_numeric(first.where(heads).str[:-1]).ffill()
    if movie is not None:
        ids = ids.fillna(movie)
    rows = ~(heads | blank).to_numpy()
    user = pd.to_numeric(first, errors="coerce").to_numpy(dtype=np.float64)
    rating = pd.to_numeric(chunk["rating"].str.strip(), errors="coerce").to_numpy(dtype=np.float64)
    date = pd.to_datetime(chunk["date"].str.strip(), format="%Y-%m-%d", errors="coerce")
    bad = rows & (np.isnan(user) | ~np.isfinite(rating) | date.isna().to_numpy())
    if bad.any():
        n = int(np.flatnonzero(bad)[0])
        shown = ",".join(c for c in chunk.iloc[n] if c != "")
        raise CrabError(f"{path}: line {line + n}: {EXPECTED}, got {clip(repr(shown))}")
    orphan = rows & ids.isna().to_numpy()
    if orphan.any():
        n = int(np.flatnonzero(orphan)[0])
        raise CrabError(f"{path}: line {line + n}: a rating before any movie line ('ID:'); {EXPECTED}")
    days = (date[rows] - pd.Timestamp("1970-01-01")).dt.days.to_numpy(dtype=np.int32)
    frame = pd.DataFrame(
        {
            "user": user[rows].astype(np.int64),
            "item": ids[rows].to_numpy(dtype=np.int64),
            "rating": rating[rows].astype(np.float32),
            "day": days,
        }
    )
    last = ids.iloc[-1] if len(ids) else np.nan
    return frame, movie if np.isnan(last) else float(last)


def _titles(path: Path) -> dict[str, dict[str, str]]:
    """Movie id -> ``{"title", "year"}`` from ``movie_titles.csv``: ``ID,year,title`` a line, the title holding any
    commas (no quoting); a ``NULL`` year is left out."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    items: dict[str, dict[str, str]] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        fields = raw.split(",", 2)
        if len(fields) < 3 or not fields[0].strip().isdigit():
            raise CrabError(
                f"{path}: line {n}: expected 'ID,year,title' (e.g. 1,2003,Dinosaur Planet), got {clip(repr(raw))}"
            )
        movie, year, title = (f.strip() for f in fields)
        items.setdefault(str(int(movie)), {"title": title, **({"year": year} if year.isdigit() else {})})
    return items
