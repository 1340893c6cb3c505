"""``crabrec serve``: an HTTP JSON service over a trained run, with dynamic batching (see :mod:`.app`)."""

from __future__ import annotations

from pathlib import Path


def served_methods(run_dir: str | Path, chosen: list[str] | None) -> list[str]:
    """``chosen``, else every method of the run that has been evaluated (Table 1's order)."""
    from crabrec.errors import CrabError
    from crabrec.methods import get, methods
    from crabrec.runfiles import RunFiles

    if chosen:
        return list(dict.fromkeys(get(m).name for m in chosen))
    files = RunFiles(run_dir)
    found = [m.name for m in methods() if m.ranker is not None and files.metrics(m.name).is_file()]
    if not found:
        raise CrabError(f"{run_dir}: no evaluated method to serve; run `crabrec run` (or pass --method)")
    return found


def build_app(run_dir: str | Path, chosen: list[str] | None = None, **options):
    """The service app of a run: loads each served method once (the first is the default of a request)."""
    from crabrec.recommender import load
    from crabrec.serve.app import create_app

    recommenders = {m: load(run_dir, m) for m in served_methods(run_dir, chosen)}
    return create_app(run_dir, recommenders, **options)
