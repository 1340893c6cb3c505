"""The ``table`` layout: a plain CSV/TSV/JSON-lines/Parquet table of interactions (the text ones may be
compressed), optionally with an item table.

Column names are detected when the configured ones (``data.user_col``, ``data.item_col``, ``data.time_col``) are
at their defaults and absent: ``user_id``, ``userId``, ``movieId``, ``date`` and the like (see the ``*_NAMES``
below). Timestamps may be Unix seconds, milliseconds (or finer), or dates such as ``2023-01-06 05:00:00``. The item
table has its own id column (``data.item_table_id_col``, else the interaction file's item column, else detected); its
other columns are the item text. Without an item table the data is ids-only. A folder holding one interaction file
(and at most one item table) is read as if both files had been named.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from crabrec.config import DataConfig
from crabrec.data.dataset import Dataset
from crabrec.data.ids import id_key
from crabrec.data.inline_text import inline_items, text_columns
from crabrec.data.loaders import _group_interactions, _items_from_frame, _read_csv
from crabrec.data.orders import Joined, find_join, read_joined
from crabrec.data.ratings import RATING_NAMES, rated_at_least
from crabrec.data.reading import (
    COMPRESSIONS,
    DATE_CELL,
    KINDS,
    NULLS,
    SPLIT_WORDS,
    Origin,
    exploded,
    first_cells,
    guess_columns,
    headerless_tables,
    id_cells,
    id_list,
    id_list_column,
    item_lines,
    item_lines_frame,
    looks_like_a_row,
    named_tables,
    parquet_dataset,
    read_parts,
    read_rows,
    read_table,
    record_fields,
    row_not_header,
    split_tables,
    table_kind,
    unfilled,
    unnested,
    whole_numbers,
)
from crabrec.data.times import DAY_MONTH, AmbiguousDates, per_second, timestamps
from crabrec.errors import CrabError, clip, listed

log = logging.getLogger("crabrec")

USER_NAMES = (
    "user", "user_id", "userid", "uid", "customer_id", "reviewer_id", "reviewerid", "visitor_id", "member_id",
    "client_id", "account_id", "session_id", "session", "household_key", "household_id",
    # a column named for whom it holds, without "id" (``customer,product,date``): looked for after every id name
    "customer", "client", "member", "visitor", "reviewer", "account", "buyer", "viewer", "listener", "reader",
)  # fmt: skip
ITEM_NAMES = (
    "item", "item_id", "itemid", "iid", "movie_id", "movieid", "product_id", "productid", "parent_asin", "asin",
    "article_id", "book_id", "isbn", "track_id", "song_id", "business_id", "recipe_id", "anime_id", "app_id", "game_id",
    "news_id", "video_id", "course_id", "poi_id", "artist_id", "album_id", "hotel_id", "restaurant_id", "post_id",
    "sku", "stock_code", "product_code", "aid", "venue_id", "place_id",
)  # fmt: skip
# an interaction table's item column named for what it holds, without "id", looked for after every id name; not in
# an item table, where ``product`` or ``movie`` beside an ``id`` column is more likely a name than the id
ITEM_WORDS = (
    "product", "movie", "book", "song", "track", "article", "video", "game", "course", "recipe", "business",
    "restaurant", "hotel", "venue", "place", "poi", "artist", "album", "anime", "app", "news", "post",
)  # fmt: skip
INTERACTION_ITEM_NAMES = (*ITEM_NAMES, *ITEM_WORDS)
TIME_NAMES = ("timestamp", "time", "date", "datetime", "ts", "unix_time", "unixreviewtime", "event_time", "created_at")
# a column named for a time by its last word (``order_date``, ``eventTimestamp``, ``created_at``), when none of
# TIME_NAMES is present
TIME_WORDS = ("timestamp", "datetime", "date", "time", "ts")
EARLIEST = 1e8  # Unix seconds (1973-03-03): a column named like a time whose values are smaller holds durations
DEFAULTS = {"user_col": "user", "item_col": "item", "time_col": "timestamp", "rating_col": "rating"}
SESSION = "session"  # the user column made for a table of sessions without one
# words in the name of a column that lists a user's items (item_ids, prev_items, history, movie_seq, asins)
LIST_WORDS = ("item", "product", "movie", "book", "asin", "song", "track", "video", "article", "news", "history", "seq")
GLANCE_ROWS = 1000  # the rows table_revision reads
YYYYMMDD = r"(19|20)[0-9]{2}(0[1-9]|1[0-2])(0[1-9]|[12][0-9]|3[01])"  # a date written as a number


def _norm(name: object) -> str:
    """``userId``, ``User ID`` and ``user_id`` compare equal (a RecBole ``:type`` suffix is ignored)."""
    return re.sub(r"[^a-z0-9]", "", str(name).split(":")[0].lower())


def find_column(columns: list[str], configured: str | None, default: str | None, names: tuple[str, ...]) -> str | None:
    """The column to use: the configured one if present; when that is the default and absent, the first column
    whose name is one of ``names`` (compared without case, spaces or underscores); else None."""
    if configured in columns:
        return configured
    if configured != default:
        return None
    by_norm = {_norm(c): c for c in reversed(columns)}
    return next((by_norm[_norm(n)] for n in names if _norm(n) in by_norm), None)


def _item_col(cols: list[str], cfg: DataConfig) -> str | None:
    """The item column among ``cols``, found by its name (``data.item_col`` or a known one)."""
    return find_column(cols, cfg.item_col, DEFAULTS["item_col"], INTERACTION_ITEM_NAMES)


def _words(name: object) -> list[str]:
    """``orderDate``, ``order_date`` and ``Order Date`` -> ``['order', 'date']``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", str(name).split(":")[0])
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def time_like(columns: list[str], taken: tuple[str, ...]) -> list[str]:
    """The columns, other than ``taken``, named for a time by their last word: ``order_date``, ``event_timestamp``,
    ``createdAt`` (``at`` after another word), by their first word: ``date_added`` (Goodreads), ``time_created``,
    or, a name of one word, by how it ends: ``eventdate``, ``purchasetime`` (``last_update`` is no time)."""
    out = []
    for c in columns:
        words = _words(c)
        if (
            c not in taken
            and words
            and (
                words[-1] in TIME_WORDS
                or len(words) == 1
                and words[0].endswith(TIME_WORDS[:-1])  # one word: eventdate, purchasetime
                or words[-1] == "at"
                and len(words) > 1
                or words[0] in TIME_WORDS[:-1]  # date_added, time_created
                and len(words) > 1
            )
        ):
            out.append(c)
    return out


