"""The ``recbole`` layout: RecBole's atomic files, ``<name>.inter`` and, when there is one, ``<name>.item``.

Each is tab-separated with a header of ``name:type`` (``user_id:token``, ``item_id_list:token_seq``); a column is
named without its type. The columns are found by name as in a table (:mod:`crabrec.data.table`): ``user_id``,
``item_id``, and the names RecBole's converted datasets use (Yelp's ``business_id`` and ``date``, Last.fm's
``artist_id``); ``data.user_col``, ``data.item_col`` and ``data.time_col`` name others. The item file's id column is
the interactions' item column, as RecBole requires, else ``id`` (Steam's). Without an item file, the interactions'
columns that name their items are the item text (:mod:`crabrec.data.inline_text`).

A benchmark split (RecBole's ``benchmark_filename``: ``<name>.train.inter``, ``<name>.valid.inter`` and
``<name>.test.inter``) is one dataset, read from any of its files or its folder. Where each row lists the items
before its item (``item_id_list:token_seq``, as sequential benchmarks are written), the rows are the benchmark's
train, valid and test samples, used as given (``data.split=given``, no k-core filtering), and each user's sequence
(for popularity, and a user's history in ``recommend --user-id``) is rebuilt from them: the user's first row's list,
then every row's item, in the files' order (rows whose list does not end with the items before are counted).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from crabrec.config import DataConfig
from crabrec.data.dataset import Dataset
from crabrec.data.reading import Origin, id_cells, read_table
from crabrec.errors import CrabError, clip, listed

log = logging.getLogger("crabrec")

SUFFIX, ITEMS = ".inter", ".item"
BENCHMARK = ("train", "valid", "test")  # the parts of a benchmark split, in the order their rows are read


@dataclass(frozen=True)
class RecBoleFiles:
    """A RecBole dataset's files: its interaction files (one, or a benchmark's parts) and its item file (which may
    be absent)."""

    name: str
    parts: list[Path]
    items: Path


def recbole_files(path: Path, name: str | None = None) -> RecBoleFiles:
    """The files of the RecBole dataset at ``path``: an ``.inter`` file (a benchmark's part stands for the whole
    benchmark) or a folder holding one dataset (``name``: the one named ``data.name``)."""
    if path.is_file():
        stem = path.name.removesuffix(SUFFIX) if path.name.endswith(SUFFIX) else path.stem
        base, _, split = stem.rpartition(".")
        if split in BENCHMARK and (parts := _benchmark(path.parent, base)):
            return RecBoleFiles(base, parts, path.parent / f"{base}{ITEMS}")
        items = path.parent / f"{stem}{ITEMS}"
        if split in BENCHMARK and not items.is_file():  # one part alone: its dataset's item file
            items = path.parent / f"{base}{ITEMS}"
        return RecBoleFiles(stem, [path], items)
    if name:
        single = path / f"{name}{SUFFIX}"
        parts = [single] if single.is_file() else _benchmark(path, name) or [single]
        return RecBoleFiles(name, parts, path / f"{name}{ITEMS}")
    stems = sorted(p.name.removesuffix(SUFFIX) for p in path.glob(f"*{SUFFIX}"))
    if len(stems) == 1:
        return RecBoleFiles(stems[0], [path / f"{stems[0]}{SUFFIX}"], path / f"{stems[0]}{ITEMS}")
    bases = {s.rpartition(".")[0] for s in stems}
    if len(bases) == 1 and (parts := _benchmark(path, base := bases.pop())) and len(parts) == len(stems):
        return RecBoleFiles(base, parts, path / f"{base}{ITEMS}")
    raise CrabError(
        f"{path}: expected one dataset's *{SUFFIX} file, or a benchmark's <name>.train{SUFFIX}, .valid and .test "
        f"(found {', '.join(stems) or 'none'}); set data.name"
    )


def _benchmark(folder: Path, base: str) -> list[Path]:
    """The parts of the benchmark ``base`` in ``folder``, in order (a train and a test file at least), or []."""
    parts = [folder / f"{base}.{split}{SUFFIX}" for split in BENCHMARK]
    found = [p for p in parts if p.is_file()]
    return found if parts[0] in found and parts[2] in found else []


def recbole_frame(path: Path, first_rows: int | None = None) -> pd.DataFrame:
    """A RecBole atomic file (``first_rows``: only those), its columns named without their types."""
    df = read_table(path, "\t", first_rows=first_rows)
    names = [str(c).split(":")[0] for c in df.columns]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CrabError(f"{path}: header: column {clip(twice[0])!r} is given twice (names compare without :type)")
    df.attrs["types"] = {n: str(c).partition(":")[2] for n, c in zip(names, df.columns, strict=True)}
    df.columns = names
    return df


def listed_column(frame: pd.DataFrame, taken: tuple[str | None, ...]) -> str | None:
    """The column (not ``taken``) that lists the items before each row's item: a ``token_seq`` named for items,
    as RecBole's ``item_id_list``."""
    from crabrec.data.table import LIST_WORDS, _norm

    types = frame.attrs.get("types", {})
    return next(
        (
            c
            for c in frame.columns
            if c not in taken and types.get(c) == "token_seq" and any(w in _norm(c) for w in LIST_WORDS)
        ),
        None,
    )


