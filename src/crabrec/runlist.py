"""``crabrec runs``: the runs under a folder, each with its data and every evaluated method's headline metrics, read
from their stored artifacts (nothing is computed)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from crabrec.errors import CrabError, clip
from crabrec.runfiles import RunFiles

COLUMNS = ("HR@10", "NDCG@10", "DGU@10", "MGU@10")


def find_runs(folders: list[Path]) -> list[Path]:
    """The run folders (a ``config.yaml`` and a ``stages/`` folder) among ``folders`` and their subfolders, sorted by
    name; a folder that is itself a run counts as one."""
    runs = []
    for folder in folders:
        if not folder.is_dir():
            raise CrabError(f"{folder}: no such folder")
        candidates = [folder] if _is_run(folder) else sorted(p for p in folder.iterdir() if _is_run(p))
        runs += candidates
    return runs


def _is_run(path: Path) -> bool:
    return (path / "config.yaml").is_file() and (path / "stages").is_dir()


def describe(run: Path, order: list[str]) -> dict[str, Any]:
    """One run: its data, size, when a stage last finished, and each evaluated method's headline metrics (methods in
    ``order`` first, in that order, then any other evaluated ones by name)."""
    files = RunFiles(run)
    try:
        saved = yaml.safe_load((run / "config.yaml").read_text()) or {}
        data = (saved.get("data") or {}).get("path") if isinstance(saved, dict) else None
        data = data or "the embedded Office dataset"
    except (OSError, yaml.YAMLError, AttributeError):  # (a data section that is not a mapping)
        data = "data unknown (config.yaml unreadable)"
    summary = (files.load_state("data") or {}).get("summary") or {}
    states = list((run / "stages").glob("*.json"))
    updated = max((p.stat().st_mtime for p in states), default=None)
    found = sorted(p.name for p in (run / "models").glob("*") if (p / "metrics.json").is_file())
    methods = [m for m in order if m in found] + [m for m in found if m not in order]
    metrics = {}
    for method in methods:
        try:
            values = files.load_metrics(method) or {}
        except CrabError as exc:  # a damaged metrics.json: shown as such, not left out as if never evaluated
            what = str(exc).removeprefix(f"{files.metrics(method)}: ").split(";")[0]
            metrics[method] = {
                "problem": f"metrics.json: {clip(what, 60)}; `crabrec evaluate {run} --method {method} "
                "--force` writes it again"
            }
            continue
        metrics[method] = {k: values.get(k) for k in COLUMNS}
    return {
        "run": str(run),
        "data": data,
        "users": summary.get("users"),
        "items": summary.get("items"),
        "updated": time.strftime("%Y-%m-%d %H:%M", time.localtime(updated)) if updated else None,
        "methods": metrics,
    }


def render(runs: list[dict[str, Any]]) -> str:
    """Plain text: a line per run, then a row per evaluated method (what is wrong with its stored metrics, where they
    cannot be read)."""
    if not runs:
        return "no runs here"
    lines = []
    for r in runs:
        size = f"{r['users']:,} users, {r['items']:,} items" if r["users"] is not None else "data not loaded"
        lines.append(f"{r['run']}: {r['data']}, {size}" + (f", updated {r['updated']}" if r["updated"] else ""))
        if not r["methods"]:
            lines.append("  no method evaluated yet")
            continue
        width = max(10, *(len(m) + 1 for m in r["methods"]))  # a method name as long as ``tiger-ppd-rr`` included
        lines.append("  " + f"{'method':<{width}}" + "".join(f"{c:>9}" for c in COLUMNS))
        for method, values in r["methods"].items():
            if "problem" in values:
                lines.append(f"  {method:<{width}} {values['problem']}")
                continue
            cells = "".join(f"{v:>9.4f}" if isinstance(v, float | int) else f"{'–':>9}" for v in values.values())
            lines.append(f"  {method:<{width}}{cells}")
    return "\n".join(lines)
