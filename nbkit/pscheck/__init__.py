"""pscheck: a static linter for Pydantic v2 models (``pscheck`` console script).

It parses files with ``ast`` and never imports or executes them (``use_import=True`` / ``--import``
opts into runtime introspection in a subprocess). Importing this package imports no pydantic.

    >>> from nbkit.pscheck import lint_source
    >>> [d.code for d in lint_source("from pydantic import BaseModel\\n"
    ...                              "class U(BaseModel):\\n    email: str = None\\n")]
    ['PSC001']

Rules: ``docs/pscheck.md`` (generated from the rule classes by ``python -m nbkit.pscheck.docs``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from nbkit.pscheck.diagnostic import Diagnostic
from nbkit.pscheck.engine import lint
from nbkit.pscheck.registry import PluginError, RuleRegistry
from nbkit.pscheck.report import LintReport
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.sources import DEFAULT_MAX_BYTES

__all__ = [
    "BaseRule",
    "Diagnostic",
    "LintReport",
    "PluginError",
    "RuleContext",
    "RuleRegistry",
    "lint_paths",
    "lint_paths_report",
    "lint_source",
]


def lint_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    strict: bool = False,
    plugins: Sequence[Any] = (),
    use_import: bool = False,
    extend_select: Iterable[str] | None = None,
) -> list[Diagnostic]:
    """Lint files/directories (directories are walked for ``.py``); returns the diagnostics.

    Unreadable or unparsable files come back as ``PSC000`` diagnostics (with the location of a
    syntax error); a plugin that cannot be loaded raises :class:`PluginError`. ``select`` /
    ``extend_select`` / ``ignore`` take codes, prefixes and group names (``"migration"``).
    """
    return lint_paths_report(
        paths,
        select=select,
        ignore=ignore,
        strict=strict,
        plugins=plugins,
        use_import=use_import,
        extend_select=extend_select,
    ).diagnostics


def lint_paths_report(
    paths: Iterable[str | os.PathLike[str]],
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    strict: bool = False,
    plugins: Sequence[Any] = (),
    use_import: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    extend_select: Iterable[str] | None = None,
) -> LintReport:
    """Like :func:`lint_paths` but returns the whole :class:`LintReport` (counts, skipped, notes)."""
    return lint(
        (),
        paths=list(paths),
        select=select,
        ignore=ignore,
        strict=strict,
        plugins=plugins,
        use_import=use_import,
        max_bytes=max_bytes,
        extend_select=extend_select,
    )


def lint_source(
    source: str,
    path: str = "<string>",
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    strict: bool = False,
    plugins: Sequence[Any] = (),
    use_import: bool = False,
    extend_select: Iterable[str] | None = None,
) -> list[Diagnostic]:
    """Lint one module given as text (``path`` only labels the diagnostics)."""
    return lint(
        [(path, source)],
        select=select,
        ignore=ignore,
        strict=strict,
        plugins=plugins,
        use_import=use_import,
        extend_select=extend_select,
    ).diagnostics
