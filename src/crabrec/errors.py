"""User-facing errors: one line, exit code 2, no traceback."""


class CrabError(Exception):
    """A problem with the user's input (data, config, arguments) rather than a bug.

    The CLI prints ``crabrec: error: <message>`` and exits with code 2.
    """


def clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters (an error never echoes a whole huge value)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def reason(exc: BaseException, limit: int = 160) -> str:
    """What a library exception says, on one line and at most ``limit`` characters (its type when it says nothing)."""
    return clip(" ".join(str(exc).split()), limit) or type(exc).__name__
