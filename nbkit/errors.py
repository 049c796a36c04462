"""Errors a user can act on, and how every entry point reports them.

``UsageError`` is a mistake in what the user gave (a flag, a config key, a file, a parameter): the
CLI prints it as one line ``nbkit: error: …`` and exits 2, with no traceback. Its message names the
file, line or key and what was expected. ``describe_error`` turns any other exception into one
readable line (panels, findings). Theme code raises ``UsageError`` (or a subclass) for bad input.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

EXIT_USAGE = 2


class UsageError(ValueError):
    """Bad input from the user: exit 2, one line, nothing half-written."""


class RunError(UsageError):
    """A problem with a run's request itself (unknown notebook or parameter, wrong type, no kernel)."""


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


def read_text(path, *, what: str, error: type[UsageError] = UsageError) -> str:
    """A user's text file as UTF-8; a directory, a missing or unreadable file, or non-UTF-8 bytes is
    one ``error`` naming the file and ``what`` was expected."""
    path = Path(path)
    if path.is_dir():
        raise error(f"{path}: is a directory; expected {what}")
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise error(f"{path}: no such file or directory; expected {what}") from None
    except UnicodeDecodeError as exc:
        raise error(
            f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); expected "
            f"{what}"
        ) from None
    except OSError as exc:
        raise error(f"{path}: cannot read it ({exc.strerror or exc}); expected {what}") from None


def read_json_object(path, *, what: str, error: type[UsageError] = UsageError) -> dict:
    """Read a JSON file whose top level must be an object (a ds_config, a config.json, a PEFT or
    TrainingArguments file). Every failure is one ``error`` naming the file (with line:column for
    bad JSON) and ``what`` was expected — the one reader behind every theme's JSON inputs."""
    text = read_text(path, what=what, error=error)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); expected {what}") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected a JSON object at the top level ({what}), got {type(data).__name__}")
    return data
