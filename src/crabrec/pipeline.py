"""Stage orchestration: each stage is keyed by its config sections and its inputs' keys, and skipped when cached.

A stage writes its artifacts under the run directory and then a small state file ``stages/<name>.json`` (atomically,
last), so a run killed at any point resumes from the last finished stage.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from crabrec.config import RunConfig
from crabrec.io import read_json, sha256_of, write_json, write_text

log = logging.getLogger("crabrec")


@dataclass
class Stage:
    """One step of the experiment: ``fn(ctx)`` writes ``artifacts`` and returns a JSON summary."""

    name: str
    fn: Callable[[RunContext], dict[str, Any]]
    sections: tuple[str, ...]
    needs: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()
    describe: str = ""
    needs_if: Callable[[RunContext], tuple[str, ...]] | None = None  # inputs that depend on what earlier stages made


@dataclass
class RunContext:
    cfg: RunConfig
    stages: dict[str, Stage]
    force: set[str] = field(default_factory=set)
    _keys: dict[str, str] = field(default_factory=dict)
    _checked: set[str] = field(default_factory=set)
    running: str = ""  # the stage being computed (its key tags training checkpoints)

    @property
    def run_dir(self) -> Path:
        return self.cfg.run_dir

    def path(self, *parts: str) -> Path:
        return self.run_dir.joinpath(*parts)

    def key(self, name: str) -> str:
        """Cache key = hash of (stage name, its config sections, the seed, its inputs' keys)."""
        if name not in self._keys:
            stage = self.stages[name]
            dump = self.cfg.model_dump(mode="json")
            payload = {
                "stage": name,
                "seed": self.cfg.seed,
                "config": {s: dump[s] for s in stage.sections},
                "inputs": {n: self.key(n) for n in self.needs(name)},
            }
            self._keys[name] = sha256_of(payload)
        return self._keys[name]

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
        """``train`` keyword arguments: resume only this stage's own checkpoint, and none when the stage is forced."""
        return {"fingerprint": self.running_key(), "fresh": self.forced}

    def state_path(self, name: str) -> Path:
        return self.path("stages", f"{name}.json")

    def is_done(self, name: str) -> bool:
        state = self.state_path(name)
        if not state.is_file():
            return False
        try:
            saved = read_json(state)
        except (OSError, ValueError):
            return False
        stage = self.stages[name]
        return saved.get("key") == self.key(name) and all(self.path(a).exists() for a in stage.artifacts)

    def summary(self, name: str) -> dict[str, Any]:
        return read_json(self.state_path(name)).get("summary", {})

    def ensure(self, name: str) -> dict[str, Any]:
        """Run ``name`` (after its inputs) unless a finished result with the same key exists."""
        stage = self.stages[name]
        for dep in stage.needs:
            self.ensure(dep)
        for dep in self.needs(name)[len(stage.needs) :]:
            self.ensure(dep)
        if name not in self.force and self.is_done(name):
            summary = self.summary(name)
            if name not in self._checked:
                log.info("[%s] cached (%s)", name, _one_line(summary))
            self._checked.add(name)
            return summary
        start = time.perf_counter()
        self.running = name
        summary = stage.fn(self)
        seconds = time.perf_counter() - start
        write_config(self.cfg)  # after success: a failing stage leaves the run directory as it was
        write_json(self.state_path(name), {"key": self.key(name), "seconds": round(seconds, 3), "summary": summary})
        log.info("[%s] done in %.1fs (%s)", name, seconds, _one_line(summary))
        self.force.discard(name)
        self._checked.add(name)
        return summary


def write_config(cfg: RunConfig) -> None:
    """The resolved config of the run, next to its artifacts."""
    text = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
    target = cfg.run_dir / "config.yaml"
    if not target.exists() or target.read_text() != text:
        write_text(target, text)


def _one_line(summary: dict[str, Any]) -> str:
    items = [f"{k}={v}" for k, v in summary.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)]
    return ", ".join(items[:6])
