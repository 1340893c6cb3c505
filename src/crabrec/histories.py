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

import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from crabrec.errors import CrabError, clip, reason
from crabrec.io import atomic_path, input_text, json_object_lines, list_literal, read_input_bytes

FORMATS = (".csv", ".tsv", ".parquet", ".jsonl")  # what --output writes; --input reads .txt too
INPUT_FORMATS = (*FORMATS, ".txt")
STDIN_NAME = "standard input"
SPLIT = re.compile(r"[\s,;|]+")  # ids apart: spaces, commas, semicolons, bars
ANSWER_PART = 8192  # input rows ranked and written at a time


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


def read_histories(source: str | Path) -> Requests:
    """The requests of a history file. ``-`` reads standard input; it and a pipe (``<(...)``) hold JSON lines,
    parquet or CSV, told apart by their content."""
    path, data, kind = _input(source)
    if kind == ".jsonl":
        numbered = [(f"line {n}", rec) for n, rec in json_object_lines(path, data.splitlines(), "with a `history`")]
    elif kind == ".txt":
        numbered = _user_lines(path, data)
    else:
        numbered = _table(path, kind, data)
    rows = [where for where, _ in numbered]
    records = [rec for _, rec in numbered]
    if not records:
        raise CrabError(f"{path}: no rows; expected one history (or user_id) per row")
    users = _column(path, records, "user", _scalar)
    user_ids = _column(path, records, "user_id", _user_id)
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


def _column(path: str, records: list[dict[str, Any]], name: str, convert) -> list[Any] | None:
    """The ``name`` cell of every row (None when no row has one); some rows without it is an error."""
    values = [None if rec.get(name) is None else convert(_scalar(rec.get(name))) for rec in records]
    given = sum(v is not None for v in values)
    if given and given != len(values):
        raise CrabError(f"{path}: `{name}` is missing on some rows; give it on every row or on none")
    return values if given else None


def _csv(path: str, kind: str, data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The rows of a CSV (or TSV) of histories, each with its line (``line 3``). An unquoted history with commas
    (``history\\n1000,1001``) has more fields than the header has columns: they are its ids when ``history`` is the
    last column, else the row is an error (a reader that took the first id for a row label would silently drop
    it)."""
    import csv
    import io

    from crabrec.data.reading import delimiter

    text = input_text(path, data)
    sep = "\t" if kind == ".tsv" else delimiter(text.partition("\n")[0])
    rows, line = [], 1  # (the line each row starts on, the row); blank rows are left out
    try:
        reader = csv.reader(io.StringIO(text), delimiter=sep)
        for row in reader:
            if any(c.strip() for c in row):
                rows.append((line, row))
            line = reader.line_num + 1
    except csv.Error as exc:
        raise CrabError(f"{path}: unreadable csv ({reason(exc)})") from None
    if not rows:
        return []
    header = [h.strip() for h in rows[0][1]]
    _need_history(path, header)
    at = header.index("history") if "history" in header else len(header)
    records = []
    for line, row in rows[1:]:
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
        records.append((f"line {line}", rec))
    return records


def _number(text: str) -> int | float | str:
    """A CSV cell as the number it writes (``3``, ``3.0``), else the text itself (refused by the caller)."""
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


def _table(path: str, kind: str, data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The rows of a CSV, TSV or Parquet file of histories, each with how errors name it."""
    import io

    import pandas as pd

    if kind in (".csv", ".tsv"):
        return _csv(path, kind, data)
    try:
        frame = pd.read_parquet(io.BytesIO(data))
    except Exception as exc:  # whatever the reader raises about the file's content
        raise CrabError(f"{path}: unreadable {kind[1:]} ({reason(exc)})") from None
    _need_history(path, list(map(str, frame.columns)))
    columns = [c for c in ("history", "user", "user_id", "exclude") if c in frame.columns]
    records = frame[columns].astype(object).where(frame[columns].notna(), None).to_dict("records")
    return [(f"row {r}", rec) for r, rec in enumerate(records)]


def _user_lines(path: str, data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The rows of a ``.txt`` file of one user a line: the user's id, then the history's item ids (none: the user's
    known history); blank lines are left out."""
    rows = []
    for n, line in enumerate(input_text(path, data).splitlines(), start=1):
        if fields := [f for f in SPLIT.split(line.strip()) if f]:
            rows.append((f"line {n}", {"user_id": fields[0], "history": fields[1:] or None}))
    return rows


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


def recommendation_lines(rows: list[list[Any]], start: int = 0) -> str:
    """Each input row's recommendations as JSON lines (``row``, ``items``, ``scores``, ``groups``); ``start``: the
    first row's number."""
    return _lines(_records(rows, start))


def _lines(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(rec) + "\n" for rec in records)


def _records(rows: list[list[Any]], start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "row": r,
            "items": [x.item for x in recs],
            "scores": [x.score for x in recs],
            "groups": [x.group for x in recs],
        }
        for r, recs in enumerate(rows, start)
    ]


def write_recommendations(path: str | Path, parts: Iterable[list[list[Any]]]) -> Path:
    """Write each input row's recommendations (lists of :class:`~crabrec.recommender.Recommendation`), given as
    ``parts``, consecutive batches of rows, each written as it comes: a file of a million histories never holds all
    its answers at once. The file appears whole, or not at all when a part fails."""
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
                for rows in parts:
                    out.write_table(pa.Table.from_pylist(_records(rows, start), schema=schema))
                    start += len(rows)
            return path
        with open(tmp, "w", encoding="utf-8", newline="") as out:
            start = 0
            for rows in parts:
                records = _records(rows, start)
                if kind == ".jsonl":
                    out.write(_lines(records))
                else:
                    flat = [{k: " ".join(map(str, v)) if isinstance(v, list) else v for k, v in r.items()}
                            for r in records]  # fmt: skip
                    frame = pd.DataFrame(flat, columns=["row", "items", "scores", "groups"])
                    frame.to_csv(out, index=False, sep="\t" if kind == ".tsv" else ",", header=start == 0)
                start += len(rows)
    return path


def _answers_schema():
    """The Parquet answers' columns: one schema for every part (a part whose lists are all empty included)."""
    import pyarrow as pa

    return pa.schema([("row", pa.int64()), ("items", pa.list_(pa.string())), ("scores", pa.list_(pa.float64())),
                      ("groups", pa.list_(pa.int64()))])  # fmt: skip


def is_user_index(user: Any) -> bool:
    """A user index is an integer that fits the int64 user column (not a bool, not negative)."""
    return not isinstance(user, bool) and isinstance(user, int | np.integer) and 0 <= user < 2**63
