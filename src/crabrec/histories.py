"""History files for ``crabrec recommend --input/--output``: CSV, parquet or JSON lines, chosen by the extension.

Input: one history per row in a ``history`` column (CSV: item ids separated by spaces or commas; parquet: a list
column or such a string; JSONL: ``{"history": [...]}`` per line), and optionally a ``user`` column (the run's user
index, read by TIGER). Output: one row per input row: ``row`` (0-based), ``items``, ``scores``, ``groups``
(CSV: space-separated), written atomically.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from crabrec.errors import CrabError, clip, reason
from crabrec.io import atomic_path, read_input_text

FORMATS = (".csv", ".parquet", ".jsonl")
SPLIT = re.compile(r"[\s,]+")


def file_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise CrabError(f"{path}: unknown extension {suffix or '(none)'!r}; expected one of {', '.join(FORMATS)}")
    return suffix


def read_histories(path: str | Path) -> tuple[list[list[str]], list[int] | None]:
    """``(histories, users)`` of a history file (users None when it has no ``user`` column)."""
    path = Path(path)
    kind = file_format(path)
    if not path.is_file():
        raise CrabError(f"{path}: no such file")
    records = _jsonl(path) if kind == ".jsonl" else _table(path, kind)
    if not records:
        raise CrabError(f"{path}: no rows; expected one history per row")
    histories, users = [], []
    for r, rec in enumerate(records):
        histories.append(_history(path, r, rec.get("history")))
        user = rec.get("user")
        user = user.item() if hasattr(user, "item") else user  # a numpy scalar from a table
        users.append(int(user) if isinstance(user, float) and user.is_integer() else user)
    given = [u for u in users if u is not None]
    if given and len(given) != len(users):
        raise CrabError(f"{path}: `user` is missing on some rows; give it on every row or on none")
    for r, u in enumerate(users if given else []):
        if not is_user_index(u):
            raise CrabError(f"{path} row {r}: user {clip(repr(u), 40)}: expected a user index from 0 to 2^63 - 1")
    return histories, (users if given else None)


def _csv(path: Path) -> list[dict[str, Any]]:
    """The rows of a CSV of histories. An unquoted history with commas (``history\\n1000,1001``) has more fields than
    the header has columns: they are its ids when ``history`` is the last column, else the row is an error (a reader
    that took the first id for a row label would silently drop it)."""
    import csv
    import io

    try:
        rows = [r for r in csv.reader(io.StringIO(read_input_text(path))) if any(c.strip() for c in r)]
    except csv.Error as exc:
        raise CrabError(f"{path}: unreadable csv ({reason(exc)})") from None
    if not rows:
        return []
    header = [h.strip() for h in rows[0]]
    if "history" not in header:
        raise CrabError(f"{path}: no `history` column (columns: {clip(', '.join(header), 80)})")
    at = header.index("history")
    records = []
    for r, row in enumerate(rows[1:]):
        if len(row) > len(header):
            if at != len(header) - 1:
                raise CrabError(
                    f"{path} row {r}: {len(row)} fields for {len(header)} columns; quote the history "
                    '("1000,1001") or separate its ids with spaces'
                )
            row = [*row[:at], ",".join(row[at:])]
        rec = {k: v.strip() for k, v in zip(header, row)}
        rec["user"] = _number(rec["user"]) if rec.get("user") else None
        rec["history"] = rec.get("history") or None
        records.append(rec)
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


def _table(path: Path, kind: str) -> list[dict[str, Any]]:
    import pandas as pd

    if kind == ".csv":
        return _csv(path)
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # whatever the reader raises about the file's content
        raise CrabError(f"{path}: unreadable {kind[1:]} ({reason(exc)})") from None
    if "history" not in frame.columns:
        raise CrabError(f"{path}: no `history` column (columns: {clip(', '.join(map(str, frame.columns)), 80)})")
    if "user" in frame.columns and frame["user"].isna().any():
        raise CrabError(f"{path}: `user` is missing on some rows; give it on every row or on none")
    columns = ["history", *(["user"] if "user" in frame.columns else [])]
    return frame[columns].to_dict("records")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    records = []
    with path.open("rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError) as exc:
                raise CrabError(f"{path} line {n}: not JSON ({reason(exc, 80)})") from None
            if not isinstance(rec, dict):
                raise CrabError(f"{path} line {n}: expected an object with a `history`, got {type(rec).__name__}")
            records.append(rec)
    return records


def _history(path: Path, row: int, value: Any) -> list[str]:
    """One history cell: a list of ids, or a string of ids separated by spaces or commas."""
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if isinstance(value, str):
        return [v for v in SPLIT.split(value.strip()) if v]
    if isinstance(value, list) and all(isinstance(v, str | int) and not isinstance(v, bool) for v in value):
        return [str(v) for v in value]
    raise CrabError(f"{path} row {row}: history {clip(repr(value), 40)}: expected item ids (a list or a string)")


def write_recommendations(path: str | Path, rows: list[list[Any]]) -> Path:
    """Write each input row's recommendations (lists of :class:`~crabrec.recommender.Recommendation`)."""
    import pandas as pd

    path = Path(path)
    kind = file_format(path)
    records = [
        {
            "row": r,
            "items": [x.item for x in recs],
            "scores": [x.score for x in recs],
            "groups": [x.group for x in recs],
        }
        for r, recs in enumerate(rows)
    ]
    with atomic_path(path) as tmp:
        if kind == ".jsonl":
            tmp.write_text("".join(json.dumps(rec) + "\n" for rec in records))
        elif kind == ".parquet":
            pd.DataFrame(records).to_parquet(tmp)
        else:
            flat = [{k: " ".join(map(str, v)) if isinstance(v, list) else v for k, v in rec.items()} for rec in records]
            pd.DataFrame(flat, columns=["row", "items", "scores", "groups"]).to_csv(tmp, index=False)
    return path


def is_user_index(user: Any) -> bool:
    """A user index is an integer that fits the int64 user column (not a bool, not negative)."""
    return not isinstance(user, bool) and isinstance(user, int | np.integer) and 0 <= user < 2**63
