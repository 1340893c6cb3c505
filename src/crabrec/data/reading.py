"""Reading a table a user brought: CSV, TSV, JSON lines or Parquet, the text formats optionally compressed.

Every cell of a text format comes back as a string (an empty cell as ``""``), so ids keep their exact spelling
(``007`` stays ``007``); Parquet columns keep their types. Text is read as UTF-8 (a byte-order mark is skipped); a
file that is not UTF-8 is read as Windows-1252 (Latin-1 where that has no character) with a warning, since that is
what legacy exports use. A header that names a column twice is an error, as is an empty file or one without a row
after its header.
"""

from __future__ import annotations

import ast
import bz2
import codecs
import contextlib
import csv
import gzip
import json
import logging
import lzma
import re
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from crabrec.errors import CrabError, clip, listed, reason
from crabrec.io import DuplicateKeyError, json_object_lines, list_literal, loads_unique, not_found, unicode_encoding

log = logging.getLogger("crabrec")

KINDS = (".csv", ".tsv", ".jsonl", ".ndjson", ".parquet")
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zip", ".zst")
HEAD_BYTES = 1 << 20  # what a header-only read decompresses
GLANCE_LINES = 1000  # the first lines item_lines looks at
# cells that spell out a missing value (Diginetica writes an anonymous user as NA): empty cells, never ids
NULLS = ("na", "n/a", "#n/a", "nan", "null", "none", "nil", "undefined")
CHUNK_BYTES = 1 << 24  # what the encoding check decodes at a time
TEXT_NAMED = (".txt", ".dat")  # delimited text, when the file is named as a table
NAMES = ".csv, .tsv, .txt, .dat, .json, .jsonl, .ndjson, .parquet (the text ones also " + "/".join(COMPRESSIONS) + ")"


def table_kind(path: Path, named: bool = False) -> str | None:
    """The table format of ``path`` from its name (``ratings.csv.gz`` -> ``.csv``), or None. ``named``: the file was
    named as a table (``--data``, ``--items``), so ``.json`` counts too (JSON lines, or an array of objects, as Yelp
    and others ship them) and ``.txt`` or ``.dat`` (delimited text); in a folder such files may be anything."""
    name = path.name.lower()
    compression = next((c for c in COMPRESSIONS if name.endswith(c)), "")
    name = name[: len(name) - len(compression)]
    kinds = (*KINDS, ".json", *TEXT_NAMED) if named else KINDS
    kind = next((k for k in kinds if name.endswith(k) and len(name) > len(k)), None)
    if kind is None and named and compression == ".zip" and len(inside := zip_members(path)) == 1:
        kind = table_kind(Path(inside[0]), named=True)  # archive.zip holding ratings.csv
    if kind is None and named and not compression and "." not in name and _object_lines(path):  # Adressa's 20170101
        kind = ".jsonl"
    return None if kind == ".parquet" and compression else kind


def _object_lines(path: Path) -> bool:
    """Whether the file's first line is a JSON object (JSON lines, named without an extension)."""
    try:
        first = _head(path).decode("utf-8-sig", errors="replace").lstrip().partition("\n")[0]
        return path.is_file() and first.startswith("{") and isinstance(json.loads(first), dict)
    except (*UNREADABLE, ValueError, RecursionError):
        return False


UNREADABLE = (OSError, zipfile.BadZipFile, zlib.error, EOFError)  # a file or an archive member that cannot be read


def named_tables(folder: Path) -> list[Path]:
    """The files of a folder that are tables though only a file named as one counts as one by its name: ``.json``
    files whose first line is a JSON object (JSON lines, as Yelp ships its dataset: ``..._review.json``,
    ``..._business.json``) and ``.txt`` or ``.dat`` files whose first line is a header of delimited columns (as the
    HetRec sets ship theirs: ``user_artists.dat``, ``artists.dat``)."""
    return [p for p in sorted(folder.iterdir()) if _first_line(p) == "header"]


def headerless_tables(folder: Path) -> list[Path]:
    """The ``.txt`` or ``.dat`` files of a folder whose first line is a row of delimited columns, not a header
    (YOOCHOOSE's ``yoochoose-clicks.dat``): tables a folder cannot name the columns of."""
    return [p for p in sorted(folder.iterdir()) if _first_line(p) == "row"]


def _first_line(path: Path) -> str | None:
    """What the first line of a file named ``.json``, ``.txt`` or ``.dat`` (and not as a table) holds: ``"header"``
    (a JSON object, or delimited column names), ``"row"`` (delimited values) or None (anything else)."""
    kind = table_kind(path, named=True) if path.is_file() and not table_kind(path) else None
    if kind in (".json", ".jsonl"):  # (.jsonl: a file of JSON lines named without an extension, Adressa's 20170101)
        return "header" if _object_lines(path) else None
    fields = first_cells(path) if kind in TEXT_NAMED else None
    if fields is None:
        return None
    return "row" if looks_like_a_row(fields) else "header"