def _found_time(
    inter: pd.DataFrame, origin: Origin, taken: tuple[str, ...], time_format: str | None
) -> tuple[str | None, np.ndarray | None]:
    """With none of TIME_NAMES present: the one column named for a time (:func:`time_like`), else the one whose
    first cells are all dates (:func:`dated`: H&M's ``t_dat``), and its Unix seconds. Several columns named for a
    time are an error asking for one, several of dates a warning; a column whose values are not times (a duration,
    ``2 days``) is passed over with a warning; the rows are then taken in file order."""
    path = origin.path
    candidates = time_like(list(inter.columns), taken)
    if not candidates:
        candidates = dated(inter, taken)
        if len(candidates) > 1:
            log.warning(
                "%s: columns %s hold dates; none is read as the time, each user's rows are taken in file order "
                "(--set data.time_col=<column> to use one)", path, ", ".join(candidates),
            )  # fmt: skip
            return None, None
    if len(candidates) > 1:
        raise CrabError(
            f"{path}: several columns could be the time ({', '.join(candidates)}); choose one with --set "
            "data.time_col=<column>, or --set data.time_col=null to order each user's rows as they appear"
        )
    if not candidates:
        return None, None
    column = candidates[0]
    if column not in time_like([column], ()):
        log.info("%s: column %s holds dates: read as the time (--set data.time_col=null to ignore it)", path, column)
    try:
        seconds = _times(inter[column], origin, column, time_format)
    except AmbiguousDates:  # dates, only their day and month order unknown
        raise
    except CrabError as exc:  # "<path>: row 7: delivery_time '2 days' is neither Unix time nor a date (...); ..."
        return _passed_over(path, column, str(exc).removeprefix(f"{path}: ").removeprefix(f"{path}/").partition(";")[0])
    if len(seconds) and float(np.median(seconds)) < EARLIEST:
        return _passed_over(path, column, "its values are too small for Unix time (a duration or a count?)")
    return column, seconds


DAY = 86_400


def _finer_time(
    inter: pd.DataFrame, origin: Origin, column: str, seconds: np.ndarray, taken: tuple[str, ...]
) -> tuple[str, np.ndarray] | None:
    """When ``column`` (read as ``seconds``) holds days only: another column named for a time (:func:`time_like`)
    holding times within the day, on the same day give or take a time zone for 95% of the rows (KuaiRand's ``date``
    and ``time_ms``), and its Unix seconds; else None."""
    if not len(seconds) or np.any(seconds % DAY):
        return None
    for other in time_like(list(inter.columns), (*taken, column)):
        try:
            finer = _times(inter[other], origin, other, None)
        except CrabError:
            continue
        if np.any(finer % DAY) and np.mean(np.abs(finer - seconds - DAY / 2) <= 1.5 * DAY) >= 0.95:
            return other, finer
    return None


def _times(values: pd.Series, origin: Origin, column: str, time_format: str | None) -> np.ndarray:
    """:func:`timestamps`, with dates written as numbers (``20230106``, as KuaiRand's ``date`` and some exports
    write them; too small for Unix time) read as dates."""
    seconds = timestamps(values, origin, column, time_format)
    if time_format is None and len(seconds) and float(np.median(seconds)) < EARLIEST and _dates_as_numbers(values):
        return timestamps(values, origin, column, "%Y%m%d")
    return seconds


def _time_glanced(head: pd.DataFrame, taken: tuple[str, ...]) -> str | None:
    """The column :func:`_found_time` reads as the time, told from a table's first rows (for a stage revision)."""
    dates = dated(head, taken)
    return next(iter(time_like(list(head.columns), taken) or (dates if len(dates) == 1 else [])), None)


def dated(inter: pd.DataFrame, taken: tuple[str, ...]) -> list[str]:
    """The columns, other than ``taken``, whose first :data:`GLANCE_ROWS` cells are all dates written as text
    (``2018-09-20``, ``2018-09-20 10:51:09``, ``4/7/2014``)."""
    head = inter.head(GLANCE_ROWS)
    return [
        c
        for c in head.columns
        if c not in taken and len(head) and id_cells(head[c]).str.strip().str.fullmatch(DATE_CELL.pattern).all()
    ]


def _dates_as_numbers(values: pd.Series) -> bool:
    """Whether every filled cell is a date written ``YYYYMMDD`` (years 1900 to 2099)."""
    cells = values.astype(str).str.strip()
    cells = cells[cells != ""]
    return bool(len(cells)) and bool(cells.str.fullmatch(YYYYMMDD).all())


def _passed_over(path: Path, column: str, why: str) -> tuple[None, None]:
    log.warning(
        "%s: column %s is named like a time but is not used as one: %s; each user's rows are taken in file order "
        "(--set data.time_col=%s to use it)", path, column, why, column,
    )  # fmt: skip
    return None, None


