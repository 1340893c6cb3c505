"""Table 1 from what a GPU playbook step sent back: the rows, each method's change against MOR with its paired-bootstrap
95% interval, and the training curves, as Markdown, the report's own tables (``crabrec.report``).

    python scripts/playbook_tables.py FILES_AT [FILES_AT ...]   # folders holding *-metrics.json, or the files

A method shows when its evaluation finished on the device; its time is the stages the report would count. Where a
folder holds step 3's measurements, the small models' eager steps are set beside their replayed ones (``cuda_graphs``)
and the LLM's eager step beside its variants (``VARIANTS``: bfloat16, compiled, replayed, both): nested in
``bench_small.json`` and ``bench_llm.json`` as the step leaves them, or in their own files where the step was
stopped before nesting them. A step 4 TIGER variant's file (``beauty-vN-metrics.json``) names its settings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


class Collected:
    """A collected run's stage records, as :func:`crabrec.report.method_seconds` reads a run's."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def load_state(self, stage: str) -> dict[str, Any] | None:
        if stage not in self.data.get("stages", {}):
            return None
        return {"summary": self.data["stages"][stage], "seconds": (self.data.get("seconds") or {}).get(stage) or 0.0}


def row(method, metrics: dict[str, Any], setting: str, seconds: float | None) -> dict[str, Any]:
    """A row as the report's tables take it."""
    from crabrec.report import BEYOND_COLUMNS, COLUMNS

    return {
        "method": method.label,
        "model": method.name,
        "setting": setting,
        **{c: metrics[c] for c, _ in COLUMNS},
        "train_s": seconds,
        "infer_s": metrics.get("inference_seconds"),
        "vs_mor": metrics.get("vs_mor") if isinstance(metrics.get("vs_mor"), dict) else None,
        "beyond": {k: metrics.get(k) for k in BEYOND_COLUMNS},
    }


def complete(metrics: Any) -> bool:
    from crabrec.report import COLUMNS

    return isinstance(metrics, dict) and all(isinstance(metrics.get(c), int | float) for c, _ in COLUMNS)


def rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Table 1's rows, in the registry's order, for the methods evaluated on the device."""
    from crabrec.methods import methods
    from crabrec.report import method_seconds

    out, evaluated, stages = [], data.get("methods") or {}, data.get("stages") or {}
    for method in methods():
        # a step collected before the methods' metrics came back: the evaluation's summary, without intervals
        metrics = evaluated.get(method.name) or stages.get(method.evaluates)
        if complete(metrics):
            out.append(row(method, metrics, "", method_seconds(Collected(data), method)))
    return out


def point_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The frontier's points that finished on the device (step 5), by method and setting, with each point's own cost
    where its stage records came back (files from before they did have none)."""
    from crabrec.methods import methods
    from crabrec.report import method_seconds

    by_name = {m.name: m for m in methods()}
    runs = data.get("point_runs") or {}
    out = []
    for key, metrics in sorted((data.get("points") or {}).items()):
        name, _, setting = key.partition(" ")
        if name in by_name and complete(metrics):
            seconds = method_seconds(Collected(runs[key]), by_name[name]) if key in runs else None
            out.append(row(by_name[name], metrics, setting, seconds))
    return out