def first_cells(path: Path) -> list[str] | None:
    """The cells of a delimited text file's first line (comma, tab, semicolon or ``|``, as :func:`delimiter` finds
    it; quotes as CSV writes them), read without a check; None for a file of one column or another kind."""
    if table_kind(path, named=True) in (None, ".parquet", ".json", ".jsonl", ".ndjson") or not path.is_file():
        return None
    try:
        first = _head(path).decode("utf-8-sig", errors="replace").lstrip().partition("\n")[0].rstrip("\r")
        sep = delimiter(first)
        fields = next(csv.reader([first], delimiter=sep), []) if sep in ",\t;|" else []
    except (*UNREADABLE, ValueError, csv.Error):
        return None
    return fields if len(fields) > 1 else None


def zip_members(path: Path) -> list[str]:
    """The files a zip archive holds (not its folders, nor macOS' ``__MACOSX`` copies); none if it is no zip."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (OSError, zipfile.BadZipFile):
        return []
    return _files(names)


def members_by_name(archive: zipfile.ZipFile) -> dict[str, str]:
    """An open archive's files by their name, in whatever folder inside (the first of a name wins)."""
    return {m.rsplit("/", 1)[-1]: m for m in reversed(_files(archive.namelist()))}


def _files(names: list[str]) -> list[str]:
    return [m for m in names if not m.endswith("/") and not m.startswith("__MACOSX/")]


def read_table(
    path: Path,
    sep: str | None = None,
    header_only: bool = False,
    names: list[str] | None = None,
    first_rows: int | None = None,
) -> pd.DataFrame:
    """The table at ``path`` with string cells; ``sep`` None: comma, tab, semicolon or bar, whichever the header
    line has most (tab for ``.tsv``); ``header_only``: the columns alone (no rows); ``names``: the columns of a
    delimited file without a header line (its first line is a row); ``first_rows``: at most that many rows, read
    from the start of the file (a glance: the text is not checked to be UTF-8)."""
    if header_only:
        first_rows = 0
    if split := split_tables(path):  # train, valid and test files of one table: read as that table
        return _joined(
            [read_table(p, sep, header_only, names, first_rows) for p in split[: 1 if first_rows is not None else 3]]
        )
    parts = parquet_dataset(path)
    if not parts:
        if path.is_dir():  # and no Parquet parts in it
            raise CrabError(f"{path}: a folder, not a table file (.csv, .tsv, .jsonl or .parquet)")
        if not path.is_file():
            raise not_found(path)
        refuse_spreadsheet(path)
        if path.stat().st_size == 0:
            raise CrabError(f"{path}: the file is empty; expected a header line, then the rows")
    kind = ".parquet" if parts else table_kind(path, named=True) or ".csv"  # named otherwise (.inter, .txt): delimited
    if names is not None and kind in (".parquet", ".jsonl", ".ndjson", ".json"):
        raise CrabError(
            f"{path}: data.columns names the columns of a CSV or TSV file without a header line; a {kind[1:]} file "
            "names its own columns (remove data.columns)"
        )
    if kind == ".parquet":
        frame = _parquet_parts(path, first_rows) if parts else _parquet(path, first_rows)
    elif kind in (".jsonl", ".ndjson", ".json"):
        glance = first_rows is not None and kind != ".json"
        frame = _json_rows(path, _text(path, glance), first_rows, kind == ".json")
    else:
        frame = _delimited(path, "\t" if sep is None and kind == ".tsv" else sep, first_rows, names)
    if first_rows != 0 and len(frame) == 0:
        cols = listed(frame.columns)
        raise CrabError(f"{path}: no rows after the header ({cols}); expected at least one row")
    return frame


@dataclass(frozen=True)
class Origin:
    """Where a table's rows stand, for messages: ``path``, the file (or folder) read, and ``first_line``, the number
    of its first row (:func:`first_row`). Rows read from several files (a dataset's train, valid and test tables)
    are named by the file each came from: ``parts`` holds, for each file, the label of its first row (its place among
    all the rows read), the file, and the number of its first row there."""

    path: Path
    first_line: int = 2
    parts: tuple[tuple[int, Path, int], ...] = ()

    def line(self, label: object) -> tuple[Path, int]:
        """The file holding the row labelled ``label`` (its place among the rows read) and the row's number there."""
        label = int(label)
        start, path, first = 0, self.path, self.first_line
        for part_start, part, part_first in self.parts:
            if label < part_start:
                break
            start, path, first = part_start, part, part_first
        return path, label - start + first

    def row(self, label: object) -> str:
        """``FILE: row N``: where the row labelled ``label`` stands."""
        path, n = self.line(label)
        return f"{path}: row {n}"

    def session(self, label: object) -> str:
        """A name for the row labelled ``label`` when its row is one user's session: its number, after its file's
        name when the rows come from several files (``Office.test.csv:4``)."""
        path, n = self.line(label)
        return f"{path.name}:{n}" if len(self.parts) > 1 else str(n)


def read_rows(path: Path, names: list[str] | None = None, headerless: bool = False) -> tuple[pd.DataFrame, Origin]:
    """The table at ``path`` (:func:`read_table`; ``headerless``: its first line is a row) and where its rows stand.
    A dataset's train, valid and test tables are read as one table whose rows keep the name of their own file and
    line."""
    split = split_tables(path)
    if not split:
        return read_table(path, names=names), Origin(path, first_row(path, headerless or names is not None))
    return read_parts(path, split, names, headerless)