def table_revision(cfg: DataConfig) -> int:
    """The data stage's revision for a table (or RecBole) dataset, from its header and first rows, the sum of:

    - 1: its time column is found by :func:`time_like` or :func:`dated` alone (a crabrec before took its rows in file
      order);
    - 2: that column writes day and month as numbers (``04/12/1997``: read month first when it could be);
    - 4: its item column is detected among both ``asin`` and ``parent_asin`` (``asin`` was taken);
    - 8: a user or item cell writes out a missing value (``NA``), or in a RecBole file is empty (read as an id);
    - 16: its time column writes dates as numbers (``20230106``: passed over when found by :func:`time_like`, read
      as Unix seconds when named as TIME_NAMES are or configured);
    - 32: the item table holds lists of words (``["Office", "Pens"]``), or lists of them (Amazon 2014's category
      paths): their brackets and quotes were embedded;
    - 64: the item column holds lists of ids, one row per user (each list was read as one item id);
    - 128: a RecBole benchmark's files make one dataset, or its rows' lists of the items before make the sequences
      (the file given was read alone, a row as one interaction);
    - 256: without an item table, the interactions have columns of words, which may be item text
      (:mod:`crabrec.data.inline_text`; the data was ids-only);
    - 512: its time column named as TIME_NAMES are holds days only and another one named for a time holds times of
      the day (KuaiRand's ``date`` and ``time_ms``: the days were read);
    - 1024: its times are milliseconds (microseconds, nanoseconds) read as seconds: of dates from 1973-03 to
      2001-09, or beside a stray 0 (:func:`~crabrec.data.times.per_second`: every value had to be at least 1e12);
    - 2048: a user or item column writes its ids as whole numbers with a fraction of zeros (``7.0``, as pandas writes
      a float column; the ids were ``7.0``, and did not match an item table's ``7``);
    - 4096: the item table holds JSON objects (Amazon 2023's ``details``, Yelp's ``attributes``): their braces and
      quotes were embedded;
    - 8192: its time column holds one value on every row read (a placeholder, read as the time: the global-time split
      cut the samples in file order).

    0 for any other layout or a file it cannot read (the data stage reports those)."""
    from crabrec.data.loaders import detect_format, embedded_path, joined_list, joined_record

    path = Path(cfg.path) if cfg.path else embedded_path()
    try:
        layout = cfg.format if cfg.format != "auto" else detect_format(path)
        if layout == "recbole":
            return _recbole_revision(path, cfg)
        if layout != "table":
            return 0
        path, item_path = resolve_folder(path, cfg) if path.is_dir() else (path, cfg.item_table)
        path = first_table(path)
        head = read_table(path, names=cfg.columns, first_rows=GLANCE_ROWS)
        items = read_item_table(Path(item_path), first_rows=GLANCE_ROWS) if item_path else pd.DataFrame()
    except (CrabError, OSError, ValueError):
        return 0
    lists = any(joined_list(v) is not None for col in items.columns for v in items[col])
    objects = any(joined_record(v) is not None for col in items.columns for v in items[col])
    cols = list(head.columns)
    user = find_column(cols, cfg.user_col, DEFAULTS["user_col"], USER_NAMES)
    item = _item_col(cols, cfg)
    asin = {"asin", "parentasin"} <= {_norm(c) for c in cols} and cfg.item_col not in cols
    nulls = any(_written_null(id_cells(head[c])).any() for c in (user, item) if c)
    id_lists = item is not None and id_list_column(head, [item]) is not None
    id_columns = [head[c] for c in (user, item) if c] + [items[c] for c in (item,) if c in items.columns]
    whole = any(whole_numbers(text := cells.astype(str)) is not text for cells in id_columns)
    revision = 4 * int(asin) + 8 * int(nulls) + 32 * int(lists) + 64 * int(id_lists) + 2048 * int(whole)
    revision += 4096 * int(objects)
    if not item_path:
        revision += 256 * int(_may_hold_item_text(head, cfg, (user, item)))
    if not cfg.time_col:
        return revision
    time = find_column(cols, cfg.time_col, DEFAULTS["time_col"], TIME_NAMES)
    by_name = None
    if time is None and cfg.time_col == DEFAULTS["time_col"]:
        by_name = _time_glanced(head, (user or "", item or ""))
    column = time or by_name
    numeric_dates = column is not None and bool(head[column].astype(str).str.strip().str.match(DAY_MONTH).any())
    as_numbers = column is not None and cfg.time_format is None and _dates_as_numbers(head[column])
    finer = early = False
    if column is not None and cfg.time_format is None:
        numbers = pd.to_numeric(head[column], errors="coerce").dropna().abs().to_numpy()
        smallest = numbers.min() if len(numbers) else 0.0  # the unit read before: 1e3 when every value was >= 1e12
        early = len(numbers) > 0 and per_second(numbers) != next(
            (s / 1e9 for s in (1e18, 1e15, 1e12) if smallest >= s), 1.0
        )
    if time is not None and cfg.time_col == DEFAULTS["time_col"] and cfg.time_format is None:
        with contextlib.suppress(CrabError):
            seconds = _times(head[time], Origin(path, 2), time, None)
            finer = _finer_time(head, Origin(path, 2), time, seconds, (user or "", item or "")) is not None
    constant = column is not None and len(head) > 1 and head[column].astype(str).str.strip().nunique() == 1
    revision += 512 * int(finer) + 1024 * int(early) + 8192 * int(constant)
    return revision + int(by_name is not None) + 2 * int(numeric_dates) + 16 * int(as_numbers)


def _may_hold_item_text(head: pd.DataFrame, cfg: DataConfig, taken: tuple[str | None, ...]) -> bool:
    """Whether an interaction table's first rows have columns of words besides its ids and time (revision 256)."""
    cols = list(head.columns)
    time = find_column(cols, cfg.time_col, DEFAULTS["time_col"], TIME_NAMES) if cfg.time_col else None
    ids = tuple(c for c in taken if c)
    return bool(text_columns(head, (*ids, time, *time_like(cols, ids), *dated(head, ids))))


def _recbole_revision(path: Path, cfg: DataConfig) -> int:
    """:func:`table_revision` for RecBole files, which crabrec read by the names ``user_id``, ``item_id`` and
    ``timestamp`` alone: +8 when an id is empty or NA (it was read as an id), +1 when the time column has another
    name (the rows were taken in file order), +128 for a benchmark or rows that list the items before, +256 without
    a ``.item`` file but with columns of words."""
    from crabrec.data.recbole import listed_column, recbole_files, recbole_frame

    files = recbole_files(path, cfg.name)
    head = recbole_frame(files.parts[0], first_rows=GLANCE_ROWS)
    cols = list(head.columns)
    user = find_column(cols, cfg.user_col, DEFAULTS["user_col"], USER_NAMES)
    item = _item_col(cols, cfg)
    nulls = any(unfilled(id_cells(head[c])).any() for c in (user, item) if c)
    time = find_column(cols, cfg.time_col, DEFAULTS["time_col"], TIME_NAMES) if cfg.time_col else None
    if time is None and cfg.time_col == DEFAULTS["time_col"]:
        time = _time_glanced(head, (user or "", item or ""))
    whole = len(files.parts) > 1 or listed_column(head, (user, item)) is not None
    inline = not whole and not files.items.is_file() and _may_hold_item_text(head, cfg, (user, item))
    return 8 * int(nulls) + int(time not in (None, "timestamp")) + 128 * int(whole) + 256 * int(inline)


def _item_column(cols: list[str], cfg: DataConfig, table_cols: list[str] | None) -> str | None:
    """The interaction table's item column: ``data.item_col``, else the first known item-id name, unless the item
    table lacks that column and has another of the interaction table's item-like columns (an Amazon 2023 review file
    has ``asin`` and ``parent_asin``, its metadata only ``parent_asin``; ``data.item_table_id_col`` names it)."""
    item = _item_col(cols, cfg)
    if item is None or table_cols is None or cfg.item_col in cols or item in table_cols:
        return item
    wanted = [cfg.item_table_id_col] if cfg.item_table_id_col is not None else ITEM_NAMES
    shared = [c for c in cols if c in table_cols]
    return find_column(shared, DEFAULTS["item_col"], DEFAULTS["item_col"], tuple(wanted)) or item


