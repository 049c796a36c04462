"""A notebook's parameters: what its ``parameters`` cell declares, and checking the values it gets.

Parameters are checked before any work: by ``nbkit run``/``nbkit sweep`` before a kernel starts
(:func:`check_given`), and by the notebook itself in its first code cell (:func:`check_parameters`, for
papermill and JupyterLab users), with the same one-line error. The name must exist in the notebook's
``parameters`` cell and the value must have the default's type. A parameter's trailing comment may
also declare what values it takes, as notes among its words separated by ``;`` (papermill stores the
comment as the parameter's help text)::

    EPOCHS = 200  # training epochs; range: 1..2000
    LR = 0.005  # range: 1e-6..1.0
    SEED = 0  # range: 0..
    DATASET = "umls"  # choices: umls, kinships, synthetic, hetionet, <path>
    DEV_SET = ""  # your JSONL; choices: "", <path>
    STEPS = None  # None: the experiment's own; type: int; range: 1..200

``range: LO..HI`` is inclusive and either end may be left open. ``choices: a, b, c`` lists the
accepted values (``""`` is the empty text); a token in angle brackets accepts every value of a shape
(:data:`SHAPES`): ``<path>`` an existing file, ``<dir>`` an existing folder (relative paths are taken
from the notebook's folder, where its kernel runs), ``<cuda:N>``, ``<module:name>``, ``<signature>``
(a DSPy string signature), ``<sizes>`` (``HIDDENxLAYERS`` sizes, comma-separated) and ``<dask>`` (a
Dask scheduler's address). ``type: T``
(int, float, str, bool or list) is the type of a parameter whose default is ``None``, which it also
accepts; without it such a parameter takes any value. A value outside is a :class:`ParameterError`
(a :class:`~nbkit.errors.UsageError`: exit 2, nothing run).
"""

from __future__ import annotations

import ast
import difflib
import io
import math
import os
import re
import tokenize
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nbkit.catalog import resolve_notebook
from nbkit.errors import RunError, UsageError


class ParameterError(RunError):
    """A parameter value the notebook does not take; shown in Jupyter as its one line."""

    def _render_traceback_(self) -> list[str]:
        # IPython prints what this returns instead of a traceback: the fix is the value, not a stack.
        return [f"ParameterError: {self}"]


def notebook_parameters(path: Path) -> dict[str, dict[str, Any]]:
    """The ``parameters`` cell's names, types, defaults and help texts (each assignment's trailing comment).

    Read from the notebook's JSON with ``ast`` (no nbformat or papermill import: a notebook's first cell
    calls this through :func:`check_parameters`, and must stay instant). The type is the annotation's, else
    the default's, else (a ``None`` default) the comment's ``type:`` note, else ``"any"``; an assignment
    whose value is not a literal takes any value (papermill injects it all the same)."""
    import json

    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = nb["cells"]
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"{path}: cannot read its parameters ({exc})") from None
    except (ValueError, KeyError, TypeError):
        raise RunError(f"{path}: cannot read its parameters (not a Jupyter notebook of format 4)") from None
    cell = next(
        (
            c
            for c in cells
            if isinstance(c, dict)
            and c.get("cell_type") == "code"
            and "parameters" in (c.get("metadata") or {}).get("tags", [])
        ),
        None,
    )
    if cell is None:
        return {}
    source = cell.get("source", "")
    return parameters_in("".join(source) if isinstance(source, list) else str(source), path)


