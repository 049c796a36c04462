"""Metrics a notebook run records, readable back from the executed notebook.

``record(name, value)`` does two things:

* keeps the value in this process (``recorded()``), for code that calls theme functions directly;
* displays it as an output with the MIME type ``application/vnd.nbkit.metric+json``, so the value is
  stored *inside* the executed ``.ipynb`` that papermill writes and ``read_notebook(path)`` reads it
  back (a run's ``metrics.json`` comes from there) — no side files needed. Its text fallback is empty:
  a notebook shows its tables and figures, not a line per recorded number (the judging cell says once
  what was recorded, :func:`summary_line`), and the HTML export leaves these outputs out.

Values must be JSON-serialisable after conversion: numpy scalars/arrays, torch scalars and
tensors, pandas frames/series, pydantic models and dataclasses are converted. A value that cannot be
recorded faithfully is a :class:`~nbkit.errors.UsageError` naming the metric and the place inside
the value, and nothing is recorded (not in this process, not in the notebook): an unserialisable
object, two dict keys that become the same JSON key (``{1: "a", "1": "b"}``), an integer too long
for JSON output, a value that contains itself or nests deeper than ``MAX_DEPTH`` levels, or one
whose JSON is over ``MAX_BYTES`` (record a summary; save big arrays to a file).

``nbkit.record`` is this module's ``record`` function (``import nbkit; nbkit.record(...)``); the
readers are reachable from it as well, as ``docs/from-code.md`` writes them: ``nbkit.record.read_notebook``,
``nbkit.record.recorded``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

from nbkit.errors import UsageError

METRIC_MIME = "application/vnd.nbkit.metric+json"
MAX_BYTES = 2 * 2**20  # one metric's JSON; a notebook output this big is already hard to open
MAX_DEPTH = 100  # nesting of dicts/lists; deeper is almost surely a mistake (or a linked structure)
_SAFE_INT_BITS = 14_000  # below Python's 4,300-digit limit on int -> str conversion (json.dumps needs it)

_RECORDED: dict[str, Any] = {}

# A place inside the value, built only when an error names it: (parent, key) links, None at the root.
_Path = tuple[Any, Any] | None


def _where(path: _Path) -> str:
    keys = []
    while path is not None:
        path, key = path
        keys.append(f"[{key!r}]")
    return "value" + "".join(reversed(keys))


def to_jsonable(value: Any) -> Any:
    """Convert ``value`` to plain JSON types, or raise :class:`UsageError` naming where it failed."""
    return _convert(value, None, 0, set())


def _convert(value: Any, path: _Path, depth: int, active: set[int]) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if value.bit_length() > _SAFE_INT_BITS:
            try:
                str(value)
            except ValueError:
                raise UsageError(
                    f"cannot record {_where(path)}: an integer of {value.bit_length()} bits has more "
                    f"digits than JSON output allows; record float(n) or str(n)"
                ) from None
        return int(value)
    if isinstance(value, float):
        # JSON has no NaN/Inf; keep them visible as strings rather than dropping them.
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (dict, list, tuple)) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        if depth >= MAX_DEPTH:
            raise UsageError(f"cannot record {_where(path)}: nested more than {MAX_DEPTH} levels deep")
        if id(value) in active:
            raise UsageError(f"cannot record {_where(path)}: it contains itself (a self-referential value)")
        active.add(id(value))
        try:
            return _convert_container(value, path, depth, active)
        finally:
            active.discard(id(value))
    module = type(value).__module__.split(".")[0]
    if module == "numpy":
        import numpy as np

        if isinstance(value, np.ndarray):
            _check_elements(value.size, path)
            return _convert(value.tolist(), path, depth, active)
        if isinstance(value, np.generic):
            return _convert(value.item(), path, depth, active)
    if module == "torch":
        import torch

        if isinstance(value, torch.Tensor):
            _check_elements(value.numel(), path)
            return _convert(value.detach().cpu().tolist(), path, depth, active)
        if isinstance(value, (torch.dtype, torch.device)):
            return str(value)
    if module == "pandas":
        import pandas as pd

        if isinstance(value, pd.DataFrame):
            _check_elements(value.size, path)
            return _convert(value.to_dict(orient="records"), path, depth, active)
        if isinstance(value, pd.Series):
            _check_elements(value.size, path)
            return _convert(value.to_dict(), path, depth, active)
    if hasattr(value, "model_dump"):  # pydantic v2 models
        return _convert(value.model_dump(mode="json"), path, depth, active)
    raise UsageError(f"cannot record {_where(path)}: {type(value).__name__} is not JSON-serialisable")


def _convert_container(value: Any, path: _Path, depth: int, active: set[int]) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        original: dict[str, Any] = {}
        for k, v in value.items():
            key = k if isinstance(k, str) else str(k)
            if key in out:
                raise UsageError(
                    f"cannot record {_where(path)}: keys {original[key]!r} and {k!r} both become the "
                    f"JSON key {key!r}, so one value would be lost; make the keys distinct"
                )
            original[key] = k
            out[key] = _convert(v, (path, k), depth + 1, active)
        return out
    if isinstance(value, (list, tuple)):
        return [_convert(v, (path, i), depth + 1, active) for i, v in enumerate(value)]
    # A dataclass, one level at a time (dataclasses.asdict recurses without a guard).
    return _convert_container(
        {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, path, depth, active
    )


def _check_elements(n: int, path: _Path) -> None:
    # Each element takes at least two bytes of JSON ("0,"): refuse before building a huge list.
    if 2 * n > MAX_BYTES:
        raise UsageError(
            f"cannot record {_where(path)}: {n:,} elements cannot fit the {MAX_BYTES // 2**20} MiB "
            f"limit on one metric; record a summary (counts, means, "
            f"quantiles) and save the array to a file"
        )


def record(name: str, value: Any) -> Any:
    """Record metric ``name`` for this run and return the JSON form that was stored.

    Everything is checked before anything is stored: on a :class:`UsageError` the metric is
    neither in :func:`recorded` nor displayed.
    """
    if not isinstance(name, str) or not name:
        raise UsageError(f"metric name must be a non-empty string, got {name!r}")
    try:
        data = to_jsonable(value)
    except UsageError as exc:
        raise UsageError(f"record({name!r}): {exc}") from None
    line = json.dumps({"name": name, "value": data})
    if len(line) > MAX_BYTES:
        raise UsageError(
            f"record({name!r}): the value is {len(line) / 2**20:.1f} MiB as JSON, over the "
            f"{MAX_BYTES // 2**20} MiB limit on one metric; record a summary "
            f"(counts, means, quantiles) and save the full data to a file"
        )
    _RECORDED[name] = data
    _display_metric(name, data)
    return data


def _display_metric(name: str, data: Any) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is None:
        return
    # An empty text fallback: frontends without a renderer for the metric type show nothing.
    display({METRIC_MIME: {"name": name, "value": data}, "text/plain": ""}, raw=True)


def recorded() -> dict[str, Any]:
    """Metrics recorded in this process so far (a copy)."""
    return dict(_RECORDED)


def summary_line() -> str:
    """One line naming every metric recorded in this process, in the order first recorded (what a
    notebook's judging cell prints instead of a line per ``record`` call)."""
    if not _RECORDED:
        return "recorded nothing"
    return f"recorded {len(_RECORDED)} metric(s): {', '.join(_RECORDED)}"


def clear() -> None:
    _RECORDED.clear()


def read_notebook(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read every metric recorded in an executed notebook; later records of a name win."""
    import nbformat

    try:
        nb = nbformat.read(Path(path), as_version=4)
    except OSError as exc:
        raise UsageError(f"cannot read notebook {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # nbformat's own errors: not JSON, not a notebook
        raise UsageError(f"{path} is not a readable notebook: {type(exc).__name__}: {exc}") from None
    metrics: dict[str, Any] = {}
    for cell_no, cell in enumerate(nb.cells, 1):
        for output in cell.get("outputs", []):
            payload = output.get("data", {}).get(METRIC_MIME)
            if payload is None:
                continue
            if not isinstance(payload, dict) or "name" not in payload or "value" not in payload:
                raise UsageError(
                    f"{path}: cell {cell_no} has a {METRIC_MIME} output without 'name' and 'value'"
                )
            metrics[payload["name"]] = payload["value"]
    return metrics


# ``import nbkit`` binds ``nbkit.record`` to the function above (the package re-exports it), so the
# module's readers are attached to it: ``nbkit.record.read_notebook(path)`` works as documented.
record.read_notebook = read_notebook  # type: ignore[attr-defined]
record.recorded = recorded  # type: ignore[attr-defined]
record.clear = clear  # type: ignore[attr-defined]
record.summary_line = summary_line  # type: ignore[attr-defined]
