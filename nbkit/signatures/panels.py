"""Notebook 03's panels: :func:`nbkit.experiment.panel` over :data:`experiments.REGISTRY`, bound to the
context.

``panel("modules", ctx, smoke=SMOKE, adapter=ADAPTER)`` builds the controls from the experiment's config (its
SMOKE preset when ``smoke``, with the overrides) and runs it in ``ctx`` when Run is pressed (or ``.run()``).
Each panel shows its result's table; the history panel shows the captured ``inspect_history`` text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nbkit.experiment import panel as experiment_panel
from nbkit.signatures.experiments import REGISTRY

if TYPE_CHECKING:
    from nbkit.panels import Panel
    from nbkit.result import Result
    from nbkit.signatures.experiments import SignaturesContext


def _table(result: Result[Any]) -> Any:
    return result.table


def _text(result: Result[Any]) -> Any:
    from IPython.display import Pretty

    text = (result.data or {}).get("text")
    return Pretty(text[-6000:]) if text else None


SHOW = {"history": _text}


def panel(
    slug: str, ctx: SignaturesContext, *, smoke: bool = False, widget: bool | None = None, **overrides: Any
) -> Panel:
    """The panel of experiment ``slug`` (see ``REGISTRY.slugs``), running in ``ctx``."""
    return experiment_panel(
        REGISTRY[slug], ctx, smoke=smoke, widget=widget, show_result=SHOW.get(slug, _table), **overrides
    )
