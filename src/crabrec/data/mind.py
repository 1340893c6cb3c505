"""The ``mind`` layout: Microsoft's MIND news-recommendation data as it unpacks (or still zipped).

Each part (``MINDsmall_train``, ``MINDsmall_dev``, ``MINDlarge_test`` ...) is a folder or ``.zip`` holding two
tab-separated files without a header:

- ``behaviors.tsv``: impression id, user id, time (``11/15/2019 8:55:22 AM``), the user's click history before the
  logged period (news ids separated by spaces; may be empty), and the impression's news with their labels
  (``N55689-1 N35729-0``; a test set's carry no label);
- ``news.tsv``: news id, category, subcategory, title, abstract, URL, title entities, abstract entities.

A user's interactions are their click history, in its order, then the news they clicked (label 1), in time order
(several clicks of one impression: in its order). The history carries no times, so the data has none: it is ordered,
as the Amazon layouts are. MIND gives a user the same history in every impression; where it differs, the earliest
impression's is read (and the log says for how many users). An item's text is its ``title``, its abstract as
``description``, and its ``category`` and ``subcategory``. The entity embeddings are not read.

``--data`` takes a part, its ``behaviors.tsv`` (under any name, ``news.tsv`` beside it), or a folder holding several
parts (the training and validation weeks then make one sequence per user; a news item listed in several parts takes
its first listing's text). A zip beside the folder it unpacks to is read once.
"""

from __future__ import annotations

import csv
import io
import logging
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from crabrec.config import DataConfig
from crabrec.data.dataset import Dataset
from crabrec.data.loaders import _group_interactions
from crabrec.data.reading import UNREADABLE, members_by_name
from crabrec.errors import CrabError, clip, reason
from crabrec.io import not_found

log = logging.getLogger("crabrec")

BEHAVIORS, NEWS = "behaviors.tsv", "news.tsv"
FIELDS = ("impression id", "user id", "time", "history", "impressions")
TIME_FORMAT = "%m/%d/%Y %I:%M:%S %p"
_TIME = re.compile(r"\d{1,2}/\d{1,2}/\d{4} \d{1,2}:\d{2}:\d{2} [AP]M")
CHUNK = 200_000  # behaviors rows read at a time: MINDlarge's 2.2M rows repeat each user's history in every row


class Part:
    """One unpacked folder or ``.zip`` of MIND (its files found by name, in whatever folder inside a zip)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.archive = zipfile.ZipFile(path) if path.is_file() and zipfile.is_zipfile(path) else None
        if self.archive is not None:
            self.members = members_by_name(self.archive)
        else:  # a folder, or a behaviors file (under any name) with news.tsv beside it
            folder, behaviors = (path, path / BEHAVIORS) if path.is_dir() else (path.parent, path)
            found = {BEHAVIORS: behaviors, NEWS: folder / NEWS}
            self.members = {name: str(p) for name, p in found.items() if p.is_file()}

    def close(self) -> None:
        if self.archive is not None:
            self.archive.close()

    def where(self, name: str) -> str:
        return f"{self.path}/{self.members[name]}" if self.archive is not None else self.members[name]

    def text(self, name: str) -> io.TextIOBase:
        raw = self.archive.open(self.members[name]) if self.archive is not None else open(self.members[name], "rb")  # noqa: SIM115
        return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")


def behaviors_line(line: str) -> bool:
    """Whether a line is a row of MIND's ``behaviors.tsv``: five tab-separated fields, the third a MIND time."""
    fields = line.rstrip("\r\n").split("\t")
    return len(fields) == 5 and bool(_TIME.fullmatch(fields[2].strip())) and bool(fields[4].strip())


def _first_line(part: Part) -> str:
    with part.text(BEHAVIORS) as f:
        return f.readline(100_000)


def _part(path: Path) -> Part | None:
    """The MIND part at ``path`` (a folder or zip holding ``behaviors.tsv``, or such a file itself), else None."""
    try:
        if path.is_file() and not zipfile.is_zipfile(path):
            part = Part(path) if path.suffix.lower() == ".tsv" else None
        elif path.is_file() or (path / BEHAVIORS).is_file():
            part = Part(path)
        else:
            return None
        if part is None or BEHAVIORS not in part.members:
            return None
        if behaviors_line(_first_line(part)):
            return part
        part.close()
    except (*UNREADABLE, UnicodeDecodeError):
        pass  # not readable as MIND: the other layouts say why
    return None


def mind_parts(path: Path) -> list[Part]:
    """The MIND parts ``path`` names: itself, or the folders and zips directly inside it (none: not MIND)."""
    part = _part(path)
    if part is not None:
        return [part]
    if not path.is_dir():
        return []
    children = sorted(c for c in path.iterdir() if not c.name.startswith("."))
    unpacked = {c.name for c in children if c.is_dir()}  # MINDsmall_train/ beside MINDsmall_train.zip: read once
    children = [c for c in children if not (c.is_file() and c.suffix.lower() == ".zip" and c.stem in unpacked)]
    return [p for c in children if (p := _part(c)) is not None]


