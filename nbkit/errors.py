"""Errors a user can act on, and how every entry point reports them.

``UsageError`` is a mistake in what the user gave (a flag, a config key, a file, a parameter): the
CLI prints it as one line ``nbkit: error: …`` and exits 2, with no traceback. Its message names the
file, line or key and what was expected. ``describe_error`` turns any other exception into one
readable line (panels, findings). Theme code raises ``UsageError`` (or a subclass) for bad input.
"""

from __future__ import annotations

import sys
import traceback

EXIT_USAGE = 2


class UsageError(ValueError):
    """Bad input from the user: exit 2, one line, nothing half-written."""


def describe_error(exc: BaseException) -> str:
    """One readable line: the exception, its message, and where in user/theme code it arose."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    for frame in reversed(frames):
        # Name the deepest frame inside nbkit or the notebook, not inside torch/pyg internals.
        if "site-packages" not in frame.filename or "/nbkit/" in frame.filename:
            where = f" (at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} in {frame.name})"
            break
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}{where}"


def main_error(message: str, prog: str = "nbkit") -> int:
    """Print one error line for a command-line entry point and return the usage exit code."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return EXIT_USAGE