def parameters_in(source: str, where: Path | str = "parameters cell") -> dict[str, dict[str, Any]]:
    """The parameters a ``parameters`` cell's ``source`` assigns (see :func:`notebook_parameters`)."""
    try:
        tree = ast.parse(source)
        comments = {
            t.start[0]: t.string.lstrip("#").strip()
            for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type == tokenize.COMMENT
        }
    except SyntaxError as exc:
        raise RunError(f"{where}: its parameters cell is not Python (line {exc.lineno}: {exc.msg})") from None
    except tokenize.TokenError as exc:
        raise RunError(f"{where}: its parameters cell is not Python ({exc.args[0]})") from None
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value, annotation = node.targets[0].id, node.value, None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value, annotation = node.target.id, node.value, ast.unparse(node.annotation)
        else:
            continue
        help_text = comments.get(node.end_lineno or node.lineno, "")
        try:
            default = ast.literal_eval(value)
        except ValueError:  # not a literal: nothing to check a value against
            out[name] = {"type": "any", "default": None, "help": help_text}
            continue
        out[name] = {
            "type": annotation or _type_of(default, help_text),
            "default": default,
            "help": help_text,
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


def check_given(
    path: Path,
    given: Mapping[str, Any],
    declared: dict[str, dict[str, Any]] | None = None,
    *,
    base: Path | None = None,
) -> dict[str, Any]:
    """``given`` checked against the notebook ``path`` declares: unknown names, values whose type differs
    from the default's (or the declared ``type:``), values outside a declared range or choice list (see the
    module docstring). ``base``: where relative paths are looked up (default the notebook's folder, where
    its kernel runs). Returns ``given`` as a dict; the first problem is a :class:`ParameterError`."""
    declared = notebook_parameters(path) if declared is None else declared
    if not declared:
        raise ParameterError(f"{path.name}: has no cell tagged 'parameters'")
    base = path.parent if base is None else base
    checked = {}
    for key, value in given.items():
        if key not in declared:
            raise ParameterError(
                f"{path.stem}: unknown parameter {key!r}{_did_you_mean(key, declared)}; it takes: "
                f"{', '.join(sorted(declared))}"
            )
        problem = _problem(value, declared[key], base)
        if problem:
            raise ParameterError(f"{path.stem}: parameter {key}{problem}")
        checked[key] = value
    return checked


def check_parameters(namespace: Mapping[str, Any], notebook: str) -> None:
    """The check a notebook's first code cell makes (``nbkit.check_parameters(globals(), "01_kg_gnn")``):
    every parameter of its ``parameters`` cell, as this kernel holds it (the defaults, or what papermill
    or the user set), against what that cell declares; a bad value stops the notebook there with one line.

    The declarations are read from the notebook file: the one this kernel serves in JupyterLab
    (``__session__``), else ``notebook``'s ``.ipynb`` in the kernel's folder, else where ``nbkit run``
    finds it (:func:`nbkit.catalog.resolve_notebook`: the copies here, else the ones nbkit came with).
    Relative paths are taken from the kernel's folder, where the notebook opens them."""
    path = _own_notebook(namespace, notebook)
    declared = notebook_parameters(path)
    check_given(path, {k: namespace[k] for k in declared if k in namespace}, declared, base=Path.cwd())


def _own_notebook(namespace: Mapping[str, Any], notebook: str) -> Path:
    session = namespace.get("__session__")  # ipykernel: the notebook's path, when a Jupyter server runs it
    candidates = [Path(session)] if isinstance(session, str) and session.endswith(".ipynb") else []
    candidates.append(Path.cwd() / f"{notebook}.ipynb")
    for path in candidates:
        if path.is_file():
            return path
    try:
        return resolve_notebook(notebook)
    except RunError as exc:
        raise ParameterError(f"{notebook}: cannot read its declared parameters ({exc})") from None


def _did_you_mean(word: str, known) -> str:
    by_upper = {str(k).upper(): str(k) for k in known}
    close = difflib.get_close_matches(str(word).upper(), list(by_upper), n=1, cutoff=0.7)
    return f" (did you mean {by_upper[close[0]]!r}?)" if close else ""


# -- what a trailing comment declares -----------------------------------------------------------------

_RANGE = re.compile(r"\brange:\s*([^\s;,]*?)\s*\.\.\s*([^\s;,]*)")
_CHOICES = re.compile(r"\bchoices:\s*([^;#]+)")
_TYPE = re.compile(r"\btype:\s*([A-Za-z]+)")
TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
    "list": (list, tuple),
}


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
    """The ``choices: a, b, <shape>`` note's items (quotes removed: ``""`` is the empty text), or None."""
    m = _CHOICES.search(help_text or "")
    return [c.strip().strip("'\"") for c in m.group(1).split(",") if c.strip()] if m else None


def declared_type(help_text: str) -> str | None:
    """The ``type: T`` note's T (one of :data:`TYPES`), or None."""
    m = _TYPE.search(help_text or "")
    return m.group(1) if m and m.group(1) in TYPES else None


NOTES = ("range:", "choices:", "type:")


def notes_removed(help_text: str) -> str:
    """A help text without its ``range:``/``choices:``/``type:`` notes: the words about the parameter."""
    return "; ".join(
        p.strip() for p in (help_text or "").split(";") if not p.strip().startswith(NOTES)
    ).strip()


def _type_of(default: Any, help_text: str) -> str:
    if default is not None:
        return type(default).__name__
    return declared_type(help_text) or "any"


def takes(info: Mapping[str, Any]) -> str:
    """What a parameter takes, in words (``nbkit list``, the errors): its choices or range, else ""."""
    help_text = info.get("help", "")
    choices = declared_choices(help_text)
    if choices is not None:
        names = [c for c in choices if not _is_shape(c)]
        shapes = [SHAPES[c[1:-1]][0] for c in choices if _is_shape(c) and c[1:-1] in SHAPES]
        words = [repr(n) + (" (empty)" if n == "" else "") for n in names] + shapes
        return ", ".join(words[:-1]) + (" or " if len(words) > 1 else "") + words[-1] if words else ""
    bounds = declared_range(help_text)
    if bounds is not None:
        lo, hi = bounds
        return f"{'' if lo is None else f'{lo:g}'}..{'' if hi is None else f'{hi:g}'}"
    return ""


