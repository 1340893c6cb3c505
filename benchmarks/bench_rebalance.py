"""CRAB's rebalancing on a large catalogue: the residuals held one level at a time (crabrec) against every level held
and each move added to every deeper level at once (the reference, ``crab.rebalance.EveryLevel``), each in its own
process, the rebalanced codebooks checked equal bit for bit.

    python benchmarks/bench_rebalance.py [--items 300000] [--dim 384] [--levels 3] [--codes 256] [--ratio 0.1]
        [--crab-levels 0,1,2] [--sides every,level,against] [--against /tmp/crabrec-old]

Random Gaussian item vectors quantized by crabrec's RQ-KMeans with a dedup level (as ``crabrec tokenize`` does),
saved, and loaded by each process as ``crabrec rebalance`` loads a run's codebook; item frequencies long-tailed
(Zipf). Prints each side's seconds and peak resident memory (the process's, loading included) and the residuals
file's size. ``--against``: another version's source tree (a git worktree), whose own ``rebalance`` is the side
``against``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def child(folder: Path, held: str, crab_levels: list[int], ratio: float) -> None:
    """Load the codebook, rebalance it with ``held`` residuals, save the result into ``folder/held``."""
    from crabrec.config import CrabConfig
    from crabrec.crab import rebalance as module
    from crabrec.sid.codebook import Codebook

    cb = Codebook.load(folder / "sid" / "codebook.json")
    freq = np.load(folder / "freq.npy")
    start = time.perf_counter()
    cfg = CrabConfig(ratio=ratio, levels=crab_levels)
    if held == "against":  # another version's rebalancing, as it is
        out = module.rebalance(cb, freq, cfg, 0, progress=False)
    else:
        kept = module.EveryLevel if held == "every" else module.LevelResiduals
        out = module.rebalance(cb, freq, cfg, 0, progress=False, held=kept)
    seconds = time.perf_counter() - start
    out.codebook.save(folder / held / "codebook.json")
    print(seconds)


def measured(folder: Path, held: str, args) -> tuple[float, float]:
    """Seconds of the rebalancing and peak resident MB of its process."""
    cmd = [sys.executable, __file__, "--child", str(folder), "--held", held, "--crab-levels", args.crab_levels,
           "--ratio", str(args.ratio)]  # fmt: skip
    env = dict(os.environ)
    if held == "against":
        env["PYTHONPATH"] = os.pathsep.join([str(args.against / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read().decode()
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{held} failed")
    return float(out.split()[-1]), usage.ru_maxrss / 1024


def same(a: Path, b: Path) -> bool:
    """Whether two saved codebooks hold the same codes, codewords and residual arrays."""
    for name in ("codebook.codewords.npz", "codebook.residuals.npz"):
        x, y = np.load(a / name), np.load(b / name)
        if sorted(x.files) != sorted(y.files) or not all(np.array_equal(x[k], y[k]) for k in x.files):
            return False
    return (a / "codebook.json").read_text() == (b / "codebook.json").read_text()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=300_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--levels", type=int, default=3, help="semantic levels of the quantizer")
    ap.add_argument("--codes", type=int, default=256, help="codebook size per level")
    ap.add_argument("--ratio", type=float, default=0.1, help="crab.ratio")
    ap.add_argument("--crab-levels", default="", help="crab.levels, comma-separated (default: every level)")
    ap.add_argument("--sides", default="every,level", help="every (the reference), level (crabrec), against")
    ap.add_argument("--against", type=Path, help="another version's source tree, for the side `against`")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--held", help=argparse.SUPPRESS)
    args = ap.parse_args()
    crab_levels = [int(v) for v in args.crab_levels.split(",")] if args.crab_levels else None
    if args.child is not None:
        return child(args.child, args.held, crab_levels, args.ratio)
    from crabrec.config import TokenizeConfig
    from crabrec.sid.build import build_codebook

    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.items, args.dim)).astype(np.float32)
    start = time.perf_counter()
    cb = build_codebook(TokenizeConfig(levels=args.levels, codebook_size=args.codes), x,
                        [f"i{i}" for i in range(args.items)], seed=0)  # fmt: skip
    del x
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cb.save(folder / "sid" / "codebook.json")
        np.save(folder / "freq.npy", rng.zipf(1.3, args.items).astype(np.float64))
        del cb
        print(f"{args.items:,} items x {args.dim}, {args.levels} levels of {args.codes} and a dedup level "
              f"(quantized in {time.perf_counter() - start:.0f} s); crab.ratio {args.ratio}, crab.levels "
              f"{crab_levels or 'all'}\n")  # fmt: skip
        sides = args.sides.split(",")
        rows = {held: measured(folder, held, args) for held in sides}
        labels = {"every": "every level (reference)", "level": "one level at a time (crabrec)",
                  "against": f"{args.against}"}  # fmt: skip
        print("| residuals held | seconds | peak MB | residuals file (MB) |\n|---|---|---|---|")
        for held in sides:
            size = (folder / held / "codebook.residuals.npz").stat().st_size / 2**20
            print(f"| {labels[held]} | {rows[held][0]:.1f} | {rows[held][1]:,.0f} | {size:,.0f} |")
        for other in sides[1:]:
            print(f"\n{sides[0]} and {other}, the same codebook: "
                  f"{'yes' if same(folder / sides[0], folder / other) else 'NO'}")  # fmt: skip


if __name__ == "__main__":
    main()
