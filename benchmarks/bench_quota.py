"""A training step under a container's CPU quota: torch's own thread count (one per core it may run on) against
crabrec's (the quota's cores), side by side in the same cgroup.

    sudo python benchmarks/bench_quota.py [runs/office-quick] [--cores 1] [--steps 30]

The run needs its SIDs (``crabrec run --until tokenize``). The benchmark makes a cgroup with a CPU quota of
``--cores`` cores' time per period (cgroup v2 ``cpu.max``, or v1 ``cpu.cfs_quota_us``), as ``docker run --cpus`` or a
Kubernetes CPU limit does, and times MOR's step there with ``benchmarks/bench_train.py`` twice: at the thread count
torch picks (``train.threads`` = the cores the process may run on) and at crabrec's default. It needs a cgroup file
system it may write (root); without one it says so and exits 2.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).with_name("bench_train.py")


def make_cgroup(cores: float) -> Path:
    """A new cgroup granting ``cores`` cores' time per 100 ms period; its folder."""
    period = 100_000
    v2 = Path("/sys/fs/cgroup/unified") if Path("/sys/fs/cgroup/unified/cgroup.procs").exists() else None
    v2 = v2 or (Path("/sys/fs/cgroup") if Path("/sys/fs/cgroup/cgroup.controllers").exists() else None)
    v1 = Path("/sys/fs/cgroup/cpu")
    if v1.is_dir() and (v1 / "cpu.cfs_quota_us").exists():
        folder = v1 / f"crabrec-bench-{os.getpid()}"
        folder.mkdir()
        (folder / "cpu.cfs_period_us").write_text(str(period))
        (folder / "cpu.cfs_quota_us").write_text(str(int(cores * period)))
    elif v2 is not None:
        folder = v2 / f"crabrec-bench-{os.getpid()}"
        folder.mkdir()
        (folder / "cpu.max").write_text(f"{int(cores * period)} {period}")
    else:
        raise OSError("no cgroup file system with a CPU controller")
    return folder


def step_ms(folder: Path, run: str, steps: int, threads: int | None) -> float:
    """MOR's mean step in ms, timed by bench_train.py in ``folder``'s cgroup."""
    sets = ["--set", f"train.threads={threads}"] if threads else []
    command = [sys.executable, str(BENCH), run, "--stages", "train", "--steps", str(steps), *sets]
    join = f"echo $$ > {folder / 'cgroup.procs'} && exec \"$@\""
    out = subprocess.run(["sh", "-c", join, "sh", *command], capture_output=True, text=True, check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("| MOR |"))
    return float(re.split(r"\s*\|\s*", row)[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", default="runs/office-quick")
    parser.add_argument("--cores", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    if not (Path(args.run) / "config.yaml").is_file():
        print(f"bench_quota: {args.run}: not a run; make one with `crabrec run --until tokenize`", file=sys.stderr)
        sys.exit(2)
    try:
        folder = make_cgroup(args.cores)
    except OSError as exc:
        why = f"bench_quota: cannot make a cgroup with a CPU quota here ({exc}); run it as root on Linux"
        print(why, file=sys.stderr)
        sys.exit(2)
    try:
        host = len(os.sched_getaffinity(0))
        torch_ms = step_ms(folder, args.run, args.steps, host)
        ours_ms = step_ms(folder, args.run, args.steps, None)
    finally:
        folder.rmdir()  # its processes have ended
    print(f"MOR step under a quota of {args.cores:g} core(s) on a host of {host} cores, {args.steps} timed steps\n")
    print("| threads | MOR step (ms) | vs crabrec's |")
    print("|---|---|---|")
    print(f"| torch's default ({host}) | {torch_ms:.1f} | {torch_ms / ours_ms:.2f}x |")
    print(f"| crabrec's default (the quota's) | {ours_ms:.1f} | 1.00x |")


if __name__ == "__main__":
    main()