def _user_and_item(cols: list[str], cfg: DataConfig) -> bool:
    """Whether ``cols`` hold a user and an item column (as configured, or detected)."""
    user = find_column(cols, cfg.user_col, DEFAULTS["user_col"], USER_NAMES)
    return user is not None and _item_col(cols, cfg) is not None


def _other_columns(cols: list[str], taken: str, names: tuple[str, ...], key: str) -> str:
    """``use another column (--set KEY=NAME)`` for the other columns named like ``names``, or ''."""
    other = [c for c in cols if c != taken and _norm(c) in {_norm(n) for n in names}]
    return f"use another column (--set {key}={' or '.join(other)})" if other else ""


def _missing(
    path: Path,
    what: str,
    key: str,
    configured: str | None,
    names: tuple[str, ...],
    cols: list[str],
    frame: pd.DataFrame | None = None,
) -> CrabError:
    """The error for a column not found; ``frame``'s columns of lists of records are named with their fields."""
    nested = record_fields(frame) if frame is not None else {}
    found = (listed(cols) or "none") + "".join(f"; {c} holds records of {listed(f, 120)}" for c, f in nested.items())
    if configured != DEFAULTS.get(key.rpartition(".")[2]):
        return CrabError(f"{path}: {key}={configured!r}: no such column (found {found}); set {key} to one of them")
    looked = ", ".join(names[:6]) + ", ..."
    if looks_like_a_row(cols):
        return row_not_header(path, cols, what)
    return CrabError(
        f"{path}: no {what} column (looked for {looked}; found {found}); name it with --set {key}=<column>"
    )


def _joined_beside(error: CrabError, path: Path, cfg: DataConfig) -> CrabError:
    """``error`` (no user or item column in the file at ``path``), saying so when the file is a table of order lines
    or of orders that its folder joins (:class:`Joined`)."""
    try:
        found = resolve_folder(path.parent, cfg)[0] if path.is_file() else None
    except (CrabError, OSError, ValueError):
        return error
    if not isinstance(found, Joined) or path not in (*found.files, found.orders):
        return error
    return CrabError(f"{error}; or give its folder, --data {path.parent}, to read {found.names()}")


def _kept_rows(inter: pd.DataFrame, path: Path, keep: dict[str, list[str]]) -> tuple[pd.DataFrame, list[str]]:
    """The rows whose column holds one of its values in ``keep`` (``data.keep_rows``; compared by :func:`id_key`),
    and a note counting them. A column the table lacks, or a filter no row passes, is a one-line error."""
    if not keep:
        return inter, []
    total, said = len(inter), []
    for col, values in keep.items():
        if col not in inter.columns:
            found = listed(inter.columns)
            raise CrabError(f"{path}: data.keep_rows: no column {col!r} (found {found}); name one of them")
        cells = id_cells(inter[col])
        wanted = {id_key(v) for v in values}
        held = pd.Series(cells.unique())
        passing = held[held.map(id_key).isin(wanted)]
        if passing.empty:
            common = ", ".join(repr(v) for v in cells.value_counts().index[:5])
            raise CrabError(
                f"{path}: data.keep_rows: no row has {col} in {values} ({col} holds {common}"
                f"{' ...' if held.size > 5 else ''})"
            )
        inter = inter[cells.isin(passing).to_numpy()].copy(deep=False)  # its own frame: columns set later are its
        said.append(f"{col} in {', '.join(values)}")
    note = f"kept {len(inter):,} of {total:,} rows: {'; '.join(said)} (data.keep_rows)"
    log.info("%s: %s", path, note)
    return inter, [note]


# columns that may mark a row shown but not acted on (0) among rows acted on (1): KuaiRand's is_click, Tenrec's click
FEEDBACK_NAMES = (
    "click", "clicked", "is_click", "is_clicked", "clk", "label", "like", "liked", "is_like", "purchase",
    "purchased", "is_purchase", "buy", "is_buy", "converted", "conversion", "is_positive", "positive", "is_read",
)  # fmt: skip
_FEEDBACK = {_norm(n) for n in FEEDBACK_NAMES}
_ZERO, _ONE = {"0", "0.0", "false"}, {"1", "1.0", "true"}


def _feedback_zeros(inter: pd.DataFrame, path: Path, keep: dict[str, list[str]]) -> list[str]:
    """A note (and a warning) for columns named like feedback (:data:`FEEDBACK_NAMES`) that hold only 0 and 1, some
    rows 0, when ``data.keep_rows`` is not set: every row is an interaction, perhaps one shown and not clicked."""
    flagged = []
    for col in inter.columns if not keep else ():
        if _norm(col) not in _FEEDBACK:
            continue
        cells = id_cells(inter[col]).str.lower()
        held = set(cells.unique())
        if held <= _ZERO | _ONE and held & _ZERO and held & _ONE:
            no, yes = min(held & _ZERO), min(held & _ONE)  # as the column writes them: 0 and 1, or false and true
            flagged.append((col, int(cells.isin(_ZERO).sum()), no, yes))
    if not flagged:
        return []
    zeros = ", ".join(f"{col} is {no} in {n:,} of {len(inter):,} rows ({n / len(inter):.0%})"
                      for col, n, no, _ in flagged)  # fmt: skip
    col, _, no, yes = flagged[0]
    note = (
        f"{zeros}: every row is read as an interaction; if {no} marks an item shown but not acted on, keep the other "
        f"rows with --set 'data.keep_rows={{{col}: [{yes}]}}'"
    )
    log.warning("%s: %s", path, note)
    return [note]


# columns that name the kind of each event (Retailrocket's view, addtocart, transaction; REES46's event_type)
EVENT_NAMES = ("event", "event_type", "type", "behavior", "behavior_type", "behaviour", "action", "action_type",
               "interaction_type", "activity")  # fmt: skip
_EVENT = {_norm(n) for n in EVENT_NAMES}
_BOUGHT = ("transaction", "purchase", "buy", "order", "orders", "checkout")  # the kind a shop would keep, if any
MAX_KINDS = 10