def read_parts(
    path: Path, files: list[Path] | tuple[Path, ...], names: list[str] | None = None, headerless: bool = False
) -> tuple[pd.DataFrame, Origin]:
    """The tables ``files`` (a dataset's train, valid and test tables, or a folder's tables of the same columns) read
    as one table, whose rows keep the name of their own file and line; ``path``: the folder."""
    frames = [read_table(p, names=names) for p in files]
    starts = np.cumsum([0] + [len(f) for f in frames[:-1]])
    parts = tuple(
        (int(s), p, first_row(p, headerless or names is not None)) for s, p in zip(starts, files, strict=True)
    )
    return _joined(frames), Origin(path, parts[0][2], parts)


def _joined(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Tables of one dataset's rows, one after another (a cell a table lacks: empty)."""
    return pd.concat(frames, ignore_index=True).fillna("")


SPLIT_WORDS = (("train",), ("valid", "val", "validation", "dev"), ("test",))


def split_tables(path: Path) -> list[Path]:
    """In a folder, the tables of one dataset's train, validation and test rows (``Office.train.csv``,
    ``Office.valid.csv``, ``Office.test.csv``, as Amazon Reviews 2023's benchmark splits are named; ``train.csv`` and
    ``test.csv`` at least), in that order; [] for anything else."""
    if not path.is_dir():
        return []
    found: dict[tuple[str, int], Path] = {}
    for p in sorted(path.iterdir()):
        kind = table_kind(p)
        if not kind or not p.is_file():
            continue
        stem = p.name.lower().split(kind)[0]
        for n, words in enumerate(SPLIT_WORDS):
            word = next((w for w in words if stem.endswith(w)), None)
            if word is not None:
                found[(stem[: len(stem) - len(word)].rstrip("._- "), n)] = p
    prefixes = {prefix for prefix, n in found if n == 0 and (prefix, 2) in found}
    if len(prefixes) != 1:
        return []
    (prefix,) = prefixes
    return [found[(prefix, n)] for n in range(3) if (prefix, n) in found]


def parquet_dataset(path: Path) -> bool:
    """Whether ``path`` is a folder of Parquet parts, as Spark, Dask or pandas write one table (``part-0.parquet``
    ..., perhaps in partition folders such as ``event=view/``; files named ``_SUCCESS``, ``_metadata`` or ``.x.crc``
    are theirs): one table, read whole. Parquet files of different columns (interactions in parts beside
    ``items.parquet``) are a folder of tables instead."""
    if not path.is_dir():
        return False
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(("_", ".")))
    if not files or not all(p.name.lower().endswith(".parquet") for p in files):
        return False
    try:
        import pyarrow.parquet as pq

        schemas = {tuple(pq.read_schema(p).names) for p in files[:SCHEMAS]}
    except Exception:  # noqa: BLE001 (a part pyarrow cannot read: reading the table says why)
        return True
    return len(schemas) == 1


SCHEMAS = 200  # the parts whose columns parquet_dataset compares


def _parquet_parts(path: Path, first_rows: int | None) -> pd.DataFrame:
    """A folder of Parquet parts as one table, its parts in the order of their names (partition columns included)."""
    try:
        import pyarrow.dataset as pads

        parts = pads.dataset(path, format="parquet", partitioning="hive")
        names = [str(n) for n in parts.schema.names]
        _refuse_twice(path, names)
        if first_rows == 0:
            return pd.DataFrame(columns=names)
        table = parts.head(first_rows) if first_rows is not None else parts.to_table()
        return table.to_pandas()
    except CrabError:
        raise
    except Exception as exc:  # whatever pyarrow raises about the parts (schemas that differ ...)
        raise CrabError(f"{path}: cannot read its Parquet parts as one table ({reason(exc)})") from None


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[IO[bytes]]:
    """The file as a binary stream, decompressed by its last suffix."""
    suffix = path.suffix.lower()
    try:
        with contextlib.ExitStack() as stack:
            if suffix == ".zip":
                z = stack.enter_context(zipfile.ZipFile(path))
                members = zip_members(path)
                if len(members) != 1:
                    raise CrabError(f"{path}: expected one file in the archive, found {len(members)}")
                stream = stack.enter_context(z.open(members[0]))
            elif suffix == ".zst":
                try:
                    import zstandard
                except ImportError:
                    raise CrabError(
                        f"{path}: reading .zst needs the zstandard package (pip install zstandard)"
                    ) from None
                raw = stack.enter_context(path.open("rb"))
                stream = stack.enter_context(zstandard.ZstdDecompressor().stream_reader(raw))
            else:
                opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}.get(suffix, open)
                stream = stack.enter_context(opener(path, "rb"))
            yield stream
    except CrabError:
        raise
    except (EOFError, lzma.LZMAError, zipfile.BadZipFile, gzip.BadGzipFile) as exc:
        raise CrabError(f"{path}: cannot decompress ({reason(exc)})") from None
    except OSError as exc:  # bz2 and zstandard say so with an OSError
        raise CrabError(f"{path}: cannot read ({reason(exc)})") from None


def _head(path: Path) -> bytes:
    """The first whole lines of the file (at least the first line)."""
    with _opened(path) as f:
        data = f.read(HEAD_BYTES)
    return data[: data.rindex(b"\n") + 1] if len(data) == HEAD_BYTES and b"\n" in data else data


