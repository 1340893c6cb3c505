"""The accuracy–fairness frontier: every debiasing method swept over its own knob, each point measured on validation
and test, one point per method picked on validation by one stated rule.

Each point is a sibling run under ``<run>/frontier/<method>/<knob>=<value>/`` that links the base run's data,
embeddings, codebook and trained MOR (nothing upstream is retrained; see :func:`crabrec.runfiles.link_base`) and runs
the method's own stages with the knob set. Results: ``frontier.json``, ``frontier.csv``, ``frontier.md`` and
``frontier.svg`` in ``<run>/frontier/``; the report shows them when present. Sweeping some methods again
(``--only``) keeps the other methods' points of the earlier result.

Selection rule (validation only): among a method's points whose validation NDCG@10 is at least ``1 − max_drop``
times that of the model it debiases (``Method.base``: MOR, or TIGER for the methods over TIGER), the one with the
lowest validation DGU@10; if none qualifies, the one with the highest validation NDCG@10 (marked). docs/METHOD.md,
"Frontier".
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crabrec.config import RunConfig, dotted_set, problem, run_config_model
from crabrec.config_paths import from_values, values_of
from crabrec.errors import CrabError
from crabrec.io import write_json, write_text
from crabrec.metrics import BEYOND
from crabrec.metrics import HEADLINE as METRICS
from crabrec.report import COLUMNS, picked_rows
from crabrec.runfiles import RunFiles, link_base, read_checked

Axes = dict[str, list[Any]]  # per method: its axes, "" = its knob, else a setting name or a dotted config key


def plan(grid: dict[str, Axes] | None = None, only: list[str] | None = None) -> list[tuple[Any, list[dict[str, Any]]]]:
    """(method, settings) for every registered method with a knob. A setting maps dotted config keys to values: the
    knob over its grid (or ``grid[method][""]``), crossed with the method's own ``axes`` and with every further axis
    ``grid[method][key]`` (``key``: a name in the knob's config section, like ``epochs`` for CRAB, or a dotted key;
    it replaces a method axis of the same key). ``only`` restricts the methods."""
    from crabrec.methods import methods

    swept = [m for m in methods() if m.knob and m.grid and m.validate]
    names = [m.name for m in swept]
    for name in [*(grid or {}), *(only or [])]:
        if name not in names:
            raise CrabError(f"frontier: method {name!r} has no knob to sweep; expected one of {', '.join(names)}")
    left_out = [name for name in grid or {} if only and name not in only]
    if left_out:
        raise CrabError(f"frontier: --grid for {', '.join(left_out)}, which --only {','.join(only or [])} leaves out")
    out = []
    for m in swept:
        if only and m.name not in only:
            continue
        given = dict((grid or {}).get(m.name, {}))
        axes = {m.knob: list(given.pop("", m.grid)), **{k: list(v) for k, v in m.axes}}
        section = m.knob.rsplit(".", 1)[0]
        for key, values in given.items():
            full = key if "." in key else f"{section}.{key}"
            field = _field(full)
            if field is None:
                raise CrabError(f"frontier: --grid {m.name}:{key}: no setting {full!r} in the config")
            axes[full] = [[v] if _list_only(field) and isinstance(v, int | float) else v for v in values]
        out.append((m, [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]))
    return out


def _field(key: str) -> Any:
    """The type annotation of the run-config field the dotted ``key`` names (None: no such field)."""
    model: Any = run_config_model()
    annotation = None
    for part in key.split("."):
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return None
        model = annotation = fields[part].annotation
    return annotation


def _list_only(annotation: Any) -> bool:
    """A field that takes a list but no single number (``crab.levels``): ``--grid crab:levels=0`` means ``[0]``."""
    import typing

    args = typing.get_args(annotation) or (annotation,)
    lists = [a for a in args if typing.get_origin(a) is list]
    return bool(lists) and not any(a in (int, float) or typing.get_origin(a) is typing.Annotated for a in args)


NONE_MEANS = {"crab.levels": "all"}  # how a tag shows a setting's None


def tag(setting: dict[str, Any]) -> str:
    """A point's name and folder: ``gamma=0.1`` or ``gamma=0.1,epochs=4`` (list values joined by ``+``)."""

    def show(v: Any, key: str) -> str:
        if v is None:
            return NONE_MEANS.get(key, "none")
        if isinstance(v, list | tuple):
            return "+".join(show(x, key) for x in v)
        return f"{v:g}" if isinstance(v, int | float) and not isinstance(v, bool) else str(v).lower()

    return ",".join(f"{k.rsplit('.', 1)[-1]}={show(v, k)}" for k, v in setting.items())