def _event_kinds(inter: pd.DataFrame, path: Path, keep: dict[str, list[str]]) -> list[str]:
    """A note (logged) for a column named for the kind of event (:data:`EVENT_NAMES`) that holds 2 to
    ``MAX_KINDS`` kinds, when ``data.keep_rows`` is not set: every kind is read as an interaction, and how to keep
    some."""
    for col in inter.columns if not keep else ():
        if _norm(col) not in _EVENT:
            continue
        counts = id_cells(inter[col]).value_counts()
        counts = counts.sort_index().sort_values(ascending=False, kind="stable")  # ties by name, in any pandas
        if not 2 <= len(counts) <= MAX_KINDS:
            continue
        kinds = ", ".join(f"{clip(str(k), 40)} {n / len(inter):.0%}" for k, n in counts.items())
        kept = next((k for k in counts.index if str(k).lower() in _BOUGHT), counts.index[-1])
        note = (
            f"column {col} holds {len(counts)} kinds of event ({kinds}): each is read as an interaction; keep some "
            f"with --set 'data.keep_rows={{{col}: [{kept}]}}'"
        )
        log.info("%s: %s", path, note)
        return [note]
    return []


def _written_null(cells: pd.Series) -> np.ndarray:
    """The cells that write out a missing value (``NA``, ``null``, ``None`` ...)."""
    return cells.str.strip().str.lower().isin(NULLS).to_numpy()


def filled_rows(
    inter: pd.DataFrame, origin: Origin, read: dict[str, str | None], drop: bool, others: dict[str, str]
) -> tuple[pd.DataFrame, list[str]]:
    """The rows whose cells in the columns crabrec reads (``read``: what each holds -> its column, None where not
    read) are all filled; an empty cell (a null in Parquet or JSON, or written out as ``NA``) is an error naming its
    row and ``others[what]`` (the setting that picks another column, if any), or with ``drop``
    (``data.incomplete_rows=drop``) its row is left out, counted in the log and in the returned note. The rows kept
    keep their index (their place among the rows read), which later messages name them by (``origin``)."""
    path = origin.path
    blank = np.zeros(len(inter), dtype=bool)
    for what, col in read.items():
        if col is None:
            continue
        inter[col] = id_cells(inter[col])  # a Parquet null or a JSON null: ""
        empty = unfilled(inter[col])
        if empty.any() and not drop:
            n, row = int(empty.sum()), int(np.flatnonzero(empty)[0])
            cell = inter[col].iloc[row].strip()
            held = f"{what} {cell!r} (a missing value)" if cell else f"empty {what}"
            raise CrabError(
                f"{origin.row(inter.index[row])}: {held} in column {col!r} ({n:,} of "
                f"{len(empty):,} rows); fill it, "
                + (f"{others[what]}, " if others.get(what) else "")
                + "or --set data.incomplete_rows=drop to leave out the rows with an empty cell"
            )
        blank |= empty
    if not blank.any():
        return inter, []
    columns = ", ".join(c for c in read.values() if c)
    if blank.all():
        raise CrabError(f"{path}: every row has an empty cell in {columns}; no interaction is left")
    note = f"left out {int(blank.sum()):,} of {len(blank):,} rows with an empty cell in {columns}"
    note += " (data.incomplete_rows=drop)"
    log.warning("%s: %s", path, note)
    return inter[~blank], [note]


@dataclass(frozen=True)
class Parts:
    """Tables of one folder with the same columns (JSON lines: the same user, item and time columns), read as one
    table in name order (REES46's monthly files, Adressa's daily ones)."""

    paths: tuple[Path, ...]


def first_table(found: Path | Parts | Joined) -> Path:
    """The table :func:`resolve_folder` found, or the first of its parts (whose header stands for them all), or of
    the order lines it joins to their orders."""
    if isinstance(found, Joined):
        found = found.lines
    return found.paths[0] if isinstance(found, Parts) else found


def resolve_folder(path: Path, cfg: DataConfig, say: bool = False) -> tuple[Path | Parts | Joined, Path | None]:
    """``(interactions, item table)`` in a folder of tables (or, with none, of the files :func:`named_tables` reads
    as tables: Yelp's JSON lines, HetRec's ``.dat`` files): the one file with user and item columns, and the one
    other file with an item column (or ``data.item_table``). Among several, the one named for reviews or ratings
    holds the interactions (Yelp's ``review.json`` beside ``tip.json``), or, when they all have the same columns,
    they are :class:`Parts` of one table (REES46's ``2019-Oct.csv`` and ``2019-Nov.csv``); the one named for the item
    column's kind holds the items (``business.json`` for ``business_id``, beside ``checkin.json``); a table of users
    (no item column) is left out. Without a table of user and item columns, a table of order lines (an item column
    and an order's id) beside a table of orders (that id and a user column) are :class:`Joined` (Instacart's
    ``order_products__prior.csv`` and ``orders.csv``). Tables that all lack a header line are read with
    ``data.columns`` (:func:`_headerless_parts`). ``say``: log which tables were chosen (the data stage does; a
    glance at the folder does not)."""
    if parquet_dataset(path):  # the folder is one table, in parts
        return path, Path(cfg.item_table) if cfg.item_table else None
    tables = sorted(p for p in path.iterdir() if table_kind(p) and p.is_file() or parquet_dataset(p))
    tables = tables or named_tables(path) or headerless_tables(path)
    if (parts := _headerless_parts(path, tables, cfg)) is not None:
        return parts, Path(cfg.item_table) if cfg.item_table else None
    if cfg.columns is not None:
        raise CrabError(
            f"{path}: data.columns names the columns of one file, or of a folder's tables without a header line: "
            "give the file with --data FILE"
        )
    inter, others, both, columns = [], [], [], {}
    for p in tables:
        columns[p] = cols = _columns(p)
        has_user = find_column(cols, cfg.user_col, DEFAULTS["user_col"], USER_NAMES) is not None
        (inter if has_user else others).append(p)
        if has_user and _user_and_item(cols, cfg):
            both.append(p)
    names = ", ".join(p.name for p in tables) or "none"
    if not both and (join := find_join([p for p in others if _item_col(columns[p], cfg)], inter, columns,
                                       lambda cols: _item_col(cols, cfg))):  # fmt: skip
        lines, orders, key = join
        user = find_column(columns[orders], cfg.user_col, DEFAULTS["user_col"], USER_NAMES) or ""
        inter = [Joined(Parts(tuple(lines)) if len(lines) > 1 else lines[0], orders, key, user)]
        others = [p for p in others if p not in lines]
    split = split_tables(path)
    if split and set(inter) <= set(split):  # one table's train, valid and test rows (sessions: no user column)
        inter, others = [path], [p for p in others if p not in split]
    same = len(both) > 1 and _one_table(both, columns, cfg)
    if len(inter) > 1 and same and not _interactions_by_name(both):  # logged as the data's label
        inter, both = [Parts(tuple(both))], []
    if len(inter) > 1 and (chosen := _interactions_by_name(both) if len(both) > 1 else both[:1]):
        left = {
            "no item column": [p.name for p in inter if p not in both],
            "--data FILE reads one instead": [p.name for p in both if p != chosen[0]],
        }
        said = "; ".join(f"{', '.join(files)}: {why}" for why, files in left.items() if files)
        if say:
            log.info("%s: interactions from %s (%s)", path, chosen[0].name, said)
        inter = chosen
    if len(inter) > 1 and not both:
        raise CrabError(
            f"{path}: no table among {names} has an item column (looked for {', '.join(ITEM_NAMES[:6])}, ...; "
            f"{inter[0].name} has {listed(columns[inter[0]])}); name it with --set data.item_col=<column>"
        )
    if len(inter) != 1:
        found = f"found {len(both)}: {', '.join(p.name for p in both)}" if len(both) > 1 else f"found {len(inter)}"
        raise CrabError(
            f"{path}: expected one interaction table (user and item columns) among {names}, {found}; name it with "
            "--data FILE (and the item table with --items FILE)"
        )
    if cfg.item_table:
        return inter[0], Path(cfg.item_table)
    item = _item_col(columns.get(first_table(inter[0]), []), cfg)
    if len(others) > 1 and item and (chosen := _named_for(others, tuple(w for w in _words(item) if w != "id"))):
        if say:
            log.info("%s: items from %s (--items FILE reads another)", path, chosen[0].name)
        others = chosen
    if len(others) > 1:
        raise CrabError(
            f"{path}: several item tables ({', '.join(p.name for p in others)}); name one with --items FILE"
            + (f", or read the interactions without one (ids only) with --data {inter[0]}" if isinstance(inter[0], Path)
               and inter[0].is_file() else "")  # fmt: skip
        )
    return inter[0], others[0] if others else None


