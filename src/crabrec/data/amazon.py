"""Raw Amazon review dumps, streamed line by line from ``.json.gz`` / ``.jsonl.gz`` (or uncompressed) files.

Formats (``data.format``), in a folder holding one category's files (``data.name`` picks the category when several):

- ``amazon14``: ``reviews_<Cat>_5.json.gz`` (JSON lines) and ``meta_<Cat>.json.gz`` (Python literals, read with
  :func:`ast.literal_eval`, never ``eval``);
- ``amazon18``: ``<Cat>_5.json.gz`` (or the full ``<Cat>.json.gz``) and ``meta_<Cat>.json.gz``, JSON lines;
- ``amazon23``: ``<Cat>.jsonl.gz`` and ``meta_<Cat>.jsonl.gz``, keyed by ``parent_asin`` (milliseconds timestamps).

Recipes (``data.recipe``):

- ``tiger`` (TIGER/LETTER): (user, item) duplicates dropped keeping the first by time, ``data.kcore``-core,
  leave-one-out;
- ``minionerec`` (MiniOneRec, the CRAB paper's): items without a usable title dropped (none, ``<span id``, one
  character or fewer, more than 20 words), interactions outside ``data.time_window`` dropped, ``data.kcore``-core,
  duplicates kept, every sliding window split 8:1:1 by the target's time.

Item text: title, description, brand and categories, HTML entities decoded and tags removed. Malformed review lines
are counted by kind and reported (a note in ``crabrec data stats``), never fatal unless no line is valid.
"""

from __future__ import annotations

import ast
import contextlib
import gzip
import html
import json
import logging
import queue
import re
import threading
import zlib
from array import array
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import numpy as np

from crabrec.data.dataset import Dataset
from crabrec.errors import CrabError, clip, reason

log = logging.getLogger("crabrec")

try:  # orjson parses a review line about 5x faster than the standard library; both reject what is not JSON
    from orjson import loads as parse_json
except ImportError:  # pragma: no cover - orjson is a dependency, json stays the fallback
    parse_json = json.loads

RAW_FORMATS = ("amazon14", "amazon18", "amazon23")
# (user key, item keys in order of preference, time key, time unit in seconds)
REVIEW_KEYS = {
    "amazon14": ("reviewerID", ("asin",), "unixReviewTime", 1.0),
    "amazon18": ("reviewerID", ("asin",), "unixReviewTime", 1.0),
    "amazon23": ("user_id", ("parent_asin", "asin"), "timestamp", 0.001),
}
TAG = re.compile(r"<!--.*?-->|<(script|style)\b.*?</\1\s*>|<[^>]+>", re.DOTALL | re.IGNORECASE)
SPACE = re.compile(r"\s+")


def raw_files(folder: Path, fmt: str, name: str | None) -> tuple[str, Path, Path]:
    """``(category, reviews file, meta file)`` of ``fmt`` in ``folder``."""
    if not folder.is_dir():
        raise CrabError(f"{folder}: the {fmt} format reads a folder holding the review and meta files")
    patterns = {
        "amazon14": ("reviews_*_5.json*", r"reviews_(.+)_5\.json(\.gz)?$"),
        "amazon18": ("*.json*", r"(?!meta_)(.+?)(_5)?\.json(\.gz)?$"),
        "amazon23": ("*.jsonl*", r"(?!meta_)(.+)\.jsonl(\.gz)?$"),
    }[fmt]
    found: dict[str, list[Path]] = {}
    for path in sorted(folder.glob(patterns[0])):
        m = re.match(patterns[1], path.name)
        if m and not path.name.startswith("meta_"):
            found.setdefault(m.group(1), []).append(path)
    if name is not None:
        found = {k: v for k, v in found.items() if k == name}
    if len(found) != 1:
        what = ", ".join(sorted(found)) or "none"
        raise CrabError(f"{folder}: expected the review file of one {fmt} category (found: {what}); set data.name")
    category, candidates = next(iter(found.items()))
    reviews = sorted(candidates, key=lambda p: ("_5." not in p.name, p.name))[0]  # the 5-core file first
    ext = ".jsonl" if fmt == "amazon23" else ".json"
    metas = [folder / f"meta_{category}{ext}{gz}" for gz in (".gz", "")]
    meta = next((m for m in metas if m.is_file()), None)
    if meta is None:
        raise CrabError(f"{folder}: {metas[0].name} not found (the item metadata of {category})")
    return category, reviews, meta