def is_mind(path: Path) -> bool:
    parts = mind_parts(path)
    for part in parts:
        part.close()
    return bool(parts)


def load_mind(path: Path, cfg: DataConfig) -> Dataset:
    parts = mind_parts(path)
    if not parts:
        raise CrabError(
            f"{path}: not MIND data (expected behaviors.tsv and news.tsv, or folders or zips holding them); "
            "set --format"
        )
    try:
        return _load(path, parts, cfg)
    except UNREADABLE as exc:
        raise CrabError(f"{path}: cannot read ({reason(exc)})") from None
    finally:
        for part in parts:
            part.close()


def _load(path: Path, parts: list[Part], cfg: DataConfig) -> Dataset:
    read = [_behaviors(part) for part in parts]
    starts = [r[0]["time"].min() for r in read]  # parts in time order (the training week before the validation one)
    for rank, n in enumerate(sorted(range(len(read)), key=lambda n: (starts[n], n))):
        read[n][0]["part"] = read[n][1]["part"] = rank
    notes = [
        f"{part.where(BEHAVIORS)}: its impressions carry no click labels (a test set): only its histories are read"
        for part, (_, _, _, unlabelled) in zip(parts, read, strict=True)
        if unlabelled
    ]
    seen = pd.concat([r[2] for r in read], ignore_index=True)
    differ = int((seen.groupby("user", sort=False)["history"].nunique() > 1).sum())
    if differ:
        notes.append(f"{differ:,} users have different histories in different impressions; the earliest is read")
    first = pd.concat([r[0] for r in read], ignore_index=True)
    first = first.sort_values(["time", "part", "line"], kind="stable").drop_duplicates("user")
    ids = first["history"].str.split()
    history = pd.DataFrame({"user": first["user"].to_numpy().repeat(ids.str.len().to_numpy())})
    history["item"] = ids.explode().dropna().to_numpy()
    history[["time", "part", "line"]] = (-np.inf, -1, 0)  # before every click
    history["pos"] = history.groupby("user", sort=False).cumcount()
    clicks = pd.concat([r[1] for r in read], ignore_index=True)
    inter = pd.concat([history, clicks], ignore_index=True)
    where = parts[0].where(BEHAVIORS) if len(parts) == 1 else str(path)
    if inter.empty:
        raise CrabError(f"{where}: no interactions (every history is empty and no impression has a click)")
    inter = inter.sort_values(["time", "part", "line", "pos"], kind="stable")  # each user's rows in this order
    items = _news(path, parts, cfg.item_table)
    ds = _group_interactions(_name(path), path, inter, "user", "item", None, items, where, cfg.missing_items == "drop")
    ds.notes.extend(notes)
    for note in notes:
        log.info("%s: %s", path, note)
    log.info("%s: MIND, %d part(s): %s history and %s click interactions", path, len(parts), f"{len(history):,}",
             f"{len(clicks):,}")  # fmt: skip
    return ds


def _name(path: Path) -> str:
    """The dataset's name: the zip's or the folder's (the folder holding a behaviors file given alone)."""
    if path.is_file():
        return path.stem if path.suffix.lower() == ".zip" else path.resolve().parent.name
    return path.resolve().name


def _behaviors(part: Part) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, bool]:
    """One part's ``behaviors.tsv``: each user's earliest history (with its impression's time and line), the clicks
    (user, item, time, line, place in the impression), every row's user and history hash, and whether its
    impressions carry no labels."""
    where = part.where(BEHAVIORS)
    hist, clicks, seen, labelled, unlabelled = [], [], [], 0, 0
    try:
        with part.text(BEHAVIORS) as f:
            reader = pd.read_csv(
                f, sep="\t", header=None, names=range(6), dtype=str, keep_default_na=False, quoting=csv.QUOTE_NONE,
                chunksize=CHUNK,
            )  # fmt: skip
            start = 1
            for chunk in reader:
                chunk.index = pd.RangeIndex(start, start + len(chunk))  # each row's line in the file
                start += len(chunk)
                user, history, time = _rows(chunk, where)
                seen.append(pd.DataFrame({"user": user, "history": pd.util.hash_pandas_object(history, index=False)}))
                earliest = pd.DataFrame({"user": user, "history": history, "time": time, "line": chunk.index})
                hist.append(earliest.sort_values(["time", "line"], kind="stable").drop_duplicates("user"))
                pairs = chunk[4].str.split().explode().dropna()
                label = pairs.str[-2:]
                labelled += int(label.isin(("-0", "-1")).sum())
                unlabelled += int((~label.isin(("-0", "-1"))).sum())
                picked = pairs[(label == "-1").to_numpy()]
                rows = picked.index.to_numpy()
                clicks.append(pd.DataFrame({
                    "user": user.loc[rows].to_numpy(), "item": picked.str[:-2].to_numpy(),
                    "time": time.loc[rows].to_numpy(), "line": rows,
                    "pos": picked.groupby(level=0).cumcount().to_numpy(),
                }))  # fmt: skip
    except UnicodeDecodeError:
        raise CrabError(f"{where}: not UTF-8 text (MIND's files are); re-save it as UTF-8") from None
    except pd.errors.ParserError as exc:
        raise CrabError(f"{where}: expected {len(FIELDS)} tab-separated fields ({reason(exc)})") from None
    except pd.errors.EmptyDataError:
        raise CrabError(f"{where}: the file is empty") from None
    if labelled and unlabelled:
        raise CrabError(f"{where}: some impressions carry a label (-0 or -1) and others none; expected one or the "
                        "other")  # fmt: skip
    first = pd.concat(hist, ignore_index=True).sort_values(["time", "line"], kind="stable").drop_duplicates("user")
    return first, pd.concat(clicks, ignore_index=True), pd.concat(seen, ignore_index=True), bool(unlabelled)