def load_recbole(path: Path, cfg: DataConfig) -> Dataset:
    from crabrec.data.table import DEFAULTS, INTERACTION_ITEM_NAMES, USER_NAMES, find_column, frame_dataset

    files = recbole_files(path, cfg.name)
    frames = [recbole_frame(p) for p in files.parts]
    for part, frame in zip(files.parts[1:], frames[1:], strict=True):
        if list(frame.columns) != list(frames[0].columns):
            raise CrabError(
                f"{part}: header: columns {listed(frame.columns)}; expected those of {files.parts[0].name} "
                f"({listed(frames[0].columns)})"
            )
    cols = list(frames[0].columns)
    user = find_column(cols, cfg.user_col, DEFAULTS["user_col"], USER_NAMES)
    item = find_column(cols, cfg.item_col, DEFAULTS["item_col"], INTERACTION_ITEM_NAMES)
    history = listed_column(frames[0], (user, item)) if user and item else None
    samples: dict[str, Rows] = {}
    notes = []
    origin = Origin(files.parts[0], 2)
    if history is None:  # rows of interactions: the parts one after another, each row named by its own file's line
        inter = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        starts = np.cumsum([0] + [len(f) for f in frames[:-1]])
        origin = Origin(files.parts[0], 2, tuple((int(s), p, 2) for s, p in zip(starts, files.parts, strict=True)))
    else:
        inter, samples, notes = rebuilt(frames, files.parts, user, history, item)
        for note in notes:
            log.info("%s: %s", files.parts[0].parent, note)
    label = f"{files.parts[0].name}: " if len(files.parts) == 1 else f"{files.parts[0].parent}: {_named(files)}: "
    item_path = files.items if files.items.is_file() else None
    ds = frame_dataset(
        inter, origin, cfg, item_path, name=files.name, label=label, read_items=recbole_frame,
        no_items=f"no {files.items.name}",
    )  # fmt: skip
    ds.notes[:0] = notes
    if set(samples) == set(BENCHMARK):  # the benchmark's rows are its samples: the split is given
        ds.given = _indexed(samples, ds, files)
    return ds


Rows = tuple[list[str], list[list[str]], list[str]]  # (user, items before, item) of each row of a part


def _named(files: RecBoleFiles) -> str:
    """``ml-100k.{train,valid,test}.inter``."""
    splits = [p.name.removesuffix(SUFFIX).rpartition(".")[2] for p in files.parts]
    return f"{files.name}.{{{','.join(splits)}}}{SUFFIX}"


def rebuilt(
    frames: list[pd.DataFrame], parts: list[Path], user: str, history: str, item: str
) -> tuple[pd.DataFrame, dict[str, Rows], list[str]]:
    """Each user's sequence from rows of (user, the items before, the item), read in the order of ``parts``: the
    user's first row's list, then each row's item (:func:`~crabrec.data.loaders._rebuild_sequences`; a row whose
    list does not end with the items before it is counted in a note). Returns the rows (user, item) in sequence
    order, each benchmark part's rows by its split's name, and the notes."""
    from crabrec.data.loaders import _rebuild_sequences

    users: dict[str, int] = {}
    items: dict[str, int] = {}
    order: list[tuple[int, list[int], int]] = []
    samples: dict[str, Rows] = {}
    for frame, part in zip(frames, parts, strict=True):
        who_col, what_col = id_cells(frame[user]).str.strip(), id_cells(frame[item]).str.strip()
        empty = (who_col == "") | (what_col == "")
        if empty.any():
            row = int(empty.to_numpy().argmax())
            raise CrabError(
                f"{part}: row {row + 2}: empty {user if who_col.iloc[row] == '' else item}; expected an id in every row"
            )
        before = [cell.split() for cell in id_cells(frame[history])]
        who, what = who_col.tolist(), what_col.tolist()
        samples[part.name.removesuffix(SUFFIX).rpartition(".")[2]] = (who, before, what)
        for u, hist, i in zip(who, before, what, strict=True):
            order.append(
                (
                    users.setdefault(u, len(users)),
                    [items.setdefault(x, len(items)) for x in hist],
                    items.setdefault(i, len(items)),
                )
            )
    seqs, broken = _rebuild_sequences(order, len(users))
    raw_items = list(items)
    frame = pd.DataFrame(
        {
            user: [u for u, seq in zip(users, seqs, strict=True) for _ in seq],
            item: [raw_items[i] for seq in seqs for i in seq],
        }
    )
    files = ", ".join(p.name for p in parts)
    note = f"{files}: each user's sequence rebuilt from {history} and {item} ({len(order):,} rows)"
    if len(parts) > 1:
        note += (
            "; their rows are the train, valid and test samples (data.split=given)"
            if set(samples) == set(BENCHMARK)
            else f"; no {BENCHMARK[1]} file: data.split splits the sequences"
        )
    notes = [note]
    if broken:
        notes.append(
            f"{broken:,} of {len(order):,} rows list items that do not end with their user's earlier rows (train, "
            "valid, test, each in file order); a user's history (recommend --user-id) follows that order"
        )
    return frame, samples if len(parts) > 1 else {}, notes


def _indexed(
    samples: dict[str, Rows], ds: Dataset, files: RecBoleFiles
) -> dict[str, tuple[list[int], list[list[int]], list[int]]]:
    """The benchmark's rows as the dataset's indices (the given split); an item the dataset lacks (an item file
    without it and ``data.missing_items=drop``) leaves its row out, or a history without it."""
    user_index = {u: n for n, u in enumerate(ds.users)}
    item_index = {raw: n for n, raw in enumerate(ds.item_ids)}
    given = {}
    for split, (who, before, what) in samples.items():
        kept = [n for n, i in enumerate(what) if i in item_index]
        given[split] = (
            [user_index[who[n]] for n in kept],
            [[item_index[x] for x in before[n] if x in item_index] for n in kept],
            [item_index[what[n]] for n in kept],
        )
        if not kept:
            raise CrabError(
                f"{files.parts[0].parent}: no {split} row is left (their items are not in {files.items.name})"
            )
    return given