def open_text(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def read_lines(path: Path, block: int = 1 << 22) -> Iterator[bytes]:
    """The lines of a (gzipped) file, without their ends. A helper thread reads and decompresses blocks ahead (zlib
    releases the GIL, so that work runs beside the parsing); its errors are raised here."""
    blocks: queue.Queue = queue.Queue(maxsize=4)
    stop = threading.Event()

    def produce() -> None:
        try:
            with open_text(path) as f:
                while not stop.is_set() and (chunk := f.read(block)):
                    blocks.put(chunk)
            blocks.put(None)
        except BaseException as exc:  # handed to the reader
            blocks.put(exc)

    worker = threading.Thread(target=produce, name="crabrec-read", daemon=True)
    worker.start()
    tail = b""
    try:
        while (chunk := blocks.get()) is not None:
            if isinstance(chunk, EOFError | OSError | zlib.error):  # gzip's words for a cut or damaged file
                what = "cut short" if isinstance(chunk, EOFError) else "damaged"
                raise CrabError(f"{path}: unreadable, {what} ({reason(chunk)}); download it again") from None
            if isinstance(chunk, BaseException):
                raise chunk
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            yield from lines
        if tail:
            yield tail
    finally:
        stop.set()
        while worker.is_alive():  # let a blocked producer finish
            with contextlib.suppress(queue.Empty):
                blocks.get(timeout=0.1)


class Reviews:
    """Interactions read from a review file: parallel arrays of user, item and time, raw ids, and bad-line counts."""

    def __init__(self) -> None:
        self.user, self.item, self.time = array("q"), array("q"), array("d")
        self.user_ids: dict[str, int] = {}
        self.item_ids: dict[str, int] = {}
        self.bad: Counter[str] = Counter()
        self.lines = 0

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.bad.items()))
        return f"{sum(self.bad.values())} of {self.lines} review lines skipped ({kinds})"


def stream_reviews(path: Path, fmt: str) -> Reviews:
    """Every valid (user, item, time) of a review file, one line in memory at a time."""
    user_key, item_keys, time_key, unit = REVIEW_KEYS[fmt]
    out = Reviews()
    users, items = out.user_ids, out.item_ids
    add_user, add_item, add_time = out.user.append, out.item.append, out.time.append
    first_key = item_keys[0]
    n = 0
    try:
        for n, line in enumerate(read_lines(path), 1):  # noqa: B007 - n is the line count after the loop
            try:  # the fast path: a JSON object with the three fields, of the right types
                rec = parse_json(line)
                user, item, when = rec[user_key], rec[first_key], rec[time_key]
                fast = type(user) is str and type(item) is str and user and item and type(when) in NUMBER
            except (ValueError, KeyError, TypeError, IndexError):
                fast = False
            if not fast:
                found = _classify(line, out, user_key, item_keys, time_key)
                if found is None:
                    continue
                user, item, when = found
            u = users.get(user)
            if u is None:
                u = users[user] = len(users)
            i = items.get(item)
            if i is None:
                i = items[item] = len(items)
            add_user(u)
            add_item(i)
            add_time(when * unit)
        out.lines = n
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise CrabError(f"{path}: unreadable ({clip(str(exc), 120)}) after {n} lines") from None
    if not out.item:
        raise CrabError(f"{path}: no valid review line ({out.summary()})")
    return out


NUMBER = (int, float)


def _classify(line: bytes, out: Reviews, user_key: str, item_keys: tuple[str, ...], time_key: str):
    """The slow path of a line the fast path could not take: ``(user, item, time)``, or None after counting why it
    is skipped."""
    bad = out.bad
    try:
        rec = parse_json(line)
    except ValueError:
        bad["bad JSON" if line.strip() else "empty line"] += 1
        return None
    if not isinstance(rec, dict):
        bad["not an object"] += 1
        return None
    user = rec.get(user_key)
    item = next((rec[k] for k in item_keys if isinstance(rec.get(k), str) and rec[k]), None)
    when = rec.get(time_key)
    if not isinstance(user, str) or not user:
        bad[f"missing {user_key}"] += 1
    elif item is None:
        bad[f"missing {item_keys[0]}"] += 1
    elif when is None:
        bad[f"missing {time_key}"] += 1
    elif isinstance(when, bool) or not isinstance(when, int | float) or when != when:
        bad[f"non-numeric {time_key}"] += 1
    else:
        return user, item, float(when)
    return None


def clean(value: Any) -> str:
    """One text field: lists joined, HTML entities decoded, tags removed, whitespace collapsed."""
    if isinstance(value, list | tuple):
        value = ", ".join(clean(v) for v in value if not isinstance(v, list | tuple)) or ", ".join(
            clean(v) for v in value
        )
    elif isinstance(value, dict):
        value = value.get("brand") or value.get("Brand") or ""
    text = TAG.sub(" ", html.unescape(str(value or "")))
    return SPACE.sub(" ", text).strip()


def item_text(rec: dict[str, Any], fmt: str) -> dict[str, str]:
    details = rec.get("details") if isinstance(rec.get("details"), dict) else {}
    brand = rec.get("brand") or rec.get("store") or details.get("Brand", "")
    categories = rec.get("categories") if fmt != "amazon18" else rec.get("category")
    if fmt == "amazon14" and isinstance(categories, list) and categories and isinstance(categories[0], list):
        categories = categories[0]  # the first category path
    return {
        "title": clean(rec.get("title")),
        "description": clean(rec.get("description")),
        "brand": clean(brand),
        "categories": clean(categories or []),
    }


