"""The CPU cores this process may use: those it may run on, capped by a cgroup CPU quota.

A container started with ``docker run --cpus 2`` or a Kubernetes pod with a CPU limit of 2 on a 64-core host may run
on all 64 cores, but only for 2 cores' worth of time each period. torch's default thread count (and a count of
cores from ``os.sched_getaffinity``) is 64 there: 64 threads share 2 cores' time, and each period ends with most of
them stopped mid-step. The quota (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), at the
process's own cgroup or any above it, caps the count, rounded up.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

V1_FOLDERS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


def available(root: Path = Path("/")) -> int:
    """Cores this process may use (at least 1); ``root``: where ``/proc`` and ``/sys`` are (a test's own)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = quota_cores(root)
    return max(1, min(cores, math.ceil(quota))) if quota is not None else max(1, cores)


def torch_threads(torch_count: int) -> int:
    """The threads torch trains and ranks with where no setting chose them: its own count (the host's cores), but no
    more than :func:`available`, unless ``OMP_NUM_THREADS`` chose that count."""
    return torch_count if os.environ.get("OMP_NUM_THREADS") else min(torch_count, available())


def quota_cores(root: Path = Path("/")) -> float | None:
    """The cores' worth of time a cgroup CPU quota grants per period, or None when no quota applies (or none can be
    read: not Linux, no cgroup file system)."""
    try:
        lines = (root / "proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    found: list[float] = []
    cgroups = root / "sys/fs/cgroup"
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # cgroup v2: one hierarchy, mounted at /sys/fs/cgroup (or its unified/ folder)
            for mount in (cgroups, cgroups / "unified"):
                found += [q for q in (_v2(f) for f in _folders(mount, path)) if q is not None]
        elif "cpu" in controllers.split(","):
            for name in V1_FOLDERS:
                found += [q for q in (_v1(f) for f in _folders(cgroups / name, path)) if q is not None]
    return min(found) if found else None


def _folders(mount: Path, path: str) -> list[Path]:
    """The process's cgroup folder under ``mount`` and every folder above it, up to the mount itself (in a container
    the mount is the container's own cgroup, and the path, named from the host, may not exist under it)."""
    own = mount / path.strip("/")
    return [own, *(p for p in own.parents if p == mount or mount in p.parents)]


def _v2(folder: Path) -> float | None:
    try:
        quota, period = (folder / "cpu.max").read_text().split()[:2]
        return int(quota) / int(period) if quota != "max" and int(period) > 0 else None
    except (OSError, ValueError):
        return None


def _v1(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None
