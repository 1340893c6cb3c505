"""Stage ``rebalance`` (CRAB stage 1): the run's codebook -> ``crab/codebook.json`` + token map + report."""

from __future__ import annotations

from typing import Any

from crabrec.io import write_json
from crabrec.pipeline import RunContext, Stage
from crabrec.stages.sid_stages import load_freq


def run_rebalance(ctx: RunContext) -> dict[str, Any]:
    from crabrec.crab.rebalance import RebalanceConfig, format_report, rebalance
    from crabrec.sid.codebook import Codebook

    c = ctx.cfg.crab
    cfg = RebalanceConfig(
        ratio=c.ratio,
        levels=c.levels,
        max_split=c.max_split,
        lam=c.lam,
        n_init=c.n_init,
        max_iter=c.max_iter,
        exact_limit=c.exact_limit,
        seed=ctx.cfg.seed,
    )
    base = Codebook.load(ctx.path("sid", "codebook.json"))
    out = rebalance(base, load_freq(ctx), cfg)
    out.codebook.save(ctx.path("crab", "codebook.json"))
    write_json(ctx.path("crab", "index.json"), out.codebook.to_index())
    write_json(ctx.path("crab", "token_map.json"), {"old_to_new": out.token_map, "parent": out.parent})
    write_json(ctx.path("crab", "report.json"), out.report)
    (ctx.path("crab", "report.txt")).write_text(format_report(out.report) + "\n")
    return {
        "split": sum(r["split"] for r in out.report),
        "created": sum(r["created"] for r in out.report),
        "collisions": out.codebook.collisions(),
    }


REBALANCE_STAGE = Stage(
    name="rebalance",
    fn=run_rebalance,
    sections=("crab",),
    needs=("data", "tokenize"),
    artifacts=("crab/codebook.json", "crab/token_map.json", "crab/report.json"),
    describe="CRAB stage 1: split over-popular tokens with balance-regularized K-means",
)
