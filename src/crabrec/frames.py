"""Tables given to :func:`crabrec.run` as objects instead of files: a pandas DataFrame or a pyarrow Table as the
interactions (``data=``) or the item table (``items=``).

Each is stored in its run folder as Parquet, in a folder named after the tables' content
(``input/<digest>/<run name>.parquet``, ``<run name>.items.parquet``), and read from there as a file given on the
command line is read: a run made from a DataFrame is the run made from the same table in a file, and the run folder
holds what it was made from. A DataFrame's named index (``df.set_index("user_id")``) is kept as columns; an unnamed
one is left out. Without ``name=``, the run folder is named after the tables too (``frame-1f3a9c0b-quick``): another
table gets another folder, never one that holds other results. With ``name=``, the table is that run's data, and a
changed one recomputes what depends on it, as an edited data file does; the tables before it are kept until a stage
has finished on the new ones (:func:`tidy`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crabrec.data.objects import arrow, parquet_bytes
from crabrec.errors import CrabError

if TYPE_CHECKING:
    from crabrec.config import RunConfig
    from crabrec.runner import RunOptions

FOLDER = "input"  # a run folder's entry that holds the tables given as objects


@dataclasses.dataclass(frozen=True)
class Stored:
    """Where :func:`resolve` put a call's tables: the run's config, the tables' folder, and whether this call made
    it (an earlier call's holds the same tables)."""

    config: RunConfig
    folder: Path
    made: bool


def resolve(options: RunOptions, tables: dict[str, Any]) -> Stored:
    """The run config of ``options`` with the table objects ``tables`` as its ``data``/``items`` (by argument name),
    written to the run folder's :data:`FOLDER` once the config is settled (a refused run writes nothing)."""
    from crabrec.io import atomic_path
    from crabrec.pipeline import run_lock
    from crabrec.runner import PRESET_NAMES

    if options.run_dir is not None:
        given = ", ".join(f"{name}=" for name in tables)
        raise CrabError(f"{options.run_dir}: a run directory fixes its config; drop {given} (overrides apply)")
    stored = {name: parquet_bytes(arrow(value, name)) for name, value in tables.items()}
    digest = hashlib.sha256(b"".join(hashlib.sha256(b).digest() for b in stored.values())).hexdigest()[:12]
    preview = options.preview()  # the run a data file (or the config) names; a table of data names its own
    name, stem = options.name, preview.name  # the data's file is named as the run is: the report names the dataset
    if "data" in stored and name is None and preview.name in PRESET_NAMES:
        stem = f"frame-{digest[:8]}"
        name = f"{stem}-{preview.preset}"
    folder = Path(preview.runs_dir) / (name or preview.name) / FOLDER / digest  # one folder a content: see tidy
    files = {"data": f"{stem}.parquet", "items": f"{stem}.items.parquet" if "data" in stored else "items.parquet"}
    paths = {key: str(folder / files[key]) for key in stored}
    cfg = dataclasses.replace(options, name=name, **paths).resolve()
    with run_lock(cfg.run_dir):  # not into someone else's folder, nor while another process runs there
        made = not folder.is_dir()
        for key, data in stored.items():
            path = Path(paths[key])
            if not (path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data):
                with atomic_path(path) as tmp:
                    tmp.write_bytes(data)
    return Stored(cfg, folder, made)


def as_given(exc: CrabError, cfg: RunConfig, tables: dict[str, Any]) -> CrabError:
    """``exc`` about a stored table named as the argument it was given as (``data= (rows numbered from 1): row 6:
    ...``), not by the file :func:`tidy` takes away when no stage finished on it."""
    text = str(exc)
    for name, key in (("data", "path"), ("items", "item_table")):
        path = getattr(cfg.data, key)
        if name in tables and path:
            label = f"{name}= (rows numbered from 1)"
            text = text.replace(str(Path(path).resolve()), label).replace(path, label)
    return CrabError(text)


def given_to(run_dir: Path, old: str, new: str) -> bool:
    """Whether ``old`` and ``new`` are both tables given to the run ``run_dir`` as objects (an earlier call's and
    this one's): a changed table of a named run is its data changed, not another run's data."""
    inside = (Path(run_dir) / FOLDER).resolve()
    return all(Path(p).resolve().is_relative_to(inside) for p in (old, new))


def tidy(stored: Stored) -> None:
    """After a run on tables given as objects: once the run's saved config reads them (it is saved when a stage
    finishes), the tables given before them go; while it does not, tables this call stored go again (and the run
    folder, when that leaves it empty), so a call that finished no stage leaves the run as it was."""
    import shutil

    from crabrec.config_paths import readable, same_path, saved_base, saved_values
    from crabrec.pipeline import run_lock

    run_dir = stored.config.run_dir
    with contextlib.suppress(CrabError), run_lock(run_dir):  # (a process that took the run since keeps it as it is)
        saved = saved_values(run_dir / "config.yaml") or {}
        data = saved.get("data") if isinstance(saved.get("data"), dict) else {}
        read = [readable(v, saved_base(run_dir, saved)) for v in (data.get("path"), data.get("item_table"))
                if isinstance(v, str) and v]  # fmt: skip
        if any(same_path(str(stored.folder), str(Path(p).parent)) for p in read):
            gone = [entry for entry in stored.folder.parent.iterdir() if entry != stored.folder]
        else:
            gone = [stored.folder] if stored.made and stored.folder.is_dir() else []
        for entry in gone:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        for empty in (stored.folder.parent, run_dir):
            if empty.is_dir() and not any(empty.iterdir()):
                empty.rmdir()