def with_setting(cfg: RunConfig, setting: dict[str, Any], **top: Any) -> RunConfig:
    """``cfg`` with each dotted key of ``setting`` set (and top-level fields ``top``), validated again; a value the
    config refuses is a one-line error."""
    from pydantic import ValidationError

    data = values_of(cfg)
    for key, value in setting.items():
        dotted_set(data, key, value)
    data.update(top)
    try:
        return from_values(data, run_config_model().model_validate)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        where = next((k for k in setting if where == k or where.startswith(k + ".")), where)  # not pydantic's tags
        raise CrabError(f"frontier: {tag(setting)}: {where}: {problem(first)}") from None


def _point(method, setting: str, files: RunFiles, cfg: RunConfig, rows: int | None) -> dict[str, Any]:
    from crabrec.report import method_seconds

    test = read_checked(files.metrics(method.name), dict)
    valid = method.validate(files, cfg, rows)
    return {
        "method": method.name,
        "label": method.label,
        "setting": setting,
        "base": method.name if setting == BASE_POINT else method.base,
        **{f"valid {k}": valid[k] for k in METRICS},
        **{f"test {k}": test[k] for k in METRICS},
        **{f"test {k}": test.get(k) for k in BEYOND},
        "cost_s": method_seconds(files, method),
        "run": str(files.root),
    }


def run_frontier(
    cfg: RunConfig,
    grid: dict[str, Axes] | None = None,
    only: list[str] | None = None,
    max_drop: float = 0.05,
    jobs: int = 1,
) -> dict[str, Any]:
    """Sweep every method's knob on the run of ``cfg`` (cached per point) and pick each method's point; the points
    are computed in ``jobs`` processes at once (0: one per point up to the CPU cores, 1 on a GPU; see
    :func:`compute_points`)."""
    from crabrec.methods import get
    from crabrec.pipeline import RunContext
    from crabrec.stages import checked_config, preflight, registry

    base = RunFiles(cfg.run_dir)
    todo = [
        (method, tag(s), with_setting(cfg, s, runs_dir=str(base.frontier / method.name), name=tag(s)))
        for method, settings in plan(grid, only)
        for s in settings
    ]  # every setting checked before any work
    rows = cfg.rr.valid_samples  # the validation rows every point is scored on (RR tunes on the same)
    ctx = RunContext(config=cfg, stages=registry())
    ctx.ensure("data")
    preflight(ctx)
    for _, _, sub in todo:  # every point's settings checked against the catalogue before any point is written
        checked_config(sub, ctx.files.n_items())
    points = []
    for name in dict.fromkeys(["mor", *(m.base for m, _ in plan(grid, only))]):  # each swept method's reference
        ctx.ensure(get(name).evaluates)
        points.append(_point(get(name), BASE_POINT, RunFiles(cfg.run_dir), ctx.config, rows))
    points += compute_points(cfg, todo, rows, jobs)
    points += kept_points(base.frontier / "frontier.json", {m.name for m, _ in plan(grid, only)}, points)
    selected = select(points, max_drop)
    result = {"points": points, "selected": selected, "pareto": pareto(points), "rule": rule(max_drop)}
    return {**result, "versus": head_to_head(selected, REFERENCES, cfg), "controls": against_controls(points, cfg)}


def compute_point(method_name: str, name: str, sub: RunConfig, base: Path, rows: int | None) -> dict[str, Any]:
    """One point: the sibling run of ``sub`` linked to the base run, its method's stages run (cached), its metrics."""
    from crabrec.methods import get
    from crabrec.pipeline import RunContext
    from crabrec.stages import preflight, registry

    method = get(method_name)
    with new_folder(sub.run_dir):
        link_base(base, sub.run_dir)
        ctx = RunContext(config=sub, stages=registry())
        preflight(ctx)
        ctx.ensure(method.evaluates)
        return _point(method, name, RunFiles(sub.run_dir), ctx.config, rows)


