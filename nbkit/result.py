"""What every experiment returns: ``Result(metrics, table, figure, data)``.

``run(cfg, ctx, live) -> Result[XMetrics]`` in each theme's ``experiments.py`` (see
:mod:`nbkit.experiment`): ``metrics`` is the frozen dataclass of what the run measured, the one thing
claims read and notebooks record; a ``Panel`` shows ``result.figure`` (and ``result.table``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

M = TypeVar("M")


@dataclass
class Result(Generic[M]):
    """``metrics``: the typed measurements (a frozen dataclass; JSON-able once converted); ``table``:
    a pandas DataFrame of evidence; ``figure``: the finished plotly figure; ``data``: anything else a
    later cell needs (models, raw per-run rows), never recorded as is."""

    metrics: M = field(default_factory=dict)  # type: ignore[assignment]
    table: Any = None
    figure: Any = None
    data: Any = None
    # The config that ran (set by the registry): what a claim's design reads its budget from.
    config: Any = None