def point_curves(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each frontier point's own training curve, named by its point (``crab gamma=0,...``)."""
    return {key: log for key, run in (data.get("point_runs") or {}).items() for log in run.get("curves", {}).values()}


def curves(data: dict[str, Any]) -> list[str]:
    """One line per trained model (the run's, then the frontier points'): each epoch's loss and validation NDCG@10
    (– where not validated); an epoch a budget stopped inside says after how many steps."""
    lines = []
    models = sorted((data.get("curves") or {}).items()) + sorted(point_curves(data).items())
    for name, log in models:
        valid = ["–" if e.get("valid_ndcg@10") is None else f"{e['valid_ndcg@10']:.4f}" for e in log]
        terms = [", ".join(f"{k} {v:.3f}" for k, v in (e.get("terms") or {}).items()) for e in log]  # CRAB: L_Rec, L_T
        at = [f"{e['epoch']}" + (" ({:,} of {:,} steps)".format(*e["steps"]) if "steps" in e else "") for e in log]
        epochs = [f"{a}: {e['loss']:.3f}{f' ({t})' if t else ''} / {v}" for a, e, t, v in zip(at, log, terms, valid)]
        lines.append(f"- {name} (epoch: loss / valid NDCG@10): " + ", ".join(epochs))
    return lines


def changes(found: list[dict[str, Any]]) -> list[str]:
    """The change-against-MOR table with its intervals (none when no row has them)."""
    from crabrec.report import COLUMNS, change_cells

    caption, cells = change_cells(found)
    if not cells:
        return []
    lines = ["", caption, "", "| method | " + " | ".join(c for c, _ in COLUMNS) + " |", "|---" * 5 + "|"]
    return lines + [f"| {label} | " + " | ".join(values) + " |" for label, values in cells]


def tables(data: dict[str, Any]) -> str:
    from crabrec.report import markdown_table

    found, points = rows(data), point_rows(data)
    if not found and not points:
        return "no method was evaluated in this step"
    parts = [markdown_table(found), *changes(found)] if found else []
    if points:  # the frontier's points, finished so far
        parts += ["", "Frontier points (test):", "", markdown_table(points), *changes(points)]
    lines = curves(data)
    if lines:
        parts += ["", *lines]
    return "\n".join(parts)


def graph_table(bench: dict[str, Any]) -> str:
    """Step 3's small models, eager (their own measurement) against replayed from CUDA graphs (``cuda_graphs``)."""
    label = {"train": "MOR", "tiger": "TIGER"}
    graphs, peak = bench.get("cuda_graphs") or {}, bench.get("peak_flop_per_s") or 0.0
    lines = [
        f"Steps eager and replayed from CUDA graphs ({bench.get('device', '?')}):",
        "",
        "| model | eager step (ms) | replayed step (ms) | faster | eager of peak | replayed of peak | graphs, replayed "
        "/ timed steps |",
        "|---|---|---|---|---|---|---|",
    ]
    for stage, eager in bench.get("stages", {}).items():
        replayed = (graphs.get("stages") or {}).get(stage)
        if replayed is None:
            continue
        step, n = replayed.get("replayed_step_s", 0.0), replayed.get("replayed_steps", 0)
        # about the same arithmetic both ways (the replayed batches carry a little padding): scale by the step times
        flops = eager["flop_per_s"] * eager["step_s"]
        cells = (
            [f"{1000 * step:.1f}", f"{eager['step_s'] / step:.1f}x", f"{100 * flops / step / peak:.1f}%"]
            if n and peak
            else ["–", "–", "–"]
        )
        recorded = (replayed.get("graphs") or {}).get("graphs", 0)
        lines.append(
            f"| {label.get(stage, stage)} | {1000 * eager['step_s']:.1f} | {cells[0]} | {cells[1]} | "
            f"{100 * eager['flop_per_s'] / peak if peak else 0:.1f}% | {cells[2]} | {recorded}, {n} / "
            f"{replayed.get('timed_steps', '?')} |"
        )
    return "\n".join(lines)


def device_of(bench: dict[str, Any], keys: Any) -> str:
    """The device a step 3 file names, in itself or in the measurements nested in it under ``keys`` ("?" if none):
    a step stopped before nesting leaves a file of nested measurements alone."""
    measured = [bench, *(bench.get(key) or {} for key in keys)]
    return next((m["device"] for m in measured if m.get("device")), "?")


def wide_table(bench: dict[str, Any]) -> str:
    """Step 3's small models replayed from CUDA graphs at their own batch (``cuda_graphs``) and at a wide one
    (``wide``; ``wide_compiled``: compiled too): how far the rows per step lift the share of the device's peak once the
    host no longer bounds a step."""
    keys = ("cuda_graphs", "wide", "wide_compiled")
    lines = [
        f"Replayed steps at the training batch and at a wide one ({device_of(bench, keys)}):",
        "",
        "| model | rows / step | replayed step (ms) | rows / s | of peak | positions / token |",
        "|---|---|---|---|---|---|",
    ]
    for key in keys:
        label = {"train": "MOR", "tiger": "TIGER"}
        if key == "wide_compiled":
            label = {stage: f"{name}, compiled" for stage, name in label.items()}
        measured = bench.get(key) or {}
        peak = measured.get("peak_flop_per_s") or bench.get("peak_flop_per_s") or 0.0
        for stage, r in (measured.get("stages") or {}).items():
            step = r.get("replayed_step_s") or 0.0
            rows = rows_per_step(r)
            if not step:  # no batch shape came twice in the timed steps: every step ran eagerly
                eager = f"none replayed ({r.get('timed_steps', 0)} timed steps eager, {1000 * r['step_s']:.1f} ms)"
                lines.append(
                    f"| {label.get(stage, stage)} | {rows:,.0f} | {eager} | {r['rows_per_s']:,.0f} | – | {padding(r)} |"
                )
                continue
            flops = r["flop_per_s"] * r["step_s"]  # a step's model arithmetic (padding left out)
            of_peak = f"{100 * flops / step / peak:.1f}%" if peak else "–"
            speed = r.get("replayed_rows_per_s", 0)
            lines.append(
                f"| {label.get(stage, stage)} | {rows:,.0f} | {1000 * step:.1f} | {speed:,.0f} | {of_peak} "
                f"| {padding(r)} |"
            )
    return "\n".join(lines) if len(lines) > 4 else ""


def padding(r: dict[str, Any]) -> str:
    """Input positions computed per token (padding included; "–" where the measurement predates the count)."""
    return f"{r['padding']:.2f}" if r.get("padding") else "–"


VARIANTS = {  # step 3's LLM, under these keys
    "bf16_backbone": "frozen weights in bfloat16",
    "compiled": "frozen weights in bfloat16, compiled",
    "cuda_graphs": "frozen weights in bfloat16, replayed CUDA graphs",
    "cuda_graphs_wide": "frozen weights in bfloat16, replayed CUDA graphs, a wide batch",
    "compiled_graphs": "frozen weights in bfloat16, compiled and replayed CUDA graphs",
    "compiled_graphs_wide": "frozen weights in bfloat16, compiled and replayed CUDA graphs, a wide batch",
}
PARTS = {  # each file step 3 nests its measurements into: key -> the measurement's own file
    "bench_small.json": {
        "cuda_graphs": "bench_graphs.json",
        "wide": "bench_wide.json",
        "wide_compiled": "bench_wide_compiled.json",
    },
    "bench_llm.json": {
        "bf16_backbone": "bench_bf16.json",
        "compiled": "bench_compiled.json",
        "cuda_graphs": "bench_llm_graphs.json",
        "cuda_graphs_wide": "bench_llm_wide.json",
        "compiled_graphs": "bench_llm_cg.json",
        "compiled_graphs_wide": "bench_llm_cg_wide.json",
    },
}


def step3_bench(folder: Path, name: str) -> dict[str, Any] | None:
    """Step 3's ``name`` (``bench_small.json``, ``bench_llm.json``) in ``folder``, with the measurements nested into it
    (``PARTS``) taken from their own files where the step was stopped before nesting them; None if absent."""
    path = folder / name
    bench = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    for key, part in PARTS[name].items():
        if (folder / part).is_file() and (bench is None or key not in bench):
            bench = bench or {}
            bench[key] = json.loads((folder / part).read_text(encoding="utf-8"))
    return bench


def rows_per_step(r: dict[str, Any]) -> float:
    """A measured stage's rows a step (its epoch's rows over its steps; 1 where the measurement does not say)."""
    return r["rows_per_epoch"] / r["steps_per_epoch"] if r.get("steps_per_epoch") else 1.0


def variant_table(bench: dict[str, Any]) -> str:
    """Step 3's LLM step, eager (its own measurement) against its variants: the frozen weights in bfloat16
    (``bf16_backbone``), and with those compiled (``compiled``, torch.compile with inductor) or replayed from CUDA
    graphs (``cuda_graphs``: the replayed steps' time, the replayed share beside it; ``cuda_graphs_wide``: the same at
    more rows a step), or both (``compiled_graphs``, ``compiled_graphs_wide``). "faster" compares the time a row
    takes, so that a wider batch compares with the others."""
    measured = [bench, *(bench.get(key) or {} for key in VARIANTS)]
    peak = next((m["peak_flop_per_s"] for m in measured if m.get("peak_flop_per_s")), 0.0)
    lines = [
        f"The LLM's step, eager and its variants ({device_of(bench, VARIANTS)}):",
        "",
        "| variant | rows / step | step (ms) | faster | of peak | positions / token | device busy "
        "| kernel launches / step | top operators (device ms / step) | graphs compiled in the timed steps |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    eager = (bench.get("stages") or {}).get("train")
    rows = [("eager, frozen weights in float32", eager)]
    rows += [(label, ((bench.get(key) or {}).get("stages") or {}).get("train")) for key, label in VARIANTS.items()]
    if all(r is None for _, r in rows):
        return ""
    for label, r in rows:
        if r is None:
            continue
        step_s, flop_per_s = r["step_s"], r["flop_per_s"]
        if r.get("replayed_steps"):  # the replayed steps alone: the eager ones record the graphs
            step_s, flop_per_s = r["replayed_step_s"], flop_per_s * r["step_s"] / r["replayed_step_s"]
            label += f" ({r['replayed_steps']} of {r['timed_steps']} steps replayed)"
        of_peak = f"{100 * flop_per_s / peak:.1f}%" if peak else "–"
        faster = f"{eager['step_s'] / rows_per_step(eager) * rows_per_step(r) / step_s:.2f}x" if eager else "–"
        compiled = r.get("compilations_in_timed_steps", "–") if r.get("compiled") else "–"
        trace = r.get("trace") or {}
        busy = f"{100 * trace['device_busy_ms'] / (1000 * r['step_s']):.0f}%" if trace else "–"
        launches = f"{trace['kernel_launches']:,.0f}" if trace else "–"
        top = ", ".join(f"`{t['name'].removeprefix('aten::')}` {t['device_ms']:.1f}" for t in trace.get("top", [])[:4])
        lines.append(
            f"| {label} | {rows_per_step(r):,.0f} | {1000 * step_s:.1f} | {faster} | {of_peak} | {padding(r)} | {busy} "
            f"| {launches} | "
            f"{top or '–'} | {compiled} |"
        )
    return "\n".join(lines)


STEP3_FILES = (*PARTS, *(part for parts in PARTS.values() for part in parts.values()))


def metric_files(paths: list[Path]) -> list[Path]:
    """The ``*-metrics.json`` files of ``paths`` (folders or files); a folder of step 3's alone has none."""
    out = []
    for path in paths:
        found = sorted(path.glob("*-metrics.json")) if path.is_dir() else [path]
        step3 = path.is_dir() and any((path / name).is_file() for name in STEP3_FILES)
        if not (found or step3) or not all(f.is_file() for f in found):
            raise ValueError(f"{path}: no *-metrics.json there (a playbook step's returned folder expected)")
        out += found
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="a step's returned folder or its *-metrics.json")
    args = parser.parse_args(argv)
    try:
        files = metric_files(args.paths)
        found = []
        for path in files:
            try:
                found.append((path, json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError) as exc:
                raise ValueError(f"{path}: not a playbook metrics file ({exc})") from None
            if not isinstance(found[-1][1], dict):
                raise ValueError(f"{path}: not a playbook metrics file (a JSON object expected)")
    except ValueError as exc:
        print(f"playbook_tables: {exc}", file=sys.stderr)
        return 2
    for path, data in found:
        env = path.parent / "env.txt"
        device = "; ".join(line for line in env.read_text().splitlines() if line.strip()) if env.is_file() else ""
        print(f"## {path}" + (f" ({device})" if device else "") + "\n")
        if data.get("variant"):  # a step 4 TIGER variant: its own settings over the run's
            print(f"TIGER variant: `{data['variant']}`\n")
        print(tables(data) + "\n")
    for folder in sorted({path.parent for path, _ in found} | {path for path in args.paths if path.is_dir()}):
        small = step3_bench(folder, "bench_small.json")
        if small and "stages" in small and "cuda_graphs" in small:
            print(graph_table(small) + "\n")
        if small and ("wide" in small or "wide_compiled" in small) and (table := wide_table(small)):
            print(table + "\n")
        llm = step3_bench(folder, "bench_llm.json")
        if llm and (table := variant_table(llm)):
            print(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
