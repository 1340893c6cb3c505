"""Stage ``report``: report.md + report.html from the stored artifacts of every other stage."""

from __future__ import annotations

from typing import Any

from crabrec.pipeline import RunContext, Stage


def run_report(ctx: RunContext) -> dict[str, Any]:
    from crabrec.report import write_report

    paths = write_report(ctx.run_dir)
    return {"report": str(paths[-1])}


REPORT_STAGE = Stage(
    name="report",
    fn=run_report,
    sections=(),
    needs=("evaluate", "tiger", "sasrec", "rw", "rr", "d2lr", "finetune"),
    artifacts=("report.md", "report.html"),
    describe="Table 1, Figure 1, token popularity curves -> report.md / report.html",
)
