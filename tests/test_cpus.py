"""The cores a process may use under a container's CPU quota, read from a cgroup file system laid out in a folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from crabrec import cpus


def layout(root: Path, cgroup: str, files: dict[str, str]) -> Path:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(cgroup)
    for name, text in files.items():
        path = root / "sys/fs/cgroup" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize(
    "cgroup, files, quota",
    [
        ("0::/\n", {"cpu.max": "150000 100000\n"}, 1.5),  # docker --cpus 1.5 (cgroup v2, its own namespace)
        ("0::/\n", {"cpu.max": "max 100000\n"}, None),  # no limit
        ("0::/a/b\n", {"a/cpu.max": "200000 100000", "a/b/cpu.max": "max 100000"}, 2.0),  # the limit above
        ("0::/a/b\n", {"a/cpu.max": "400000 100000", "a/b/cpu.max": "300000 100000"}, 3.0),  # the tighter one
        (  # cgroup v1 in a container: the path is the host's, the mount the container's own cgroup
            "5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n",
            {"cpu,cpuacct/cpu.cfs_quota_us": "50000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"},
            0.5,
        ),
        ("5:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ("0::/\n", {"cpu.max": "garbled"}, None),  # unreadable: no quota assumed
        ("0::/\n", {}, None),  # no cgroup files (not mounted)
    ],
)
def test_the_quota_is_read_from_either_cgroup_version(tmp_path, cgroup, files, quota):
    assert cpus.quota_cores(layout(tmp_path, cgroup, files)) == quota


def test_the_quota_caps_the_cores_rounded_up(tmp_path, monkeypatch):
    monkeypatch.setattr(cpus.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert cpus.available(layout(tmp_path / "a", "0::/\n", {"cpu.max": "150000 100000"})) == 2
    assert cpus.available(layout(tmp_path / "b", "0::/\n", {"cpu.max": "10000 100000"})) == 1
    assert cpus.available(layout(tmp_path / "c", "0::/\n", {"cpu.max": "max 100000"})) == 64
    assert cpus.available(tmp_path / "nothing") == 64  # no /proc: the cores it may run on


def test_a_stage_trains_with_no_more_threads_than_the_quota(monkeypatch):
    """torch counts the host's cores; a stage without train.threads (and ranking in recommend and serve) uses no
    more than the quota's, unless OMP_NUM_THREADS chose torch's count."""
    monkeypatch.setattr(cpus, "available", lambda root=None: 2)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert cpus.torch_threads(64) == 2 and cpus.torch_threads(1) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "64")
    assert cpus.torch_threads(64) == 64