def compute_points(cfg: RunConfig, todo: list[tuple[Any, str, RunConfig]], rows: int | None, jobs: int):
    """Every point of ``todo``, in its order. With ``jobs`` ≥ 2 (0: :func:`crabrec.parallel.auto_count`) the points
    run in that many worker processes, the CPU cores shared among them (``train.threads`` when set), the points that
    train a model handed out first; a point's results depend only on its settings and its processes' thread count.
    The first failing point stops the points not yet started, and its error is raised once the others finish."""
    from crabrec.parallel import auto_count, cores, ended_abruptly, worker_pool

    jobs = min(jobs or auto_count(cfg, len(todo)), len(todo))
    if jobs < 2:
        return [compute_point(method.name, name, sub, cfg.run_dir, rows) for method, name, sub in todo]
    import logging
    from concurrent.futures import FIRST_EXCEPTION, wait

    threads = cfg.train.threads or max(1, cores() // jobs)
    log = logging.getLogger("crabrec")
    log.info("frontier: %d points in %d processes, %d thread(s) each", len(todo), jobs, threads)
    order = sorted(range(len(todo)), key=lambda i: todo[i][0].trains is None)  # training points first: the longest
    worker = (threads, log.level)
    with worker_pool(jobs) as pool:
        futures = {}
        try:
            for i in order:
                method, name, sub = todo[i]
                point = (method.name, name, values_of(sub), cfg.run_dir, rows)
                futures[i] = pool.submit(_point_worker, point, worker)
            done, _ = wait(futures.values(), return_when=FIRST_EXCEPTION)
            failed = next((f.exception() for f in futures.values() if f in done and f.exception() is not None), None)
            if failed is not None:
                raise ended_abruptly(failed, "a frontier point")
        except BaseException:  # a failed point, or Ctrl-C: the points not started are not started
            for future in futures.values():
                future.cancel()  # the points already running finish or stop (and keep their cached stages)
            raise
    return [futures[i].result() for i in range(len(todo))]


def _point_worker(point: tuple[str, str, dict[str, Any], Path, int | None], worker: tuple[int, int]) -> dict[str, Any]:
    """In a worker process: :func:`compute_point` of ``point`` (its config as plain values) with ``worker`` =
    ``(torch threads, log level)``, its log lines tagged with the point."""
    from crabrec.parallel import worker_job, worker_setup

    method_name, name, values, base, rows = point
    worker_setup(f"{method_name} {name}", *worker)
    try:
        with worker_job():
            return compute_point(method_name, name, from_values(values), base, rows)
    except CrabError as exc:  # a user error crosses the process boundary as itself, without the worker's traceback
        raise CrabError(str(exc)) from None


# The strongest published debiasing method here, per model debiased: every picked point over that model is compared
# with its pick (RR over MOR's beams, RR over TIGER's).
REFERENCES = {"mor": "rr", "tiger": "tiger-rr"}


def head_to_head(selected: dict[str, dict[str, Any]], refs: dict[str, str], cfg: RunConfig) -> dict[str, Any]:
    """Each picked point against the picked point of the reference over the same model (``refs``: model -> method)
    on the same test rows: the change of HR@10, NDCG@10, MGU@10 and DGU@10 with paired-bootstrap 95% intervals
    (``evaluate.bootstrap`` resamples, seeded by ``seed``). A point whose reference was not swept, or every point
    when the bootstrap is off, is left out."""
    from crabrec.metrics.bootstrap import paired_bootstrap

    if not cfg.evaluate.bootstrap:
        return {}
    out, parts = {}, {}
    for name, p in selected.items():
        ref = refs.get(based_on(p))
        if ref is None or ref == name or ref not in selected:
            continue
        if ref not in parts:
            parts[ref] = _test_parts(selected[ref], cfg)
        change = paired_bootstrap(parts[ref], _test_parts(p, cfg), cfg.evaluate.bootstrap, cfg.seed)
        out[name] = {"against": ref, **change}
    return out


def _settings(text: str) -> dict[str, str]:
    """The settings a tag names (``gamma=0,ratio=0.1`` -> ``{"gamma": "0", "ratio": "0.1"}``; ``base``: none)."""
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


def control_pairs(points: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(point, its control) for every point of a method with a ``control`` (:class:`crabrec.methods.Method`): the
    control is the first point with the control's values and the point's other settings (``control_free`` keys
    aside); points without one, and the controls themselves, are left out."""
    from crabrec.methods import methods

    pairs = []
    for m in methods():
        if not m.control:
            continue
        off = _settings(tag(dict(m.control)))
        free = set(off) | {key.rsplit(".", 1)[-1] for key in m.control_free}
        mine = [(p, _settings(p["setting"])) for p in points if p["method"] == m.name]
        controls = [(p, s) for p, s in mine if all(s.get(k) == v for k, v in off.items())]
        for p, s in mine:
            if any(s.get(k) == v for k, v in off.items()):
                continue  # a control itself (or half of one)
            rest = {k: v for k, v in s.items() if k not in free}
            match = [c for c, cs in controls if {k: v for k, v in cs.items() if k not in free} == rest]
            if match:
                pairs.append((p, match[0]))
    return pairs


def against_controls(points: list[dict[str, Any]], cfg: RunConfig) -> list[dict[str, Any]]:
    """Each point against its control on the same test rows (:func:`control_pairs`): the change of the @10 metrics
    with paired-bootstrap 95% intervals, as :func:`head_to_head`; empty when the bootstrap is off."""
    from crabrec.metrics.bootstrap import paired_bootstrap

    if not cfg.evaluate.bootstrap:
        return []
    return [
        {
            "method": p["method"],
            "setting": p["setting"],
            "against": c["setting"],
            **paired_bootstrap(_test_parts(c, cfg), _test_parts(p, cfg), cfg.evaluate.bootstrap, cfg.seed),
        }
        for p, c in control_pairs(points)
    ]


def _test_parts(point: dict[str, Any], cfg: RunConfig):
    """Per-test-row metric parts of a picked point's stored test rankings (over the SIDs its method ranks)."""
    from crabrec.evaluation import ranked_parts, test_rows
    from crabrec.methods import get

    files, method = RunFiles(Path(point["run"])), get(point["method"])
    return ranked_parts(files, method.name, method.sids, test_rows(files, cfg.evaluate))


@contextlib.contextmanager
def new_folder(path: Path) -> Iterator[None]:
    """A point's folder that this command creates is removed again when its point fails (an existing one, with its
    cached stages, is kept): a failing frontier leaves no half-made sibling runs behind."""
    existed = path.exists()
    try:
        yield
    except Exception:  # not on Ctrl-C: an interrupted point resumes from its checkpoint
        if not existed:
            shutil.rmtree(path, ignore_errors=True)
        raise


def kept_points(path: Path, swept: set[str], bases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points of an earlier frontier for the methods not swept now (``--only crab`` keeps RR's, RW's ...), and
    the reference points (``base``) that those need and ``bases``, measured now, lacks (TIGER's, for the methods
    over TIGER when ``--only crab``)."""
    if not path.is_file():
        return []
    earlier = read_checked(path, dict).get("points")
    if not isinstance(earlier, list):
        raise CrabError(f"{path}: not a frontier result; delete it or re-run the whole frontier")
    earlier = [p for p in earlier if isinstance(p, dict)]
    kept = [p for p in earlier if p.get("setting") != BASE_POINT and p.get("method") not in swept]
    needed = {based_on(p) for p in kept} - {p["method"] for p in bases}
    return [p for p in earlier if p.get("setting") == BASE_POINT and p.get("method") in needed] + kept


BASE_POINT = "base"  # the setting of a reference point: the model the swept methods debias, as it is


def based_on(point: dict[str, Any]) -> str:
    """The model a point's method debiases (its reference point's method; MOR in results written before ``base``)."""
    return str(point.get("base") or "mor")


def rule(max_drop: float) -> str:
    return (
        f"per method, the lowest validation DGU@10 among its points with validation NDCG@10 ≥ {1 - max_drop:.2f} × "
        "that of the model it debiases (MOR, or TIGER for a method over TIGER); if none, its highest validation NDCG@10"
    )


def select(points: list[dict[str, Any]], max_drop: float) -> dict[str, dict[str, Any]]:
    """Each method's point by the validation rule (the reference point of the model it debiases, MOR's or TIGER's,
    is the reference)."""
    reference = {p["method"]: p["valid NDCG@10"] for p in points if p["setting"] == BASE_POINT}
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(p["method"] for p in points if p["setting"] != BASE_POINT):
        mine = [p for p in points if p["method"] == name]
        base = reference[based_on(mine[0])]
        ok = [p for p in mine if p["valid NDCG@10"] >= (1 - max_drop) * base]
        if ok:
            best = min(ok, key=lambda p: (p["valid DGU@10"], -p["valid NDCG@10"]))
            out[name] = {**best, "within_drop": True}
        else:
            out[name] = {**max(mine, key=lambda p: p["valid NDCG@10"]), "within_drop": False}
    return out


def pareto(points: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per method, the settings on its test Pareto set of (HR@10 up, DGU@10 down)."""
    out: dict[str, list[str]] = {}
    for name in dict.fromkeys(p["method"] for p in points):
        mine = [p for p in points if p["method"] == name]
        out[name] = [p["setting"] for p in mine if not any(dominates(q, p, "test") for q in mine if q is not p)]
    return out


def dominates(a: dict[str, Any], b: dict[str, Any], split: str) -> bool:
    """``a`` is at least as good as ``b`` on HR@10 and DGU@10 of ``split`` and better on one."""
    ha, hb, da, db = a[f"{split} HR@10"], b[f"{split} HR@10"], a[f"{split} DGU@10"], b[f"{split} DGU@10"]
    return ha >= hb and da <= db and (ha > hb or da < db)


def write_frontier(result: dict[str, Any], out: Path) -> list[Path]:
    """``frontier.json``, ``.csv``, ``.md`` and ``.svg`` under ``out``."""
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(result["points"]).drop(columns=["run"])
    paths = [out / "frontier.json", out / "frontier.csv", out / "frontier.md", out / "frontier.svg"]
    write_json(paths[0], result)
    write_text(paths[1], frame.to_csv(index=False))
    write_text(paths[2], markdown(result))
    write_text(paths[3], figure(result))
    return paths


def _cells(p: dict[str, Any], split: str) -> str:
    return " | ".join(f"{p[f'{split} {k}']:.4f}" for k in METRICS)


def markdown(result: dict[str, Any]) -> str:
    head = " | ".join(f"valid {k}" for k in METRICS) + " | " + " | ".join(f"test {k}" for k in METRICS)
    lines = ["# Accuracy–fairness frontier", "", f"Selection rule: {result['rule']}.", ""]
    lines += [f"| method | setting | {head} | cost (s) | test Pareto | picked |", "|---" * 13 + "|"]
    for p in result["points"]:
        picked = result["selected"].get(p["method"], {}).get("setting") == p["setting"]
        on_front = p["setting"] in result["pareto"].get(p["method"], [])
        cost = "–" if p["cost_s"] is None else f"{p['cost_s']:,.0f}"
        lines.append(
            f"| {p['label']} | {p['setting']} | {_cells(p, 'valid')} | {_cells(p, 'test')} | {cost} | "
            f"{'yes' if on_front else ''} | {'**picked**' if picked else ''} |"
        )
    lines += ["", "## Picked points (test value, change against the model it debiases: MOR or TIGER)", ""]
    lines += ["| method | setting | " + " | ".join(c for c, _ in COLUMNS) + " | dominated by |", "|---" * 7 + "|"]
    picked = list(result["selected"].values())
    for p, (label, setting, cells) in zip(picked, picked_rows(result)):
        by = [q["label"] for q in picked if q is not p and dominates(q, p, "test")]
        note = "" if p["within_drop"] else " (no point within the NDCG budget)"
        lines.append(f"| {label} | {setting}{note} | " + " | ".join(cells) + f" | {', '.join(by) or '–'} |")
    base = [p for p in result["points"] if p["setting"] == BASE_POINT]
    return "\n".join(lines + beyond_lines(base + picked) + versus_lines(result) + control_lines(result)) + "\n"


def beyond_lines(picked: list[dict[str, Any]]) -> list[str]:
    """Catalogue coverage and tail-user HR@10 (test) at the picked points that have them."""
    rows = [p for p in picked if all(isinstance(p.get(f"test {k}"), int | float) for k in BEYOND)]
    if not rows:
        return []
    lines = ["", "## Beyond GU at the picked points (test)", "", "| method | " + " | ".join(BEYOND) + " |"]
    lines.append("|---" * (len(BEYOND) + 1) + "|")
    return lines + [f"| {p['label']} | " + " | ".join(f"{p[f'test {k}']:.4f}" for k in BEYOND) + " |" for p in rows]


def versus_lines(result: dict[str, Any]) -> list[str]:
    """The head-to-head tables, one per reference (RR's pick, TIGER+RR's): each picked point's change against it,
    with 95% intervals (``*``: the interval excludes 0)."""
    versus = result.get("versus") or {}
    lines: list[str] = []
    for ref in dict.fromkeys(v["against"] for v in versus.values()):
        label = result["selected"][ref]["label"]
        lines += ["", f"## Head to head against {label}'s picked point (test, paired bootstrap 95% CI)", ""]
        lines += ["| method | " + " | ".join(f"Δ {c}" for c, _ in COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
        for name, v in versus.items():
            if v["against"] == ref:
                lines.append(f"| {result['selected'][name]['label']} | " + " | ".join(_delta_cells(v)) + " |")
    return lines


def control_lines(result: dict[str, Any]) -> list[str]:
    """The table of each point against its control (:func:`against_controls`), as the head-to-head table."""
    rows = result.get("controls") or []
    if not rows:
        return []
    from crabrec.methods import get

    labels = {p["method"]: p["label"] for p in result["points"]}
    offs = "; ".join(
        f"{labels.get(name, name)}: " + ", ".join(f"`{k}={v}`" for k, v in get(name).control)
        for name in dict.fromkeys(v["method"] for v in rows)
    )
    lines = ["", "## Each point against its control (test, paired bootstrap 95% CI)", ""]
    lines += [f"A control runs the method with its own change turned off ({offs}); the difference is what it buys.", ""]
    lines += ["| method | setting | control | " + " | ".join(f"Δ {c}" for c, _ in COLUMNS) + " |"]
    lines.append("|---" * (len(COLUMNS) + 3) + "|")
    for v in rows:
        cells = " | ".join(_delta_cells(v))
        lines.append(f"| {labels.get(v['method'], v['method'])} | {v['setting']} | {v['against']} | {cells} |")
    return lines


def _delta_cells(v: dict[str, Any]) -> list[str]:
    """Each @10 metric's change with its interval; ``*``: the interval excludes 0."""
    cells = []
    for c, _ in COLUMNS:
        lo, hi = v[c]["ci"]
        star = "*" if lo > 0 or hi < 0 else ""
        cells.append(f"{v[c]['delta']:+.4f} [{lo:+.4f}, {hi:+.4f}]{star}")
    return cells


def figure(result: dict[str, Any]) -> str:
    """Test HR@10 against test DGU@10: every point, each method's Pareto set joined, its picked point starred."""
    from crabrec import plots

    with plots.drawing(figsize=(6.4, 4.2)) as fig:
        ax = fig.subplots()
        for name in dict.fromkeys(p["method"] for p in result["points"]):
            mine = [p for p in result["points"] if p["method"] == name]
            front = sorted(
                (p for p in mine if p["setting"] in result["pareto"].get(name, [])), key=lambda p: p["test DGU@10"]
            )
            (line,) = ax.plot(
                [p["test DGU@10"] for p in front], [p["test HR@10"] for p in front], marker="o", label=mine[0]["label"]
            )
            ax.scatter([p["test DGU@10"] for p in mine], [p["test HR@10"] for p in mine], color=line.get_color(), s=14)
            pick = result["selected"].get(name)
            if pick:
                ax.scatter([pick["test DGU@10"]], [pick["test HR@10"]], marker="*", s=180, color=line.get_color())
        ax.set_xlabel("test DGU@10 (lower is fairer)")
        ax.set_ylabel("test HR@10")
        ax.set_title("Frontier: lines = each method's test Pareto set, ★ = picked on validation", fontsize=9)
        ax.legend(frameon=False, fontsize=8)
        return plots.svg(fig, header=True)
