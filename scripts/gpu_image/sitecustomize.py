"""The playbook's dry run, as the GPU image sees it: the modules named in ``CRABREC_ABSENT_MODULES`` (comma-separated)
look uninstalled.

Put this folder first on ``PYTHONPATH``: Python imports ``sitecustomize`` at start-up, which puts a finder in front of
the others. ``import name`` then raises ``ModuleNotFoundError`` and ``importlib.util.find_spec(name)`` gives a spec
without a package folder, so code that needs one of these modules fails in the dry run as it would on the device.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

ABSENT = {name.strip() for name in os.environ.get("CRABREC_ABSENT_MODULES", "").split(",") if name.strip()}


class _Missing(importlib.abc.Loader):
    def create_module(self, spec):
        raise ModuleNotFoundError(f"No module named {spec.name!r} (absent from the GPU image)", name=spec.name)

    def exec_module(self, module):  # pragma: no cover - create_module always raises
        raise ModuleNotFoundError(module.__name__)


class _Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in ABSENT:
            return importlib.machinery.ModuleSpec(fullname, _Missing())
        return None


if ABSENT:
    sys.meta_path.insert(0, _Absent())
