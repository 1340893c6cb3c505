"""``report.md`` + ``report.html`` (self-contained, figures inlined as SVG) from a run's stored artifacts only.

Table 1 of the paper on this data, Figure 1 (left: exposure by item-popularity group; right: GU of the items under
popular / neutral / unpopular tokens per level, before and after CRAB), sorted token-popularity curves per level
before/after rebalancing, the metric definitions and the config. Missing models are listed, not invented.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crabrec.errors import CrabError
from crabrec.io import write_json, write_text
from crabrec.metrics import HEADLINE
from crabrec.runfiles import RunFiles, read_checked, run_folder

COLUMNS = [("HR@10", "max"), ("NDCG@10", "max"), ("DGU@10", "min"), ("MGU@10", "min")]


def method_seconds(files: RunFiles, method) -> float | None:
    """A method's own cost: the time of its ``cost`` stages (a training stage counts its training loop, which
    survives a resume; any other stage its wall-clock). None when one of them has not run, or when nothing is
    fitted (a floor such as MostPop)."""
    if not method.cost:
        return None
    total = 0.0
    for stage in method.cost:
        state = files.load_state(stage)
        if state is None:
            return None
        summary = state.get("summary") if isinstance(state.get("summary"), dict) else {}
        total += float(summary.get("train_seconds", state.get("seconds", 0.0)))
    return round(total, 1)


PICKED_NOTE = (
    "A method with a setting in brackets is shown at the point `crabrec frontier` picked for it on validation (see the "
    "frontier section); the others run at their configured settings."
)


def table_rows(run: Path) -> list[dict[str, Any]]:
    """Table 1: one row per evaluated method, in the registry's order. Once ``crabrec frontier`` has run, a method it
    swept is shown at the point it picked on validation (that sibling run's metrics, intervals and cost; ``setting``
    names it); the others at their configured settings."""
    from crabrec.methods import methods

    files, rows = RunFiles(run), []
    picked = picked_runs(run)
    for method in methods():
        setting, at = picked.get(method.name, ("", files))
        metrics = at.load_metrics(method.name)
        if metrics is None:
            continue
        missing = [c for c, _ in COLUMNS if not isinstance(metrics.get(c), (int, float))]
        if missing:
            raise CrabError(f"{at.metrics(method.name)}: no {', '.join(missing)}; re-run its evaluation")
        rows.append(
            {
                "method": method.label,
                "model": method.name,
                "setting": setting,
                **{c: metrics[c] for c, _ in COLUMNS},
                "train_s": method_seconds(at, method),
                "infer_s": metrics.get("inference_seconds"),
                "vs_mor": metrics.get("vs_mor") if isinstance(metrics.get("vs_mor"), dict) else None,
                "vs_base": metrics.get("vs_base") if isinstance(metrics.get("vs_base"), dict) else None,
                "beyond": {k: metrics.get(k) for k in BEYOND_COLUMNS},
                "metrics": {k: v for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)},
            }
        )
    return rows


def results_frame(run_dir: str | Path) -> Any:
    """:func:`crabrec.results`: Table 1 of a run as a pandas DataFrame."""
    import pandas as pd

    run = run_folder(run_dir)
    records = [
        {"method": r["model"], "label": r["method"], "setting": r["setting"], **r["metrics"], "train_s": r["train_s"]}
        for r in table_rows(run)
    ]
    return pd.DataFrame.from_records(records, index="method") if records else pd.DataFrame(columns=["label"])


def picked_runs(run: Path) -> dict[str, tuple[str, RunFiles]]:
    """``{method: (setting, its sibling run)}`` for the frontier's validation-picked points that are on disk."""
    path = RunFiles(run).frontier / "frontier.json"
    if not path.is_file():
        return {}
    selected = read_checked(path, dict).get("selected")
    if not isinstance(selected, dict):
        raise CrabError(f"{path}: not a frontier result; re-run `crabrec frontier`")
    out = {}
    for name, point in selected.items():
        setting = point.get("setting") if isinstance(point, dict) else None
        if not isinstance(setting, str) or not setting or "/" in setting or setting.startswith("."):
            raise CrabError(f"{path}: method {name!r} has no picked setting; re-run `crabrec frontier`")
        sub = RunFiles(RunFiles(run).frontier_point(str(name), setting))
        if sub.metrics(str(name)).is_file():
            out[str(name)] = (setting, sub)
    return out


