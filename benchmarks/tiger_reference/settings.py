"""The settings both TIGER implementations take, one flag each (imported by both sides; plain argparse only, since
the cornac side runs in an environment without crabrec)."""

from __future__ import annotations

import argparse

SHARED = {  # flag: (type, default); the GRID recipe at the TIGER paper's size (the seed is per run)
    "--layers": (int, 4),
    "--d-model": (int, 128),
    "--heads": (int, 6),
    "--d-kv": (int, 64),
    "--ff": (int, 1024),
    "--dropout": (float, 0.1),
    "--lr": (float, 5e-4),
    "--weight-decay": (float, 1e-6),
    "--batch": (int, 256),
    "--epochs": (int, 8),
    "--schedule": (str, "constant"),  # constant or cosine (after --warmup steps)
    "--warmup": (int, 0),
    "--valid-samples": (int, 2000),
    "--test-samples": (int, 0),  # the first N test rows (0: every one)
    "--beam": (int, 20),
    "--threads": (int, 2),
}


def add_settings(ap: argparse.ArgumentParser, defaults: bool = True) -> None:
    """Add every shared flag to ``ap`` (``defaults=False``: unset flags stay None, to pass only the given ones)."""
    for flag, (kind, default) in SHARED.items():
        extra = {"choices": ("constant", "cosine")} if flag == "--schedule" else {}
        ap.add_argument(flag, type=kind, default=default if defaults else None, **extra)


def given(args: argparse.Namespace) -> list[str]:
    """The shared flags set on ``args``, as command-line words for either side."""
    words = []
    for flag in SHARED:
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            words += [flag, str(value)]
    return words
