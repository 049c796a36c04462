"""Which of nbkit's optional parts (its pip extras) this environment has, and one line when one is missing.

nbkit is installed as the distribution ``nbkit-workbook`` (:data:`DIST`; the package index's ``nbkit`` is
another project); the import package and the command stay ``nbkit``. ``pip install nbkit-workbook`` brings
the harness (the runner, the report, notebook 00, ``pscheck``); each theme's notebook needs its extra
(``nbkit-workbook[kg]``, ``[zero]``, ``[signatures]``, ``[audit]``; ``nbkit-workbook[all]`` for every one).
The requirements are read from the distribution's own installed metadata (what pyproject.toml declared
when it was installed), so this module holds no second copy of the dependency list. A theme notebook's
first code cell calls ``nbkit.require("kg")``: with the extra incomplete it stops there with one line
naming the extra and what is missing, instead of an ImportError deep in a later cell.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import metadata
from pathlib import Path

from nbkit.errors import UsageError

# The distribution nbkit is installed as: every install command nbkit prints names it (install_line).
DIST = "nbkit-workbook"
# Extras that are not a part of the workbook a user picks: `all` is their union, `dev` the test tools.
NOT_PARTS = ("all", "dev")


class MissingExtra(UsageError):
    """An extra the notebook needs is not (fully) installed; shown in Jupyter as its one line."""

    def _render_traceback_(self) -> list[str]:
        # IPython prints what this returns instead of a traceback: the fix is one pip line, not a stack.
        return [f"MissingExtra: {self}"]


@lru_cache(maxsize=1)
def _requirement_lines() -> tuple[str, ...]:
    try:
        return tuple(metadata.requires(DIST) or ())
    except metadata.PackageNotFoundError:
        pass
    # Not installed (a bare source checkout on PYTHONPATH): the checkout's pyproject.toml.
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10 without tomli: nothing to read
        return ()
    if not pyproject.is_file():
        return ()
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    lines = list(project.get("dependencies", []))
    for extra, reqs in project.get("optional-dependencies", {}).items():
        lines += [f'{r}; extra == "{extra}"' for r in reqs]
    return tuple(lines)


def requirements(lines: tuple[str, ...] | None = None) -> dict[str, list]:
    """``{"core": [Requirement…], "kg": [...], …}``: nbkit's requirements by extra, ``nbkit-workbook[x,y]``
    self-references expanded. ``lines`` (Requires-Dist strings) replaces the installed metadata."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    parsed = [Requirement(line) for line in (_requirement_lines() if lines is None else lines)]
    names = sorted({extra for r in parsed if r.marker for extra in _extras_named(str(r.marker))})
    out: dict[str, list] = {
        "core": [r for r in parsed if r.marker is None or r.marker.evaluate({"extra": ""})]
    }
    for extra in names:
        out[extra] = [
            r
            for r in parsed
            if r.marker is not None
            and r.marker.evaluate({"extra": extra})
            and not r.marker.evaluate({"extra": ""})
        ]
    # `all = ["nbkit-workbook[kg,zero]"]` names other extras of nbkit: replace each by their requirements.
    for extra in names:
        expanded, seen = [], {extra}
        pending = list(out[extra])
        while pending:
            r = pending.pop(0)
            if canonicalize_name(r.name) == canonicalize_name(DIST):
                for sub in sorted(r.extras - seen):
                    seen.add(sub)
                    pending.extend(out.get(sub, []))
            elif all(str(r) != str(e) for e in expanded):
                expanded.append(r)
        out[extra] = expanded
    return out


def _extras_named(marker: str) -> list[str]:
    import re

    return re.findall(r"""extra\s*==\s*['"]([^'"]+)['"]""", marker)


def problems(reqs) -> list[str]:
    """What of ``reqs`` this environment lacks: ``"pykeen (not installed)"`` or ``"dspy 2.6.0 (needs
    >=3.0,<4)"``."""
    out = []
    for r in reqs:
        try:
            version = metadata.version(r.name)
        except metadata.PackageNotFoundError:
            out.append(f"{r.name} (not installed)")
            continue
        if r.specifier and not r.specifier.contains(version, prereleases=True):
            out.append(f"{r.name} {version} (needs {r.specifier})")
    return out


def install_line(extra: str = "core") -> str:
    """The pip command that installs ``extra`` (``core``: nbkit alone)."""
    return f"pip install '{DIST}[{extra}]'" if extra != "core" else f"pip install {DIST}"


def status(lines: tuple[str, ...] | None = None) -> dict[str, dict]:
    """Every part (core and each extra but ``all``/``dev``): ``{"ok", "missing": [...], "fix"}``."""
    out = {}
    for extra, reqs in requirements(lines).items():
        if extra in NOT_PARTS:
            continue
        missing = problems(reqs)
        out[extra] = {
            "ok": not missing,
            "missing": missing,
            "packages": [r.name for r in reqs],
            "fix": None if not missing else install_line(extra),
        }
    return out


def require(extra: str, lines: tuple[str, ...] | None = None) -> None:
    """Stop with one line (``MissingExtra``, a UsageError) unless every package of
    ``nbkit-workbook[extra]`` is installed at a version it accepts. Called first thing in a theme notebook."""
    reqs = requirements(lines)
    if extra not in reqs or extra in ("core", *NOT_PARTS):
        known = (
            ", ".join(e for e in reqs if e not in ("core", *NOT_PARTS))
            or f"(none: {DIST}'s metadata is not found)"
        )
        raise UsageError(f"{DIST} has no extra {extra!r}; its extras: {known}")
    missing = problems(reqs[extra])
    if missing:
        raise MissingExtra(
            f"this notebook needs {DIST}[{extra}]: {', '.join(missing)}; install with: {install_line(extra)}"
        )