def _bom_encoding(path: Path) -> str | None:
    """The encoding the file's first bytes show (:func:`~crabrec.io.unicode_encoding`), or None."""
    with _opened(path) as f:
        return unicode_encoding(f.read(4))


def _encoding(path: Path) -> str:
    """``utf-16``/``utf-32`` by a byte-order mark; else ``utf-8`` when the whole file is UTF-8 (read in chunks), else
    Windows-1252 (Latin-1 when a byte has no Windows-1252 character), with a warning."""
    if bom := _bom_encoding(path):
        return bom
    for encoding in ("utf-8", "cp1252"):
        decoder, offset = codecs.getincrementaldecoder(encoding)(), 0
        try:
            with _opened(path) as f:
                while chunk := f.read(CHUNK_BYTES):
                    decoder.decode(chunk)
                    offset += len(chunk)
                decoder.decode(b"", final=True)
            return encoding
        except UnicodeDecodeError as exc:
            if encoding == "utf-8":
                log.warning(
                    "%s: not UTF-8 (byte 0x%02x at offset %d): read as Windows-1252; re-save it as UTF-8 if its "
                    "text shows wrong characters",
                    path, exc.object[exc.start], offset + exc.start,
                )  # fmt: skip
    return "latin-1"


def delimiter(header: str) -> str:
    """The delimiter of a delimited file: comma, tab, semicolon or bar, whichever its header line has most; with none
    of them, ``::`` when the header has it (MovieLens' ``user::item::rating::time``), else a space (runs of spaces
    between the columns) when the header has two words or more, else comma (one column)."""
    if not any(c in header for c in ",\t;|") and "::" in header:
        return "::"
    if not any(c in header for c in ",\t;|") and len(header.split()) > 1:
        return " "
    return max(",\t;|", key=header.count)


NUMBER = re.compile(r"[-+]?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?")  # a cell of a row, never a column name
SPREADSHEETS = (".xlsx", ".xlsm", ".xls", ".ods", ".numbers")


def refuse_spreadsheet(path: Path) -> None:
    """A spreadsheet workbook named as a table is a one-line error saying how to export it."""
    if path.suffix.lower() in SPREADSHEETS:
        raise CrabError(
            f"{path}: a spreadsheet workbook; crabrec reads tables as CSV, TSV, JSON lines or Parquet: save the sheet "
            "as CSV (UTF-8) and give that file"
        )


def _refuse_preamble(path: Path, first: str) -> None:
    """A first line that is a comment (``# exported ...``) or Excel's delimiter hint (``sep=;``) is an error: line 1
    is read as the header (or the first row), and messages count lines from it."""
    hint = re.fullmatch(r"\s*sep=(.)\s*", first)
    if hint or first.lstrip().startswith("#"):
        what = f"Excel's delimiter hint (the columns are parted by {hint.group(1)!r})" if hint else "a comment"
        raise CrabError(
            f"{path}: line 1 ({clip(first.strip())}) is {what}, not a header line; delete the line(s) above the header"
        )


def _delimited(path: Path, sep: str | None, first_rows: int | None, names: list[str] | None) -> pd.DataFrame:
    glance = first_rows is not None
    encoding = _bom_encoding(path) or ("utf-8" if glance else _encoding(path))  # (pandas skips a byte-order mark)
    header = _head(path).decode(encoding, errors="replace").removeprefix("\ufeff").partition("\n")[0].rstrip("\r")
    _refuse_preamble(path, header)
    if sep is None:
        sep = delimiter(header)
    if sep == " ":  # columns parted by runs of spaces
        first, sep = header.split(), r"\s+"
    elif len(sep) > 1:  # "::" (the csv module takes one character)
        first = [n.strip() for n in header.split(sep)]
    else:
        try:
            first = [n.strip() for n in next(csv.reader([header], delimiter=sep), [])]
        except csv.Error as exc:  # a lone carriage return in the header line: no text table
            raise CrabError(f"{path}: cannot parse its header line ({reason(exc)})") from None
    if names is not None and len(first) != len(names):
        raise CrabError(
            f"{path}: line 1 has {len(first)} field(s) ({clip(', '.join(first))}), data.columns names {len(names)} "
            f"({', '.join(names)}); name each column once, in file order"
        )
    if names is not None:
        _refuse_twice(path, names, "data.columns")
    else:
        _refuse_twice(path, first)
    try:
        with _opened(path) as f:
            frame = pd.read_csv(
                f if path.suffix.lower() in COMPRESSIONS else path,  # a plain file: pandas reads it fastest itself
                sep=sep, dtype=str, keep_default_na=False, nrows=first_rows, encoding=encoding,
                engine="python" if sep == "::" else "c",
                skipinitialspace=True,  # `a, "b, c"`: a space after a delimiter is not part of the next field
                encoding_errors="replace" if glance else "strict",
                **({"header": None, "names": names} if names is not None else {}),
            )  # fmt: skip
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise CrabError(f"{path}: cannot parse table ({reason(exc)})") from None
    if names is None and len(first) == len(frame.columns):  # `user , item`: the names without the spaces around
        frame.columns = [name or column for name, column in zip(first, frame.columns)]  # "": pandas' "Unnamed: 3"
    return frame


