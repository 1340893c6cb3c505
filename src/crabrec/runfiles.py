"""Where every artifact of a run lives, and the loaders that read them back (each checks what it reads).

A run directory holds ``data/`` (splits, popularity, items), ``embeddings.npy``, ``sid/`` (the base codebook),
``crab/`` (the rebalanced codebook), ``models/<method>/`` (weights, ``metrics.json``, ``rankings.parquet``),
``stages/<stage>.json`` (cache state) and the reports. Nothing else in the package spells these paths out.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from crabrec.errors import CrabError, reason
from crabrec.io import load_npz, read_json

T = TypeVar("T")


class RunFiles:
    """Paths of one run directory's artifacts, and checked loaders for them."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def __truediv__(self, rel: str) -> Path:
        return self.root / rel

    # -- paths ------------------------------------------------------------------------------------------------------
    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def splits(self) -> Path:
        return self.root / "data" / "splits.npz"

    @property
    def popularity(self) -> Path:
        return self.root / "data" / "popularity.npz"

    @property
    def items(self) -> Path:
        return self.root / "data" / "items.json"

    @property
    def users(self) -> Path:
        """Each user's id and whole known sequence (runs made before crabrec kept them lack it)."""
        return self.root / "data" / "users.npz"

    @property
    def data_stats(self) -> Path:
        return self.root / "data" / "stats.json"

    @property
    def embeddings(self) -> Path:
        return self.root / "embeddings.npy"

    @property
    def embeddings_partial(self) -> Path:
        """The finished batches of an interrupted encoding, which the next one goes on from."""
        return self.root / "embeddings.partial.npz"

    @property
    def embedding_items(self) -> Path:
        return self.root / "embeddings.items.json"

    @property
    def new_items_cache(self) -> Path:
        """Encodings of the tables of new items this run was loaded with (:mod:`crabrec.new_items`), by content."""
        return self.root / "new-items"

    def codebook(self, rebalanced: bool = False) -> Path:
        """The base codebook (``sid/``) or CRAB's rebalanced one (``crab/``)."""
        return self.root / ("crab" if rebalanced else "sid") / "codebook.json"

    def sid_file(self, name: str, rebalanced: bool = False) -> Path:
        """Another file beside a codebook: ``index.json``, ``stats.json``, ``token_map.json``, ``report.json`` ..."""
        return self.codebook(rebalanced).with_name(name)

    @property
    def frontier(self) -> Path:
        """``frontier/``: ``frontier.{json,csv,md,svg}`` and one sibling run per point, ``<method>/<setting>/``."""
        return self.root / "frontier"

    def frontier_point(self, method: str, setting: str) -> Path:
        return self.frontier / method / setting

    def model_dir(self, method: str) -> Path:
        """``models/<method>/``: ``model/`` (weights), ``metrics.json``, ``rankings.parquet``, summaries."""
        return self.root / "models" / method

    def weights(self, method: str) -> Path:
        return self.model_dir(method) / "model"

    def metrics(self, method: str) -> Path:
        return self.model_dir(method) / "metrics.json"

    def rankings(self, method: str) -> Path:
        return self.model_dir(method) / "rankings.parquet"

    def train_summary(self, method: str) -> Path:
        return self.model_dir(method) / "train_summary.json"

    def state(self, stage: str) -> Path:
        return self.root / "stages" / f"{stage}.json"

    # -- loaders ----------------------------------------------------------------------------------------------------
    def load_splits(self):
        from crabrec.data.dataset import Splits

        return Splits.load(self.splits)

    def load_popularity(self):
        """Item frequencies, popularity groups and the popular flag written by the ``data`` stage."""
        from crabrec.data.popularity import Popularity

        arrays = load_npz(self.popularity)
        need = ("freq", "group", "popular")
        if any(k not in arrays for k in need) or len({len(arrays[k]) for k in need}) != 1:
            raise CrabError(f"{self.popularity}: expected arrays freq, group, popular of one length; re-run `data`")
        n_groups = int(arrays["n_groups"]) if "n_groups" in arrays else int(arrays["group"].max(initial=0)) + 1
        return Popularity(arrays["freq"], arrays["group"], arrays["popular"].astype(bool), n_groups)

    def load_items(self) -> dict[str, Any]:
        items = read_checked(self.items, dict)
        if not isinstance(items.get("item_ids"), list):
            raise CrabError(f"{self.items}: expected an object with an `item_ids` list; re-run `data`")
        return items

    def load_users(self):
        """The run's :class:`~crabrec.data.users.UserHistories`."""
        from crabrec.data.users import UserHistories

        if not self.users.is_file():
            raise CrabError(
                f"{self.root}: this run was made before crabrec kept each user's history ({self.users.name}); give "
                f"the history instead, or `crabrec run {self.root} --force data` to write it (its models retrain)"
            )
        return UserHistories.load(self.users, self.n_items())

    def load_codebook(self, rebalanced: bool = False):
        from crabrec.sid.codebook import Codebook

        path = self.codebook(rebalanced)
        if not path.is_file():  # the stage that makes it has not run here
            rel = path.relative_to(self.root)
            raise CrabError(
                f"{self.root}: CRAB has not run here (no rebalanced codebook, {rel}); "
                f"`crabrec train {self.root} --method crab` runs it"
                if rebalanced
                else f"{self.root}: no codebook in this run ({rel}); "
                f"`crabrec run {self.root} --until tokenize` makes it"
            )
        return Codebook.load(path)

    def has_embeddings(self) -> bool:
        """Whether the run embedded its item text (an ids-only dataset has no ``embeddings.npy``)."""
        return self.embeddings.is_file() or "skipped" not in read_checked(self.embedding_items, dict)

    def load_metrics(self, method: str) -> dict[str, Any] | None:
        """A method's ``metrics.json``, or None when it has not been evaluated."""
        path = self.metrics(method)
        return read_checked(path, dict) if path.is_file() else None

    def load_rankings(self, method: str, test=None):
        """A method's ``rankings.parquet`` (columns row, user, target, items, scores), checked; with ``test`` (the
        run's test samples), also that its rows are test rows with their targets (not another run's rankings, nor a
        file of answers written over it)."""
        import pandas as pd

        path = self.rankings(method)
        if not path.is_file():
            raise CrabError(f"{path}: missing; run `crabrec evaluate {self.root} --method {method}` first")
        frame = load_checked(path, lambda: pd.read_parquet(path))
        if any(c not in frame.columns for c in RANKING_COLUMNS):
            raise CrabError(
                f"{path}: expected columns {', '.join(RANKING_COLUMNS)}; re-run the stage that writes it (--force)"
            )
        if test is not None:
            rows = frame["row"].to_numpy()
            inside = len(rows) == 0 or (rows.min() >= 0 and rows.max() < len(test))
            if not inside or not np.array_equal(np.asarray(test.target)[rows], frame["target"].to_numpy()):
                raise CrabError(
                    f"{path}: not rankings of this run's test rows; re-run `crabrec evaluate {self.root} --method "
                    f"{method} --force`"
                )
        return frame

    def load_state(self, stage: str) -> dict[str, Any] | None:
        """A stage's cache state, or None when it has not finished (or the file is not a state)."""
        path = self.state(stage)
        try:
            state = read_json(path)
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def check_written(self, stage: str) -> None:
        """A one-line error when an artifact of ``stage`` is no longer the file the stage wrote here (its content hash
        differs from the one in ``stages/<stage>.json``: changed, or copied from another run). States written
        before hashes were recorded are not checked."""
        from crabrec.io import content_hash

        written = (self.load_state(stage) or {}).get("artifacts")
        for rel, digest in written.items() if isinstance(written, dict) else []:
            path = self.root / rel
            if path.exists() and content_hash(path) != digest:
                raise CrabError(
                    f"{path}: not the file the {stage} stage wrote in this run (changed, or copied from another "
                    "run); re-run that stage with --force to replace it"
                )

    def n_items(self) -> int:
        return int(len(self.load_popularity().freq))


