"""Print the installed version of each direct dependency of pyproject.toml, and fail when one sits above its floor:
another dependency needs more, so that floor is untested and should be raised (run by ``check_floors.sh``)."""

from __future__ import annotations

import re
import sys
from importlib.metadata import version
from pathlib import Path

from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomllib's forerunner, which pytest needs there
    import tomli as tomllib

EXEMPT = {"torch"}  # the CPU wheel installed first, whatever its floor


def main() -> None:
    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
    floors = {}
    for dep in project["dependencies"]:
        name, floor = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?>=([0-9.]+)", dep.split(";")[0].strip()).groups()
        floors[name] = floor
    have = {name: Version(version(name)) for name in floors}
    print("installed: " + ", ".join(f"{name} {have[name].base_version}" for name in floors))
    above = [
        f"{n} {have[n].base_version} (floor {f})"
        for n, f in floors.items()
        if n not in EXEMPT and have[n] != Version(f)
    ]
    if above:
        sys.exit("above their floor, so those floors are untested: " + ", ".join(above))


if __name__ == "__main__":
    main()