def item_lines(path: Path) -> str | None:
    """The delimiter of a text file of one user a line, the user's id then the user's items in order (``1 2 3 4``, as
    S3-Rec's ``Beauty.txt`` and P5's ``sequential_data.txt`` are written), told by its first lines: no header line
    (the first is a row), lines of different numbers of fields (a user without items: one field), every field an id
    (no quotes, spaces or dates); None for anything else."""
    if path.is_dir() or (table_kind(path, named=True) or ".csv") not in (".csv", ".tsv", *TEXT_NAMED):
        return None
    try:
        text = _head(path).decode(_bom_encoding(path) or "utf-8-sig", errors="replace")
    except OSError:
        return None
    lines = [line for line in text.splitlines() if line.strip()][:GLANCE_LINES]
    if not lines or (sep := delimiter(lines[0])) == "::":
        return None
    fields = [line.split() if sep == " " else line.split(sep) for line in lines]  # an empty field is a field
    if not looks_like_a_row(fields[0]) or any('"' in line for line in lines):  # a header line: a table
        return None
    if any(not cell.strip() or " " in cell.strip() or DATE_CELL.fullmatch(cell.strip()) for f in fields for cell in f):
        return None
    lengths = [len(f) for f in fields]
    listing = sum(n >= 2 for n in lengths) >= len(lengths) / 2  # a user without items is the exception
    return sep if listing and len(set(lengths)) > 1 else None


def _fields(line: str, sep: str) -> list[str]:
    """The filled fields of one line of :func:`item_lines`."""
    return line.split() if sep == " " else [f.strip() for f in line.split(sep) if f.strip()]


def item_lines_frame(path: Path, sep: str) -> tuple[pd.DataFrame, int]:
    """The rows (``user``, ``item``) of a file of :func:`item_lines`, each line's items in order (a row's index: its
    line, less one), and the number of lines that hold a user without items (left out)."""
    users: list[str] = []
    items: list[str] = []
    lines: list[int] = []
    empty = 0
    for n, line in enumerate(_text(path, glance=False).splitlines()):
        fields = _fields(line, sep)
        empty += len(fields) == 1
        users.extend(fields[:1] * (len(fields) - 1))
        items.extend(fields[1:])
        lines.extend([n] * (len(fields) - 1))
    return pd.DataFrame({"user": users, "item": items}, index=lines), empty


def _text(path: Path, glance: bool) -> str:
    """The file as text (JSON lines); ``glance``: its first lines."""
    if glance:
        return _head(path).decode(_bom_encoding(path) or "utf-8-sig", errors="replace")
    with _opened(path) as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode(_encoding(path))  # (which says so)
    return text.removeprefix("\ufeff")


def _json_rows(path: Path, text: str, first_rows: int | None, whole: bool = False) -> pd.DataFrame:
    """One JSON object per line or (``whole``: a ``.json`` file) one array of objects, one object of objects keyed by
    id (``{"B001": {"title": ...}}``: an ``id`` column holds the keys), one object of lists (``{"u1": ["B001",
    ...]}``: each user's items in order, as ``user`` and ``item`` columns) or one object with one array of objects
    among other keys (the Million Playlist Dataset's ``{"info": ..., "playlists": [...]}``: that array); a key missing
    on a row is an empty cell, a nested value its JSON text; ``first_rows``: at most that many (0: the first row's
    columns)."""
    records: Iterable[tuple[int, dict]] | None = None
    if whole and text.lstrip()[:1] in ("[", "{"):
        try:
            value = loads_unique(text)
        except DuplicateKeyError as exc:
            raise CrabError(f"{path}: {exc}") from None
        except (ValueError, RecursionError):
            value = None  # JSON lines (or broken JSON: the lines say where)
        if isinstance(value, dict) and len(value) > 1 and all(isinstance(v, dict) for v in value.values()):
            value = [{"id": key, **{f: x for f, x in rec.items() if f != "id"}} for key, rec in value.items()]
        elif isinstance(value, dict) and len(value) > 1 and all(_ids(v) for v in value.values()):
            value = [{"user": key, "item": x} for key, items in value.items() for x in items]  # {user: [item, ...]}
        elif isinstance(value, dict) and len(rows_at := [k for k, v in value.items() if _objects(v)]) == 1:
            value = value[rows_at[0]]  # {"info": {...}, "playlists": [{...}, ...]}: the one array of objects
        if isinstance(value, dict) and text.strip().count("\n"):
            raise CrabError(
                f"{path}: one JSON object, not a table; expected one object per line (its keys the columns) or an "
                "array of such objects"
            )
        if isinstance(value, list):
            records = _array_objects(path, value)
    rows: list[dict[str, str]] = []
    columns: dict[str, None] = {}
    lines = records if records is not None else json_object_lines(path, text.splitlines(), "of columns")
    for _, rec in lines:
        columns.update(dict.fromkeys(rec))
        rows.append({k: _cell(v) for k, v in rec.items()})
        if first_rows is not None and len(rows) >= max(first_rows, 1):
            break
    if not rows:
        raise CrabError(f"{path}: no JSON objects; expected one object per line")
    frame = pd.DataFrame(rows, columns=list(columns), dtype=object).fillna("")
    return frame.iloc[:first_rows]


def _objects(value: object) -> bool:
    """Whether ``value`` is a non-empty list of objects."""
    return isinstance(value, list) and bool(value) and all(isinstance(x, dict) for x in value)