LINES_KINDS = (".jsonl", ".ndjson")  # JSON lines, whose rows may each leave keys out


def _columns(path: Path) -> list[str]:
    """A table's columns: its header's, or for JSON lines the keys of its first ``GLANCE_ROWS`` rows (a row may
    leave a key out: Adressa's events without an article ``id``)."""
    if not path.is_dir() and table_kind(path, named=True) in LINES_KINDS:
        return list(read_table(path, first_rows=GLANCE_ROWS).columns)
    return list(_read_csv(path, header_only=True).columns)


def _one_table(paths: list[Path], columns: dict[Path, list[str]], cfg: DataConfig) -> bool:
    """Whether tables are parts of one table: the same columns, or for JSON lines (whose rows may leave keys out:
    Adressa's daily files) the same user, item and time columns."""
    if all(columns[p] == columns[paths[0]] for p in paths):
        return True
    if not all(not p.is_dir() and table_kind(p, named=True) in LINES_KINDS for p in paths):
        return False
    read = [(find_column(columns[p], cfg.user_col, DEFAULTS["user_col"], USER_NAMES), _item_col(columns[p], cfg),
             find_column(columns[p], cfg.time_col, DEFAULTS["time_col"], TIME_NAMES)) for p in paths]  # fmt: skip
    return all(r == read[0] for r in read)


def _headerless_parts(path: Path, tables: list[Path], cfg: DataConfig) -> Path | Parts | None:
    """A folder whose every table has no header line (Spark's CSV parts, YOOCHOOSE's ``.dat`` files): with
    ``data.columns``, its tables as :class:`Parts` of one table of those columns (each must have as many); without,
    an error suggesting the names. None for any other folder."""
    heads = {p: first_cells(p) for p in tables}
    if not tables or not all(cells is not None and looks_like_a_row(cells) for cells in heads.values()):
        return None
    names = ", ".join(p.name for p in tables)
    if cfg.columns is None and len({len(cells) for cells in heads.values()}) > 1:
        raise CrabError(
            f"{path}: its tables have no header line and differ in their number of columns ({names}): give one "
            "table with --data FILE (its error suggests its columns' names)"
        )
    if cfg.columns is None:
        guess = ",".join(guess_columns(heads[tables[0]]))
        raise CrabError(
            f"{path}: its tables have no header line ({names}); name their columns with --set "
            f"data.columns=[{guess}] (one name per column, in file order; the folder's tables are read as one), or "
            "give one table with --data FILE"
        )
    if odd := next((p for p in tables if len(heads[p]) != len(cfg.columns)), None):
        raise CrabError(
            f"{odd}: its first line has {len(heads[odd])} columns and data.columns names {len(cfg.columns)}; the "
            f"folder's tables ({names}) are read as one table of those columns: give one table with --data FILE"
        )
    return Parts(tuple(tables)) if len(tables) > 1 else tables[0]


INTERACTION_WORDS = ("review", "rating", "interaction")  # words of a file name that holds the interactions


def _interactions_by_name(paths: list[Path]) -> list[Path]:
    """The one file named for interactions (Goodreads' ``goodreads_interactions_poetry.json.gz``, beside its
    ``goodreads_reviews_poetry.json.gz``, a part of them), else for reviews or ratings; [] if none or several."""
    return _named_for(paths, ("interaction",)) or _named_for(paths, INTERACTION_WORDS)


def _named_for(paths: list[Path], words: tuple[str, ...]) -> list[Path]:
    """The one file whose name holds one of ``words`` (or its plural) as a word, in a list; [] if none or several."""
    wanted = {*words, *(w + "s" for w in words)}
    named = [p for p in paths if wanted & set(_words(dataset_name(p) if p.is_dir() else p.name.split(".")[0]))]
    return named if len(named) == 1 else []


def load_table(path: Path, cfg: DataConfig) -> Dataset:
    folder = path.is_dir() and not parquet_dataset(path)  # a folder of tables, not one table in parts
    parts = None
    if folder:  # the interactions: a file of the folder, the folder (split tables), or parts read from the folder
        found, item_path = resolve_folder(path, cfg, say=True)
        parts, path = (found, path) if isinstance(found, Parts | Joined) else (None, found)
    else:
        item_path = Path(cfg.item_table) if cfg.item_table else None
    sep = item_lines(path) if cfg.columns is None and not folder else None
    notes = []
    if isinstance(parts, Joined):
        inter, origin, joined = read_joined(parts, path, cfg.incomplete_rows == "drop")
        notes += joined
    elif parts is not None:
        inter, origin = read_parts(path, parts.paths, cfg.columns)
    elif sep is not None:  # one line per user: its id, then its items
        inter, empty = item_lines_frame(path, sep)
        origin = Origin(path, 1)
        notes.append("one line per user: the user's id, then the user's items in order")
        if empty:
            notes.append(f"left out {empty:,} line(s) of a user id without items")
        log.info("%s: %s", path, "; ".join(notes))
    else:
        inter, origin = read_rows(path, cfg.columns)
    label = f"{path.name}: "
    if folder:
        if isinstance(parts, Joined):
            one = parts.names()
        else:
            one = ", ".join(p.name for p in (parts.paths if parts else split_tables(path))) + " (as one table"
            one += "; crabrec splits it)" if not parts else ": the same user, item and time columns)"
        label = (
            f"{path.parent if path.is_file() else path}: interactions from {one if path.is_dir() else path.name}, "
            + (f"items from {item_path.name}; " if item_path else "no item table; ")
        )
    ds = frame_dataset(inter, origin, cfg, item_path, name=dataset_name(path), label=label)
    ds.notes[:0] = notes
    return ds


