"""The ``recbole`` layout: RecBole's atomic files, ``<name>.inter`` and, when there is one, ``<name>.item``.

Each is tab-separated with a header of ``name:type`` (``user_id:token``, ``item_id_list:token_seq``); a column is
named without its type. The columns are found by name as in a table (:mod:`crabrec.data.table`): ``user_id``,
``item_id``, and the names RecBole's converted datasets use (Yelp's ``business_id`` and ``date``, Last.fm's
``artist_id``); ``data.user_col``, ``data.item_col`` and ``data.time_col`` name others. The item file's id column is
the interactions' item column, as RecBole requires.

A benchmark split (RecBole's ``benchmark_filename``: ``<name>.train.inter``, ``<name>.valid.inter`` and
``<name>.test.inter``) is one dataset, read from any of its files or its folder. Where each row lists the items
before its item (``item_id_list:token_seq``, as sequential benchmarks are written), each user's sequence is rebuilt:
the user's first row's list, then every row's item, in the files' order; a row whose list is not the user's items
so far is an error. crabrec splits the rebuilt sequences itself (``data.split``), and the data's notes say whether
the valid and test files held each user's last items.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from crabrec.config import DataConfig
from crabrec.data.dataset import Dataset
from crabrec.data.reading import id_cells, read_table
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
        return RecBoleFiles(stem, [path], path.parent / f"{stem}{ITEMS}")
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
    from crabrec.data.table import DEFAULTS, ITEM_NAMES, USER_NAMES, find_column, frame_dataset

    files = recbole_files(path, cfg.name)
    frames = [recbole_frame(p) for p in files.parts]
    for part, frame in zip(files.parts[1:], frames[1:], strict=True):
        if list(frame.columns) != list(frames[0].columns):
            raise CrabError(
                f"{part}: header: columns {listed(frame.columns)}; expected those of {files.parts[0].name} "
                f"({listed(frames[0].columns)})"
            )
    inter = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    cols = list(inter.columns)
    user = find_column(cols, cfg.user_col, DEFAULTS["user_col"], USER_NAMES)
    item = find_column(cols, cfg.item_col, DEFAULTS["item_col"], ITEM_NAMES)
    history = listed_column(frames[0], (user, item)) if user and item else None
    notes = []
    if history is not None:
        inter, note = rebuilt(frames, files.parts, user, history, item)
        notes.append(note)
        log.info("%s", note)
    where = files.parts[0] if len(files.parts) == 1 else files.parts[0].parent
    label = f"{files.parts[0].name}: " if len(files.parts) == 1 else f"{where}: {_named(files)}: "
    item_path = files.items if files.items.is_file() else None
    ds = frame_dataset(
        inter, files.parts[0], 2, cfg, item_path, name=files.name, label=label, read_items=recbole_frame,
        no_items=f"no {files.items.name}",
    )  # fmt: skip
    ds.notes[:0] = notes
    return ds


def _named(files: RecBoleFiles) -> str:
    """``ml-100k.{train,valid,test}.inter``."""
    splits = [p.name.removesuffix(SUFFIX).rpartition(".")[2] for p in files.parts]
    return f"{files.name}.{{{','.join(splits)}}}{SUFFIX}"


def rebuilt(
    frames: list[pd.DataFrame], parts: list[Path], user: str, history: str, item: str
) -> tuple[pd.DataFrame, str]:
    """Each user's sequence from rows of (user, the items before, the item), read in the order of ``parts``: the
    user's first row's list, then each row's item. Returns the rows (user, item) in sequence order and a note."""
    seqs: dict[str, list[str]] = {}
    roles: dict[str, list[int]] = {}  # the part each item of a user's sequence came from
    for n, (frame, part) in enumerate(zip(frames, parts, strict=True)):
        cells = zip(id_cells(frame[user]).str.strip(), id_cells(frame[history]), id_cells(frame[item]).str.strip())
        for row, (who, before, what) in enumerate(cells, start=2):
            if not who or not what:
                empty = user if not who else item
                raise CrabError(f"{part}: row {row}: empty {empty}; expected an id in every row")
            listed_before = before.split()
            if who not in seqs:  # the user's first row: its list starts the sequence
                seqs[who], roles[who] = list(listed_before), [n] * len(listed_before)
            else:
                seq = seqs[who]
                if listed_before and seq[-len(listed_before) :] != listed_before:
                    raise CrabError(
                        f"{part}: row {row}: {history} of user {who!r} ({clip(before, 60)}) is not that user's "
                        f"items so far (they end {clip(' '.join(seq[-len(listed_before) :]), 60)}); expected each "
                        f"row to list the items before its {item}"
                    )
            seqs[who].append(what)
            roles[who].append(n)
    frame = pd.DataFrame(
        {user: [u for u, seq in seqs.items() for _ in seq], item: [i for seq in seqs.values() for i in seq]}
    )
    files = ", ".join(p.name for p in parts)
    note = f"{files}: each user's items rebuilt from {history} and {item} ({sum(map(len, frames)):,} rows)"
    if len(parts) > 1:
        held = list(range(1, len(parts)))  # the parts after train: each user's last items, one each?
        last = all(r[-len(held) :] == held and set(r[: -len(held)]) <= {0} for r in roles.values())
        note += (
            f"; the {' and '.join(p.name for p in parts[1:])} rows are each user's last items"
            if last
            else f"; the rows after {parts[0].name} are not each user's last items: data.split splits the sequences"
        )
    return frame, note