def _ids(value: object) -> bool:
    """Whether ``value`` is a list of ids (strings or numbers)."""
    return isinstance(value, list) and all(isinstance(x, str | int | float) and not isinstance(x, bool) for x in value)


def _array_objects(path: Path, values: list) -> Iterator[tuple[int, dict]]:
    for n, rec in enumerate(values):
        if not isinstance(rec, dict):
            raise CrabError(f"{path}: array element {n}: expected an object of columns, got {type(rec).__name__}")
        yield n, rec


def unnested(
    frame: pd.DataFrame, origin: Origin, has_item: Callable[[list[str]], bool]
) -> tuple[pd.DataFrame, str] | None:
    """A table with one row per user and the user's interactions as a list of records in one column (UCSD's Steam
    reviews: ``{"user_id": "u1", "reviews": [{"item_id": "10", ...}, ...]}``; a Parquet list of structs), as one row
    per record: the row's other columns and the record's fields, each row keeping its index (its label, ``origin``);
    ``(table, column)``, or None when no column's first list of records has fields that ``has_item``."""
    for col, fields in record_fields(frame).items():
        if not has_item(fields):
            continue
        columns: dict[str, list[str | None]] = {}  # each field's cells, record by record (None: not in the record)
        counts, n = [], 0
        for label, cell in zip(frame.index, frame[col]):
            records = _records(cell)
            if records is None and isinstance(cell, str) and cell.strip() not in ("", "[]"):
                raise CrabError(
                    f"{origin.row(label)}: column {col!r} holds no list of records; the first rows hold one there"
                )
            for rec in records or []:
                for key, value in rec.items():
                    cells = columns.get(key := str(key))
                    if cells is None:
                        cells = columns[key] = [None] * n
                    cells.append(_cell(value))
                n += 1
                for cells in columns.values():
                    if len(cells) < n:
                        cells.append(None)
            counts.append(len(records or ()))
        outer = {c: np.repeat(np.array([_cell(v) for v in frame[c]], dtype=object), counts) for c in frame if c != col}
        table = pd.DataFrame(outer, index=np.repeat(frame.index.to_numpy(), counts), dtype=object)
        for key, cells in columns.items():  # a record's field over the row's column of that name, where it has one
            had = table[key].to_numpy() if key in table else np.full(n, "", dtype=object)
            table[key] = np.array([h if c is None else c for c, h in zip(cells, had)], dtype=object)
        return table, col
    return None


GLANCE = 1000  # the cells unnested looks at for a first list of records


def record_fields(frame: pd.DataFrame) -> dict[str, list[str]]:
    """Each column whose first rows hold a list of records (OTTO's ``events``: ``[{"aid": ..., "ts": ...}]``): the
    fields of its first such list, in order."""
    out = {}
    for col in frame.columns:
        sample = next((r for r in map(_records, frame[col].iloc[:GLANCE]) if r), None)
        if sample is not None:
            out[col] = list(dict.fromkeys(str(k) for rec in sample for k in rec))
    return out


_NUMPY_LIST = re.compile(r"\[\s*(?:'[^']*'\s*)*\]")  # NumPy's print of an array of strings: ['B01' 'B02']


_ID_TOKEN = re.compile(r"[A-Za-z0-9_.:-]*[0-9][A-Za-z0-9_.:-]*")  # an id of a joined list: 12, B01, N55189, i_5


def joined_ids(cells: Iterable[object]) -> str | None:
    """The separator of a column of ids joined into one text a cell (``1 2 3``, ``B01;B02``, ``7|8``, ``1, 2``): the
    one among space, ``;``, ``|`` and ``,`` that some of ``cells`` hold and that splits every cell into ids (each
    holding a digit, so that a name such as ``Toy Story`` is no list); None when there is none."""
    texts = [c.strip() for c in cells if isinstance(c, str) and c.strip()]
    if not texts or any(t[0] in "[{" for t in texts):
        return None
    for sep in (";", "|", ",", " "):
        if not any(sep in t for t in texts):
            continue
        tokens = [x.strip() for t in texts for x in (t.split() if sep == " " else t.split(sep))]
        if all(_ID_TOKEN.fullmatch(x) for x in tokens):
            return sep
    return None


def id_list(cell: object, sep: str | None = None) -> list[str] | None:
    """A cell holding a flat list of ids, as text: a Parquet or JSON list, its JSON or Python literal
    (``[1, 2]``, ``['B01', 'B02']``), NumPy's print of one (``['B01' 'B02']``, as Amazon-M2 ships sessions) or, with
    ``sep`` (:func:`joined_ids`), its ids joined by it (``1 2 3``); None for any other cell (an empty cell: an empty
    list)."""
    if isinstance(cell, str):
        text = cell.strip()
        if not text:
            return []
        if sep is not None and text[0] not in "[{":
            return [x.strip() for x in (text.split() if sep == " " else text.split(sep)) if x.strip()]
        if "," not in text and _NUMPY_LIST.fullmatch(text):
            return re.findall(r"'([^']*)'", text)
        try:
            cell = list_literal(text)  # (a flat list of ids, else ValueError)
        except ValueError:
            return None
    items = cell_list(cell)
    if items is None or any(isinstance(x, list | tuple | dict | float | bool) for x in items):
        return None
    return [str(x) for x in items]


