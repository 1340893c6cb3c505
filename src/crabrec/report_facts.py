"""What a report says about its run before any number: the data, the code, the machine, the seeds, and each trained
model's training curve. Read from the run's stored artifacts and the process that writes the report."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import yaml

from crabrec.data.repeats import describe_repeats
from crabrec.runfiles import RunFiles, read_checked


def crabrec_version() -> str:
    """``0.1.0`` plus the git commit of the checkout it runs from (``+abc1234``, ``-dirty`` with local changes);
    the bare version for an installed package."""
    from crabrec import __version__

    source = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        )
        if commit.returncode != 0:
            return __version__
        dirty = subprocess.run(
            ["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no", "--", "."],
            capture_output=True,
            text=True,
            timeout=5,
        )
        return f"{__version__}+{commit.stdout.strip()}{'-dirty' if dirty.stdout.strip() else ''}"
    except (OSError, subprocess.SubprocessError):
        return __version__


def hardware() -> dict[str, Any]:
    """The processor, its cores, the threads torch uses and the GPU (if any) of the process writing the report."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    out: dict[str, Any] = {"cpu": cpu, "cores": os.cpu_count(), "os": f"{platform.system()} {platform.release()}"}
    from crabrec.cpus import quota_cores

    quota = quota_cores()
    if quota is not None:  # a container's CPU quota: the time the run had, whatever the host's cores
        out["cpu_quota"] = quota
    try:
        import torch

        out["torch_threads"] = torch.get_num_threads()
        out["torch"] = torch.__version__
        if torch.cuda.is_available():
            out["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return out


def run_facts(run: Path) -> dict[str, Any]:
    """Dataset summary, split, SID collisions, seeds, crabrec version, date and hardware."""
    files = RunFiles(run)
    facts: dict[str, Any] = {
        "crabrec": crabrec_version(),
        "generated": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "hardware": hardware(),
    }
    if files.data_stats.is_file():
        stats = read_checked(files.data_stats, dict)
        facts["data"] = {k: stats.get(k) for k in ("dataset", "users", "items", "interactions", "split", "samples")}
        facts["data"]["item_text"] = stats.get("item_text", True)
        facts["data"]["notes"] = [str(n) for n in stats.get("notes") or []]  # rows left out, items dropped ...
        facts["data"]["repeats"] = stats.get("repeats") or {}
    tokenize = (files.load_state("tokenize") or {}).get("summary") or {}
    if tokenize:
        facts["sids"] = {k: tokenize.get(k) for k in ("quantizer", "levels", "collisions_before_dedup", "collisions")}
    threads: dict[int, list[str]] = {}
    for state in sorted(files.state("*").parent.glob("*.json")):
        n = (files.load_state(state.stem) or {}).get("threads")
        if isinstance(n, int):
            threads.setdefault(n, []).append(state.stem)
    if threads:
        facts["threads"] = threads
    config = yaml.safe_load(files.config.read_text(encoding="utf-8")) if files.config.is_file() else {}
    facts["seed"] = config.get("seed") if isinstance(config, dict) else None
    evaluate = config.get("evaluate") if isinstance(config, dict) else None
    if isinstance(evaluate, dict):
        facts["evaluation"] = {"beam": evaluate.get("beam"), "max_samples": evaluate.get("max_samples")}
    seeds = run / "seeds" / "seeds.json"
    if seeds.is_file():
        facts["seeds"] = read_checked(seeds, dict).get("seeds")
    return facts


def facts_lines(facts: dict[str, Any]) -> list[tuple[str, str]]:
    """The facts as ``(label, text)`` rows of the report's first table."""
    rows = []
    data = facts.get("data")
    if data:
        samples = data.get("samples") or {}
        ids_only = "" if data.get("item_text") else " (ids only, no item text)"
        counts = f"{data['users']:,} users, {data['items']:,} items, {data['interactions']:,} interactions"
        rows.append(("data", f"{data['dataset']}: {counts}{ids_only}"))
        if data.get("notes"):
            rows.append(("data notes", "; ".join(data["notes"])))
        rows += describe_repeats(data.get("repeats") or {}, data["interactions"])
        rows.append(
            (
                "split",
                f"{data['split']}: "
                + ", ".join(f"{samples[p]:,} {p}" for p in ("train", "valid", "test") if p in samples)
                + " rows",
            )
        )
    sids = facts.get("sids")
    if sids:
        rows.append(
            (
                "semantic IDs",
                f"{sids['quantizer']}, {sids['levels']} levels; {sids['collisions_before_dedup']:,} items shared a "
                f"SID before deduplication, {sids['collisions']:,} after",
            )
        )
    evaluation = facts.get("evaluation")
    if evaluation:
        rows_used = (
            "all test rows"
            if evaluation.get("max_samples") is None
            else f"the first {evaluation['max_samples']:,} test rows"
        )
        rows.append(
            (
                "evaluation",
                f"{rows_used}, lists of {evaluation['beam']} (beam); every item is ranked, history items included "
                "(the paper's protocol; recommendations exclude them)",
            )
        )
    seeds = facts.get("seeds")
    rows.append(("seed", f"{facts.get('seed')}" + (f" ({len(seeds)} seeds: {seeds})" if seeds else "")))
    rows.append(("crabrec", facts["crabrec"]))
    hw = facts["hardware"]
    quota = f" (a CPU quota of {hw['cpu_quota']:g})" if hw.get("cpu_quota") is not None else ""
    machine = f"{hw['cpu']}, {hw['cores']} cores{quota}" + _threads(facts.get("threads"), hw.get("torch_threads"))
    rows.append(("hardware", machine + (f", GPU {hw['gpu']}" if hw.get("gpu") else "") + f" ({hw['os']})"))
    rows.append(("report written", facts["generated"]))
    return rows


def _threads(per_count: dict | None, default: int | None) -> str:
    """The torch threads the stages ran with: one number when they agree, else each count with its stages (stages
    trained side by side run in worker processes with fewer threads each)."""
    if not per_count:
        return f", torch threads: {default}" if default else ""
    if len(per_count) == 1:
        return f", torch threads: {next(iter(per_count))}"
    groups = sorted(per_count.items(), key=lambda kv: int(kv[0]))
    return ", torch threads: " + "; ".join(f"{n} ({', '.join(stages)})" for n, stages in groups)


def training_curves(run: Path) -> dict[str, list[dict[str, Any]]]:
    """Each trained model's per-epoch log (``models/<method>/train_log.json``: loss, validation NDCG@10), by label."""
    from crabrec.methods import methods

    files, out = RunFiles(run), {}
    for method in methods():
        path = files.model_dir(method.name) / "train_log.json"
        if method.trains and path.is_file():
            log = read_checked(path, list)
            if log:
                out[method.label] = log
    return out
