"""Loaders for the supported on-disk layouts; each returns a :class:`Dataset` or raises a one-line CrabError.

Layouts: ``lcrec`` (LC-Rec/LETTER json), ``minionerec`` (train/valid/test CSVs + index + info), ``recbole``
(atomic ``.inter``/``.item`` files), ``table`` (a CSV/parquet of user,item,timestamp plus an item table),
``movielens`` (GroupLens' releases as they unpack, :mod:`crabrec.data.movielens`), ``mind`` (Microsoft's MIND
news data, :mod:`crabrec.data.mind`) and the raw Amazon dumps
``amazon14``/``amazon18``/``amazon23`` (:mod:`crabrec.data.amazon`).
"""

from __future__ import annotations

import functools
import logging
import re
import tarfile
from collections.abc import Callable, Iterable
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crabrec.config import DataConfig
from crabrec.data.dataset import Dataset
from crabrec.data.ids import id_key
from crabrec.data.kcore import kcore
from crabrec.data.reading import (
    NAMES,
    bracketed,
    cell_list,
    first_row,
    headerless_tables,
    id_cells,
    named_tables,
    parquet_dataset,
    read_table,
    refuse_spreadsheet,
    table_kind,
    zip_members,
)
from crabrec.data.repeats import drop_repeats
from crabrec.errors import CrabError, clip, listed
from crabrec.io import list_literal, not_found, read_input_json, read_input_text

log = logging.getLogger("crabrec")

SPLIT_NAMES = ("train", "valid", "test")
MINIONEREC_COLUMNS = ("user_id", "history_item_id", "item_id")
RAW_FORMATS = ("amazon14", "amazon18", "amazon23")  # crabrec.data.amazon
MINIONEREC_WINDOW = ["2016-10", "2018-11"]  # the months of MiniOneRec's shipped Amazon-2018 files


def embedded_path() -> Path:
    """Directory of the embedded Amazon-2014 Office dataset shipped inside the package."""
    return Path(str(resources.files("crabrec.datasets").joinpath("office")))


RATED = ("table", "movielens", "recbole", "netflix")  # the layouts whose ratings data.min_rating reads


def load_dataset(cfg: DataConfig) -> Dataset:
    """Load, validate, k-core filter (raw layouts) and drop users with fewer than 2 interactions."""
    path = Path(cfg.path) if cfg.path else embedded_path()
    if not path.exists():
        raise not_found(cfg.path or path, "dataset path")
    if not path.is_file() and not path.is_dir():  # a run reads its data again to check its cache: a pipe cannot be
        raise CrabError(f"{path}: not a file or folder (a pipe, as from <(...)?); save the data to a file, pass that")
    fmt = cfg.format if cfg.format != "auto" else detect_format(path)
    if cfg.min_rating is not None and fmt not in RATED:
        raise CrabError(
            f"{path}: data.min_rating={cfg.min_rating:g}: the {fmt} layout has no ratings that crabrec reads (it reads "
            f"them in the {', '.join(RATED)} layouts); remove data.min_rating"
        )
    tables = {"keep_rows": ("table", "recbole"), "columns": ("table",)}  # the layouts each setting reads
    table_only = [key for key, layouts in tables.items() if getattr(cfg, key) and fmt not in layouts]
    if table_only:
        key = table_only[0]
        raise CrabError(
            f"{path}: data.{key} reads a table's columns; the {fmt} layout is not a table (remove data.{key}"
            + (", or read it as one with --format table" if cfg.format == "auto" else "")
            + ")"
        )
    loader: dict[str, Callable[[Path, DataConfig], Dataset]] = {
        "lcrec": _load_lcrec,
        "minionerec": _load_minionerec,
        "recbole": _load_recbole,
        "table": _load_table,
        "movielens": _load_movielens,
        "mind": _load_mind,
        "netflix": _load_netflix,
        **{raw: functools.partial(_load_raw, fmt=raw) for raw in RAW_FORMATS},
    }
    ds = drop_repeats(loader[fmt](path, cfg), cfg.repeats)
    if ds.given is None:
        ds = _filter(ds, cfg.kcore)
    if ds.n_users == 0 or ds.n_items == 0:
        if cfg.kcore > 1 and ds.given is None:
            raise CrabError(f"{ds.source}: no interactions left after {cfg.kcore}-core filtering; lower data.kcore")
        raise CrabError(f"{ds.source}: no user has 2 interactions or more; a model needs a history and a next item")
    return ds


