"""Reading a table a user brought: CSV, TSV, JSON lines or Parquet, the text formats optionally compressed.

Every cell of a text format comes back as a string (an empty cell as ``""``), so ids keep their exact spelling
(``007`` stays ``007``); Parquet columns keep their types. Text is read as UTF-8 (a byte-order mark is skipped); a
file that is not UTF-8 is read as Windows-1252 (Latin-1 where that has no character) with a warning, since that is
what legacy exports use. A header that names a column twice is an error, as is an empty file or one without a row
after its header.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import logging
import lzma
import zipfile
from pathlib import Path

import pandas as pd

from crabrec.errors import CrabError, clip, reason

log = logging.getLogger("crabrec")

KINDS = (".csv", ".tsv", ".jsonl", ".ndjson", ".parquet")
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zip", ".zst")
HEAD_BYTES = 1 << 20  # what a header-only read decompresses
NAMES = ", ".join(KINDS) + " (the text ones also " + "/".join(COMPRESSIONS) + ")"


def table_kind(path: Path) -> str | None:
    """The table format of ``path`` from its name (``ratings.csv.gz`` -> ``.csv``), or None."""
    name = path.name.lower()
    compression = next((c for c in COMPRESSIONS if name.endswith(c)), "")
    name = name[: len(name) - len(compression)]
    kind = next((k for k in KINDS if name.endswith(k) and len(name) > len(k)), None)
    return None if kind == ".parquet" and compression else kind


def read_table(path: Path, sep: str | None = None, header_only: bool = False) -> pd.DataFrame:
    """The table at ``path`` with string cells; ``sep`` None: comma, tab, semicolon or bar, whichever the header
    line has most (tab for ``.tsv``); ``header_only``: the columns alone (no rows)."""
    if not path.is_file():
        raise CrabError(f"{path}: file not found")
    if path.stat().st_size == 0:
        raise CrabError(f"{path}: the file is empty; expected a header line, then the rows")
    kind = table_kind(path) or ".csv"  # a table named otherwise (a RecBole .inter, a .txt) is delimited text
    if kind == ".parquet":
        frame = _parquet(path, header_only)
    else:
        text = _text(path, header_only)
        frame = (
            _json_lines(path, text, header_only)
            if kind in (".jsonl", ".ndjson")
            else _delimited(path, text, "\t" if sep is None and kind == ".tsv" else sep, header_only)
        )
    if not header_only and len(frame) == 0:
        cols = ", ".join(map(str, frame.columns))
        raise CrabError(f"{path}: no rows after the header ({cols}); expected at least one row")
    return frame


def _raw_bytes(path: Path, limit: int = -1) -> bytes:
    """The file's bytes (the first ``limit`` of them when not -1), decompressed by its last suffix."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".zip":
            with zipfile.ZipFile(path) as z:
                members = [m for m in z.namelist() if not m.endswith("/")]
                if len(members) != 1:
                    raise CrabError(f"{path}: expected one file in the archive, found {len(members)}")
                with z.open(members[0]) as f:
                    return f.read(limit)
        if suffix == ".zst":
            try:
                import zstandard
            except ImportError:
                raise CrabError(f"{path}: reading .zst needs the zstandard package (pip install zstandard)") from None
            with path.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as f:
                return f.read(limit)
        opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}.get(suffix, open)
        with opener(path, "rb") as f:
            return f.read(limit)
    except CrabError:
        raise
    except (OSError, EOFError, ValueError, lzma.LZMAError, zipfile.BadZipFile) as exc:
        raise CrabError(f"{path}: cannot decompress ({reason(exc)})") from None


def _text(path: Path, header_only: bool = False) -> str:
    """The file as text; ``header_only``: its first lines (at least the first)."""
    data = _raw_bytes(path, HEAD_BYTES if header_only else -1)
    if header_only and len(data) == HEAD_BYTES and b"\n" in data:
        data = data[: data.rindex(b"\n") + 1]  # whole lines: no character cut in two
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if not header_only:
            log.warning(
                "%s: not UTF-8 (byte 0x%02x at offset %d): read as Windows-1252; re-save it as UTF-8 if its text "
                "shows wrong characters",
                path, data[exc.start], exc.start,
            )  # fmt: skip
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:  # five bytes have no Windows-1252 character: Latin-1 maps every byte
        return data.decode("latin-1")


def _delimited(path: Path, text: str, sep: str | None, header_only: bool) -> pd.DataFrame:
    header = text.partition("\n")[0].rstrip("\r")
    if sep is None:
        sep = max(",\t;|", key=header.count)
    names = [n.strip() for n in next(csv.reader([header], delimiter=sep), [])]
    _refuse_twice(path, names)
    try:
        return pd.read_csv(
            io.StringIO(text), sep=sep, dtype=str, keep_default_na=False, nrows=0 if header_only else None
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise CrabError(f"{path}: cannot parse table ({reason(exc)})") from None


def _json_lines(path: Path, text: str, header_only: bool) -> pd.DataFrame:
    """One JSON object per line; a key missing on a row is an empty cell, a nested value its JSON text."""
    rows: list[dict[str, str]] = []
    columns: dict[str, None] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise CrabError(f"{path}: line {n}: not JSON ({reason(exc, 80)})") from None
        if not isinstance(rec, dict):
            raise CrabError(f"{path}: line {n}: expected an object of columns, got {type(rec).__name__}")
        columns.update(dict.fromkeys(rec))
        rows.append({k: _cell(v) for k, v in rec.items()})
        if header_only:
            break
    if not rows:
        raise CrabError(f"{path}: no JSON objects; expected one object per line")
    frame = pd.DataFrame(rows, columns=list(columns), dtype=object).fillna("")
    return frame.iloc[:0] if header_only else frame


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _parquet(path: Path, header_only: bool) -> pd.DataFrame:
    try:
        import pyarrow.parquet as pq

        names = [str(n) for n in pq.read_schema(path).names]
        _refuse_twice(path, names)
        if header_only:
            return pd.DataFrame(columns=names)
        return pd.read_parquet(path)
    except CrabError:
        raise
    except Exception as exc:  # whatever pyarrow raises about the file's content
        raise CrabError(f"{path}: cannot parse table ({reason(exc)})") from None


def _refuse_twice(path: Path, names: list[str]) -> None:
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise CrabError(f"{path}: header: column {clip(twice)!r} is given twice; name each column once")
