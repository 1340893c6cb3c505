"""History files for ``crabrec recommend --input/--output``: CSV, TSV, parquet or JSON lines, chosen by the extension
(standard input and pipes, which have none, by their content).

Input: one history per row in a ``history`` column (CSV: item ids separated by spaces, commas, ``;`` or ``|``, or
a list literal such as ``[1, 2]``, the file's delimiter a comma, tab, semicolon or bar, whichever its header line has
most; TSV: tab; parquet: a list column or such a string; JSONL: ``{"history": [...]}`` per line), and optionally
a ``user_id`` column (a user of the run's data by their id in it: a row without a history gets their known one) or a
``user`` column (the run's user index); TIGER reads the user; and optionally an ``exclude`` column, written as a
history is, of item ids the row's list must not hold. A ``.txt`` file holds one user a line, as S3-Rec's
``Beauty.txt`` and P5's ``sequential_data.txt`` write them: the user's id, then the history's item ids (spaces,
tabs or commas; none: the user's known history). Output: one row per input row: ``row`` (0-based),
``items``, ``scores``, ``groups`` (CSV and TSV: space-separated), written atomically. An error names the input's row
by its line in a text file (``line 3``), else by its place (``row 0``, as the output numbers it).
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np

from crabrec.errors import CrabError, clip, reason
from crabrec.io import atomic_path, input_text, json_object_lines, list_literal, read_input_bytes

FORMATS = (".csv", ".tsv", ".parquet", ".jsonl")  # what --output writes; --input reads .txt too
INPUT_FORMATS = (*FORMATS, ".txt")
STDIN_NAME = "standard input"
SPLIT = re.compile(r"[\s,;|]+")  # ids apart: spaces, commas, semicolons, bars
ANSWER_PART = 8192  # input rows ranked and written at a time
READ_PART = 65536  # input rows read and checked at a time
T = TypeVar("T", str, bytes)


def file_format(path: Path, formats: tuple[str, ...] = FORMATS) -> str:
    suffix = path.suffix.lower()
    if suffix not in formats:
        raise CrabError(f"{path}: unknown extension {suffix or '(none)'!r}; expected one of {', '.join(formats)}")
    return suffix


class Requests(NamedTuple):
    """What a history file asks: its histories, users (None without a ``user`` column), user ids (None without a
    ``user_id`` column; a history None where a row names a user id and no history), how errors name each row
    (``line 3``, or ``row 0`` in a Parquet file), and each row's items not to recommend (None without an
    ``exclude`` column)."""

    histories: list[list[str] | None]
    users: list[int] | None
    user_ids: list[str] | None
    rows: list[str]
    excludes: list[list[str]] | None = None


def iter_histories(source: str | Path, size: int = READ_PART) -> Iterator[Requests]:
    """The requests of a history file, ``size`` rows at a time, each part checked as it is read: a file of a
    million histories is never held as a million rows of Python objects. ``-`` reads standard input; it and a pipe
    (``<(...)``) hold JSON lines, parquet or CSV, told apart by their content."""
    path, data, kind = _input(source)
    if kind == ".jsonl":
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if b"\r" in data else data
        numbered = ((f"line {n}", rec) for n, rec in json_object_lines(path, _lines(data), "with a `history`"))
    elif kind == ".txt":
        numbered = _user_lines(path, data)
    else:
        numbered = _table(path, kind, data, size)
    given: dict[str, bool] = {}  # whether the parts so far had a user, user_id column
    while part := list(itertools.islice(numbered, size)):
        yield _requests(path, part, given)
    if not given:
        raise CrabError(f"{path}: no rows; expected one history (or user_id) per row")


def _requests(path: str, numbered: list[tuple[str, dict[str, Any]]], given: dict[str, bool]) -> Requests:
    """A part of a history file's rows as requests, each row checked; ``given``: whether the parts before had a
    ``user`` and a ``user_id`` column (updated: some rows with one and some without is an error)."""
    rows = [where for where, _ in numbered]
    records = [rec for _, rec in numbered]
    users = _column(path, records, "user", _scalar, given)
    user_ids = _column(path, records, "user_id", _user_id, given)
    if users is not None and user_ids is not None:
        raise CrabError(f"{path}: both `user` and `user_id` columns; give one (user_id: the data's user ids)")
    for r, u in enumerate(users or []):
        if not is_user_index(u):
            hint = " (users of the data by their ids go in a `user_id` column)" if isinstance(u, str) else ""
            raise CrabError(
                f"{path}: {rows[r]}: user {clip(repr(u), 40)}: expected a user index from 0 to 2^63 - 1{hint}"
            )
    for r, u in enumerate(user_ids or []):
        if not isinstance(u, str) or not u.strip():
            raise CrabError(f"{path}: {rows[r]}: user_id {clip(repr(u), 40)}: expected a user id (a string)")
    histories: list[list[str] | None] = []
    for r, rec in enumerate(records):
        value = rec.get("history")
        if (value is None or isinstance(value, str) and not value.strip()) and user_ids is not None:
            histories.append(None)  # the user's known history
        else:
            histories.append(_history(f"{path}: {rows[r]}", value))
    excludes = None
    if any(not _blank(rec.get("exclude")) for rec in records):  # a row without one excludes nothing more
        excludes = [
            [] if _blank(rec.get("exclude")) else _history(f"{path}: {rows[r]}", rec.get("exclude"), "exclude")
            for r, rec in enumerate(records)
        ]
    return Requests(histories, users, user_ids, rows, excludes)


def _blank(value: Any) -> bool:
    """An empty cell: missing, null, or only spaces."""
    return value is None or isinstance(value, str) and not value.strip()


def input_name(source: str | Path) -> str:
    """How messages name an input: ``-`` is standard input."""
    return STDIN_NAME if str(source) == "-" else str(source)


def _input(source: str | Path) -> tuple[str, bytes, str]:
    """``(name, content, format)`` of an input: a file by its extension; standard input or a pipe by its content."""
    if input_name(source) == STDIN_NAME:
        data = sys.stdin.buffer.read()
        return STDIN_NAME, data, _sniff(data)
    path = Path(source)
    if path.is_dir():
        raise CrabError(f"{path}: a folder, not a file of histories")
    stream = path.exists() and not path.is_file()  # a pipe: <(...) has no extension to read
    kind = "" if stream and path.suffix.lower() not in INPUT_FORMATS else file_format(path, INPUT_FORMATS)
    data = read_input_bytes(path)
    return str(path), data, kind or _sniff(data)


def _sniff(data: bytes) -> str:
    """The format of content without a file name: parquet by its magic bytes, JSON lines by a first ``{``, else
    CSV."""
    if data[:4] == b"PAR1":
        return ".parquet"
    return ".jsonl" if data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{" else ".csv"


def _scalar(value: Any) -> Any:
    """A table cell as a plain Python value (a numpy scalar as its item, an integral float as an int)."""
    value = value.item() if hasattr(value, "item") else value
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _user_id(value: Any) -> Any:
    """A user id cell as its string (an integer as its decimal string); anything else as it is (refused later)."""
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) else value


def _column(path: str, records: list[dict[str, Any]], name: str, convert, given: dict[str, bool]) -> list[Any] | None:
    """The ``name`` cell of every row (None when no row has one); some rows without it is an error, in this part
    or against the parts before (``given[name]``: whether they had it; set by the first part)."""
    values = [None if rec.get(name) is None else convert(_scalar(rec.get(name))) for rec in records]
    count = sum(v is not None for v in values)
    if count and count != len(values) or given.setdefault(name, bool(count)) != bool(count):
        raise CrabError(f"{path}: `{name}` is missing on some rows; give it on every row or on none")
    return values if count else None


def _csv(path: str, kind: str, data: bytes) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of a CSV (or TSV) of histories, each with its line (``line 3``), read as they are asked for. An
    unquoted history with commas (``history\\n1000,1001``) has more fields than the header has columns: they are its
    ids when ``history`` is the last column, else the row is an error (a reader that took the first id for a row
    label would silently drop it)."""
    import csv

    from crabrec.data.reading import delimiter

    text = input_text(path, data)
    sep = "\t" if kind == ".tsv" else delimiter(text.partition("\n")[0])
    reader = csv.reader(_lines(text), delimiter=sep)
    header = None
    for line, row in _csv_rows(path, reader):
        if header is None:
            header = [h.strip() for h in row]
            _need_history(path, header)
            at = header.index("history") if "history" in header else len(header)
            continue
        if len(row) > len(header):
            if at != len(header) - 1:
                raise CrabError(
                    f"{path}: line {line}: {len(row)} fields for {len(header)} columns; quote the history "
                    '("1000,1001") or separate its ids with spaces'
                )
            row = [*row[:at], ",".join(row[at:])]
        rec = {k: v.strip() for k, v in zip(header, row)}
        rec["user"] = _number(rec["user"]) if rec.get("user") else None
        rec["user_id"] = rec.get("user_id") or None
        rec["history"] = rec.get("history") or None
        rec["exclude"] = rec.get("exclude") or None
        yield f"line {line}", rec


def _lines(text: T) -> Iterator[T]:
    """The lines of a text (or bytes) whose line ends are ``\\n``, each with its end, one at a time (not a list of a
    million lines)."""
    end = "\n" if isinstance(text, str) else b"\n"
    start = 0
    while start < len(text):
        stop = text.find(end, start)
        stop = len(text) if stop < 0 else stop + 1
        yield text[start:stop]
        start = stop


def _csv_rows(path: str, reader) -> Iterator[tuple[int, list[str]]]:
    """``(the line it starts on, row)`` for each row of a CSV reader that is not blank."""
    import csv

    line = 1
    try:
        for row in reader:
            if any(c.strip() for c in row):
                yield line, row
            line = reader.line_num + 1
    except csv.Error as exc:
        raise CrabError(f"{path}: unreadable csv ({reason(exc)})") from None


def _number(text: str) -> int | float | str:
    """A CSV cell as the number it writes (``3``, ``3.0``), else the text itself (refused by the caller)."""
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


def _table(path: str, kind: str, data: bytes, size: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of a CSV, TSV or Parquet file of histories, each with how errors name it, read as they are asked
    for (a Parquet file ``size`` rows at a time)."""
    import io

    if kind in (".csv", ".tsv"):
        yield from _csv(path, kind, data)
        return
    import pyarrow.parquet as pq

    start = 0
    try:
        table = pq.ParquetFile(io.BytesIO(data))
        names = table.schema_arrow.names
        _need_history(path, names)
        batches = table.iter_batches(size, columns=[c for c in ("history", "user", "user_id", "exclude") if c in names])
        for batch in batches:
            frame = batch.to_pandas()
            records = frame.astype(object).where(frame.notna(), None).to_dict("records")
            yield from ((f"row {r}", rec) for r, rec in enumerate(records, start))
            start += len(records)
    except CrabError:
        raise
    except Exception as exc:  # whatever the reader raises about the file's content
        raise CrabError(f"{path}: unreadable {kind[1:]} ({reason(exc)})") from None


def _user_lines(path: str, data: bytes) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of a ``.txt`` file of one user a line: the user's id, then the history's item ids (none: the user's
    known history); blank lines are left out."""
    for n, line in enumerate(_lines(input_text(path, data)), start=1):
        if fields := [f for f in SPLIT.split(line.strip()) if f]:
            yield f"line {n}", {"user_id": fields[0], "history": fields[1:] or None}


def _need_history(path: str, columns: list[str]) -> None:
    if "history" not in columns and "user_id" not in columns:
        raise CrabError(f"{path}: no `history` or `user_id` column (columns: {clip(', '.join(columns), 80)})")


def history_ids(text: str) -> list[str]:
    """A history written as text: item ids separated by spaces, commas, ``;`` or ``|``, or a JSON or Python list of them
    (``[1, 2]``, ``['B01', 'B02']``: how pandas and MiniOneRec's CSVs write a list); ValueError for a broken list."""
    text = text.strip()
    if text.startswith("["):
        try:
            return [str(v) for v in list_literal(text)]
        except ValueError:
            raise ValueError(
                f"{clip(repr(text), 40)}: expected item ids separated by spaces, commas, ';' or '|', or a list of "
                "them such as [1, 2] or ['B01', 'B02']"
            ) from None
    return [v for v in SPLIT.split(text) if v]


def _history(where: str, value: Any, column: str = "history") -> list[str]:
    """One history cell, or another cell of item ids (``column``; ``where``: its file and row, for errors): a list
    of ids, or a string as :func:`history_ids` reads it."""
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if isinstance(value, str):
        try:
            return history_ids(value)
        except ValueError as exc:
            raise CrabError(f"{where}: {column} {exc}") from None
    if isinstance(value, list) and all(isinstance(v, str | int) and not isinstance(v, bool) for v in value):
        return [str(v) for v in value]
    raise CrabError(f"{where}: {column} {clip(repr(value), 40)}: expected item ids (a list or a string)")


class Answers(NamedTuple):
    """Ranked lists as arrays: row ``r``'s list is ``items[r, :count[r]]`` (item ids), with their ``scores`` and
    popularity ``groups`` in the same places."""

    items: np.ndarray
    scores: np.ndarray
    groups: np.ndarray
    count: np.ndarray

    def __len__(self) -> int:
        return len(self.count)

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every list's items, scores (rounded to 6 places, as a :class:`~crabrec.recommender.Recommendation`'s) and
        groups, one list after another."""
        keep = np.arange(self.items.shape[1])[None, :] < self.count[:, None]
        scores = np.array([round(s, 6) for s in self.scores[keep].tolist()], dtype=np.float64)
        return self.items[keep], scores, self.groups[keep].astype(np.int64)


def recommendation_lines(answers: Answers, start: int = 0) -> str:
    """Each input row's recommendations as JSON lines (``row``, ``items``, ``scores``, ``groups``); ``start``: the
    first row's number."""
    items, scores, groups = answers.flat()
    ends = np.cumsum(answers.count).tolist()
    items, scores, groups = items.tolist(), scores.tolist(), groups.tolist()
    lines, a = [], 0
    for r, b in enumerate(ends, start):
        lines.append(json.dumps({"row": r, "items": items[a:b], "scores": scores[a:b], "groups": groups[a:b]}) + "\n")
        a = b
    return "".join(lines)


def _joined(values: list[Any], ends: list[int]) -> list[str]:
    """Each row's values (``values[end of the row before : end]``) as one space-separated cell."""
    cells, a = [], 0
    for b in ends:
        cells.append(" ".join(map(str, values[a:b])))
        a = b
    return cells


def write_recommendations(path: str | Path, parts: Iterable[Answers]) -> Path:
    """Write each input row's recommendations, given as ``parts``, consecutive batches of rows, each written as it
    comes: a file of a million histories never holds all its answers at once. The file appears whole, or not at all
    when a part fails."""
    import pandas as pd

    path = Path(path)
    kind = file_format(path)
    with atomic_path(path) as tmp:
        if kind == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            schema = _answers_schema()
            with pq.ParquetWriter(tmp, schema) as out:
                start = 0
                for part in parts:
                    offsets = pa.array(np.concatenate([[0], np.cumsum(part.count)]), type=pa.int32())
                    columns = [pa.ListArray.from_arrays(offsets, pa.array(v, type=t.value_type))
                               for v, t in zip(part.flat(), schema.types[1:])]  # fmt: skip
                    rows = pa.array(np.arange(start, start + len(part)), type=pa.int64())
                    out.write_table(pa.Table.from_arrays([rows, *columns], schema=schema))
                    start += len(part)
            return path
        with open(tmp, "w", encoding="utf-8", newline="") as out:
            start = 0
            for part in parts:
                if kind == ".jsonl":
                    out.write(recommendation_lines(part, start))
                else:
                    ends = np.cumsum(part.count).tolist()
                    cells = [_joined(v.tolist(), ends) for v in part.flat()]
                    frame = pd.DataFrame({"row": np.arange(start, start + len(part)), "items": cells[0],
                                          "scores": cells[1], "groups": cells[2]})  # fmt: skip
                    frame.to_csv(out, index=False, sep="\t" if kind == ".tsv" else ",", header=start == 0)
                start += len(part)
    return path


def _answers_schema():
    """The Parquet answers' columns: one schema for every part (a part whose lists are all empty included)."""
    import pyarrow as pa

    return pa.schema([("row", pa.int64()), ("items", pa.list_(pa.string())), ("scores", pa.list_(pa.float64())),
                      ("groups", pa.list_(pa.int64()))])  # fmt: skip


def is_user_index(user: Any) -> bool:
    """A user index is an integer that fits the int64 user column (not a bool, not negative)."""
    return not isinstance(user, bool) and isinstance(user, int | np.integer) and 0 <= user < 2**63
