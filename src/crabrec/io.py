"""Atomic artifact I/O: every file is written to a temporary sibling and renamed into place."""

from __future__ import annotations

import ast
import codecs
import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

try:
    import fcntl
except ImportError:  # Windows: try_lock uses msvcrt
    fcntl = None

from crabrec.errors import CrabError, clip, reason


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


UMASK = _umask()  # read once: os.umask can only be read by setting it


def publish_mode(tmp: Path, path: Path) -> None:
    """Give ``tmp`` (a temporary file or folder, created private) the mode ``path`` has, or else the mode a plain
    ``open``/``mkdir`` would give it, before it is renamed onto ``path``."""
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        mode = (0o777 if tmp.is_dir() else 0o666) & ~UMASK
    os.chmod(tmp, mode)


def publish_tree(tmp: Path, folder: Path) -> None:
    """Give the folder ``tmp`` the mode ``folder`` has (or a plain ``mkdir``'s) and everything in it the mode a plain
    ``open``/``mkdir`` would give it: writers such as safetensors' create their files private (0600), which would
    keep a model from a teammate, or from a server running as another user. Links are left as they are."""
    publish_mode(tmp, folder)
    for root, dirs, files in os.walk(tmp):
        for name in dirs + files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                opens = os.path.isdir(path) or os.stat(path).st_mode & 0o111  # a folder, or an executable
                os.chmod(path, (0o777 if opens else 0o666) & ~UMASK)