def stream_meta(path: Path, fmt: str, wanted: dict[str, int]) -> tuple[dict[str, dict[str, str]], Counter]:
    """Item text of the ``wanted`` items (others are skipped without being parsed twice)."""
    key = "parent_asin" if fmt == "amazon23" else "asin"
    out: dict[str, dict[str, str]] = {}
    bad: Counter[str] = Counter()
    for line in read_lines(path):
        rec = _meta_record(line, fmt) if line.strip() else {}
        if rec is None:
            bad["unparsable meta line"] += 1
            continue
        item = rec.get(key) or rec.get("asin")
        if isinstance(item, str) and item in wanted and item not in out:
            out[item] = item_text(rec, fmt)
    return out, bad


def _meta_record(line: bytes, fmt: str) -> dict[str, Any] | None:
    try:
        rec = parse_json(line)
    except ValueError:
        if fmt != "amazon14":
            return None
        try:  # amazon14 meta lines are Python literals ({'asin': ...}): parsed as data, never executed
            rec = ast.literal_eval(line.decode("utf-8", "replace"))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return rec if isinstance(rec, dict) else None


def usable_title(title: str) -> bool:
    """MiniOneRec's title filter: present, no ``<span id``, more than one character, at most 20 words."""
    return bool(title) and "<span id" not in title and len(title) > 1 and len(title.split()) <= 20


def month_start(text: str, end: bool = False) -> float:
    """``YYYY-MM`` -> the UTC timestamp of that month's first second (``end``: of the next month's)."""
    try:
        year, month = (int(x) for x in text.split("-"))
        if end:
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        return datetime(year, month, 1, tzinfo=timezone.utc).timestamp()
    except (ValueError, TypeError):
        raise CrabError(f"data.time_window: {text!r} is not a YYYY-MM month") from None


def _month(seconds: float) -> str:
    """Unix seconds -> ``YYYY-MM``."""
    return datetime.fromtimestamp(float(seconds), tz=timezone.utc).strftime("%Y-%m")


def load_raw_amazon(folder: Path, fmt: str, recipe: str, window: list[str] | None, name: str | None) -> Dataset:
    """One category's raw files -> a :class:`Dataset` prepared by ``recipe`` (k-core is applied by the caller)."""
    category, review_path, meta_path = raw_files(folder, fmt, name)
    reviews = stream_reviews(review_path, fmt)
    notes = [f"{review_path.name}: {reviews.summary()}"] if reviews.bad else []
    if reviews.bad:
        log.warning("%s", notes[0])
    meta, meta_bad = stream_meta(meta_path, fmt, reviews.item_ids)
    if meta_bad:
        notes.append(f"{meta_path.name}: {sum(meta_bad.values())} unparsable meta lines skipped")
    user, item, when = (np.frombuffer(a, dtype=t) for a, t in ((reviews.user, np.int64), (reviews.item, np.int64),
                                                                (reviews.time, np.float64)))  # fmt: skip
    item_names = list(reviews.item_ids)
    keep = np.ones(len(item), dtype=bool)
    passed = []  # what each filter keeps: noted, and said by the error when nothing is left
    if recipe == "minionerec":
        titled = np.array([usable_title(meta.get(i, {}).get("title", "")) for i in item_names], dtype=bool)
        keep &= titled[item]
        passed.append(f"{int(titled[item].sum()):,} of {len(item):,} reviews are of an item with a usable title")
    if window:  # both months included
        inside = (when >= month_start(window[0])) & (when < month_start(window[1], end=True))
        keep &= inside
        dated = f", the reviews run from {_month(when.min())} to {_month(when.max())}" if len(when) else ""
        passed.append(f"{int(inside.sum()):,} are dated {window[0]} to {window[1]} (data.time_window{dated})")
    if passed and not keep.all():
        notes.append(f"the {recipe} recipe kept {int(keep.sum()):,} of {len(keep):,} reviews: {'; '.join(passed)}")
        log.info("%s: %s", folder, notes[-1])
    no_meta = sum(1 for i in item_names if i not in meta)
    if no_meta:
        notes.append(f"{no_meta} reviewed items have no metadata line (empty text)")
    order = np.lexsort((when, user))  # by user, then time (stable: file order breaks ties)
    order = order[keep[order]]
    user, item, when = user[order], item[order], when[order]
    if recipe == "tiger":  # (user, item) duplicates: keep the first by time
        first = np.unique(user * len(item_names) + item, return_index=True)[1]
        first.sort()
        user, item, when = user[first], item[first], when[first]
    if not len(user):
        raise CrabError(
            f"{folder}: no interaction left after the {recipe} recipe's filters"
            + (f": {'; '.join(passed)}" if passed else "")
        )
    used = np.unique(item)
    remap = np.full(len(item_names), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    bounds = np.flatnonzero(np.diff(user)) + 1
    user_names = list(reviews.user_ids)
    starts = np.concatenate([[0], bounds])
    return Dataset(
        name=category,
        source=str(review_path),
        item_ids=[item_names[i] for i in used],
        item_text=[meta.get(item_names[i], {"title": "", "description": ""}) for i in used],
        users=[user_names[user[s]] for s in starts],
        sequences=np.split(remap[item], bounds),
        timestamps=np.split(when, bounds),
        notes=notes,
        split_hint="leave_one_out" if recipe == "tiger" else "global_time",
    )
