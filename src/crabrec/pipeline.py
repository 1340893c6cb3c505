"""Stage orchestration: a stage is keyed by the settings it reads and its inputs' keys, and skipped when cached.

Each stage declares the settings it reads (``Stage.reads``: dotted keys, or a whole section). While it runs it sees
the config through a :class:`ConfigView` that refuses anything undeclared and records what was read, so the cache
key (a hash of the declared settings, minus speed-only ones, and of the inputs' keys) covers exactly what can change
its result. Every stage starts from the same random state: Python, NumPy and torch are seeded at its start.

A stage writes its artifacts under the run directory and then a small state file ``stages/<name>.json`` (atomically,
last), so a run killed at any point resumes from the last finished stage.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from crabrec import distributed
from crabrec.config import (
    INPUT_FILES,
    RunConfig,
    absent_sections,
    applies,
    dotted_get,
    is_speed_only,
    leaf_keys,
    self_gated,
)
from crabrec.config_paths import as_written, file_values, saved_values
from crabrec.errors import CrabError
from crabrec.io import content_hash, os_reason, sha256_of, try_lock, unlock, write_json, write_text
from crabrec.progress import stage_lines
from crabrec.runfiles import RunFiles

log = logging.getLogger("crabrec")

# Where a run lives: never part of a result, readable by every stage.
LOCATION = frozenset({"name", "runs_dir", "run_dir", "preset"})
# A training loop's budget: where it stops, not what it computes up to there. A checkpoint trained under a smaller one
# (and the same everything else) is resumed under a larger one (crabrec.train.loop.extends says when).
BUDGET = frozenset({"epochs", "max_minutes"})


@dataclass
class Stage:
    """One step of the experiment: ``fn(ctx)`` writes ``artifacts`` and returns a JSON summary.

    ``reads`` lists the settings ``fn`` may read: dotted keys (``train.lr``), whole sections (``tiger``) or ``seed``.
    Under a given config, settings that do not apply to its choices (``config.only_if``) drop out.
    """

    name: str
    fn: Callable[[RunContext], dict[str, Any]]
    reads: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()
    added: tuple[str, ...] = ()  # artifacts a run made by an earlier crabrec may lack: hashed, not needed for cached
    describe: str = ""
    needs_if: Callable[[RunContext], tuple[str, ...]] | None = None  # inputs that depend on what earlier stages made
    check: Callable[[RunContext], None] | None = None  # inputs and settings checked before any stage is computed
    checked_outputs: bool = True  # False: its artifacts are an end product (a report a user may edit), not checked
    uses_torch: bool = True  # False: torch is not imported for it (seeded all the same when already loaded)
    distributed: bool = False  # under a launcher, every process runs it (training, evaluation); else the main one
    revision: int = 0  # bumped when the stage's code changes its results: cached outputs of an older revision rerun
    revised: Callable[[RunContext], int] | None = None  # added to revision where a change touched only some inputs

    def declared_keys(self, config: Any = None) -> set[str]:
        """Every setting this stage may read under ``config``, sections expanded to their keys."""
        keys = leaf_keys()
        out = set()
        for read in self.reads:
            if read in keys:
                out.add(read)
            else:
                matched = {k for k in keys if k.startswith(read + ".")}
                if not matched:
                    raise ValueError(f"stage {self.name}: reads {read!r}, which is no setting or section")
                out |= matched
        return out if config is None else {k for k in out if applies(k, config)}

    def readable_keys(self, config: Any) -> set[str]:
        """What the stage may read under ``config``: its applicable settings, and its self-gated choices (at their
        default they are in no key, and reading them only tells the stage so)."""
        return self.declared_keys(config) | {k for k in self.declared_keys() if self_gated(k)}


class UndeclaredRead(RuntimeError):
    """A stage read a setting it does not declare: its cache key would miss it (a bug in the stage)."""


class ConfigView:
    """Attribute access to a config (or one of its sections) limited to ``allowed`` keys; reads go into ``seen``."""

    def __init__(self, node: BaseModel, allowed: set[str], seen: set[str], stage: str, prefix: str = "") -> None:
        self._node, self._allowed, self._seen, self._stage, self._prefix = node, allowed, seen, stage, prefix

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        value = getattr(self._node, name)
        key = self._prefix + name
        if isinstance(value, BaseModel):
            return ConfigView(value, self._allowed, self._seen, self._stage, key + ".")
        if key in LOCATION:
            return value
        if key not in self._allowed:
            raise UndeclaredRead(f"stage {self._stage!r} read {key!r}, which its Stage.reads does not declare")
        self._seen.add(key)
        return value


@dataclass
class RunContext:
    config: RunConfig
    stages: dict[str, Stage]
    force: set[str] = field(default_factory=set)
    _keys: dict[str, str] = field(default_factory=dict)
    _checked: set[str] = field(default_factory=set)
    running: str = ""  # the stage being computed (its key tags training checkpoints)
    _view: ConfigView | None = None
    _ran: set[str] = field(default_factory=set)  # stages computed (not taken from the cache) by this context
    _ahead: set[str] = field(default_factory=set)  # stages whose checks have run
    _gone: dict[str, dict[str, str]] = field(default_factory=dict)  # stage -> its input files that are gone
    _revisions: dict[str, int] = field(default_factory=dict)  # Stage.revised may read an input file: once each

    @property
    def cfg(self) -> Any:
        """The config: inside a running stage, the view of what it declared; elsewhere the whole config."""
        return self._view if self._view is not None else self.config

    @property
    def run_dir(self) -> Path:
        return self.config.run_dir

    @property
    def files(self) -> RunFiles:
        return RunFiles(self.run_dir)

    def path(self, *parts: str) -> Path:
        return self.run_dir.joinpath(*parts)

    def settings(self, name: str, budget_free: bool = False) -> dict[str, Any]:
        """The declared, result-changing settings of stage ``name`` with their values (its key's config part);
        ``budget_free``: without the training budget (:data:`BUDGET`)."""
        dump = self.config.model_dump(mode="json")
        out = {}
        for key in sorted(self.stages[name].declared_keys(self.config)):
            if is_speed_only(key) or (budget_free and key.rpartition(".")[2] in BUDGET):
                continue
            node = dotted_get(dump, key)
            out[key] = as_written(self.config, key, node) if key in INPUT_FILES else node  # as the run's config has it
            if key in INPUT_FILES and isinstance(node, str) and node:  # what the file holds, not only its name
                out.update(self._contents(name, key, node, out[key]))
        return out

    def _contents(self, name: str, key: str, path: str, written: str) -> dict[str, str | None]:
        """The content hashes of input ``key``'s file ``path`` (and of the files a dataset file is read with). When
        ``path`` is gone, those stage ``name`` recorded when it ran on the same path as written: a run copied or kept
        without its raw data keeps its finished stages (said when found cached), and a stage that must read the file
        again stops at the missing file."""
        hashes = {f"{key} content": content_hash(path)}
        if key == "data.path":  # the files a dataset given as one file is read with
            from crabrec.data.loaders import companion_files

            for other in companion_files(Path(path)):
                hashes[f"{key} content {other.name}"] = content_hash(other)
        if os.path.exists(path):
            return hashes
        saved = (self.files.load_state(name) or {}).get("inputs") or {}
        kept = {k: v for k, v in saved.items() if k.startswith(f"{key} content")}
        if saved.get(key) != written or not any(kept.values()):
            return hashes
        self._gone.setdefault(name, {})[key] = f"{key} {written!r}: {path} is not there"
        return kept

    def recorded_inputs(self, name: str) -> dict[str, Any]:
        """What stage ``name``'s state records of its input files: each one's path as written and content hashes."""
        return {k: v for k, v in self.settings(name).items() if k.split(" ")[0] in INPUT_FILES and v is not None}

    def key(self, name: str) -> str:
        """Cache key = hash of (stage name, the settings it reads, its inputs' keys, and its code revision when
        nonzero: revision 0 is in no key, so the keys of stages never revised stay what they were)."""
        if name not in self._keys:
            self._keys[name] = self._hash(name)
        return self._keys[name]

    def _hash(self, name: str, budget_free: bool = False) -> str:
        """:meth:`key`'s hash; ``budget_free``: of the settings without the training budget (:data:`BUDGET`)."""
        payload: dict[str, Any] = {
            "stage": name,
            "config": self.settings(name, budget_free),
            "inputs": {n: self.key(n) for n in self.needs(name)},
        }
        if revision := self.revision(name):
            payload["revision"] = revision
        return sha256_of(payload)

    def revision(self, name: str) -> int:
        """Stage ``name``'s code revision for this run: :attr:`Stage.revision`, plus :attr:`Stage.revised` for inputs
        that a change of its code touched alone."""
        if name not in self._revisions:
            stage = self.stages[name]
            self._revisions[name] = stage.revision + (stage.revised(self) if stage.revised else 0)
        return self._revisions[name]

    def needs(self, name: str) -> tuple[str, ...]:
        """A stage's inputs: its fixed ones, then those its ``needs_if`` asks for once the fixed ones exist."""
        stage = self.stages[name]
        return stage.needs + (stage.needs_if(self) if stage.needs_if else ())

    def running_key(self) -> str:
        """Cache key of the stage being computed: a checkpoint written under another key is not resumed."""
        return self.key(self.running) if self.running else ""

    @property
    def forced(self) -> bool:
        """Whether the stage being computed was forced: its training starts from scratch, not from a checkpoint."""
        return self.running in self.force

    def checkpoint_policy(self) -> dict[str, Any]:
        """``train`` keyword arguments: resume only this stage's own checkpoint, or one trained under a smaller budget
        and otherwise the same (``budget_free``: the key without :data:`BUDGET`); none when the stage is forced."""
        budget_free = self._hash(self.running, budget_free=True) if self.running else ""
        return {"fingerprint": self.running_key(), "fresh": self.forced, "budget_free": budget_free}

    def state_path(self, name: str) -> Path:
        return self.files.state(name)

    def is_done(self, name: str) -> bool:
        """Whether a finished result of ``name`` under its current key is there. Its artifacts must still be the
        files the stage wrote (their content hashes are in its state): a changed or foreign one is an error."""
        saved = self.files.load_state(name)
        if saved is None:
            return False
        stage = self.stages[name]
        if saved.get("key") != self.key(name) or not all(self.path(a).exists() for a in stage.artifacts):
            return False
        if stage.checked_outputs:
            self.files.check_written(name)
        return True

    def artifact_hashes(self, name: str) -> dict[str, str | None]:
        """The content hash of each artifact of ``name`` as it stands (recorded when the stage finishes)."""
        stage = self.stages[name]
        return {a: content_hash(self.path(a)) for a in stage.artifacts + stage.added if self.path(a).exists()}

    def summary(self, name: str) -> dict[str, Any]:
        summary = (self.files.load_state(name) or {}).get("summary", {})
        return summary if isinstance(summary, dict) else {}

    def _say_if_revised(self, name: str) -> None:
        """Log why a finished result is recomputed when the reason is a newer revision of the stage's code."""
        saved = self.files.load_state(name)
        if saved is None or name in self.force:
            return
        before, now = saved.get("revision", 0), self.revision(name)
        if before != now:
            log.info(
                "[%s] its code changed since this run computed it (revision %s -> %s): recomputing", name, before, now
            )

    def check_ahead(self, name: str) -> None:
        """Before anything of ``name`` is computed: the checks of ``name`` and every input it will compute, so that a
        setting or input file that cannot work fails the command before its first write."""
        if name in self._ahead:
            return
        self._ahead.add(name)
        for dep in self.stages[name].needs:
            self.check_ahead(dep)
        stage = self.stages[name]
        if distributed.is_main() and (name in self.force or not self.is_done(name)):
            self._check_moved_inputs(stage)
            if stage.check is not None:
                stage.check(self)

    def _check_moved_inputs(self, stage: Stage) -> None:
        """A stage about to run on an input that the run's config names relative to its base folder (``paths_from``),
        when the file is not there: a one-line error that says where the path came from."""
        for key in sorted(stage.declared_keys(self.config) & INPUT_FILES):
            path, written = self.config._written.get(key, (None, None))
            if path and not os.path.exists(path):
                raise CrabError(
                    f"{key} {written!r}: {path} not found ({self.run_dir / 'config.yaml'} reads its relative paths "
                    f"from {self.config._paths_from}); put it there, or set paths_from in that file to the folder "
                    "they start from"
                )

    def ensure(self, name: str) -> dict[str, Any]:
        """Run ``name`` (after its inputs) unless a finished result with the same key exists and none of its inputs
        was recomputed by this context."""
        self.check_ahead(name)
        stage = self.stages[name]
        for dep in stage.needs:
            self.ensure(dep)
        for dep in self.needs(name)[len(stage.needs) :]:
            self.ensure(dep)
        if name in self._ran:  # computed by this context already
            return self.summary(name)
        fresh_input = any(dep in self._ran for dep in self.needs(name))  # e.g. a forced re-training
        cached = name not in self.force and not fresh_input and distributed.is_main() and self.is_done(name)
        if distributed.broadcast(cached):  # the main process decides for all (it alone writes the files)
            summary = self.summary(name)
            if name not in self._checked:
                for gone in self._gone.get(name, {}).values():
                    log.warning("%s; the stored results of stage %s, made from it, are used", gone, name)
                log.info("[%s] cached (%s)", name, _one_line(summary))
            self._checked.add(name)
            return summary
        seen: set[str] = set()
        start = time.perf_counter()
        if main := distributed.is_main():
            self._say_if_revised(name)
            own_outputs(self.run_dir, stage.artifacts + stage.added)
        self.running = name
        self._view = ConfigView(self.config, stage.readable_keys(self.config), seen, name)
        try:
            start_stage(self.config, "seed" in stage.reads, stage.uses_torch)
            with stage_lines(name):
                summary = stage.fn(self) if main or stage.distributed else {}
        finally:
            self._view, self.running = None, ""
        seconds = time.perf_counter() - start
        if main:
            write_config(self.config)  # after success: a failing stage leaves the run directory as it was
            state = {"key": self.key(name), "seconds": round(seconds, 3), "summary": summary, "read": sorted(seen)}
            if revision := self.revision(name):
                state["revision"] = revision
            if "torch" in sys.modules:  # results depend on it in their last digits (worker processes use fewer)
                state["threads"] = sys.modules["torch"].get_num_threads()
            state["artifacts"] = self.artifact_hashes(name)
            if inputs := self.recorded_inputs(name):
                state["inputs"] = inputs
            write_json(self.state_path(name), state)
        distributed.barrier()  # the other processes go on once the main one has written the stage's files
        summary = distributed.broadcast(summary)
        log.info("[%s] done in %.1fs (%s)", name, seconds, _one_line(summary))
        self.force.discard(name)
        self._checked.add(name)
        self._ran.add(name)
        return summary


def own_outputs(run_dir: Path, artifacts: tuple[str, ...]) -> None:
    """Make the places a stage writes its own before it runs: a run that shares another run's artifacts through links
    (a frontier point, an analysis setting) gets a real copy of every linked file or folder on the way to each of the
    stage's artifacts, so that recomputing it writes into this run and never through the link into the other one."""
    import shutil

    for rel in artifacts:
        path = Path(run_dir)
        for part in Path(rel).parts:
            path = path / part
            if not path.is_symlink():
                continue
            source = path.resolve()
            tmp = path.with_name(f".{part}.own.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                if source.is_dir():
                    shutil.copytree(source, tmp, symlinks=True)
                elif source.exists():
                    shutil.copy2(source, tmp)
                path.unlink()
                if tmp.exists():
                    tmp.rename(path)
            except OSError as exc:
                shutil.rmtree(tmp, ignore_errors=True)
                raise CrabError(f"{path}: cannot make a copy of the linked {source} ({exc.strerror or exc})") from None


PROCESS_THREADS: int | None = None  # torch's thread count when the first stage of this process started


def start_stage(cfg: RunConfig, seeded: bool, uses_torch: bool = True) -> None:
    """Put the process in the same state at the start of every stage: threads, and Python/NumPy/torch seeds (the
    run's seed for a stage that reads ``seed``, 0 for one that does not, so its result cannot depend on it). A stage
    without torch does not import it (about 190 MB of memory); a later stage seeds it at its own start."""
    import random
    import sys

    import numpy as np

    seed = cfg.seed if seeded else 0
    random.seed(seed)
    np.random.seed(seed % 2**32)
    if uses_torch or "torch" in sys.modules:
        import torch

        global PROCESS_THREADS
        if PROCESS_THREADS is None:  # the process's own count, before any stage changed it (within a CPU quota)
            from crabrec.cpus import torch_threads

            PROCESS_THREADS = torch_threads(torch.get_num_threads())
        # a stage without train.threads gets that count back, not what an earlier command in this process set
        torch.set_num_threads(cfg.train.threads or PROCESS_THREADS)
        torch.manual_seed(seed)


def write_config(cfg: RunConfig) -> None:
    """The resolved config of the run, next to its artifacts; the sections of method plugins not installed here that
    the file holds stay in it."""
    target = RunFiles(cfg.run_dir).config
    values = file_values(cfg)
    if target.is_file():
        try:
            old = yaml.safe_load(target.read_text())
        except (OSError, yaml.YAMLError):
            old = None
        if isinstance(old, dict):
            values |= absent_sections(old)
    text = yaml.safe_dump(values, sort_keys=False)
    if not target.exists() or target.read_text() != text:
        write_text(target, text)


def _one_line(summary: dict[str, Any]) -> str:
    items = [f"{k}={v}" for k, v in summary.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)]
    return ", ".join(items[:6])


_HELD: set[Path] = set()  # run directories this process holds the lock of (a held lock is re-entered freely)
_LOCKS_TAKEN = [0]  # how many times this process has taken a run's lock


def locks_taken() -> int:
    """How many times this process has taken a run's lock (a command that took none has written into no run)."""
    return _LOCKS_TAKEN[0]


# what a run writes at its top level besides its config (a command killed before its first stage finished leaves some
# of these alone; the config is written once a stage has finished)
RUN_ENTRIES = frozenset(
    {"data", "embeddings.npy", "embeddings.items.json", "sid", "crab", "models", "stages", "frontier",
     "analysis", "seeds", "report.md", "report.html", "report_data.json", "report_files", "new-items", "input"}
)  # fmt: skip


def refuse_foreign_folder(run_dir: Path) -> None:
    """A run is never written into a folder of someone else's files (``--name`` or ``runs_dir`` naming a project
    folder by mistake): an existing folder must be empty, a run (its ``stages/``, or a ``config.yaml`` that crabrec
    saved), or hold only what a run writes. Its files, a ``config.yaml`` of its own among them, stay untouched."""
    if not run_dir.is_dir() or (run_dir / "stages").is_dir() or _saved_config(run_dir / "config.yaml"):
        return
    foreign = sorted(p.name for p in run_dir.iterdir() if p.name.removesuffix(".tmp") not in RUN_ENTRIES)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise CrabError(
            f"{run_dir}: exists and is not a crabrec run (it holds {shown}); choose another --name or runs_dir, or "
            "empty the folder"
        )


def _saved_config(path: Path) -> bool:
    """Whether ``path`` is a run's config as crabrec saves it (a mapping naming the run and its runs folder)."""
    return saved_values(path) is not None


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run directory for this process: checked writable before any work, and an advisory lock
    (``<runs_dir>/.<name>.lock``, beside the run so a failed command leaves the run as it was) refuses a second
    process with a message naming the holder."""
    run_dir = Path(run_dir).resolve()
    if run_dir in _HELD or not distributed.is_main():  # under a launcher the main process holds it for all
        yield
        return
    if run_dir.exists() and not run_dir.is_dir():
        raise CrabError(f"{run_dir}: exists and is not a directory; choose another --name or runs_dir")
    made = [p for p in (run_dir.parent, *run_dir.parent.parents) if not p.exists()]  # removed again if left empty
    try:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CrabError(f"{run_dir.parent}: cannot create the runs folder ({exc.strerror})") from None
    if run_dir.exists() and not os.access(run_dir, os.W_OK | os.X_OK):
        raise CrabError(
            f"{run_dir}: not writable, and this command writes into the run; copy the run to a folder you can write, "
            "or read its stored results with crabrec runs, compare, recommend or serve, which write nothing"
        )
    if not os.access(run_dir.parent, os.W_OK | os.X_OK):
        where = (
            f"the run's lock file (.{run_dir.name}.lock) is kept there, beside the run; copy the run to a folder "
            "you can write"
            if run_dir.exists()
            else "choose another runs_dir (--set runs_dir=PATH)"
        )
        raise CrabError(f"{run_dir.parent}: not writable; {where}")
    refuse_foreign_folder(run_dir)
    lock_path = run_dir.parent / f".{run_dir.name}.lock"
    handle = _take_lock(lock_path, run_dir)
    with handle:
        handle.seek(0)
        handle.truncate()
        handle.write(f"crabrec process {os.getpid()}")
        handle.flush()
        _HELD.add(run_dir)
        _LOCKS_TAKEN[0] += 1
        try:
            yield
        finally:
            _HELD.discard(run_dir)
            if not run_dir.exists():  # nothing was written: no lock file is left beside a run that is not there,
                with contextlib.suppress(OSError):  # nor a runs folder made for it
                    lock_path.unlink()
                    for folder in made:
                        folder.rmdir()
            unlock(handle)


def _take_lock(lock_path: Path, run_dir: Path):
    """The open lock file ``lock_path``, locked by this process; a lock held elsewhere is a one-line error. A lock
    file removed by its holder while this process waited to open it is opened again (the two would not exclude each
    other)."""
    while True:
        try:
            handle = open(lock_path, "a+", encoding="utf-8")  # noqa: SIM115 (the caller closes it)
        except OSError as exc:
            raise CrabError(f"{lock_path}: cannot open the run's lock file ({os_reason(exc)})") from None
        if not try_lock(handle):
            try:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
            except OSError:  # Windows: the holder's locked byte cannot be read
                holder = "another process"
            handle.close()
            raise CrabError(f"{run_dir}: in use by {holder}; wait for it to finish or stop it") from None
        try:
            if os.stat(lock_path).st_ino == os.fstat(handle.fileno()).st_ino:
                return handle
        except OSError:  # removed meanwhile
            pass
        unlock(handle)
        handle.close()