def detect_format(path: Path) -> str:
    from crabrec.data.mind import is_mind
    from crabrec.data.movielens import is_movielens
    from crabrec.data.netflix import is_netflix

    if is_movielens(path):
        return "movielens"
    if is_mind(path):
        return "mind"
    if is_netflix(path):
        return "netflix"
    if path.is_file():
        name = path.name
        if name.endswith(".inter.json"):
            return "lcrec"
        if name.endswith(".inter"):
            return "recbole"
        if table_kind(path, named=True):
            return "table"
        refuse_spreadsheet(path)
        if len(inside := zip_members(path)) > 1:
            raise CrabError(
                f"{path}: a zip archive of {len(inside)} files ({clip(', '.join(inside), 160)}); crabrec reads a .zip "
                "that holds one table, or a MovieLens release: unzip it and give the folder (--data FOLDER), or its "
                "interaction table (--data FILE, --items FILE)"
            )
        if tarfile.is_tarfile(path):
            raise CrabError(
                f"{path}: a tar archive; unpack it (tar -xf {path.name}) and give the folder (--data FOLDER) or its "
                "interaction table (--data FILE, --items FILE)"
            )
        raise CrabError(
            f"{path}: cannot tell the layout from the file name (expected a table: {NAMES}; .inter or "
            ".inter.json; or MovieLens' u.data or ratings.dat); set --format (--format table for a delimited text "
            "file)"
        )
    if parquet_dataset(path):
        return "table"
    if any((path / s).is_dir() for s in SPLIT_NAMES):
        return "minionerec"
    if list(path.glob("reviews_*_5.json*")):
        return "amazon14"
    if list(path.glob("meta_*.jsonl*")):
        return "amazon23"
    if list(path.glob("meta_*.json*")):
        return "amazon18"
    if list(path.glob("*.inter.json")):
        return "lcrec"
    if list(path.glob("*.inter")):
        return "recbole"
    if any(table_kind(p) for p in path.iterdir()) or named_tables(path) or headerless_tables(path):
        return "table"
    raise CrabError(
        f"{path}: no known layout found (expected <name>.inter.json, <name>.inter, train|valid|test/ folders, "
        "CSV/TSV/JSON-lines/Parquet tables, raw Amazon review + meta_<Category> files, a MovieLens release, or "
        "MIND's behaviors.tsv + news.tsv, or Netflix Prize's combined_data_*.txt); set data.format"
    )


def companion_files(path: Path) -> list[Path]:
    """The files a layout reads beside a dataset given as one file, so that a run's cache key covers them too:
    ``X.inter.json`` -> ``X.item.json``, ``X.inter`` -> ``X.item``, MovieLens' ``u.data`` -> ``u.item`` and
    ``u.genre``, ``ratings.dat`` -> ``movies.dat``, MIND's behaviors file -> ``news.tsv``, a RecBole benchmark's
    part -> its other parts and ``X.item``, a Netflix Prize rating file -> ``movie_titles.csv``; none for anything
    else (or a folder, which is hashed whole)."""
    if not path.is_file():
        return []
    if path.suffix.lower() == ".txt":
        from crabrec.data.netflix import is_netflix, titles_file

        titles = titles_file(path) if is_netflix(path) else None
        return [titles] if titles else []
    name = path.name
    beside = {"u.data": ["u.item", "u.genre"], "ratings.dat": ["movies.dat"]}.get(name, [])
    if path.suffix.lower() == ".tsv":
        from crabrec.data.mind import NEWS, is_mind

        beside = [NEWS] if is_mind(path) else []
    if name.endswith(".inter.json"):
        beside = [name.removesuffix(".inter.json") + ".item.json"]
    elif name.endswith(".inter"):
        from crabrec.data.recbole import recbole_files

        files = recbole_files(path)
        beside = [p.name for p in [*files.parts, files.items] if p != path]
    return [path.parent / n for n in beside if (path.parent / n).is_file()]