RANKING_COLUMNS = ("row", "user", "target", "items", "scores")  # as crabrec.evaluation writes them


def run_folder(path: str | Path) -> Path:
    """``path`` as a run folder (one holding ``config.yaml``), else a one-line error saying what it is instead and
    what was likely meant: a data file (``--data``), a run under ``runs/``, one of a folder of runs."""
    from crabrec.config import RunConfig

    root = Path(path)
    if (root / "config.yaml").is_file():
        return root
    if root.is_file():
        raise CrabError(f"{path}: a file, not a run folder (one holding config.yaml); a data file goes with --data")
    if root.is_dir():
        held = [p.name for p in sorted(root.iterdir()) if (p / "config.yaml").is_file()]
        if held:
            shown = ", ".join(held[:3]) + (", …" if len(held) > 3 else "")
            raise CrabError(f"{path}: a folder of runs ({shown}), not a run; name one of them, e.g. {root / held[0]}")
        raise CrabError(f"{path}: not a run folder (no config.yaml); `crabrec run` makes one")
    runs_dir = Path(RunConfig.model_fields["runs_dir"].default)
    if len(root.parts) == 1 and (runs_dir / root / "config.yaml").is_file():
        raise CrabError(f"{path}: no such folder here; the run of that name is {runs_dir / root}")
    raise CrabError(f"{path}: no such run folder; `crabrec runs` lists the runs in {runs_dir}/")


