"""User-facing errors: one line, exit code 2, no traceback."""

import re
from collections.abc import Iterable


class CrabError(Exception):
    """A problem with the user's input (data, config, arguments) rather than a bug.

    The CLI prints ``crabrec: error: <message>`` and exits with code 2.
    """


def clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters (an error never echoes a whole huge value)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def listed(values: Iterable[object], limit: int = 200) -> str:
    """``values`` joined by commas for a message: each cut to 40 characters, the whole to ``limit`` (a header line
    that is a long row of data, or a table of a thousand columns, is not echoed whole)."""
    return clip(", ".join(clip(str(v), 40) for v in values), limit)


def reason(exc: BaseException, limit: int = 160) -> str:
    """What a library exception says, on one line and at most ``limit`` characters (its type when it says nothing)."""
    return clip(" ".join(str(exc).split()), limit) or type(exc).__name__


# C0 and C1 control characters, and the bidirectional overrides that reorder what a terminal shows
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def printable(text: str, keep: str = "") -> str:
    """``text`` safe to show on a terminal: each control character (but those in ``keep``) written as its escape
    (``\\x1b``), so a value read from a user's file cannot move the cursor, recolour or reorder what follows."""

    def escape(match: re.Match[str]) -> str:
        ch = match.group()
        return ch if ch in keep else ascii(ch)[1:-1]

    return _UNPRINTABLE.sub(escape, text)
