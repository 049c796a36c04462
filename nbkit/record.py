"""Metrics a notebook run records, readable back from the executed notebook.

``record(name, value)`` does three things:

* keeps the value in this process (``recorded()``), for code that calls theme functions directly;
* displays it as a small output with the MIME type ``application/vnd.nbkit.metric+json`` (plus a
  one-line text fallback), so the value is stored *inside* the executed ``.ipynb`` that papermill
  writes and ``read_notebook(path)`` can read it back — no side files needed;
* appends it to the JSON-lines file named by ``$NBKIT_RECORD_FILE`` when that is set (``nbkit run``
  sets it), so a batch report does not have to parse notebooks.

Values must be JSON-serialisable after conversion: numpy scalars/arrays, torch scalars, pandas
frames/series and dataclasses are converted; anything else is a ``TypeError`` naming the metric.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

METRIC_MIME = "application/vnd.nbkit.metric+json"

_RECORDED: dict[str, Any] = {}


def to_jsonable(value: Any, _path: str = "value") -> Any:
    """Convert ``value`` to plain JSON types, or raise ``TypeError`` naming where it failed."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        # JSON has no NaN/Inf; keep them visible as strings rather than dropping them.
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, f"{_path}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, f"{_path}[{i}]") for i, v in enumerate(value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value), _path)
    module = type(value).__module__.split(".")[0]
    if module == "numpy":
        import numpy as np

        if isinstance(value, np.ndarray):
            return to_jsonable(value.tolist(), _path)
        if isinstance(value, np.generic):
            return to_jsonable(value.item(), _path)
    if module == "torch":
        import torch

        if isinstance(value, torch.Tensor):
            return to_jsonable(value.detach().cpu().tolist(), _path)
        if isinstance(value, (torch.dtype, torch.device)):
            return str(value)
    if module == "pandas":
        import pandas as pd

        if isinstance(value, pd.DataFrame):
            return to_jsonable(value.to_dict(orient="records"), _path)
        if isinstance(value, pd.Series):
            return to_jsonable(value.to_dict(), _path)
    if hasattr(value, "model_dump"):  # pydantic v2 models
        return to_jsonable(value.model_dump(mode="json"), _path)
    raise TypeError(f"cannot record {_path}: {type(value).__name__} is not JSON-serialisable")


def record(name: str, value: Any) -> Any:
    """Record metric ``name`` for this run and return the JSON form that was stored."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"metric name must be a non-empty string, got {name!r}")
    try:
        data = to_jsonable(value)
    except TypeError as exc:
        raise TypeError(f"record({name!r}): {exc}") from None
    _RECORDED[name] = data
    sink = os.environ.get("NBKIT_RECORD_FILE")
    if sink:
        with open(sink, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"name": name, "value": data}) + "\n")
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
    text = json.dumps(data)
    if len(text) > 120:
        text = text[:117] + "..."
    display({METRIC_MIME: {"name": name, "value": data}, "text/plain": f"recorded {name} = {text}"}, raw=True)


def recorded() -> dict[str, Any]:
    """Metrics recorded in this process so far (a copy)."""
    return dict(_RECORDED)


def clear() -> None:
    _RECORDED.clear()


def read_notebook(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read every metric recorded in an executed notebook; later records of a name win."""
    import nbformat

    nb = nbformat.read(Path(path), as_version=4)
    metrics: dict[str, Any] = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            payload = output.get("data", {}).get(METRIC_MIME)
            if payload is not None:
                metrics[payload["name"]] = payload["value"]
    return metrics


def read_jsonl(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ``$NBKIT_RECORD_FILE`` sink; later records of a name win."""
    metrics: dict[str, Any] = {}
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                metrics[item["name"]] = item["value"]
            except (json.JSONDecodeError, KeyError) as exc:
                raise ValueError(f"{path}:{line_no}: not a metric record ({exc})") from None
    return metrics