def read_checked(path: Path, kind: type) -> Any:
    """A JSON artifact that must hold a ``kind`` (dict or list): anything else is a one-line error naming it."""
    try:
        value = read_json(path)
    except FileNotFoundError:
        raise CrabError(f"{path}: missing; run the stage that writes it") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise CrabError(
            f"{path}: unreadable JSON ({reason(exc)}); re-run the stage that writes it with --force"
        ) from None
    if not isinstance(value, kind):
        raise CrabError(f"{path}: expected a JSON {kind.__name__}, got {type(value).__name__}; re-run with --force")
    return value


def load_checked(path: Path, load: Callable[[], T]) -> T:
    """``load()`` of a saved artifact (weights, a parquet table ...); whatever a corrupt or foreign file raises becomes
    a one-line error naming ``path``."""
    try:
        return load()
    except CrabError:
        raise
    except Exception as exc:  # the file's content is the cause, whatever the library raises for it
        raise CrabError(
            f"{path}: unusable artifact ({reason(exc)}); re-run the stage that writes it with --force"
        ) from None


def first_rows(samples, limit: int | None):
    """The first ``limit`` rows of ``samples`` (all of them when ``limit`` is None)."""
    return samples if limit is None else samples.take(np.arange(min(limit, len(samples))))


LINKS_MAY_BE_REFUSED = os.name == "nt"  # Windows lets only some users make links: a shared artifact is copied there
SHARED = ("data", "embeddings.npy", "embeddings.items.json", "sid", "models/mor", "models/tiger")
SHARED_STAGES = ("data", "embed", "tokenize", "train", "evaluate", "tiger", "tiger-eval")


def link_base(
    base: Path, target: Path, shared: tuple[str, ...] = SHARED, stages: tuple[str, ...] = SHARED_STAGES
) -> None:
    """Make ``target`` a run that shares the base run's finished upstream artifacts (symlinks) and stage states. An
    artifact the base run does not have is not linked (``embeddings.npy`` of data without item text: the embed stage
    skipped it); the copied stage states say what each stage wrote, and a stage whose output is missing runs again."""
    for rel in shared:
        src, dst = base / rel, target / rel
        if not src.exists():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            try:
                os.symlink(src.resolve(), dst, target_is_directory=src.is_dir())
            except OSError:
                if not LINKS_MAY_BE_REFUSED:
                    raise
                (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    for name in stages:
        state, copy = RunFiles(base).state(name), RunFiles(target).state(name)
        if state.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(state.read_bytes())