def id_list_column(frame: pd.DataFrame, columns: list[str]) -> str | None:
    """The first of ``columns`` whose first non-empty cell holds a list of ids, and one of the first cells two or
    more (a table of one row per user and their items in order); None when there is none."""
    for col in columns:
        cells = [c for c in frame[col].iloc[:GLANCE] if not (isinstance(c, str) and not c.strip())]
        sep = joined_ids(cells)
        lists = [x for x in (id_list(c, sep) for c in cells) if x is not None]
        if cells and id_list(cells[0], sep) is not None and any(len(x) > 1 for x in lists):
            return col
    return None


def exploded(frame: pd.DataFrame, col: str, origin: Origin, then: str | None = None) -> pd.DataFrame:
    """One row per id of column ``col``'s lists, in their order (``then``: followed by that column's id, when the row
    has one), each keeping its row's index (its label, ``origin``) and other cells; a cell that holds no list is an
    error naming its row."""
    lists = []
    after = id_cells(frame[then]).str.strip() if then else pd.Series("", index=frame.index)
    sep = joined_ids(frame[col].iloc[:GLANCE])
    for label, cell, last in zip(frame.index, frame[col], after, strict=True):
        ids = id_list(cell, sep)
        if ids is None:
            raise CrabError(
                f"{origin.row(label)}: column {col!r} holds {clip(repr(cell))}, not a list of item "
                "ids; the first rows hold one there"
            )
        lists.append([*ids, last] if last else ids)
    out = frame.assign(**{col: lists}).explode(col)
    return out[out[col].notna()].astype({col: str})


def bracketed(cell: str, brackets: str) -> object | None:
    """The value a text cell written between ``brackets`` (``"[]"``, ``"{}"``) holds, as JSON or as a Python
    literal (as pandas writes a column of lists or dicts to CSV; never evaluated as code); None for any other cell."""
    text = cell.strip()
    if not (text.startswith(brackets[0]) and text.endswith(brackets[1])) or len(text) > 1_000_000:
        return None
    try:
        return json.loads(text)
    except RecursionError:
        return None
    except ValueError:
        try:
            return ast.literal_eval(text)
        except (SyntaxError, MemoryError, RecursionError, TypeError, ValueError):
            return None


def cell_list(cell: object) -> list | None:
    """A cell that holds a list: its JSON text (``["Office", "Pens"]``) or Python literal (``['Office', 'Pens']``, as
    pandas writes a column of lists to CSV: Food.com's ``tags`` and ``ingredients``; never evaluated as code), a
    Parquet list (a numpy array) or a list; else None."""
    if isinstance(cell, str):
        cell = bracketed(cell, "[]")
    if isinstance(cell, np.ndarray):
        cell = cell.tolist()
    return list(cell) if isinstance(cell, list | tuple) else None


def _records(cell: object) -> list[dict] | None:
    """A cell's list of records (its JSON text, or a Parquet list of structs), or None."""
    items = cell_list(cell)
    return items if items and all(isinstance(r, dict) for r in items) else None


def _cell(value: object) -> str:
    """A JSON value (or a Parquet one: a numpy array or scalar) as a table's text cell."""
    if isinstance(value, np.ndarray | np.generic):
        value = value.tolist()
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
    return json.dumps(value, ensure_ascii=False, default=str)  # a Python literal's set or tuple: its text


def _parquet(path: Path, first_rows: int | None) -> pd.DataFrame:
    try:
        import pyarrow.parquet as pq

        names = [str(n) for n in pq.read_schema(path).names]
        _refuse_twice(path, names)
        if first_rows == 0:
            return pd.DataFrame(columns=names)
        if first_rows is not None:
            batch = next(pq.ParquetFile(path).iter_batches(batch_size=first_rows), None)
            return batch.to_pandas() if batch is not None else pd.DataFrame(columns=names)
        return pd.read_parquet(path)
    except CrabError:
        raise
    except Exception as exc:  # whatever pyarrow raises about the file's content
        raise CrabError(f"{path}: cannot parse table ({reason(exc)})") from None


def first_row(path: Path, headerless: bool = False) -> int:
    """The number a message gives the table's first row: its line in a delimited file (2, after the header line; 1
    without one), else its place (JSON lines, a JSON array, Parquet: 1)."""
    kind = None if path.is_dir() else table_kind(path, named=True) or ".csv"  # a folder: Parquet parts
    delimited = kind not in (None, ".parquet", ".jsonl", ".ndjson", ".json")
    return 2 if not headerless and delimited else 1


def id_cells(values: pd.Series) -> pd.Series:
    """A column of ids as text, the way a text table spells them: a missing value (a Parquet null) is ``""``, and a
    float column whose values are whole numbers (a Parquet column of integer ids that held a null) reads ``"7"``, not
    ``"7.0"``."""
    missing = values.isna().to_numpy()
    if pd.api.types.is_float_dtype(values.dtype):
        finite = values[~missing]
        if len(finite) and bool((finite == finite.round()).all()) and float(finite.abs().max()) < 2**53:
            values = values.astype("Int64")
    elif not missing.any():  # (a text table's cells: strings already)
        return whole_numbers(values.astype(str))
    elif values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
        return values.map(lambda v: "" if v is None or (isinstance(v, float) and v != v) else str(v))
    text = values.astype(str).to_numpy(dtype=object)
    text[missing] = ""
    return pd.Series(text, index=values.index, name=values.name, dtype=object)


