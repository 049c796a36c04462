"""Notebook 01's panels: :func:`nbkit.experiment.panel` over the KG registry, showing each result's table.

``panel("ablation", ctx, smoke=SMOKE, **overrides).run()`` runs exactly what the Run button runs
(headless under papermill and in tests).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nbkit.experiment import panel as _panel
from nbkit.kg.experiments import REGISTRY, KGContext

if TYPE_CHECKING:
    from nbkit.experiment import Experiment
    from nbkit.panels import Panel
    from nbkit.result import Result

__all__ = ["REGISTRY", "KGContext", "panel"]


def _table(result: Result) -> Any:
    return result.table.round(4)


def panel(
    experiment: str | Experiment,
    ctx: KGContext,
    *,
    smoke: bool = False,
    widget: bool | None = None,
    **overrides,
) -> Panel:
    """The panel of a KG experiment (its slug in ``REGISTRY`` or the experiment itself), run in ``ctx``."""
    exp = REGISTRY[experiment] if isinstance(experiment, str) else experiment
    return _panel(exp, ctx, smoke=smoke, widget=widget, show_result=_table, **overrides)
