"""Notebook 02's panels: ``panel(slug, ctx, ...)`` is :func:`nbkit.experiment.panel` over this theme's
registry."""

from __future__ import annotations

from typing import Any

from nbkit import experiment
from nbkit.panels import Panel
from nbkit.zero.experiments import REGISTRY, ZeroContext

__all__ = ["REGISTRY", "ZeroContext", "panel"]


def panel(
    slug: str, ctx: ZeroContext, *, smoke: bool = False, widget: bool | None = None, **overrides: Any
) -> Panel:
    """Widgets for the experiment ``slug``'s config (its SMOKE preset when ``smoke``, with ``overrides``);
    its Run button runs it in ``ctx``. An unknown slug or field is a ``UsageError`` naming what exists."""
    return experiment.panel(REGISTRY[slug], ctx, smoke=smoke, widget=widget, **overrides)
