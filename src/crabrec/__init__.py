"""crabrec: generative recommendation with semantic IDs and CRAB codebook rebalancing."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from crabrec.recommender import Recommender

__version__ = "0.1.0"


def load(
    run_dir: str | os.PathLike,
    method: str = "mor",
    *,
    beam: int | None = None,
    new_items: str | os.PathLike | pd.DataFrame | pa.Table | None = None,
    new_share: float | None = None,
    unavailable: str | os.PathLike | Sequence[str | int] | None = None,
) -> Recommender:
    """The trained ``method`` (``crabrec methods`` lists them) of the run folder ``run_dir`` that ``crabrec run``
    wrote, as a :class:`~crabrec.recommender.Recommender` ready to rank histories of the dataset's own item ids.

    ``beam``: the beam width, which is the longest list a generative method returns (default: the run's
    ``evaluate.beam``). ``new_items``: an item table (CSV, TSV, JSON lines or Parquet: an id column and the text
    columns; or the table itself: a pandas DataFrame, a pyarrow Table, a polars one) of items that arrived after
    training: those the catalogue lacks get semantic IDs from the run's quantizer and are ranked like the others,
    without retraining (methods over semantic IDs only; see docs/guides/serve.md). ``new_share``: the most of every
    top-k they take after the generated SIDs they share tokens with (round(new_share·k); default 0.1; 0: only where
    the model generates them itself, which it rarely does). ``unavailable``: items never to recommend
    (discontinued, out of stock): a list of item ids, or a file of them (a ``.txt`` of one id a line, or an item
    table); they stay readable in histories, and ``rec.set_unavailable(ids)`` replaces the set later. A request's
    own ``exclude=`` adds to it. Raises :class:`crabrec.errors.CrabError` with a one-line reason when the folder is
    not a finished run or the method was not trained in it.

    Example::

        rec = crabrec.load("runs/office-quick", "crab")
        for r in rec.recommend(["0", "1", "5"], k=5):
            print(r.rank, r.item, r.title, r.group)
    """
    from crabrec.process_state import kept
    from crabrec.recommender import load as load_run

    with kept():  # building the model seeds torch: the caller's generators stay theirs
        return load_run(run_dir, method, beam=beam, new_items=new_items, new_share=new_share, unavailable=unavailable)


def run(
    run_dir: str | os.PathLike | None = None,
    *,
    data: str | os.PathLike | pd.DataFrame | pa.Table | None = None,
    items: str | os.PathLike | pd.DataFrame | pa.Table | None = None,
    format: str | None = None,  # (named as the command's --format)
    config: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    preset: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    name: str | None = None,
    seed: int | None = None,
    until: str | Sequence[str] | None = None,
    force: str | Sequence[str] | None = None,
    seeds: int = 1,
    frontier: bool = False,
    jobs: int = 1,
    quiet: bool = False,
) -> Path:
    """Run an experiment as ``crabrec run`` does, and return its run folder (read it with :func:`results` and
    :func:`load`). Every argument is the command's option of the same name; ``overrides`` are its ``--set``, as
    values by dotted key (``{"train.epochs": 3, "data.kcore": 0}``). ``run_dir``: an existing run, whose saved
    config is used (``overrides`` and ``seed`` still apply). Finished stages are skipped, as with the command.

    ``data`` and ``items`` also take the tables themselves (a pandas DataFrame, a pyarrow Table or a table with
    ``to_arrow()`` such as a polars DataFrame, with a file's columns): stored in the run folder as Parquet
    (``input/``) and read as that file would be. Without ``name``, the run folder is named after their content
    (``frame-1f3a9c0b-quick``); with it, a changed table recomputes what depends on it, as an edited data file does.

    ``jobs`` is 1 here (the command's default is 0, automatic): more train models in spawned worker processes,
    which import the calling script again, so a script that asks for them calls ``run`` under ``if __name__ ==
    "__main__":`` (a notebook need not).

    What the command prints goes to the ``crabrec`` logger: a line per stage and epoch, and where stderr is no
    terminal (a notebook), a line a minute inside a long loop instead of a progress bar (the libraries' bars, such
    as transformers' when it saves a model, are off for the call then). A program that has set up no logging sees
    these lines on stderr, as the command prints them; one that has (``logging.basicConfig(...)``) gets them through
    its own setup. ``quiet``: warnings only and no bars, as the command's ``--quiet``. The process is left as it
    was: the random generators of Python, NumPy and torch, torch's thread count, matplotlib's settings. A bad setting or
    input raises :class:`crabrec.errors.CrabError` with the command's one-line message; Ctrl-C stops the run with
    the same cleanup, the finished stages kept.

    Example::

        run = crabrec.run(data="ratings.csv", items="movies.csv", overrides={"train.epochs": 3})
        print(crabrec.results(run)[["HR@10", "DGU@10"]])
    """
    from crabrec import frames
    from crabrec.data.objects import checked, is_table
    from crabrec.errors import CrabError
    from crabrec.process_state import kept
    from crabrec.progress import library_bars_off, shown_as_the_command_shows
    from crabrec.runner import RunOptions, run_all

    def names(value: str | Sequence[str] | None) -> list[str] | None:
        return [value] if isinstance(value, str) else list(value) if value is not None else None

    def path(value: str | os.PathLike | None) -> str | None:
        return os.fspath(value) if value is not None else None

    given = {"data": checked(data, "data"), "items": checked(items, "items")}
    tables = {key: value for key, value in given.items() if is_table(value)}  # stored in the run folder
    configs = [config] if isinstance(config, str | os.PathLike) else config
    options = RunOptions(
        run_dir=path(run_dir),
        config=[os.fspath(c) for c in configs] if configs is not None else None,
        preset=preset,
        data=None if "data" in tables else path(data),
        items=None if "items" in tables else path(items),
        data_format=format,
        name=name,
        seed=seed,
        values=dict(overrides) if overrides is not None else None,
    )
    stored = frames.resolve(options, tables) if tables else None
    cfg = stored.config if stored else options.resolve()
    try:
        with kept(), shown_as_the_command_shows(quiet), library_bars_off(only_off_terminal=True):
            run_all(cfg, names(force), names(until), seeds, frontier, jobs)  # the library bars follow ours
    except CrabError as exc:
        raise frames.as_given(exc, cfg, tables) if stored else exc from None
    finally:
        if stored:  # the tables the run reads, and no others
            frames.tidy(stored)
    return Path(cfg.run_dir)


def results(run_dir: str | os.PathLike) -> pd.DataFrame:
    """Table 1 of the run folder ``run_dir`` as a pandas DataFrame, read from the stored metrics (nothing is
    computed): one row per evaluated method, in Table 1's order, indexed by the method's name (``mor``, ``crab``
    ...), with its ``label``, the frontier ``setting`` it is shown at (empty: its configured one), every metric of
    its ``metrics.json`` (``HR@K`` and ``NDCG@K`` for K in 1, 3, 5, 10, 20; ``MGU@K`` and ``DGU@K`` for K in 1, 5,
    10, 20; ``coverage@10``, ``tail_HR@10``, ``popular_share@10``; ``inference_seconds``, ``users_per_s``,
    ``test_rows``) and ``train_s``, the method's own cost in seconds as Table 1 counts it.

    Example::

        table = crabrec.results("runs/office-quick")
        print(table[["HR@10", "NDCG@10", "DGU@10", "MGU@10"]].round(4))
    """
    from crabrec.report import results_frame

    return results_frame(run_dir)


def compare(
    run_dir: str | os.PathLike, method: str, against: str = "mor", *, samples: int | None = None
) -> pd.DataFrame:
    """``method``'s change against ``against`` (two evaluated methods of the run folder ``run_dir``), as ``crabrec
    compare`` gives it: each @10 metric's difference on the same test users with a paired-bootstrap 95% interval,
    from the stored rankings (nothing is ranked again), resampled ``samples`` times (default: the run's
    ``evaluate.bootstrap``) with the run's seed, so the intervals against MOR are those of the report.

    One row per metric (``HR@10``, ``NDCG@10``, ``MGU@10``, ``DGU@10``), with the two methods' values (columns named
    after them), ``delta`` and its interval ``low``-``high``, the relative change ``rel`` and its interval
    ``rel_low``-``rel_high``, and ``excludes_0``, whether the interval leaves out 0. ``attrs`` holds the methods'
    labels and the resampling (``users``, ``samples``, ``seed``). A method not evaluated in the run, or a bad
    argument, raises :class:`crabrec.errors.CrabError`.

    Example::

        crabrec.compare("runs/office-quick", "ppd-rr", against="rr")[["rr", "ppd-rr", "low", "high"]]
    """
    from crabrec.comparison import PYTHON, as_frame
    from crabrec.comparison import compare as paired
    from crabrec.errors import CrabError

    if not isinstance(run_dir, str | os.PathLike):
        raise CrabError(f"run_dir: expected a path to a run folder, got {type(run_dir).__name__}")
    if samples is not None and (isinstance(samples, bool) or not isinstance(samples, int) or samples < 1):
        raise CrabError(f"samples={samples!r}: expected a number of resamples ≥ 1")
    return as_frame(paired(run_dir, method, against, samples, named=PYTHON))