def _rows(chunk: pd.DataFrame, where: str) -> tuple[pd.Series, pd.Series, pd.Series]:
    """The rows' users, histories and times (seconds), each row checked: five fields, a user, a MIND time."""
    bad = (chunk[4].str.strip() == "") | (chunk[5] != "")  # a field short (read as empty), or one too many
    if bad.any():
        line = int(bad.idxmax())
        got = "\t".join(chunk.loc[line]).rstrip("\t")
        raise CrabError(
            f"{where}: line {line}: expected {len(FIELDS)} tab-separated fields ({', '.join(FIELDS)}), got "
            f"{clip(repr(got))}"
        )
    user = chunk[1].str.strip()
    if (user == "").any():
        line = int((user == "").idxmax())
        raise CrabError(f"{where}: line {line}: no user id")
    time = pd.to_datetime(chunk[2].str.strip(), format=TIME_FORMAT, errors="coerce")
    if time.isna().any():
        line = int(time.isna().idxmax())
        raise CrabError(
            f"{where}: line {line}: time {clip(repr(chunk.at[line, 2]))} is not written as MIND writes it "
            "(11/15/2019 8:55:22 AM)"
        )
    seconds = pd.Series(time.to_numpy().astype("datetime64[s]").astype(np.float64), index=chunk.index)
    return user, chunk[3].str.strip(), seconds


def _news(path: Path, parts: list[Part], item_table: str | None) -> dict[str, dict[str, str]]:
    """News id -> ``{"title", "description" (the abstract), "category", "subcategory"}`` from every part's
    ``news.tsv`` (the first listing of an id wins), or from ``--items``."""
    if item_table:
        if not Path(item_table).is_file():
            raise not_found(item_table)
        sources = [(item_table, lambda: open(item_table, encoding="utf-8-sig", newline=""))]  # noqa: SIM115
    else:
        sources = [(part.where(NEWS), lambda part=part: part.text(NEWS)) for part in parts if NEWS in part.members]
        if not sources:
            raise CrabError(
                f"{path}: no {NEWS} beside {BEHAVIORS} (MIND ships one in each part); put it there or give it with "
                "--items"
            )
    items: dict[str, dict[str, str]] = {}
    for where, opener in sources:
        try:
            with opener() as f:
                table = pd.read_csv(
                    f, sep="\t", header=None, names=range(8), usecols=range(5), dtype=str, keep_default_na=False,
                    quoting=csv.QUOTE_NONE,
                )  # fmt: skip
        except UnicodeDecodeError:
            raise CrabError(f"{where}: not UTF-8 text (MIND's files are); re-save it as UTF-8") from None
        except pd.errors.ParserError as exc:
            raise CrabError(f"{where}: expected 8 tab-separated fields (id, category, subcategory, title, abstract, "
                            f"URL, title entities, abstract entities) ({reason(exc)})") from None  # fmt: skip
        except pd.errors.EmptyDataError:
            raise CrabError(f"{where}: the file is empty") from None
        table = table.fillna("")
        bad = (table[0].str.strip() == "") | (table[3].str.strip() == "")
        if bad.any():
            line = int(bad.to_numpy().argmax()) + 1
            raise CrabError(f"{where}: line {line}: expected a news id and a title (id, category, subcategory, title, "
                            "abstract ...)")  # fmt: skip
        for raw_id, category, sub, title, abstract in table.itertuples(index=False):
            items.setdefault(raw_id.strip(), {
                "title": title.strip(), "description": abstract.strip(), "category": category.strip(),
                "subcategory": sub.strip(),
            })  # fmt: skip
    return items