# -- shapes: a choice in angle brackets ---------------------------------------------------------------


def _existing(kind: str) -> Callable[[Any, Path], str | None]:
    def check(value: Any, base: Path) -> str | None:
        if not isinstance(value, str) or not value.strip():
            return ""
        found = base / Path(value).expanduser()
        if found.is_file() if kind == "file" else found.is_dir():
            return None
        if value.lstrip().startswith(("{", "[")):
            return "JSON text is not a path: save it to a file and give the file's path"
        if "/" not in value and os.sep not in value and not Path(value).suffix:
            return ""  # a name, not meant as a path: the choices say enough
        return f"{found} is not a {kind}" if found.exists() else f"no such {kind}: {found}"

    return check


def _matching(pattern: str) -> Callable[[Any, Path], str | None]:
    compiled = re.compile(pattern)
    return lambda value, base: None if isinstance(value, str) and compiled.fullmatch(value.strip()) else ""


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """(hidden, layers) of each item of a comma-separated ``HIDDENxLAYERS`` list (``"256x8,512x8"``); empty:
    none. A malformed item is a UsageError naming it. Notebook 02's size sweep reads its sizes with it
    (``nbkit.zero.config``), and the ``<sizes>`` shape checks them with it before a run starts."""
    out: list[tuple[int, int]] = []
    if not text.strip():
        return out
    for item in text.split(","):
        h, _, layers = item.strip().partition("x")
        if not (h.isdigit() and layers.isdigit() and int(h) >= 32 and int(layers) >= 1):
            raise UsageError(f"item {item.strip()!r}: expected HIDDENxLAYERS with HIDDEN ≥ 32, e.g. 512x8")
        out.append((int(h), int(layers)))
    return out


def _sizes(value: Any, base: Path) -> str | None:
    if not isinstance(value, str):
        return ""
    try:
        parse_sizes(value)
    except UsageError as exc:
        return str(exc)
    return None


# A choice in angle brackets: name -> (what it takes, in words; its check: None when the value has the
# shape, else why not, "" when the words above say it all).
SHAPES: dict[str, tuple[str, Callable[[Any, Path], str | None]]] = {
    "path": ("the path of an existing file", _existing("file")),
    "dir": ("the path of an existing folder", _existing("folder")),
    "cuda:N": ("cuda:N (N: a GPU's index)", _matching(r"cuda:\d+")),
    "module:name": ("an importable 'module:name'", _matching(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")),
    "signature": ("a DSPy string signature such as 'question -> answer'", _matching(r".*\S.*->.*\S.*")),
    "sizes": ("comma-separated HIDDENxLAYERS sizes such as '256x8,512x8'", _sizes),
    "dask": (
        "a Dask scheduler's address such as 'tcp://host:8786'",
        _matching(r"(tcp|tls|inproc|ucx)://\S+"),
    ),
}


def _is_shape(choice: str) -> bool:
    return choice.startswith("<") and choice.endswith(">")


def _problem(value: Any, info: Mapping[str, Any], base: Path) -> str:
    """ "" when ``value`` is one the parameter takes, else the rest of its error line (after its name)."""
    default, help_text = info["default"], info.get("help", "")
    wanted, choices = takes(info), declared_choices(help_text)
    kind = declared_type(help_text) if default is None else None
    if (default is not None and not _same_kind(default, value)) or (
        kind is not None and value is not None and not _is_type(value, kind)
    ):
        expected = type(default).__name__ if default is not None else f"{kind} or None"
        json_hint = (
            "; JSON is not taken: save it to a file and give the file's path"
            if isinstance(value, (dict, list)) and "<path>" in (choices or [])
            else ""
        )
        return (
            f" expects {expected} (default {default!r}), got {value!r} ({type(value).__name__})"
            + (f"; it takes {wanted}" if wanted else "")
            + json_hint
        )
    if value is None:
        return ""
    bounds = declared_range(help_text)
    if bounds and isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = bounds
        if math.isnan(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
            shown = f"{'' if lo is None else f'{lo:g}'}..{'' if hi is None else f'{hi:g}'}"
            return f"={value!r} is outside its declared range {shown}"
    if choices is None:
        return ""
    names = [c for c in choices if not _is_shape(c)]
    if isinstance(value, str) and value in names:
        return ""
    why = []
    for choice in choices:
        if _is_shape(choice) and choice[1:-1] in SHAPES:
            reason = SHAPES[choice[1:-1]][1](value, base)
            if reason is None:
                return ""
            why += [reason] if reason else []
    hint = _did_you_mean(str(value), [n for n in names if n])
    return f"={value!r} is not one it takes: {wanted}{hint}" + (f"; {'; '.join(why)}" if why else "")


def _is_type(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return kind == "bool"
    return isinstance(value, TYPES[kind])


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    return isinstance(value, type(default))
