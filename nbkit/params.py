"""A notebook's parameters: what its ``parameters`` cell declares, and checking what a run gives it.

Parameters are checked before anything runs: the name must exist in the notebook's ``parameters``
cell and the value must have the default's type. A parameter's trailing comment may also declare
what values it takes (papermill stores that comment as the parameter's help text)::

    EPOCHS = 200  # training epochs; range: 1..2000
    LR = 0.005  # range: 1e-6..1.0
    SEED = 0  # range: 0..
    DATASET = "umls"  # choices: umls, kinships, synthetic, hetionet, <path>

``range: LO..HI`` is inclusive and either end may be left open. ``choices: a, b, c`` lists the
accepted values; the token ``<path>`` also accepts the path of an existing file (relative paths
are taken from the notebook's folder, where its kernel runs). A value outside is a ``RunError``
(a :class:`~nbkit.errors.UsageError`: exit 2, nothing run).
"""

from __future__ import annotations

import ast
import io
import math
import os
import re
import tokenize
from pathlib import Path
from typing import Any

from nbkit.errors import RunError


def notebook_parameters(path: Path) -> dict[str, dict[str, Any]]:
    """The ``parameters`` cell's names, inferred types and defaults (papermill's inspection)."""
    import papermill as pm  # heavy: only when a notebook is inspected

    try:
        params = pm.inspect_notebook(str(path))
    except Exception as exc:  # papermill raises plain errors for unreadable notebooks
        raise RunError(f"{path}: cannot read its parameters ({type(exc).__name__}: {exc})") from None
    out = {}
    for name, info in params.items():
        try:
            default = ast.literal_eval(info.get("default", "None"))
        except (ValueError, SyntaxError):
            default = info.get("default")
        # papermill infers a type only from annotations; an unannotated literal's type is its value's.
        inferred = info.get("inferred_type_name", "None")
        kind = inferred if inferred not in ("None", None) else type(default).__name__
        out[name] = {"type": kind, "default": default, "help": info.get("help", "")}
    for name, entry in _parameters_papermill_skipped(path, set(out)).items():
        out[name] = entry
    return out


def _parameters_papermill_skipped(path: Path, known: set[str]) -> dict[str, dict[str, Any]]:
    """Assignments of the ``parameters`` cell that papermill's line parser dropped, read with ``ast``.

    papermill skips (with only a logged warning) any line holding more than one ``=``, so a trailing
    comment such as ``# "" = the default model`` made the parameter unknown to ``-p``, while papermill
    still injects it fine. ``ast`` reads the assignment; the line's comment, via ``tokenize``, is its help.
    """
    import nbformat  # heavy (jsonschema): only when a notebook is read

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # already readable by papermill above; a second reader's failure only loses the fill-in
        return {}
    cell = next(
        (c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])), None
    )
    if cell is None:
        return {}
    try:
        tree = ast.parse(cell.source)
        comments = {
            t.start[0]: t.string.lstrip("#").strip()
            for t in tokenize.generate_tokens(io.StringIO(cell.source).readline)
            if t.type == tokenize.COMMENT
        }
    except (SyntaxError, tokenize.TokenError):
        return {}
    out = {}
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            continue
        name = node.targets[0].id
        if name in known:
            continue
        try:
            default = ast.literal_eval(node.value)
        except ValueError:
            continue  # not a literal: papermill could not type it either
        out[name] = {
            "type": type(default).__name__,
            "default": default,
            "help": comments.get(node.end_lineno or node.lineno, ""),
        }
    return out


def parse_value(text: str) -> Any:
    """A ``-p KEY VALUE`` value: a Python literal when it is one, else the string itself."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        lowered = text.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        value = text
    return _absolute_if_path(value)


def _absolute_if_path(value: Any) -> Any:
    """A relative path the user means from *their* directory, made absolute.

    Kernels run in the notebooks' folder, so ``-p DATASET my/triples.tsv`` would otherwise be looked
    up there. Only a string that names an existing file or folder and looks like a path (a
    separator or a suffix) is changed, so names such as ``umls`` stay names.
    """
    if not isinstance(value, str) or not value or os.path.isabs(value):
        return value
    if ("/" in value or os.sep in value or Path(value).suffix) and os.path.exists(value):
        return str(Path(value).resolve())
    return value


def check_parameters(
    path: Path, given: dict[str, Any], declared: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Reject unknown parameters, values whose type differs from the default's, and values outside
    a declared range or choice list (see the module docstring)."""
    declared = notebook_parameters(path) if declared is None else declared
    if not declared:
        raise RunError(f"{path.name}: has no cell tagged 'parameters'")
    checked = {}
    for key, value in given.items():
        if key not in declared:
            raise RunError(f"{path.stem}: unknown parameter {key!r}; it takes: {', '.join(sorted(declared))}")
        default = declared[key]["default"]
        if default is not None and not _same_kind(default, value):
            raise RunError(
                f"{path.stem}: parameter {key} expects {type(default).__name__} (default {default!r}), "
                f"got {value!r} ({type(value).__name__})"
            )
        problem = _outside_declared(value, declared[key].get("help", ""), path.parent)
        if problem:
            raise RunError(f"{path.stem}: parameter {key}={value!r} {problem}")
        checked[key] = value
    return checked


_RANGE = re.compile(r"\brange:\s*([^\s;,]*?)\s*\.\.\s*([^\s;,]*)")
_CHOICES = re.compile(r"\bchoices:\s*([^;#]+)")


def declared_range(help_text: str) -> tuple[float | None, float | None] | None:
    """``(lo, hi)`` from a ``range: LO..HI`` note (None for an open end), or None without one."""
    m = _RANGE.search(help_text or "")
    if not m:
        return None
    try:
        lo, hi = (float(x) if x else None for x in m.groups())
    except ValueError:
        return None
    return lo, hi


def declared_choices(help_text: str) -> list[str] | None:
    m = _CHOICES.search(help_text or "")
    return [c.strip().strip("'\"") for c in m.group(1).split(",") if c.strip()] if m else None


def _outside_declared(value: Any, help_text: str, nb_dir: Path) -> str | None:
    bounds = declared_range(help_text)
    if bounds and isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = bounds
        if math.isnan(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
            shown = f"{'' if lo is None else f'{lo:g}'}..{'' if hi is None else f'{hi:g}'}"
            return f"is outside its declared range {shown}"
    choices = declared_choices(help_text)
    if choices is not None:
        names = [c for c in choices if c != "<path>"]
        if str(value) in names:
            return None
        if (
            "<path>" in choices
            and isinstance(value, str)
            and value
            and (nb_dir / Path(value).expanduser()).is_file()
        ):
            return None
        takes = ", ".join(repr(c) for c in names) + (
            " or the path of an existing file" if "<path>" in choices else ""
        )
        return f"is not one it takes: {takes}"
    return None


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    return isinstance(value, type(default))