def frame_dataset(
    inter: pd.DataFrame,
    origin: Origin,
    cfg: DataConfig,
    item_path: Path | None,
    *,
    name: str,
    label: str,
    read_items: Callable[[Path], pd.DataFrame] | None = None,
    no_items: str = "no item table",
) -> Dataset:
    """The dataset of an interaction table (``origin``: where its rows were read, its index each row's label) and
    the item table at ``item_path`` (read with ``read_items``, else :func:`read_item_table`; None: ids-only data,
    noted as ``no_items``): its columns found by name (:func:`find_column`), rows with empty cells and below
    ``data.min_rating`` handled, each user's rows in time order. ``label`` starts the log line that names the columns
    found."""
    path = origin.path
    cols = list(inter.columns)
    if not _user_and_item(cols, cfg) and (found := unnested(inter, origin, lambda k: _user_and_item(cols + k, cfg))):
        inter, nested = found
        log.info("%s: one row per record of column %s", path, nested)
        cols = list(inter.columns)
    inter, kept = _kept_rows(inter, path, cfg.keep_rows or {})
    kept += _feedback_zeros(inter, path, cfg.keep_rows or {}) + _event_kinds(inter, path, cfg.keep_rows or {})
    user = find_column(cols, cfg.user_col, DEFAULTS["user_col"], USER_NAMES)
    listed_items = _listed_items(inter, cols, cfg, user)
    if user is None and listed_items is None:
        raise _joined_beside(_missing(path, "user", "data.user_col", cfg.user_col, USER_NAMES, cols, inter), path, cfg)
    if listed_items is not None:
        then = None
        if user is None:  # a table of sessions (Amazon-M2): each row one user, named by its line
            user, then = SESSION, _next_item(inter, cols, listed_items)
            inter[SESSION] = [origin.session(row) for row in inter.index]
            log.info(
                "%s: no user column: each row is one session, named by its line (its items: %s%s)", path,
                listed_items, f", then {then}" if then else "",
            )  # fmt: skip
        inter = exploded(inter, listed_items, origin, then)
        log.info("%s: one row per item of the lists in column %s", path, listed_items)
    table = (read_items or read_item_table)(item_path) if item_path is not None else None
    item = listed_items or _item_column(cols, cfg, None if table is None else list(table.columns))
    if item is None:
        raise _joined_beside(_missing(path, "item", "data.item_col", cfg.item_col, ITEM_NAMES, cols, inter), path, cfg)
    time = find_column(cols, cfg.time_col, DEFAULTS["time_col"], TIME_NAMES) if cfg.time_col else None
    if cfg.time_col and cfg.time_col != DEFAULTS["time_col"] and time is None:
        raise _missing(path, "time", "data.time_col", cfg.time_col, TIME_NAMES, cols)
    rating = None
    if cfg.min_rating is not None:
        rating = find_column(cols, cfg.rating_col, DEFAULTS["rating_col"], RATING_NAMES)
        if rating is None:
            raise _missing(path, "rating", "data.rating_col", cfg.rating_col, RATING_NAMES, cols)
    named = []  # the time column found by its name or its dates, when none is named as TIME_NAMES are
    if time is None and cfg.time_col == DEFAULTS["time_col"]:
        named = time_like(cols, (user, item)) or dated(inter, (user, item))
    read = {"user id": user, "item id": item, "time": time or (named[0] if len(named) == 1 else None), "rating": rating}
    others = {what: _other_columns(cols, col, names, key) for what, col, names, key in (
        ("user id", user, USER_NAMES, "data.user_col"), ("item id", item, ITEM_NAMES, "data.item_col"))}  # fmt: skip
    inter, dropped = filled_rows(inter, origin, read, cfg.incomplete_rows == "drop", others)
    ts = _times(inter[time], origin, time, cfg.time_format) if time else None
    by_day = time and cfg.time_col == DEFAULTS["time_col"] and cfg.time_format is None
    if by_day and (finer := _finer_time(inter, origin, time, ts, (user, item))):
        log.info("%s: time=%s, finer than %s (days only; --set data.time_col=%s orders by it)", path, finer[0], time,
                 time)  # fmt: skip
        time, ts = finer
    if time is None and cfg.time_col == DEFAULTS["time_col"]:
        time, ts = _found_time(inter, origin, (user, item), cfg.time_format)
    if ts is not None and len(ts) > 1 and np.all(ts == ts[0]):  # a placeholder: no order, and no split by time
        constant = (
            f"column {time} holds one value for every row ({clip(str(inter[time].iloc[0]))}), so it is not read as "
            "the time: each user's rows are taken in file order"
        )
        log.warning("%s: %s", path, constant)
        dropped.append(constant)
        time, ts = None, None
    if rating is not None:
        keep = rated_at_least(
            inter[rating], cfg.min_rating, str(path), rating, lambda row: origin.row(inter.index[row])
        )
        inter, ts = inter[keep], ts[keep] if ts is not None else None
    detected = {k: v for k, v in (("user", user), ("item", item), ("time", time), ("rating", rating)) if v}
    found = label + "columns " + ", ".join(f"{k}={v}" for k, v in detected.items())
    if item_path is None:
        inline = inline_items(inter, item, (user, time, rating, *named))
        items = inline[0] if inline else {raw: {} for raw in inter[item].astype(str).str.strip().unique()}
        ds = _group_interactions(name, path, inter, user, item, ts, items, str(path))
        ds.notes[:0] = kept + dropped
        if inline:
            ds.notes.append(inline[1])
            log.info("%s; %s", found, inline[1])
            return ds
        ds.has_text = False
        ds.notes.append(f"{no_items}: ids-only data, semantic IDs come from SASRec's item embeddings")
        log.info("%s", found)
        return ds
    id_col = _item_table_id(list(table.columns), item, cfg, item_path)
    items = _items_from_frame(table, id_col, item_path)
    drop = cfg.missing_items == "drop"
    ds = _group_interactions(name, path, inter, user, item, ts, items, str(path), drop)
    ds.notes[:0] = kept + dropped
    if not any(v.strip() for rec in ds.item_text for v in rec.values()):
        ds.has_text = False
        ds.notes.append(f"{item_path.name} has no text columns: ids-only data")
    log.info("%s (item id column %s)", found, id_col)
    return ds


