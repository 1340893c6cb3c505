"""Where the relative file paths of a run's config are read from: the run's base folder, the current folder when the
run was made, whichever folder a later command on the run starts in.

A run's ``config.yaml`` keeps each input path (``data.path``, ``data.item_table``, ``tokenize.import_path``, a local
``embed.encoder`` or ``train.backbone``) as it was written, and records the base folder as ``paths_from``: relative
to the run folder when the run lies inside it (a project moved or copied as a whole keeps working), else absolute. A
command started elsewhere joins each relative path to the base folder, so it reads the run's own files, never files
of the same names beside it; the cache keys keep the spelling as written, so nothing is recomputed for it. A path
that starts with ``~`` is read from the home folder, in a config file and a ``--set`` value as on a shell's line.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from crabrec.config import INPUT_FILES, RunConfig, dotted_get, dotted_set, validate_config
from crabrec.errors import CrabError

KEY = "paths_from"  # the base folder in a run's saved config
ALWAYS_PATHS = frozenset({"data.path", "data.item_table", "tokenize.import_path"})  # the others may name a model


def same_path(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one file or folder (the same absolute path where either is missing)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def readable(path: str, base: str | None) -> str:
    """``path`` as a path to read: ``~`` is the home folder, and a relative path is joined to ``base`` (None: left
    relative to the current folder)."""
    path = os.path.expanduser(path) if path.startswith("~") else path
    return os.path.join(base, path) if base is not None and not os.path.isabs(path) else path


def anchor(values: dict[str, Any], base: str | None) -> dict[str, tuple[str, str]]:
    """Each input path of ``values`` (nested, changed in place) as a path to read: ``~`` is the home folder, and a
    relative path is joined to ``base`` (None: left relative to the current folder); a relative encoder or backbone
    that is no folder there stays a name (the bundled encoder's). -> ``{key: (the path, as written)}``."""
    joined: dict[str, tuple[str, str]] = {}
    for key in sorted(INPUT_FILES):
        value = dotted_get(values, key)
        if not isinstance(value, str) or not value:
            continue
        path = readable(value, base)
        spelled_as_path = os.path.isabs(value) or value.startswith("~")
        if key not in ALWAYS_PATHS and not spelled_as_path and not os.path.exists(path):
            continue  # a model's name
        if path != value:
            dotted_set(values, key, path)
            joined[key] = (path, value)
    return joined


def from_values(values: dict[str, Any], validate: Callable[[dict[str, Any]], RunConfig] = validate_config) -> RunConfig:
    """A config from its values with their ``paths_from`` (absolute): relative input paths read from there when
    that is not the current folder, each remembered as written (see :func:`as_written`)."""
    values = copy.deepcopy(values)  # the caller's values stay as they were
    base = values.pop(KEY, None)
    elsewhere = isinstance(base, str) and base and not same_path(base, os.getcwd())
    joined = anchor(values, base if elsewhere else None)
    cfg = validate(values)
    cfg._paths_from = base if isinstance(base, str) and base else None
    cfg._written = joined
    return cfg


def as_written(cfg: RunConfig, key: str, value: Any) -> Any:
    """``value``, input setting ``key``'s path (or a path under it), spelled as the run's config writes that
    setting: cache keys, the saved config and what artifacts record do not depend on the folder a command started
    in."""
    joined, written = cfg._written.get(key, (None, None))
    ok = isinstance(value, str) and joined and written and value.startswith(joined)
    return written + value[len(joined) :] if ok else value


def values_of(cfg: RunConfig) -> dict[str, Any]:
    """``cfg``'s values as written, with its base folder (absolute): what :func:`from_values` rebuilds it from (in
    a worker process, or with a setting changed)."""
    out = cfg.model_dump(mode="json")
    for key in cfg._written:
        dotted_set(out, key, as_written(cfg, key, dotted_get(out, key)))
    out[KEY] = cfg._paths_from or os.getcwd()
    return out


def file_values(cfg: RunConfig) -> dict[str, Any]:
    """The values a run's ``config.yaml`` holds: :func:`values_of`, with ``paths_from`` after ``runs_dir`` and
    relative to the run folder when the run lies inside the base folder."""
    values = values_of(cfg)
    base, run = Path(values.pop(KEY)).resolve(), cfg.run_dir.resolve()
    where = os.path.relpath(base, run) if base in run.parents else str(base)
    out: dict[str, Any] = {}
    for key, value in values.items():
        out[key] = value
        if key == "runs_dir":
            out[KEY] = where
    return out


def saved_base(run_dir: Path, values: dict[str, Any]) -> str:
    """The folder the relative paths of a run's saved config (``values``) are read from: its ``paths_from``
    (relative to the run folder), or for a run saved without one, the folder its relative ``runs_dir`` was written
    from, or the base of the run holding it (a frontier point, an analysis setting); else the current folder."""
    run = run_dir.resolve()
    given = values.get(KEY)
    if isinstance(given, str) and given:
        return os.path.normpath(os.path.join(run, given))
    runs_dir = values.get("runs_dir")
    if isinstance(runs_dir, str) and runs_dir and not os.path.isabs(runs_dir):
        parts = Path(runs_dir).parts
        holder = run.parent.parts
        if ".." not in parts and len(parts) < len(holder) and holder[len(holder) - len(parts) :] == parts:
            return str(Path(*holder[: len(holder) - len(parts)]))
    for parent in run.parents:
        saved = saved_values(parent / "config.yaml")
        if saved is not None:
            return saved_base(parent, saved)
    return os.getcwd()


def saved_values(path: Path) -> dict[str, Any] | None:
    """A run's saved config as read (a mapping naming the run and its runs folder), or None."""
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return values if isinstance(values, dict) and "name" in values and "runs_dir" in values else None


def not_the_runs_data(target: Path, run_dir: str | Path, option: str) -> None:
    """A one-line error when writing ``target`` (given as ``option``) would replace the run's data or item table, put
    a file inside its data folder, or write into a run folder, this one or another (its ``rankings.parquet``, its
    config: ``crabrec recommend --output``, ``crabrec data export``)."""
    from crabrec.config import load_saved

    goal = target.resolve()
    for folder in goal.parents:
        if saved_values(folder / "config.yaml") is not None:
            raise CrabError(
                f"{option} {target}: is inside the run {folder}, whose files crabrec writes; write elsewhere"
            )
    try:
        data = load_saved(run_dir).data
    except CrabError:  # not a run: the command says so when it loads it
        return
    for key, given in (("data.path", data.path), ("data.item_table", data.item_table)):
        source = Path(given).resolve() if given else None
        if source is not None and (goal == source or source.is_dir() and source in goal.parents):
            where = "is" if goal == source else "is inside"
            raise CrabError(f"{option} {target}: {where} this run's data ({key} {given}); write elsewhere")
