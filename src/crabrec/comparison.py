"""``crabrec compare``: two evaluated methods of one run on the same test rows, each @10 metric's difference with a
paired-bootstrap 95% interval, from their stored rankings (nothing is ranked again). The comparison every
``vs_mor`` in ``metrics.json`` holds against MOR, for any pair: TIGER+PPD against TIGER+RR, PPD against RR."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from crabrec.errors import CrabError
from crabrec.metrics import HEADLINE

if TYPE_CHECKING:
    import pandas as pd


COMMAND = {"method": "--method", "against": "--against", "samples": "--samples N"}  # how messages name the options
PYTHON = {"method": "method", "against": "against", "samples": "samples=N"}  # ... and crabrec.compare's arguments


def compare(
    run_dir: str | Path, method: str, against: str, samples: int | None = None, named: dict[str, str] = COMMAND
) -> dict[str, Any]:
    """``method``'s change against ``against`` on the run's test rows: per @10 metric ``base`` (against's value),
    ``value``, ``delta``, ``ci``, ``rel`` and ``rel_ci``, resampled ``samples`` times (default: the run's
    ``evaluate.bootstrap``) with the run's seed, as the report's intervals are. ``named``: how an error names the
    options (:data:`COMMAND`, :data:`PYTHON`)."""
    from crabrec.config import load_saved
    from crabrec.evaluation import ranked_parts, test_rows
    from crabrec.methods import get
    from crabrec.metrics.bootstrap import paired_bootstrap
    from crabrec.runfiles import RunFiles, run_folder

    root = run_folder(run_dir)
    chosen, base = get(method, flag=named["method"]), get(against, flag=named["against"])
    if chosen.name == base.name:
        raise CrabError(f"{named['method']} and {named['against']} are both {method!r}; name two methods")
    cfg = load_saved(root)
    samples = cfg.evaluate.bootstrap if samples is None else samples
    if not samples:
        raise CrabError(f"{root / 'config.yaml'}: evaluate.bootstrap is 0; give {named['samples']} (e.g. 1000)")
    files = RunFiles(root)
    test = test_rows(files, cfg.evaluate)
    before, after = (ranked_parts(files, m.name, m.sids, test) for m in (base, chosen))
    change = paired_bootstrap(before, after, samples, cfg.seed)
    bootstrap = {"samples": samples, "seed": cfg.seed, "users": len(test), "level": 0.95, "paired": True}
    labels = {"method": chosen.label, "against": base.label}
    return {"method": chosen.name, "against": base.name, "labels": labels, **change, "bootstrap": bootstrap}


def as_frame(result: dict[str, Any]) -> pd.DataFrame:
    """:func:`compare`'s result as a table: one row per @10 metric (``HR@10`` ...), with ``against``'s value, the
    method's, their ``delta`` and its interval (``low``, ``high``), the relative change ``rel`` and its interval
    (``rel_low``, ``rel_high``; NaN where ``against`` is 0), and ``excludes_0`` (whether the interval leaves out 0).
    What was compared, on how many rows and resamples, is in the frame's ``attrs``."""
    import pandas as pd

    rows = {}
    for k in HEADLINE:
        v = result[k]
        (low, high), (rel_low, rel_high) = v["ci"], v["rel_ci"] or (None, None)
        rows[k] = {
            result["against"]: v["base"], result["method"]: v["value"], "delta": v["delta"], "low": low, "high": high,
            "rel": v["rel"], "rel_low": rel_low, "rel_high": rel_high, "excludes_0": low > 0 or high < 0,
        }  # fmt: skip
    frame = pd.DataFrame.from_dict(rows, orient="index").astype({"rel": float, "rel_low": float, "rel_high": float})
    frame.attrs = {key: result[key] for key in ("method", "against", "labels", "bootstrap")}
    return frame


def render(result: dict[str, Any]) -> str:
    """The comparison as a table: each metric's two values, the difference and its interval (``*``: it excludes 0)."""
    labels, boot = result["labels"], result["bootstrap"]
    lines = [
        f"{labels['method']} against {labels['against']}: {boot['users']:,} test rows, paired bootstrap "
        f"({boot['samples']:,} resamples, seed {boot['seed']}), 95% intervals; * = the interval excludes 0",
    ]
    wa, wm = max(len(labels["against"]), 8), max(len(labels["method"]), 8)
    lines.append(
        f"{'metric':<9} {labels['against']:>{wa}} {labels['method']:>{wm}} {'difference [95% interval]':>30} "
        f"{'relative':>9}"
    )
    for k in HEADLINE:
        v = result[k]
        lo, hi = v["ci"]
        star = "*" if lo > 0 or hi < 0 else " "
        rel = "" if v["rel"] is None else f"{v['rel'] * 100:+.1f}%"
        diff = f"{v['delta']:+.4f} [{lo:+.4f}, {hi:+.4f}]{star}"
        lines.append(f"{k:<9} {v['base']:>{wa}.4f} {v['value']:>{wm}.4f} {diff:>30} {rel:>9}")
    return "\n".join(lines)
