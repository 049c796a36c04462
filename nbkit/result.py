"""What every experiment returns: ``Result(metrics, table, figure, data)``.

``run_x(cfg, live=None) -> Result`` in each theme's ``experiments.py``; a ``Panel`` shows
``result.figure`` (and ``result.table``), the notebook records ``result.metrics``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Result:
    """``metrics``: JSON-able numbers worth recording; ``table``: a pandas DataFrame of evidence;
    ``figure``: the finished plotly figure; ``data``: anything else a later cell needs (models,
    raw per-run rows), never recorded as is."""

    metrics: dict[str, Any] = field(default_factory=dict)
    table: Any = None
    figure: Any = None
    data: Any = None
