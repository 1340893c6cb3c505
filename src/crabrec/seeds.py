"""Training noise: the whole pipeline after the embedding repeated with other seeds, metrics as mean ± std.

``crabrec run --seeds N`` runs the base run (seed s) and N − 1 sibling runs under ``<run>/seeds/seed=<s+i>/``. A
sibling shares the base run's data and item embeddings (they do not depend on the seed) and redoes every stage that
does: the semantic IDs, every training, CRAB's rebalancing and every evaluation. ``seeds.json`` / ``seeds.md`` in
``<run>/seeds/`` hold each method's per-seed metrics, their mean and sample standard deviation; the report shows them.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from crabrec.config import RunConfig
from crabrec.io import write_json, write_text
from crabrec.metrics import HEADLINE as METRICS
from crabrec.runfiles import RunFiles, link_base

SEED_INDEPENDENT = ("data", "embeddings.npy", "embeddings.items.json")


def seed_configs(cfg: RunConfig, n: int) -> list[RunConfig]:
    """The base config and its ``n − 1`` siblings (seeds ``seed + 1`` ...)."""
    out = [cfg]
    for i in range(1, n):
        seed = (cfg.seed + i) % 2**32
        out.append(
            cfg.model_copy(update={"seed": seed, "runs_dir": str(cfg.run_dir / "seeds"), "name": f"seed={seed}"})
        )
    return out


def prepare_sibling(base: RunConfig, sibling: RunConfig) -> None:
    """Share the base run's seed-independent artifacts with ``sibling`` (its data and embed stages are done)."""
    shared = tuple(rel for rel in SEED_INDEPENDENT if (base.run_dir / rel).exists())
    link_base(base.run_dir, sibling.run_dir, shared=shared, stages=("data", "embed"))


def summarize(configs: list[RunConfig]) -> dict[str, Any]:
    """Per method: each seed's metrics, their mean and sample std (over the seeds that evaluated it)."""
    from crabrec.methods import methods

    out: dict[str, Any] = {"seeds": [c.seed for c in configs], "methods": {}}
    for method in methods():
        per_seed = []
        for c in configs:
            m = RunFiles(c.run_dir).load_metrics(method.name)
            if m is not None:
                per_seed.append({"seed": c.seed, **{k: m[k] for k in METRICS}})
        if not per_seed:
            continue
        stats = {}
        for k in METRICS:
            values = [p[k] for p in per_seed]
            stats[k] = {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0}
        out["methods"][method.name] = {"label": method.label, "per_seed": per_seed, **stats}
    return out


def markdown(summary: dict[str, Any]) -> str:
    from crabrec.report import seeds_table

    caption, rows = seeds_table(summary)
    lines = [caption, "", "| method | " + " | ".join(METRICS) + " | seeds |", "|---" * (len(METRICS) + 2) + "|"]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    return "\n".join(lines) + "\n"


def write_summary(summary: dict[str, Any], out: Path) -> list[Path]:
    paths = [out / "seeds.json", out / "seeds.md"]
    write_json(paths[0], summary)
    write_text(paths[1], "# Across seeds\n\n" + markdown(summary))
    return paths