def _next_item(inter: pd.DataFrame, cols: list[str], listed: str) -> str | None:
    """In a table of sessions, the column holding the item after each row's list (Amazon-M2's ``next_item``): one
    named ``next...`` or ``target...`` whose first cell is one id, not a list."""
    named = [c for c in cols if c != listed and _norm(c).startswith(("next", "target"))]
    return next((c for c in named if len(inter) and id_list(inter[c].iloc[0]) is None), None)


def _listed_items(inter: pd.DataFrame, cols: list[str], cfg: DataConfig, user: str | None) -> str | None:
    """The column of a table of one row per user that lists the user's items in order (``[1, 2, 3]``): the item
    column when its cells are lists, else, with no item column, the first column named for items (``item_ids``,
    ``prev_items``, ``history``) whose cells are."""
    item = _item_col(cols, cfg)
    named = [c for c in cols if c != user and any(w in _norm(c) for w in LIST_WORDS)]
    return id_list_column(inter, [item] if item else named)


def read_item_table(path: Path, first_rows: int | None = None) -> pd.DataFrame:
    """An item table (:func:`~crabrec.data.reading.read_table`); a delimited one whose first line is a row, not a
    header (MicroLens' ``1,Video about cats``), is read without one: its first column the item id (``item_id``), its
    second the ``title``, any others ``column3`` ... (logged, unless ``first_rows``: a glance)."""
    table = read_table(path, first_rows=first_rows)
    cols = [str(c) for c in table.columns]
    if table_kind(path, named=True) in (".json", ".jsonl", ".ndjson", ".parquet") or not looks_like_a_row(cols):
        return table
    names = ["item_id", "title", *(f"column{n}" for n in range(3, len(cols) + 1))][: len(cols)]
    if first_rows is None:
        log.info("%s: no header line: its columns read as %s", path, ", ".join(names))
    return read_table(path, names=names, first_rows=first_rows)


def _item_table_id(table_cols: list[str], item: str, cfg: DataConfig, item_path: Path) -> str:
    """The item table's id column: ``data.item_table_id_col``, else the interactions' item column, else a known
    item-id name."""
    if cfg.item_table_id_col is not None:
        if cfg.item_table_id_col not in table_cols:
            raise _missing(item_path, "item id", "data.item_table_id_col", cfg.item_table_id_col, (), table_cols)
        return cfg.item_table_id_col
    id_col = item if item in table_cols else find_column(table_cols, "item", "item", (*ITEM_NAMES, "id"))
    if id_col is None:
        raise CrabError(
            f"{item_path}: no item id column (looked for {', '.join(dict.fromkeys([item, *ITEM_NAMES[:6]]))}, "
            f"...; found {listed(table_cols) or 'none'}); name it with --set data.item_table_id_col=<column>"
        )
    return id_col


def item_text_glance(cfg: DataConfig) -> list[dict[str, str]]:
    """The item text records of the first rows of a table's or RecBole dataset's item table, as their loader makes
    them (for a stage revision that depends on the item text); none for other layouts, without an item table, or
    when the files cannot be read (the data stage reports that)."""
    from crabrec.data.loaders import detect_format, embedded_path
    from crabrec.data.recbole import recbole_files, recbole_frame

    path = Path(cfg.path) if cfg.path else embedded_path()
    try:
        layout = cfg.format if cfg.format != "auto" else detect_format(path)
        if layout == "recbole":
            files = recbole_files(path, cfg.name)
            if not files.items.is_file():
                return []
            item_path, head = files.items, recbole_frame(files.items, first_rows=GLANCE_ROWS)
            inter_cols = list(recbole_frame(files.parts[0], first_rows=0).columns)
            item = _item_col(inter_cols, cfg) or DEFAULTS["item_col"]
            id_col = _item_table_id(list(head.columns), item, cfg, item_path)
        elif layout == "table":
            path, found = resolve_folder(path, cfg) if path.is_dir() else (path, cfg.item_table)
            path = first_table(path)
            if not found:
                return []
            item_path = Path(found)
            lines = cfg.columns is None and item_lines(path) is not None  # one line per user: user, then items
            inter_cols = ["user", "item"] if lines else list(read_table(path, names=cfg.columns, first_rows=0).columns)
            head = read_item_table(item_path, first_rows=GLANCE_ROWS)
            item = _item_column(inter_cols, cfg, list(head.columns)) or DEFAULTS["item_col"]
            id_col = _item_table_id(list(head.columns), item, cfg, item_path)
        else:
            return []
        return list(_items_from_frame(head, id_col, item_path).values())
    except (CrabError, OSError, ValueError, KeyError):
        return []


def dataset_name(path: Path) -> str:
    """``ratings.csv`` -> ``ratings``; ``ml-100k.inter.json`` -> ``ml-100k``; a MovieLens release's ratings file
    (``ml-1m/ratings.dat``) or a file named for a split (``otto/train.jsonl``) -> its folder's name; a folder of
    ``Office.train.csv``, ``Office.valid.csv`` and ``Office.test.csv`` -> ``Office``; the Netflix Prize's
    ``training_set/`` -> the folder holding it."""
    name = path.name or path.resolve().name
    if name == "training_set" and path.is_dir():
        return dataset_name(path.resolve().parent)
    if split := split_tables(path):  # the files' common stem, else the folder's name (train.csv ...)
        return re.sub(r"[._\- ]*train$", "", _stem(split[0].name), flags=re.IGNORECASE) or name
    stem = _stem(name)
    parent = path.resolve().parent.name
    if (name in ("u.data", "ratings.dat") or stem.lower() in {w for ws in SPLIT_WORDS for w in ws}) and parent:
        return parent
    return stem or "data"


def _stem(name: str) -> str:
    """A file's name without its table, compression and dataset suffixes (``ml-100k.inter.json`` -> ``ml-100k``)."""
    for suffix in (*COMPRESSIONS, *KINDS, ".json", ".inter", ".item", ".txt", ".dat"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name
