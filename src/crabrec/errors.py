"""User-facing errors: one line, exit code 2, no traceback."""


class CrabError(Exception):
    """A problem with the user's input (data, config, arguments) rather than a bug.

    The CLI prints ``crabrec: error: <message>`` and exits with code 2.
    """