def writable_parent(path: str | os.PathLike) -> Path:
    """``path``'s folder, created if missing; a :class:`CrabError` naming ``path`` when it cannot be written there."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CrabError(f"{path}: cannot create its folder ({os_reason(exc)})") from None
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise CrabError(f"{path}: cannot write in {path.parent} (permission denied)")
    return path.parent


def writable_file(path: str | os.PathLike) -> Path:
    """The folder that ``path`` (a file to write) goes in, created if missing; a :class:`CrabError` naming ``path``
    when it is a folder, a pipe or a device, or its folder cannot be written. Checked by every atomic write, and by
    a command before long work whose result goes to ``path``."""
    path = Path(path)
    if path.is_dir():
        raise CrabError(f"{path}: is a folder; expected a file path to write")
    if path.exists() and not path.is_file():  # a file is written whole, then renamed: it would replace the pipe
        raise CrabError(f"{path}: not a regular file (a pipe or a device); name a file to write")
    return writable_parent(path)


def replaceable_folder(folder: str | os.PathLike, made_by: Callable[[Path], bool], what: str, keep: list[Path]) -> None:
    """Refuse to replace ``folder`` (a command's output, removed and written anew) unless it is missing, empty, or
    ``made_by`` recognises it as an earlier output of the same command (``what`` names such an output); it may
    never be a link, a run directory, or be or hold a path in ``keep`` (the command's inputs)."""
    folder = Path(folder)
    if folder.is_symlink():
        raise CrabError(f"{folder}: a link; choose a plain folder to write")
    folder = folder.resolve()
    for path in keep:
        path = Path(path).resolve()
        if folder == path or folder in path.parents:
            raise CrabError(f"{folder}: is or holds {path}, which this command reads; choose another folder")
    if not folder.is_dir() or not any(folder.iterdir()):
        return
    if (folder / "config.yaml").is_file() and (folder / "stages").is_dir():
        raise CrabError(f"{folder}: a run directory; choose another folder")
    if not made_by(folder):
        raise CrabError(f"{folder}: not empty and not {what}; choose another folder (only {what} is replaced)")


def os_reason(exc: OSError) -> str:
    """An OS error's own words ("Permission denied"), without the errno and path that the message repeats."""
    return exc.strerror or reason(exc)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only if the block succeeds.

    The file ends with the mode a plain ``open`` would give it (or the mode of the file it replaces); an OS error
    (no such folder, permission, disk full) is a :class:`CrabError` naming ``path``."""
    path = Path(path)
    folder = writable_file(path)
    tmp_path: Path | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        os.close(fd)
        tmp_path = Path(tmp)
        yield tmp_path
        publish_mode(tmp_path, path)
        os.replace(tmp_path, path)
    except OSError as exc:
        raise CrabError(f"{path}: cannot write ({os_reason(exc)})") from None
    finally:
        if tmp_path is not None and tmp_path.exists():
            tmp_path.unlink()


def try_lock(handle: IO[Any]) -> bool:
    """Take an exclusive lock on an open file without waiting; False when another process holds it. ``flock`` on
    Linux and macOS; on Windows (no ``fcntl``) ``msvcrt`` locks the file's first byte."""
    if fcntl is None:
        import msvcrt

        handle.seek(0)
        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def unlock(handle: IO[Any]) -> None:
    """Release :func:`try_lock`'s lock."""
    if fcntl is None:
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
    else:
        fcntl.flock(handle, fcntl.LOCK_UN)


SPACE_WORDS = ("No space", "Disk quota", "StorageFull")  # how torch's and safetensors' writers say the disk is full
WRITE_WORDS = (*SPACE_WORDS, "IoError", "write failed", "failed writing", "Read-only")  # ... or that a write failed


def write_folder(folder: str | os.PathLike, fill: Callable[[Path], None]) -> None:
    """``fill`` the folder ``<folder>.tmp`` (it creates it), give it the modes of :func:`publish_tree`, then rename
    it onto ``folder``; the previous ``folder`` waits as ``<folder>.old`` until the new one is in place. A write that
    fails (a full disk, a read-only folder: an OSError, or the words of torch's and safetensors' writers) removes the
    temporary folder and is one error naming ``folder``; the previous ``folder`` stays as it was, and so it does after
    Ctrl-C."""
    folder = Path(folder)
    tmp, old = folder.with_name(folder.name + ".tmp"), folder.with_name(folder.name + ".old")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        fill(tmp)
        publish_tree(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
        if folder.exists():  # moved aside, not deleted, until the new one is in place
            folder.rename(old)
        tmp.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException as exc:  # Ctrl-C included: no half-filled temporary folder is left
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not folder.exists():
            old.rename(folder)
        if not isinstance(exc, Exception):
            raise
        text = str(exc)
        if not isinstance(exc, OSError) and not any(w in text for w in WRITE_WORDS):
            raise
        detail = os_reason(exc) if isinstance(exc, OSError) else reason(exc)
        full = getattr(exc, "errno", None) == errno.ENOSPC or any(w in text for w in SPACE_WORDS)
        hint = "; free some space and run the command again" if full else ""
        raise CrabError(f"{folder}: cannot write ({detail}){hint}") from None


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def write_npy(path: str | os.PathLike, array: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array, allow_pickle=False)


def write_npz(path: str | os.PathLike, **arrays: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


MAX_INT_DIGITS = 100  # longer JSON integers stay strings: they are ids, and int() refuses > 4,300 digits anyway


class DuplicateKeyError(ValueError):
    """A key given twice in one JSON object: JSON parsers keep the last value and drop the first silently."""

    def __init__(self, key: str):
        super().__init__(f"duplicate key {clip(key)!r} (a key given twice in one object)")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        raise DuplicateKeyError(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return out


def loads_unique(text: str | bytes, **kwargs: Any) -> Any:
    """``json.loads`` that raises :class:`DuplicateKeyError` for a key given twice in one object, at any depth.
    Parsing is plain ``json.loads`` first: the slower check runs only where the text has more colons than the
    objects it made have keys at the top, which a key given twice needs."""
    value = json.loads(text, **kwargs)
    if type(value) is dict:
        keys = len(value)
    elif type(value) is list:
        keys = sum(len(v) for v in value if type(v) is dict)
    else:
        return value
    if text.count(":" if type(text) is str else b":") > keys:
        value = json.loads(text, object_pairs_hook=_unique_object, **kwargs)
    return value


def list_literal(text: str) -> list[Any]:
    """A cell holding a list of ids: a JSON or Python list literal (``[1, 2]``, ``['B01', 'B02']``, never evaluated
    as code); ValueError if it is not a flat one."""
    if len(text) > 1_000_000:
        raise ValueError("too long")
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        try:
            value = ast.literal_eval(text)
        except (SyntaxError, MemoryError, RecursionError, TypeError, ValueError) as exc:
            raise ValueError("not a literal") from exc
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    if not isinstance(value, list) or any(isinstance(x, (list, dict, tuple, set, float, bytes, bool)) for x in value):
        raise ValueError("not a flat list of ids")
    return value


def read_input_json(path: str | os.PathLike) -> Any:
    """A JSON file the user brought (dataset, SID index): every way it can be wrong is a one-line ``CrabError``
    naming it: missing, a folder, not UTF-8, invalid JSON, nested too deeply, or a key given twice in one object.
    Integers of more than ``MAX_INT_DIGITS`` digits are kept as their digit strings."""
    path = Path(path)

    def integer(text: str) -> int | str:
        return int(text) if len(text) <= MAX_INT_DIGITS else text

    text = read_input_text(path)
    try:
        # one checking parse: a whole file's nested objects (an item table) would fail loads_unique's quick count
        return json.loads(text, object_pairs_hook=_unique_object, parse_int=integer)
    except DuplicateKeyError as exc:
        raise CrabError(f"{path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CrabError(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg})") from None
    except RecursionError:
        raise CrabError(f"{path}: JSON nested too deeply") from None


def _dict_literal(line: str | bytes) -> dict[str, Any] | None:
    """A line holding a Python dict literal, or None."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    if not text.lstrip().startswith("{") or len(text) > 10_000_000:
        return None
    try:
        value = ast.literal_eval(text.strip())
    except (SyntaxError, MemoryError, RecursionError, TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def json_object_lines(
    path: str | os.PathLike, lines: Iterable[str | bytes], expected: str
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a JSON-lines file the user brought; a line may also be a
    Python dict literal (``{'user_id': 'u1', 'ok': True}``, as UCSD's Steam and Amazon 2014 files are written; read
    with :func:`ast.literal_eval`, never run). A line that is neither, or not an object (``expected`` says what it
    should hold), is a one-line error naming the line."""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = loads_unique(line)
        except DuplicateKeyError as exc:
            raise CrabError(f"{path}: line {n}: {exc}") from None
        except (ValueError, RecursionError) as exc:
            rec = _dict_literal(line)
            if rec is None:
                raise CrabError(f"{path}: line {n}: not JSON ({reason(exc, 80)})") from None
        if not isinstance(rec, dict):
            raise CrabError(f"{path}: line {n}: expected an object {expected}, got {type(rec).__name__}")
        yield n, rec


def not_found(path: str | os.PathLike, what: str = "file") -> CrabError:
    """``<path>: file not found``, saying so when the path is a web address (crabrec reads local files only)."""
    text = str(path)
    if re.match(r"[a-zA-Z][\w+.-]+:/", text):  # https://..., s3://... (a drive letter, C:/, is one character)
        return CrabError(f"{text}: a web address; crabrec reads local files: download it first, then give the file")
    return CrabError(f"{text}: {what} not found")


def read_input_bytes(path: str | os.PathLike) -> bytes:
    """A file the user brought, whole (a pipe too); missing, a folder or unreadable is a one-line error."""
    path = Path(path)
    try:
        return path.read_bytes()
    except IsADirectoryError:
        raise CrabError(f"{path}: a folder, not a file") from None
    except FileNotFoundError:
        raise not_found(path) from None
    except OSError as exc:
        raise CrabError(f"{path}: unreadable ({exc.strerror or exc})") from None


def unicode_encoding(start: bytes) -> str | None:
    """The encoding a text's first 4 bytes show: ``utf-32`` or ``utf-16`` by their byte-order mark (Excel's "Unicode
    Text" is UTF-16), ``utf-16-le``/``-be`` when its first characters are ASCII written in two bytes without one
    (text never holds NUL); else None (UTF-8 or an 8-bit encoding)."""
    if start.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32"
    if start.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if len(start) == 4 and start[1] == start[3] == 0 and start[0] and start[2]:  # "u\0s\0"
        return "utf-16-le"
    if len(start) == 4 and start[0] == start[2] == 0 and start[1] and start[3]:
        return "utf-16-be"
    return None


def input_text(name: str | os.PathLike, data: bytes) -> str:
    """``data`` as UTF-8 text without the byte-order mark some editors write first (Excel's "CSV UTF-8"), or in the
    encoding :func:`unicode_encoding` sees (Excel's "Unicode Text"), its line ends as ``\\n``; not UTF-8 is a one-line
    error naming ``name``."""
    encoding = unicode_encoding(data[:4])
    try:
        text = data.decode(encoding or "utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CrabError(f"{name}: not {encoding or 'UTF-8'} text (byte {exc.start}); re-save it as UTF-8") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_input_text(path: str | os.PathLike) -> str:
    """A text file the user brought, as :func:`input_text` reads it; missing, a folder, unreadable or not UTF-8 is a
    one-line error."""
    return input_text(path, read_input_bytes(path))


def load_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Arrays of an ``.npz`` artifact; pickled objects are refused (a clear error, never executed)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise _bad_artifact(path, exc) from None


def load_npy(path: str | os.PathLike) -> np.ndarray:
    """An ``.npy`` artifact; pickled objects are refused (a clear error, never executed)."""
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise _bad_artifact(path, exc) from None


def _bad_artifact(path: str | os.PathLike, exc: Exception):
    return CrabError(f"{path}: unreadable artifact ({reason(exc)}); re-run the stage that writes it with --force")


_HASHED: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> content hash, for this process


def content_hash(path: str | os.PathLike) -> str | None:
    """SHA-256 of a file's bytes, or of a folder's files (relative names and contents, hidden ones left out); None
    when ``path`` is not there (a name such as a bundled encoder's). A file is read again only when its size or
    modification time changed since this process last hashed it."""
    path = Path(path)
    if path.is_file():
        stat = path.stat()
        memo = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        if memo not in _HASHED:
            digest = hashlib.sha256()
            try:
                with open(path, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        digest.update(block)
            except OSError as exc:
                raise CrabError(f"{path}: unreadable ({os_reason(exc)})") from None
            _HASHED[memo] = digest.hexdigest()
        return _HASHED[memo]
    if path.is_dir():
        return sha256_of([[str(p.relative_to(path)), content_hash(p)] for p in _input_files(path)])
    return None


def _input_files(folder: Path, depth: int = 2) -> list[Path]:
    """The files a dataset or model folder can hold, two levels down at most: hidden names and run directories
    (``config.yaml`` + ``stages/``: outputs, not inputs, when runs live beside the data) are left out."""
    out: list[Path] = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_file():
            out.append(entry)
        elif entry.is_dir() and depth > 1 and not ((entry / "config.yaml").is_file() and (entry / "stages").is_dir()):
            out += _input_files(entry, depth - 1)
    return out


def sha256_of(obj: Any) -> str:
    """Stable hash of a JSON-serialisable object (used as a cache key)."""
    blob = json.dumps(obj, sort_keys=True, default=_json_default).encode()
    return hashlib.sha256(blob).hexdigest()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