def row_label(row: dict[str, Any]) -> str:
    return f"{row['method']} ({row['setting']})" if row.get("setting") else row["method"]


def relative_change(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    by = {r["model"]: r for r in rows}
    if "mor" not in by or "crab" not in by:
        return None
    return {
        c: (by["crab"][c] - by["mor"][c]) / by["mor"][c] * 100 if by["mor"][c] else float("nan") for c, _ in COLUMNS
    }


def _best(rows: list[dict[str, Any]]) -> dict[str, float]:
    best = {c: (max if how == "max" else min)(r[c] for r in rows) for c, how in COLUMNS}
    times = [r["train_s"] for r in rows if r["train_s"] is not None]
    if times:
        best["train_s"] = min(times)
    return best


def _fmt_s(v: float | None) -> str:
    """Seconds as Table 1 shows them: whole seconds, a tenth under 10 s (a small run's stages took 0.1-3 s: all
    showed 0, some of them in bold)."""
    if v is None:
        return "–"
    return f"{v:.1f}" if v < 9.95 else f"{v:,.0f}"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    best = _best(rows)
    head = "| method | " + " | ".join(c for c, _ in COLUMNS) + " | train / method time (s) | test inference (s) |"
    lines = [head, "|---" * (len(COLUMNS) + 3) + "|"]
    for r in rows:
        cells = [f"**{r[c]:.4f}**" if r[c] == best[c] else f"{r[c]:.4f}" for c, _ in COLUMNS]
        t = _fmt_s(r["train_s"])
        t = f"**{t}**" if r["train_s"] is not None and t == _fmt_s(best.get("train_s")) else t
        lines.append(f"| {row_label(r)} | " + " | ".join(cells) + f" | {t} | {_fmt_s(r['infer_s'])} |")
    rel = relative_change(rows)
    if rel:
        lines.append("| CRAB vs MOR | " + " | ".join(f"{rel[c]:+.1f}%" for c, _ in COLUMNS) + " | | |")
    return "\n".join(lines)


def change_tables(rows: list[dict[str, Any]]) -> list[tuple[str, str, list[tuple[str, list[str]]]]]:
    """The change tables: against MOR (every method with CIs), then against each other model that methods are based
    on (TIGER+PPD's TIGER), as ``(that model's label, caption, rows)``."""
    labels = {r["model"]: r["method"] for r in rows}
    tables = [("MOR", *change_cells(rows))]
    for base in dict.fromkeys(r["vs_base"].get("method") for r in rows if r.get("vs_base")):
        label = labels.get(base, str(base))
        on_base = [r for r in rows if (r.get("vs_base") or {}).get("method") == base]
        tables.append((label, *change_cells(on_base, "vs_base", label)))
    return [t for t in tables if t[2]]


def change_cells(
    rows: list[dict[str, Any]], key: str = "vs_mor", against: str = "MOR"
) -> tuple[str, list[tuple[str, list[str]]]]:
    """A change table: a caption and, per method with CIs under ``key``, one cell per metric:
    ``relative change [95% CI]``, starred when the interval excludes 0."""
    with_ci = [r for r in rows if r.get(key)]
    if not with_ci:
        return "", []
    boot = with_ci[0][key].get("bootstrap", {})
    caption = (
        f"Change against {against}, relative, with a paired-bootstrap 95% interval over the {boot.get('users', '?'):,} "
        f"test users ({boot.get('samples', '?'):,} resamples); * = the interval excludes 0."
    )
    out = []
    for r in with_ci:
        cells = []
        for c, _ in COLUMNS:
            v = r[key].get(c) or {}
            rel, ci = v.get("rel"), v.get("rel_ci")
            if rel is None or not ci:
                cells.append("–")
                continue
            star = "*" if ci[0] > 0 or ci[1] < 0 else ""
            cells.append(f"{rel * 100:+.1f}%{star} [{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}]")
        out.append((row_label(r), cells))
    return caption, out


BEYOND_COLUMNS = ("coverage@10", "tail_HR@10", "popular_share@10")
BEYOND_CAPTION = (
    "Beyond GU: catalogue coverage of the top 10 (share of items shown to some test user), HR@10 on the test rows "
    "whose target is in the least popular group, and the top-10 share of the most popular items. A method that only "
    "shifts exposure shows coverage up without tail HR@10 up."
)


def beyond_cells(rows: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """Per method with the numbers in its metrics (older runs lack them): coverage, tail HR@10, popular share."""
    out = []
    for r in rows:
        values = r.get("beyond") or {}
        if all(isinstance(values.get(c), int | float) for c in BEYOND_COLUMNS):
            out.append((row_label(r), [f"{values[c]:.4f}" for c in BEYOND_COLUMNS]))
    return out


def frontier_picked(run: Path) -> tuple[str, list[tuple[str, str, list[str]]]]:
    """From ``frontier/frontier.json``: its selection rule and, per method, the picked setting with its test metrics
    and their change against MOR."""
    path = RunFiles(run).frontier / "frontier.json"
    if not path.is_file():
        return "", []
    result = read_checked(path, dict)
    try:
        return str(result["rule"]), picked_rows(result)
    except (KeyError, TypeError, StopIteration, AttributeError):
        raise CrabError(f"{path}: not a frontier result; re-run `crabrec frontier`") from None


PICKED_CHANGE = "test values, change against the model each method debiases (MOR, or TIGER for one over TIGER)"


def picked_rows(result: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """Per method of a frontier result: its label, picked setting and ``test value (change vs the model it
    debiases)`` per column (MOR's, or TIGER's for a method over TIGER: their reference points)."""
    reference = {p["method"]: p for p in result["points"] if p["setting"] == "base"}
    out = []
    for p in result["selected"].values():
        base = reference[p.get("base") or "mor"]
        cells = []
        for c, _ in COLUMNS:
            b, v = base[f"test {c}"], p[f"test {c}"]
            cells.append(f"{v:.4f} ({(v - b) / b * 100:+.1f}%)" if b else f"{v:.4f}")
        out.append((p["label"], p["setting"], cells))
    return out


def seeds_table(summary: dict[str, Any]) -> tuple[str, list[tuple[str, list[str]]]]:
    """The across-seeds table of ``seeds/seeds.json``: a caption and, per method, ``mean ± std`` per metric and the
    number of seeds."""
    try:
        seeds = ", ".join(str(s) for s in summary["seeds"])
        caption = (
            f"Mean ± sample standard deviation over {len(summary['seeds'])} seeds ({seeds}): each seed redoes the "
            "semantic IDs, every training and every evaluation on the same data and item embeddings."
        )
        rows = []
        for m in summary["methods"].values():
            cells = [f"{m[c]['mean']:.4f} ± {m[c]['std']:.4f}" for c in HEADLINE]
            rows.append((str(m["label"]), [*cells, str(len(m["per_seed"]))]))
        return caption, rows
    except (KeyError, TypeError, AttributeError):
        raise CrabError("seeds/seeds.json: not a seeds summary; re-run `crabrec run --seeds N`") from None


def exposure_by_group(run: Path) -> dict[str, list[float]]:
    """GP@10 per popularity group (least → most popular) for SASRec, MOR and CRAB, plus GH (history share)."""
    out: dict[str, list[float]] = {}
    for label, model in (("SASRec", "sasrec"), ("MOR", "mor"), ("CRAB", "crab")):
        m = RunFiles(run).load_metrics(model)
        if m:
            out.setdefault("history (GH)", m["groups"]["GH"])
            out[label] = m["groups"]["GP@10"]
    return out


def token_group_analysis(run: Path, k: int = 10) -> dict[str, list[dict[str, Any]]]:
    """GU of G_pop / G_neu / G_unp per level (token groups of the BASE codebook), for MOR and for CRAB."""
    from crabrec.metrics.token_groups import token_group_gu

    files = RunFiles(run)
    if not files.codebook().is_file():
        return {}
    codebook = files.load_codebook()
    freq = files.load_popularity().freq
    out = {}
    for label, model in (("MOR", "mor"), ("CRAB", "crab")):
        if not files.rankings(model).is_file():
            continue
        every = files.load_splits().test
        frame = files.load_rankings(model, every)
        test = every.take(frame["row"].to_numpy())
        out[label] = token_group_gu(codebook, freq, np.stack(frame["items"]), test.history_items(), k)
    return out


def token_popularity_curves(run: Path) -> dict[str, dict[str, list[float]]]:
    """Sorted P(c) of the used tokens per semantic level, before and after rebalancing."""
    from crabrec.sid.codebook import Codebook

    out: dict[str, dict[str, list[float]]] = {}
    files = RunFiles(run)
    if not files.popularity.is_file():
        return out
    freq = files.load_popularity().freq
    for label, path in (("before", files.codebook()), ("after CRAB", files.codebook(rebalanced=True))):
        if not path.is_file():
            continue
        cb = Codebook.load(path)
        for level in range(cb.semantic_levels):
            p = cb.popularity(freq, level)[cb.used(level)]
            out.setdefault(cb.prefixes[level], {})[label] = sorted(p.tolist(), reverse=True)
    return out


def figures(exposure, tokens, curves, training=None) -> dict[str, str]:
    """The report's figures as inline SVG, by name; one for each kind of result the run holds."""
    from crabrec import plots

    out = {}
    if exposure:
        with plots.drawing(figsize=(5.2, 3.2)) as fig:
            ax = fig.subplots()
            names = list(exposure)
            n_groups = len(exposure[names[0]])
            width = 0.8 / len(names)
            for j, name in enumerate(names):
                ax.bar(np.arange(n_groups) + j * width, exposure[name], width, label=name)
            ax.set_xticks(np.arange(n_groups) + 0.4 - width / 2, [f"G{g + 1}" for g in range(n_groups)])
            ax.set_xlabel(f"item popularity group (G1 least popular → G{n_groups} most)")
            ax.set_ylabel("share of top-10 slots")
            ax.legend(frameon=False)
            ax.set_title("Recommendation frequency by item popularity")
            out["exposure"] = plots.svg(fig)
    if tokens:
        with plots.drawing(figsize=(5.6, 3.2)) as fig:
            ax = fig.subplots()
            labels, series = [], {}
            for model, rows in tokens.items():
                for row in rows:
                    for g in ("pop", "neu", "unp"):
                        series.setdefault(f"{model} T_{g}", []).append(row[g]["GU"])
                labels = [f"level {row['level']}" for row in rows]
            width = 0.8 / len(series)
            for j, (name, vals) in enumerate(series.items()):
                hatch = "//" if name.startswith("CRAB") else None
                ax.bar(np.arange(len(labels)) + j * width, vals, width, label=name, hatch=hatch)
            ax.axhline(0, color="black", lw=0.6)
            ax.set_xticks(np.arange(len(labels)) + 0.4 - width / 2, labels)
            ax.set_ylabel("GU@10 of the items under the tokens")
            ax.legend(frameon=False, fontsize=7, ncol=2)
            ax.set_title("GU by token popularity group" + (", before (MOR) and after CRAB" if "CRAB" in tokens else ""))
            out["tokens"] = plots.svg(fig)
    if curves:
        with plots.drawing(figsize=(3.0 * len(curves), 2.8)) as fig:
            axes = fig.subplots(1, len(curves))
            for ax, (level, data) in zip(np.atleast_1d(axes), curves.items()):
                for name, vals in data.items():
                    ax.plot(np.arange(1, len(vals) + 1), vals, label=name)
                ax.set_yscale("log")
                ax.set_title(f"level {level}")
                ax.set_xlabel("token rank")
            np.atleast_1d(axes)[0].set_ylabel("P(c)")
            np.atleast_1d(axes)[0].legend(frameon=False)
            out["curves"] = plots.svg(fig)
    if training:
        with plots.drawing(figsize=(8.4, 3.0)) as fig:
            left, right = fig.subplots(1, 2)
            for label, log in training.items():
                epochs = [e["epoch"] for e in log]
                left.plot(epochs, [e["loss"] for e in log], marker=".", label=label)
                scored = [(e["epoch"], e["valid_ndcg@10"]) for e in log if e.get("valid_ndcg@10") is not None]
                if scored:
                    right.plot(*zip(*scored), marker=".", label=label)
            left.set(xlabel="epoch", ylabel="training loss", title="training loss (each model's own)")
            right.set(xlabel="epoch", ylabel="NDCG@10", title="validation NDCG@10")
            right.legend(frameon=False, fontsize=7)
            out["training"] = plots.svg(fig)
    return out


def figure_titles(tokens, curves) -> dict[str, str]:
    """The figures' headings, worded for what this run holds (a run without CRAB claims no before/after)."""
    titles = dict(TITLES)
    if "CRAB" not in tokens:
        titles["tokens"] = "Figure 1 (right): GU of item groups by token popularity (MOR)"
    if not any("after CRAB" in by_label for by_label in curves.values()):
        titles["curves"] = "Token popularity per level (sorted P(c))"
    return titles


def write_report(run_dir: str | Path, stages: list[str]) -> list[Path]:
    """Write ``report.md``, ``report.html`` and ``report_data.json`` into ``run_dir`` (its wall-clock table lists
    ``stages`` in that order); returns their paths."""
    from crabrec.methods import methods

    run = run_folder(run_dir)
    rows = table_rows(run)
    if not rows:
        raise CrabError(f"{run}: no evaluated model yet (no models/*/metrics.json); run `crabrec run` first")
    from crabrec.report_facts import run_facts, training_curves

    exposure, tokens, curves = exposure_by_group(run), token_group_analysis(run), token_popularity_curves(run)
    training = training_curves(run)
    svgs = figures(exposure, tokens, curves, training)
    titles = figure_titles(tokens, curves)
    facts = run_facts(run)
    files = RunFiles(run)
    front = files.frontier / "frontier.svg"
    if front.is_file() and (files.frontier / "frontier.json").is_file():
        svgs = {"frontier": front.read_text(encoding="utf-8"), **svgs}
    text = files.sid_file("report.txt", rebalanced=True)
    rebalance = text.read_text() if text.is_file() else ""
    definitions = (files.load_metrics(rows[0]["model"]) or {}).get("definitions", {})
    config = files.config.read_text()
    states = {name: files.load_state(name) for name in stages if name != "report"}
    states = {name: state for name, state in states.items() if state is not None}
    stage_times = {_stage_label(name, state): state.get("seconds") for name, state in states.items()}
    vectors = (states.get("rebalance") or {}).get("summary", {}).get("vectors")
    if rebalance and vectors:
        rebalance = f"clustered on: {vectors}\n{rebalance}"
    missing = [m.label for m in methods() if m.name not in {r["model"] for r in rows}]
    data = {
        "run": facts,
        "table": rows,
        "exposure": exposure,
        "token_groups": tokens,
        "training": training,
        "stage_seconds": stage_times,
    }
    write_json(run / "report_data.json", data)
    figdir = run / "report_files"
    for name, svg in svgs.items():
        write_text(figdir / f"{name}.svg", svg)
    page = Page(run, facts, rows, missing, svgs, titles, rebalance, definitions, config, stage_times)
    write_text(run / "report.md", _markdown(page))
    write_text(run / "report.html", _html(page))
    return [run / "report.md", run / "report.html"]


def _stage_label(name: str, state: dict) -> str:
    """A stage's row label in the wall-clock table; a skipped stage says why (e.g. embed on ids-only data)."""
    skipped = state.get("summary", {}).get("skipped")
    return f"{name} ({skipped})" if skipped else name


TITLES = {
    "training": "Training curves",
    "frontier": "Accuracy–fairness frontier (crabrec frontier)",
    "exposure": "Figure 1 (left): recommendation frequency by item-popularity group",
    "tokens": "Figure 1 (right): GU of item groups by token popularity, before/after CRAB",
    "curves": "Token popularity per level before/after rebalancing (sorted P(c))",
}
NOTES = {
    "training": "Per epoch: each trained model's training loss (its own objective, so levels differ between models) "
    "and NDCG@10 on the validation rows it was selected on.",
    "frontier": "Test HR@10 against test DGU@10 for every point of each method's knob sweep; lines join each "
    "method's test Pareto set, ★ marks the point picked on validation (the rule and every number: "
    "frontier/frontier.md).",
    "exposure": "Share of all top-10 slots per popularity group (equal-size groups by training frequency); "
    "'history' is the groups' share of the test users' histories (GH). The closer to GH, the fairer.",
    "tokens": "Items grouped by the popularity of their token at each level (top 5% tokens T_pop, bottom 5% "
    "T_unp, the rest T_neu) in the base codebook, for both models; GU = share of top-10 slots − share of history.",
    "curves": "P(c) = Σ of the training frequencies of the items under token c, used tokens only, log scale.",
}


@dataclass
class Page:
    """Everything one report shows, for the Markdown and the HTML writer."""

    run: Path
    facts: dict[str, Any]
    rows: list[dict[str, Any]]
    missing: list[str]
    svgs: dict[str, str]
    titles: dict[str, str]
    rebalance: str
    definitions: dict[str, str]
    config: str
    stage_times: dict[str, Any]


def _markdown(page: Page) -> str:
    from crabrec.report_facts import facts_lines

    run, rows, missing, svgs, rebalance = page.run, page.rows, page.missing, page.svgs, page.rebalance
    definitions, config, stage_times = page.definitions, page.config, page.stage_times
    parts = [f"# crabrec report: {run.name}", "", "| run | |", "|---|---|"]
    parts += [f"| {label} | {text} |" for label, text in facts_lines(page.facts)]
    parts += ["", "## Table 1: accuracy, popularity bias and time", ""]
    parts += [markdown_table(rows), ""]
    if missing:
        parts += [f"Not in this run: {', '.join(missing)}.", ""]
    parts += ["Higher is better for HR/NDCG, lower for DGU/MGU and time; best per column in bold.", ""]
    if any(r.get("setting") for r in rows):
        parts += [PICKED_NOTE, ""]
    for against, caption, changes in change_tables(rows):
        parts += [f"### Change against {against}", "", caption, ""]
        parts += ["| method | " + " | ".join(c for c, _ in COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
        parts += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in changes]
        parts += [""]
    beyond = beyond_cells(rows)
    if beyond:
        parts += ["### Beyond GU: coverage and tail users", "", BEYOND_CAPTION, ""]
        parts += ["| method | " + " | ".join(BEYOND_COLUMNS) + " |", "|---" * (len(BEYOND_COLUMNS) + 1) + "|"]
        parts += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in beyond]
        parts += [""]
    seeds = run / "seeds" / "seeds.json"
    if seeds.is_file():
        caption, srows = seeds_table(read_checked(seeds, dict))
        parts += ["### Across seeds", "", caption, "", "| method | " + " | ".join(HEADLINE) + " | seeds |"]
        parts += ["|---" * 6 + "|", *(f"| {label} | " + " | ".join(cells) + " |" for label, cells in srows), ""]
    for name in svgs:
        parts += [f"## {page.titles[name]}", "", f"![{name}](report_files/{name}.svg)", "", NOTES[name], ""]
        if name == "frontier":
            rule, picked = frontier_picked(run)
            parts += [f"Picked on validation ({rule}); {PICKED_CHANGE}:", ""]
            parts += ["| method | setting | " + " | ".join(c for c, _ in COLUMNS) + " |", "|---" * 6 + "|"]
            parts += [f"| {label} | {setting} | " + " | ".join(cells) + " |" for label, setting, cells in picked]
            parts += [""]
    if rebalance:
        parts += ["## Codebook rebalancing (CRAB stage 1)", "", "```", rebalance.rstrip(), "```", ""]
    parts += ["## Stage wall-clock (s)", "", "| stage | seconds |", "|---|---|"]
    parts += [f"| {k} | {v:,.1f} |" for k, v in stage_times.items() if v is not None]
    parts += ["", "## Metric definitions", ""]
    parts += [f"- **{k}**: {v}" for k, v in definitions.items()]
    parts += ["", "## Config", "", "```yaml", config.rstrip(), "```", ""]
    return "\n".join(parts)


CSS = """body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}pre{background:#f7f7f7;padding:1em;
overflow-x:auto;font-size:12px}figure{margin:1.5em 0}figcaption{font-size:13px;color:#555;max-width:760px}
.fig svg{max-width:100%;height:auto}table.facts th,table.facts td{text-align:left}"""


def _html(page: Page) -> str:
    from crabrec.report_facts import facts_lines

    run, rows, missing, svgs, rebalance = page.run, page.rows, page.missing, page.svgs, page.rebalance
    definitions, config, stage_times = page.definitions, page.config, page.stage_times
    best = _best(rows)
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c, _ in COLUMNS)
    body = []
    for r in rows:
        cells = "".join(
            f"<td><b>{r[c]:.4f}</b></td>" if r[c] == best[c] else f"<td>{r[c]:.4f}</td>" for c, _ in COLUMNS
        )
        t = _fmt_s(r["train_s"])
        t = f"<b>{t}</b>" if r["train_s"] is not None and t == _fmt_s(best.get("train_s")) else t
        body.append(f"<tr><td>{e(row_label(r))}</td>{cells}<td>{t}</td><td>{_fmt_s(r['infer_s'])}</td></tr>")
    rel = relative_change(rows)
    if rel:
        body.append(
            "<tr><td><i>CRAB vs MOR</i></td>"
            + "".join(f"<td>{rel[c]:+.1f}%</td>" for c, _ in COLUMNS)
            + "<td></td><td></td></tr>"
        )
    out = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>crabrec report: {e(run.name)}</title>",
        f"<style>{CSS}</style></head><body><h1>crabrec report: {e(run.name)}</h1>",
        "<table class='facts'>",
        *(f"<tr><th>{e(label)}</th><td>{e(text)}</td></tr>" for label, text in facts_lines(page.facts)),
        "</table>",
        "<h2>Table 1: accuracy, popularity bias and time</h2>",
        f"<table><tr><th>method</th>{head}<th>train / method time (s)</th><th>test inference (s)</th></tr>",
        *body,
        "</table><p>Higher is better for HR/NDCG, lower for DGU/MGU and time; best per column in bold.</p>",
    ]
    if any(r.get("setting") for r in rows):
        out.append(f"<p>{e(PICKED_NOTE.replace('`', ''))}</p>")
    for against, caption, changes in change_tables(rows):
        out.append(f"<h3>Change against {e(against)}</h3><p>{e(caption)}</p><table><tr><th>method</th>{head}</tr>")
        out += [
            f"<tr><td>{e(name)}</td>" + "".join(f"<td>{e(c)}</td>" for c in cells) + "</tr>" for name, cells in changes
        ]
        out.append("</table>")
    beyond = beyond_cells(rows)
    if beyond:
        out.append(f"<h3>Beyond GU: coverage and tail users</h3><p>{e(BEYOND_CAPTION)}</p><table><tr><th>method</th>")
        out.append("".join(f"<th>{c}</th>" for c in BEYOND_COLUMNS) + "</tr>")
        out += [f"<tr><td>{e(lb)}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>" for lb, cells in beyond]
        out.append("</table>")
    seeds = run / "seeds" / "seeds.json"
    if seeds.is_file():
        caption, srows = seeds_table(read_checked(seeds, dict))
        out.append(f"<h3>Across seeds</h3><p>{e(caption)}</p><table><tr><th>method</th>")
        out.append("".join(f"<th>{c}</th>" for c in (*HEADLINE, "seeds")) + "</tr>")
        out += [f"<tr><td>{e(lb)}</td>" + "".join(f"<td>{e(c)}</td>" for c in cells) + "</tr>" for lb, cells in srows]
        out.append("</table>")
    if missing:
        out.append(f"<p>Not in this run: {e(', '.join(missing))}.</p>")
    for name, svg in svgs.items():
        out.append(
            f"<h2>{e(page.titles[name])}</h2><figure class='fig'>{svg}<figcaption>{e(NOTES[name])}</figcaption>"
            "</figure>"
        )
        if name == "frontier":
            rule, picked = frontier_picked(run)
            out.append(f"<p>Picked on validation ({e(rule)}); {e(PICKED_CHANGE)}:</p>")
            out.append(f"<table><tr><th>method</th><th>setting</th>{head}</tr>")
            out += [
                f"<tr><td>{e(lb)}</td><td>{e(st)}</td>" + "".join(f"<td>{e(c)}</td>" for c in cells) + "</tr>"
                for lb, st, cells in picked
            ]
            out.append("</table>")
    if rebalance:
        out.append(f"<h2>Codebook rebalancing (CRAB stage 1)</h2><pre>{e(rebalance)}</pre>")
    out.append("<h2>Stage wall-clock</h2><table><tr><th>stage</th><th>seconds</th></tr>")
    out += [f"<tr><td>{e(k)}</td><td>{v:,.1f}</td></tr>" for k, v in stage_times.items() if v is not None]
    out.append("</table><h2>Metric definitions</h2><ul>")
    out += [f"<li><b>{e(k)}</b>: {e(v)}</li>" for k, v in definitions.items()]
    out.append(f"</ul><h2>Config</h2><pre>{e(config)}</pre></body></html>")
    return "\n".join(out)