# ----------------------------------------------------------------------------------------------- helpers


def _stem(path: Path, suffix: str, name: str | None) -> tuple[Path, str]:
    """Resolve ``(directory, name)`` for files ``<dir>/<name><suffix>``."""
    if path.is_file():
        return path.parent, path.name[: -len(suffix)] if path.name.endswith(suffix) else path.stem
    if name:
        return path, name
    stems = sorted(p.name[: -len(suffix)] for p in path.glob(f"*{suffix}"))
    if len(stems) != 1:
        found = ", ".join(stems) or "none"
        raise CrabError(f"{path}: expected exactly one *{suffix} file (found {found}); set data.name")
    return path, stems[0]


def _read_csv(path: Path, sep: str | None = None, header_only: bool = False) -> pd.DataFrame:
    """A table the user brought, every text cell a string (:func:`crabrec.data.reading.read_table`)."""
    return read_table(path, sep, header_only)


def _require_columns(df: pd.DataFrame, path: Path, columns: tuple[str, ...] | list[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise CrabError(
            f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(columns)} "
            f"(found {listed(df.columns)})"
        )


NUMERIC_ID = re.compile(r"-?[0-9]+")
# an item table's name column, the title when it has no column of titles (Yelp's ``name``, ``product_name``)
NAME_COLUMNS = {"name", *(f"{kind}name" for kind in ("item", "product", "movie", "book", "business", "song", "track",
                                                      "game", "app", "recipe", "place"))}  # fmt: skip


def _catalogue_order(ids: list[str]) -> list[str]:
    """Ids that are all plain (ASCII) integers sorted numerically, of any length; other ids kept in file order."""
    if ids and all(NUMERIC_ID.fullmatch(i) for i in ids):
        return sorted(ids, key=Decimal)  # Decimal: no digit limit, unlike int()
    return list(ids)


def _text(value: Any) -> str:
    """A text field as valid Unicode: a lone UTF-16 surrogate (legal in JSON, not in UTF-8) becomes '?'."""
    text = "" if value is None else str(value)
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def _text_record(raw: Any, source: Path, key: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise CrabError(
            f"{source}: item {clip(repr(key))}: expected an object of text fields, got {type(raw).__name__}"
        )
    return {_text(k): _text(v) for k, v in raw.items()}


def _build(
    name: str,
    source: Path,
    items: dict[str, dict[str, str]],
    user_rows: dict[str, list[str]],
    user_times: dict[str, list[float]] | None,
    where: str,
    drop_missing: bool = False,
) -> Dataset:
    """Map raw ids to indices (catalogue order). An item outside the item table is an error naming the first one, or
    with ``drop_missing`` its interactions are dropped (logged, and noted on the dataset)."""
    item_ids = _catalogue_order(list(items))
    index = {raw: i for i, raw in enumerate(item_ids)}
    unlisted = [(user, str(x)) for user, raw_seq in user_rows.items() for x in raw_seq if str(x) not in index]
    notes = []
    if unlisted:
        n_items = len({item for _, item in unlisted})
        if not drop_missing:
            raise _unlisted_error(where, unlisted[0][0], unlisted[0][1], n_items, len(unlisted), item_ids)
        notes.append(_dropped_unlisted(where, n_items, len(unlisted)))
    users, seqs, times = [], [], []
    for user, raw_seq in user_rows.items():
        kept = [j for j, x in enumerate(raw_seq) if str(x) in index] if unlisted else range(len(raw_seq))
        if not kept:
            continue
        seq = np.fromiter((index[str(raw_seq[j])] for j in kept), dtype=np.int64, count=len(kept))
        users.append(user)
        seqs.append(seq)
        if user_times is not None:
            times.append(np.asarray(user_times[user], dtype=np.float64)[list(kept)])
    return Dataset(
        name=name,
        source=str(source),
        item_ids=item_ids,
        item_text=[items[i] for i in item_ids],
        users=users,
        sequences=seqs,
        timestamps=times if user_times is not None else None,
        notes=notes,
    )


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _unlisted_error(
    where: str, user: str, item: str, n_items: int, n_rows: int, listed: Iterable[str] = ()
) -> CrabError:
    """The error for interactions with items the item table lacks: the first one met, how many there are, and the
    item table's id written another way (``'25.0'`` or ``'025'`` for ``'25'``) when there is one."""
    more = f" ({_count(n_items, 'item')}, {_count(n_rows, 'interaction')} in all)" if n_rows > 1 else ""
    key = id_key(item)
    twin = next((x for x in listed if id_key(x) == key), None)
    hint = (
        f"; the item table has {clip(repr(twin))}: ids are matched as text, write them the same way in both files"
        if twin is not None
        else "; add it to the item table"
    )
    return CrabError(
        f"{where}: user {clip(repr(user))}: item {clip(repr(item))} is not in the item table{more}{hint}, or --set "
        "data.missing_items=drop to drop the interactions with items it lacks"
    )


def _dropped_unlisted(where: str, n_items: int, n_rows: int) -> str:
    """Log and return the note for interactions dropped because the item table lacks their items."""
    note = (
        f"dropped {_count(n_rows, 'interaction')} with {_count(n_items, 'item')} not in the item table "
        "(data.missing_items=drop)"
    )
    log.warning("%s: %s", where, note)
    return note


def _filter(ds: Dataset, k: int) -> Dataset:
    """k-core, then drop users with < 2 interactions (warned), then drop items that no longer occur."""
    keep, seqs, times = kcore(ds.sequences, ds.n_items, k, ds.timestamps)
    short = [j for j, s in enumerate(seqs) if len(s) < 2]
    if short:
        log.warning("%s: dropped %d user(s) with fewer than 2 interactions", ds.source, len(short))
        ok = [j for j, s in enumerate(seqs) if len(s) >= 2]
        keep = [keep[j] for j in ok]
        seqs = [seqs[j] for j in ok]
        times = [times[j] for j in ok] if times is not None else None
    used = np.unique(np.concatenate(seqs)) if seqs else np.zeros(0, np.int64)
    dropped_items = ds.n_items - len(used)
    if dropped_items:
        log.debug("%s: %d item(s) without interactions left the catalogue", ds.source, dropped_items)
    remap = np.full(ds.n_items, -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    return Dataset(
        name=ds.name,
        source=ds.source,
        item_ids=[ds.item_ids[i] for i in used],
        item_text=[ds.item_text[i] for i in used],
        users=[ds.users[u] for u in keep],
        sequences=[remap[s] for s in seqs],
        timestamps=times,
        notes=ds.notes,
        has_text=ds.has_text,
        split_hint=ds.split_hint,
    )


# ----------------------------------------------------------------------------------------------- layouts


def _load_raw(path: Path, cfg: DataConfig, fmt: str) -> Dataset:
    from crabrec.data.amazon import load_raw_amazon

    recipe = cfg.recipe if cfg.recipe != "auto" else ("tiger" if fmt == "amazon14" else "minionerec")
    window = cfg.time_window or (MINIONEREC_WINDOW if recipe == "minionerec" else None)
    return load_raw_amazon(path, fmt, recipe, window, cfg.name)


def _load_lcrec(path: Path, cfg: DataConfig) -> Dataset:
    folder, name = _stem(path, ".inter.json", cfg.name)
    inter_path, item_path = folder / f"{name}.inter.json", folder / f"{name}.item.json"
    inter = read_input_json(inter_path)
    if not isinstance(inter, dict):
        raise CrabError(f"{inter_path}: expected an object {{user: [item, ...]}}, got {type(inter).__name__}")
    rows: dict[str, list[str]] = {}
    for user, seq in inter.items():
        if not isinstance(seq, list):
            raise CrabError(
                f"{inter_path}: user {clip(repr(user))}: expected a list of item ids, got {type(seq).__name__}"
            )
        odd = [x for x in seq if isinstance(x, bool) or not isinstance(x, (str, int))]
        if odd:  # (a list, not next(..., None): a null id is itself None)
            raise CrabError(
                f"{inter_path}: user {clip(repr(user))}: item ids are strings or integers, got {clip(repr(odd[0]))}"
            )
        rows[user] = [str(x) for x in seq]
    if not item_path.exists():  # ids-only data (e.g. the TIGER Beauty benchmark): the catalogue is what occurs
        items = {raw: {} for seq in rows.values() for raw in seq}
        ds = _build(name, folder, items, rows, None, str(inter_path))  # (every item is listed)
        ds.has_text = False
        ds.notes.append(f"no item text ({item_path.name} absent): semantic IDs must be imported")
        return ds
    items_raw = read_input_json(item_path)
    if not isinstance(items_raw, dict):
        raise CrabError(f"{item_path}: expected an object {{item: {{title, ...}}}}, got {type(items_raw).__name__}")
    items = {str(k): _text_record(v, item_path, k) for k, v in items_raw.items()}
    return _build(name, folder, items, rows, None, str(inter_path), cfg.missing_items == "drop")


def _load_recbole(path: Path, cfg: DataConfig) -> Dataset:
    from crabrec.data.recbole import load_recbole

    return load_recbole(path, cfg)


def _load_table(path: Path, cfg: DataConfig) -> Dataset:
    from crabrec.data.table import load_table

    return load_table(path, cfg)


def _load_movielens(path: Path, cfg: DataConfig) -> Dataset:
    from crabrec.data.movielens import load_movielens

    return load_movielens(path, cfg)


def _load_mind(path: Path, cfg: DataConfig) -> Dataset:
    from crabrec.data.mind import load_mind

    return load_mind(path, cfg)


def _load_netflix(path: Path, cfg: DataConfig) -> Dataset:
    from crabrec.data.netflix import load_netflix

    return load_netflix(path, cfg)


def joined_list(value: Any) -> str | None:
    """A cell holding a list of words (a Parquet list, or its JSON text: ``["Office", "Pens"]``, as Amazon 2023's
    metadata writes categories and descriptions) as the text ``Office, Pens``; a list of such lists (Amazon 2014's
    category paths, ``[["Beauty", "Makeup"], ["Beauty", "Nails"]]``) as each word once, in order
    (``Beauty, Makeup, Nails``); None for any other cell."""
    items = cell_list(value)
    if items is not None and items and all(isinstance(x, list) for x in items):
        items = list(dict.fromkeys(x for inner in items for x in inner if isinstance(x, str | int | float)))
        if not items:
            return None
    if items is None or not all(isinstance(x, str | int | float) for x in items):
        return None
    return ", ".join(" ".join(str(x).split()) for x in items if str(x).strip())


def _joined(value: Any) -> Any:
    """An item table's cell as text: a list of words or an object as :func:`joined_list` and :func:`joined_record`
    write them, any other cell as it is."""
    for join in (joined_list, joined_record):
        if (words := join(value)) is not None:
            return words
    return value


def joined_record(value: Any) -> str | None:
    """A cell holding one object (its JSON text or Python literal, or a Parquet struct: Amazon 2023's ``details``,
    Yelp's ``attributes``) as its ``key: value`` pairs joined by commas (``Brand: Pilot, Color: Black``), a list value
    as its words and a nested object or a null left out; None for any other cell."""
    if isinstance(value, str):
        value = bracketed(value, "{}")
    if not isinstance(value, dict):
        return None
    pairs = []
    for key, v in value.items():
        v = joined_list(v) if isinstance(v, list | tuple | np.ndarray) else v
        if v is not None and not isinstance(v, dict) and str(v).strip():
            pairs.append(f"{' '.join(str(key).split())}: {' '.join(str(v).split())}")
    return ", ".join(pairs)


def _items_from_frame(df: pd.DataFrame, id_col: str, path: Path) -> dict[str, dict[str, str]]:
    ids = id_cells(df[id_col]).str.strip()  # as the interactions' ids: without spaces around them
    empty = np.flatnonzero(ids.to_numpy() == "")
    if len(empty):
        raise CrabError(f"{path}: row {int(empty[0]) + first_row(path)}: empty item id in column {id_col!r}")
    if ids.duplicated().any():
        df, ids = _one_row_per_item(df, ids, path)
    text_cols = [c for c in df.columns if c != id_col]
    title_col = "title" if "title" in text_cols else next((c for c in text_cols if "title" in str(c).lower()), None)
    title_col = title_col or next((c for c in text_cols if re.sub(r"[^a-z]", "", str(c).lower()) in NAME_COLUMNS), None)
    items: dict[str, dict[str, str]] = {}
    text = df[text_cols]
    records = text.astype(object).where(text.notna(), "").to_dict("records")  # a Parquet null: no text
    for raw_id, rec in zip(ids, records):
        rec = {str(k): _text(_joined(v)) for k, v in rec.items()}
        if title_col and "title" not in rec:
            rec["title"] = rec[title_col]
        items[raw_id] = rec
    return items


def _one_row_per_item(df: pd.DataFrame, ids: pd.Series, path: Path) -> tuple[pd.DataFrame, pd.Series]:
    """The item table with each item's repeated rows read once when they are the same row (a table exported from a
    join); an item whose rows differ is an error naming two of them."""
    cells = df.astype(object).where(df.notna(), "").astype(str).apply(lambda col: col.str.strip())
    same = cells.assign(_id=ids.to_numpy()).duplicated()
    other = ids.duplicated() & ~same.to_numpy()
    if other.any():
        row = int(np.flatnonzero(other.to_numpy())[0])
        first = int(np.flatnonzero((ids == ids.iloc[row]).to_numpy())[0])
        line = first_row(path)
        raise CrabError(
            f"{path}: rows {first + line} and {row + line}: item id {clip(repr(ids.iloc[row]))} is given twice, with "
            "different text; keep one row per item"
        )
    log.info("%s: %d repeated row(s) of an item read once", path, int(same.sum()))
    keep = ~same.to_numpy()
    return df[keep], ids[keep]


def _stripped(codes: np.ndarray, uniques: pd.Index) -> tuple[np.ndarray, pd.Index]:
    """Factorized ids without the spaces around them (``u1, i1`` written with a space after each comma): the
    distinct values are stripped and those that become one are merged, so a large table is not stripped row by row."""
    clean = pd.Index(uniques, dtype=object).str.strip()
    if clean.equals(pd.Index(uniques, dtype=object)):
        return codes, uniques
    merged, kept = pd.factorize(clean, sort=False)
    return merged[codes], kept


def _factorized(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each value's code and the distinct values as ``values.astype(str)`` spells them; a column of integers is
    factorized before its distinct values are spelled, which spares a string a row (100 million of them in the
    Netflix Prize data)."""
    if values.dtype.kind in "iu":
        codes, uniques = pd.factorize(values, sort=False)
        return codes, np.asarray([str(v) for v in uniques], dtype=object)
    return pd.factorize(values.astype(str), sort=False)


def _group_interactions(
    name: str,
    source: Path,
    inter: pd.DataFrame,
    user_col: str,
    item_col: str,
    ts: np.ndarray | None,
    items: dict[str, dict[str, str]],
    where: str,
    drop_missing: bool = False,
) -> Dataset:
    """Group rows per user (users in sorted order of their ids); with timestamps, sort each user's rows by time (file
    order breaks ties). Items are numbered in catalogue order; one outside ``items`` is handled as in :func:`_build`.
    Array operations throughout: a 25M-row table groups in seconds."""
    if len(inter) == 0:
        raise CrabError(f"{where}: no interactions")
    user_codes, user_ids = _stripped(*_factorized(inter[user_col]))
    ids = np.asarray(user_ids, dtype=object)
    by_id = np.argsort(ids, kind="stable")
    rank = np.empty(len(ids), dtype=np.int64)
    rank[by_id] = np.arange(len(ids))
    user = rank[user_codes]  # each row's user, as its place among the sorted user ids
    rows = np.arange(len(inter))
    order = np.lexsort((rows, ts, user) if ts is not None else (rows, user))
    item_ids = _catalogue_order(list(items))
    item_codes, raw_items = _stripped(*_factorized(inter[item_col]))
    codes = pd.Index(item_ids, dtype=object).get_indexer(raw_items)[item_codes]
    codes, user = codes[order], user[order]
    missing = np.flatnonzero(codes < 0)
    notes = []
    if len(missing):
        n_items = len(np.unique(item_codes[order[missing]]))
        if not drop_missing:
            row = int(order[missing[0]])  # the first one met, users in order
            first = raw_items[item_codes[row]]
            raise _unlisted_error(where, str(ids[user_codes[row]]), first, n_items, len(missing), item_ids)
        notes.append(_dropped_unlisted(where, n_items, len(missing)))
        kept = codes >= 0
        if not kept.any():
            raise CrabError(f"{where}: no interactions left: the item table lacks every item")
        order, codes, user = order[kept], codes[kept], user[kept]
    bounds = np.flatnonzero(np.diff(user)) + 1
    present = user[np.r_[0, bounds]]  # the users with a row left, in order
    times = np.split(np.asarray(ts, dtype=np.float64)[order], bounds) if ts is not None else None
    return Dataset(
        name=name,
        source=str(source),
        item_ids=item_ids,
        item_text=[items[i] for i in item_ids],
        users=[str(u) for u in ids[by_id][present]],
        sequences=[np.ascontiguousarray(s, dtype=np.int64) for s in np.split(codes.astype(np.int64), bounds)],
        timestamps=[np.ascontiguousarray(t) for t in times] if times is not None else None,
        notes=notes,
    )


def _load_minionerec(path: Path, cfg: DataConfig) -> Dataset:
    """MiniOneRec release: the files' own split is used as given."""
    item_files = sorted((path / "index").glob("*.item.json"))
    info_files = sorted((path / "info").glob("*.txt"))
    if item_files:
        raw = read_input_json(item_files[0])
        if not isinstance(raw, dict):
            raise CrabError(f"{item_files[0]}: expected an object {{item: {{title, ...}}}}")
        items = {str(k): _text_record(v, item_files[0], k) for k, v in raw.items()}
    elif info_files:
        items = _items_from_info(info_files[0])
    else:
        raise CrabError(f"{path}: no item table (expected index/*.item.json or info/*.txt)")
    item_ids = _catalogue_order(list(items))
    index = {raw: i for i, raw in enumerate(item_ids)}
    user_index: dict[str, int] = {}
    given: dict[str, tuple[list[int], list[list[int]], list[int]]] = {}
    order: list[tuple[int, list[int], int]] = []
    for split in SPLIT_NAMES:
        files = sorted((path / split).glob("*.csv")) if (path / split).is_dir() else []
        if not files:
            continue
        parts = [_read_minionerec_csv(f, index, user_index) for f in files]  # every CSV of the split, in name order
        given[split] = tuple([x for part in parts for x in part[k]] for k in range(3))  # type: ignore[assignment]
        order.extend(zip(*given[split]))
    notes = []
    for split in ("valid", "test"):
        if split not in given:
            raise CrabError(f"{path}: missing the {split} split ({split}/*.csv)")
    if "train" not in given:
        if not cfg.train_on_available:
            raise CrabError(
                f"{path}: no train split (train/*.csv); set data.train_on_available=true to train on the valid rows"
            )
        given["train"] = given["valid"]
        notes.append("no train split: the valid rows are used for training, so validation is not held out")
        log.warning("%s: %s", path, notes[-1])
    users = sorted(user_index, key=user_index.get)
    seqs, broken = _rebuild_sequences(order, len(users))
    if broken:
        notes.append(
            f"{broken:,} of {len(order):,} rows have a history that does not end with their user's earlier rows "
            "(train, valid, test, each in file order); a user's history (recommend --user-id) follows that order"
        )
        log.warning("%s: %s", path, notes[-1])
    return Dataset(
        name=item_files[0].name.split(".")[0] if item_files else path.name,
        source=str(path),
        item_ids=item_ids,
        item_text=[items[i] for i in item_ids],
        users=users,
        sequences=[np.asarray(s, dtype=np.int64) for s in seqs],
        given=given,
        notes=notes,
    )


def _rebuild_sequences(rows: list[tuple[int, list[int], int]], n_users: int) -> tuple[list[list[int]], int]:
    """Each user's sequence from sliding-window rows (user, history, target) in time order: the user's first
    history, then every target. Rows whose history is not the end of what came before are counted, not fixed.
    A user whose first row has a full window gets the end of their sequence only."""
    seqs: list[list[int]] = [[] for _ in range(n_users)]
    broken = 0
    for u, hist, tgt in sorted(rows, key=lambda r: r[0]):  # stable: each user's rows keep their order
        seq = seqs[u]
        if not seq:
            seq.extend(hist)
        elif hist and seq[len(seq) - len(hist) :] != hist:
            broken += 1
        seq.append(tgt)
    return seqs, broken


def _items_from_info(path: Path) -> dict[str, dict[str, str]]:
    items: dict[str, dict[str, str]] = {}
    for n, line in enumerate(read_input_text(path).splitlines(), start=1):
        parts = line.split("\t")
        if len(parts) != 3:
            raise CrabError(f"{path}: line {n}: expected 3 tab-separated columns (semantic_id, title, item_id)")
        if parts[2] in items:
            raise CrabError(f"{path}: line {n}: duplicate item id {clip(repr(parts[2]))}")
        items[parts[2]] = {"title": _text(parts[1])}
    return items


def _read_minionerec_csv(
    path: Path, index: dict[str, int], user_index: dict[str, int]
) -> tuple[list[int], list[list[int]], list[int]]:
    df = _read_csv(path)
    _require_columns(df, path, MINIONEREC_COLUMNS)
    users, hists, targets = [], [], []
    for row, (user, hist_text, target) in enumerate(zip(df["user_id"], df["history_item_id"], df["item_id"]), start=2):
        try:
            hist = [index[str(x)] for x in list_literal(hist_text)]
            tgt = index[str(target).strip()]
        except KeyError as exc:
            raise CrabError(f"{path}: row {row}: item {clip(repr(exc.args[0]))} is not in the item table") from None
        except (ValueError, SyntaxError):
            raise CrabError(
                f"{path}: row {row}: history_item_id {clip(hist_text)!r} is not a list of item ids"
            ) from None
        users.append(user_index.setdefault(str(user), len(user_index)))
        hists.append(hist)
        targets.append(tgt)
    return users, hists, targets