_WHOLE = re.compile(r"-?[0-9]+\.0+")  # 7.0: a whole number as pandas writes a float column


def unfilled(cells: pd.Series) -> np.ndarray:
    """The cells (text) that hold no value: empty, or a missing value written out (:data:`NULLS`)."""
    stripped = cells.str.strip()
    return ((stripped == "") | stripped.str.lower().isin(NULLS)).to_numpy()


def whole_numbers(cells: pd.Series) -> pd.Series:
    """A text column of ids written as whole numbers with a fraction of zeros (``"7.0"``, as pandas writes a float
    column of integer ids that held a missing value to CSV), when every filled cell is one, spelled as integers
    (``"7"``); else ``cells``."""
    if not next((c for c in cells.iloc[:GLANCE] if c), "").endswith(".0"):  # (most columns: a glance suffices)
        return cells
    filled = cells[cells != ""]
    if not filled.str.fullmatch(_WHOLE.pattern).all():
        return cells
    return cells.str.replace(r"\.0+$", "", regex=True).str.replace(r"^-0$", "0", regex=True)


def looks_like_a_row(cells: list) -> bool:
    """Whether a header line holds a number, a date, a UUID, a list, a JSON object or a web address: a row of data,
    not column names."""
    stripped = (str(c).strip() for c in cells)
    return any(
        NUMBER.fullmatch(c)
        or DATE_CELL.fullmatch(c)
        or UUID.fullmatch(c)
        or c.startswith(("[", "{", "http://", "https://"))
        for c in stripped
    )


UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")  # a MusicBrainz id
# a cell holding a date: 2014-04-07, 2014-04-07T10:51:09Z, 4/7/2014, Tue Apr 03 18:00:09 +0000 2012 (as Twitter and
# Foursquare's check-ins write it)
DATE_CELL = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}([T ].*)?|\d{1,2}/\d{1,2}/\d{2,4}( .*)?"
    r"|(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} \d{1,2} \d{2}:\d{2}:\d{2} [+-]\d{4} \d{4}"
)


ASIN = re.compile(r"B[0-9A-Z]{9}|\d{9}[\dX]")  # an Amazon item id: B0... or an ISBN-10
REVIEWER = re.compile(r"A[0-9A-Z]{9,21}")  # an Amazon reviewer id


def guess_columns(cells: list) -> list[str]:
    """Names for the cells of a row, in order, for the ``data.columns`` an error suggests: the first is the user, a
    date the timestamp, else the last number of 9 to 13 digits not written with a leading zero (Unix seconds or
    milliseconds; ``0205616461`` is an ISBN), the next one left that is no decimal fraction (``32.42``: a latitude)
    the item, a number from 0 to 10 after it the rating, and any other ``columnN``; a row that starts with an Amazon
    item id (ASIN) and a reviewer id is item first, as Amazon's 2018 ratings-only files are written."""
    text = [str(c).strip() for c in cells]
    item_first = len(text) > 1 and bool(ASIN.fullmatch(text[0])) and bool(REVIEWER.fullmatch(text[1]))
    first: list[str | None] = ["item", "user"] if item_first else ["user"]
    names = first + [None] * (len(text) - len(first))
    free = [i for i in range(len(text)) if names[i] is None]
    dates = [i for i in free if DATE_CELL.fullmatch(text[i])]
    seconds = [i for i in free if re.fullmatch(r"[1-9]\d{8,12}(\.\d*)?", text[i])]
    stamp = dates[0] if dates else seconds[-1] if seconds else None
    if stamp is not None:
        names[stamp] = "timestamp"
    measures = {i for i in free if re.fullmatch(r"[-+]?\d*\.\d*[1-9]\d*", text[i])}  # 32.42: a latitude, no id
    item = 0 if item_first else next((i for i in free if names[i] is None and i not in measures), None)
    if item is not None:
        names[item] = "item"
        rating = next((i for i in range(item + 1, len(text)) if names[i] is None and NUMBER.fullmatch(text[i])
                       and 0 <= float(text[i]) <= 10), None)  # fmt: skip
        if rating is not None:
            names[rating] = "rating"
    return [name or f"column{i + 1}" for i, name in enumerate(names)]


def row_not_header(path: Path, cells: list, what: str | None = None) -> CrabError:
    """The error for a file whose first line (``cells``) is a row, not a header (``what``: the interaction column
    looked for; without it the file may be an item table too, which has no ``data.columns``)."""
    columns = (
        f"name the columns with --set data.columns=[{','.join(guess_columns(cells))}] (one name per column, in file "
        "order)"
    )
    fix = (
        f"{columns}, or add a header line"
        if what
        else f"add a header line (to an item table: its id column's name, then its text columns'), or, for "
        f"interactions, {columns}"
    )
    return CrabError(
        f"{path}: {f'no {what} column: ' if what else ''}its first line ({listed(cells)}) looks like a row, not a "
        f"header; {fix}"
    )


def _refuse_twice(path: Path, names: list[str], where: str = "header") -> None:
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None and where == "header" and looks_like_a_row(names):
        raise row_not_header(path, names)
    if twice is not None:
        raise CrabError(f"{path}: {where}: column {clip(twice)!r} is given twice; name each column once")
