"""Running an experiment: the run's config from what a command or a program gives (:class:`RunOptions`), and every
stage of it (:func:`run_all`), for ``crabrec run`` and :func:`crabrec.run` alike."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crabrec.config import (
    RunConfig,
    deep_merge,
    dotted_keys,
    load_config,
    load_saved,
    nested_overrides,
    parse_overrides,
)
from crabrec.errors import CrabError
from crabrec.runfiles import run_folder

if TYPE_CHECKING:
    from crabrec.pipeline import RunContext

log = logging.getLogger("crabrec")

MAX_SEEDS = 100
MAX_JOBS = 64

PRESET_NAMES = ("office-quick", "office-paper")  # the presets' run names, meant for the embedded data


OPTION_OF = {"crab.lam": "--lambda"}  # command options not named after their setting (codebook_size: --codebook-size)


@dataclass
class RunOptions:
    """What a run command (or :func:`crabrec.run`) takes to know its run: ``RUN_DIR`` or preset <- --config <- flags
    <- --set <- ``values``."""

    run_dir: str | None = None
    config: list[str] | None = None
    preset: str | None = None
    sets: list[str] | None = None
    data: str | None = None
    items: str | None = None
    data_format: str | None = None
    name: str | None = None
    seed: int | None = None
    values: dict[str, Any] | None = None  # settings by dotted key, as the Python API takes them (after --set)

    def resolve(self, **sections: dict[str, Any] | None) -> RunConfig:
        """The run's config; ``sections`` are a command's own options (e.g. ``tokenize={"levels": 4}``)."""
        overrides, typed, origin = self._overrides(sections)
        if self.run_dir is None:
            cfg = self._new(overrides, origin)
            described = self.config or self.preset or self.data or self.data_format or self.items
            if self.name is None or described or not (cfg.run_dir / "config.yaml").is_file():
                refuse_other_data(cfg, "--data" if self.data else "this config's data")
                return cfg
            # --name of an existing run and nothing else that describes one: that run's saved config, as with RUN_DIR
            return RunOptions(str(cfg.run_dir), sets=self.sets, seed=self.seed, values=self.values).resolve(**sections)
        given = (
            ("--data", self.data),
            ("--items", self.items),
            ("--format", self.data_format),
            ("--name", self.name),
            ("--config", self.config),
        )
        path = run_folder(self.run_dir)
        extra = [flag for flag, value in given if value]
        if extra:
            raise CrabError(
                f"{self.run_dir}: a run directory fixes its config; drop {', '.join(extra)} (--set applies)"
            )
        cfg = load_saved(path, overrides, self.preset, origin)
        if "path" in (typed.get("data") or {}):
            refuse_other_data(cfg, "--set data.path")
        return cfg

    def preview(self) -> RunConfig:
        """The config of the new run these options describe (no ``run_dir``), its folder not looked at: where the run
        would be written, before anything is checked against what that folder holds."""
        overrides, _, origin = self._overrides({})
        return self._new(overrides, origin)

    def _new(self, overrides: dict[str, Any], origin: dict[str, str]) -> RunConfig:
        """A new run's config: the configs and presets under ``overrides``; a data file's run named after it."""
        if self.name is not None:
            overrides["name"] = self.name
        cfg = load_config(self.config, overrides, self.preset, origin)
        if self.data and "name" not in overrides and cfg.name in PRESET_NAMES:  # own data: its own run folder
            from crabrec.data.table import dataset_name

            cfg = cfg.model_copy(update={"name": f"{dataset_name(Path(self.data).resolve())}-{cfg.preset}"})
        return cfg

    def _overrides(self, sections: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
        """``(overrides, typed, origin)``: every value given, the ``--set`` and Python ones among them, and the option
        each dotted key came from (for an error about it)."""
        named: dict[str, Any] = {k: v for k, v in sections.items() if v}
        if self.data is not None:
            named.setdefault("data", {})["path"] = self.data
        if self.items is not None:
            named.setdefault("data", {})["item_table"] = self.items
        if self.data_format is not None:
            named.setdefault("data", {})["format"] = self.data_format
        if self.seed is not None:
            named["seed"] = self.seed
        pairs = (self.values or {}).items()
        valued = nested_overrides((_dotted(key), value, f"{key}={value!r}") for key, value in pairs)
        typed = deep_merge(parse_overrides(self.sets or []), valued)
        overrides = deep_merge(named, typed)
        origin = {  # where each value the user typed came from, for an error about it: a command's own option
            key: OPTION_OF.get(key) or "--" + key.rpartition(".")[2].replace("_", "-")  # named as typer names it
            for key in dotted_keys({k: v for k, v in named.items() if k in sections})
        }
        for key, option, value in (
            ("data.path", "--data", self.data),
            ("data.item_table", "--items", self.items),
            ("data.format", "--format", self.data_format),
            ("seed", "--seed", self.seed),
            ("name", "--name", self.name),
        ):
            if value is not None:
                origin[key] = option
        # the keys as typed: a value that is itself a mapping ({event: [buy]}) is one setting, named by its key
        origin.update(dict.fromkeys((item.partition("=")[0].strip() for item in self.sets or []), "--set"))
        origin.update(dict.fromkeys((_dotted(key) for key in self.values or {}), "overrides"))
        return overrides, typed, origin


def refuse_other_data(cfg: RunConfig, given: str) -> None:
    """A run folder's finished results are never replaced by a run on another dataset: two data files with the same
    name (``2023/ratings.csv``, ``2024/ratings.csv``) get the same default run name, and ``--name`` may repeat one by
    mistake. Editing the same file recomputes as usual."""
    import os

    from crabrec.config_paths import readable, same_path, saved_base, saved_values
    from crabrec.frames import given_to

    folder = cfg.run_dir
    if not any((folder / "stages").glob("*.json")):
        return  # nothing finished there: nothing to lose
    saved = saved_values(folder / "config.yaml")
    old = saved.get("data", {}).get("path") if saved and isinstance(saved.get("data"), dict) else None
    if saved is None or not (old is None or isinstance(old, str)):
        return  # not a run's config: the commands that read it say what is wrong with it
    if old:  # a relative path of the run's config is read from its base folder, not from here
        old = readable(old, saved_base(folder, saved))
    new = cfg.data.path
    if old == new or (old and new and same_path(old, new)):  # a copy elsewhere is another dataset that may change
        return
    if old and new and given_to(folder, old, new):  # crabrec.run(data=DataFrame, name=...) again: its data changed
        return

    def named(path: str | None) -> str:
        return os.path.abspath(path) if path else "the embedded Office dataset"

    raise CrabError(
        f"{folder}: holds the results of a run on {named(old)}; {given} ({named(new)}) would replace them: name this "
        f"run with --name, or delete {folder} first"
    )


def _dotted(key: Any) -> str:
    """A key of the Python API's ``overrides``: a setting's dotted name."""
    if not isinstance(key, str) or not all(key.split(".")):
        raise CrabError(f"overrides: key {key!r}: expected a setting's dotted name, e.g. 'train.epochs'")
    return key


def _count(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def run_all(
    cfg: RunConfig,
    force: list[str] | None = None,
    until: list[str] | None = None,
    seeds: int = 1,
    frontier: bool = False,
    jobs: int = 0,
) -> RunContext:
    """Every stage of the run of ``cfg`` (cached ones are skipped), then its report: ``force`` re-runs stages,
    ``until`` stops after them, ``seeds`` repeats what follows the embedding with that many seeds, ``frontier``
    sweeps the accuracy-fairness frontier, ``jobs`` trains that many models at once (0: automatic)."""
    from crabrec.pipeline import run_lock
    from crabrec.stages import registry

    if not _count(seeds, 1, MAX_SEEDS):
        raise CrabError(f"seeds={seeds!r}: expected a number of seeds from 1 to {MAX_SEEDS}")
    if not _count(jobs, 0, MAX_JOBS):
        raise CrabError(f"jobs={jobs!r}: expected a number of processes from 0 (automatic) to {MAX_JOBS}")
    stages = registry()
    for name_ in [*(force or []), *(until or [])]:
        if name_ not in stages:
            raise CrabError(f"stage {name_!r}: expected one of {', '.join(stages)}")
    todo = [s for s in stages if s in until] if until else [s for s in stages if s != "report"]
    start = time.perf_counter()
    log.info("run %s -> %s", cfg.name, cfg.run_dir)
    with run_lock(cfg.run_dir):
        ctx = run_stages(cfg, todo, set(force or []), jobs)
        if seeds > 1:
            from crabrec import seeds as sd

            configs = sd.seed_configs(cfg, seeds)
            for sub in configs[1:]:
                log.info("seed %d -> %s", sub.seed, sub.run_dir)
                sd.prepare_sibling(cfg, sub)
                run_stages(sub, todo, set(force or []), jobs)
            sd.write_summary(sd.summarize(configs), cfg.run_dir / "seeds")
            log.info("across seeds: %s", cfg.run_dir / "seeds" / "seeds.md")
            ctx.force.add("report")  # the report shows the seeds
        if frontier and not until:
            from crabrec import frontier as fr
            from crabrec.runfiles import RunFiles

            fr.write_frontier(fr.run_frontier(cfg, jobs=jobs), RunFiles(cfg.run_dir).frontier)
            ctx.force.add("report")  # the report shows the frontier and the picked points
        if not until:
            ctx.ensure("report")
    log.info("finished in %.1fs; artifacts in %s", time.perf_counter() - start, cfg.run_dir)
    return ctx


def run_stages(cfg: RunConfig, names: list[str], force: set[str], jobs: int = 1) -> RunContext:
    """Run ``names`` (and what they need) in the run of ``cfg``, the independent training stages in ``jobs``
    processes (:mod:`crabrec.parallel`); returns the context."""
    from crabrec.parallel import run_side_by_side
    from crabrec.pipeline import RunContext
    from crabrec.stages import preflight, registry

    ctx = RunContext(config=cfg, stages=registry(), force=force)
    ctx.ensure("data")
    preflight(ctx)
    run_side_by_side(ctx, names, jobs)
    for name in names:
        ctx.ensure(name)
    return ctx
