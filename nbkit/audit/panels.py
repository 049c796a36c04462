"""Panels of notebook 04: a check's config dataclass wired to ``experiments.run_check``.

Controls come from the config's field metadata; the model, tokenizer and data are shared through
the audit's context, so a click re-runs the check only.
"""

from __future__ import annotations


def show_finding(result):
    """Card + evidence table (first rows) for a panel's output area."""
    import pandas as pd
    from IPython.display import HTML

    f = result.data
    table = pd.DataFrame(f.table[:12]).to_html(index=False) if f.table else ""
    more = f"<div><i>{len(f.table) - 12} more evidence rows in result.data.table</i></div>" if len(f.table) > 12 else ""
    return HTML(f.card_html() + table + more)


def check_panel(check: str, context, cfg=None, *, smoke: bool = False, widget: bool | None = None):
    """The panel of one check (slug): ``cfg`` or the check's config taken from the audit config."""
    from nbkit.audit.checks import REGISTRY
    from nbkit.audit.experiments import run_check
    from nbkit.panels import Panel

    c = REGISTRY[check]
    if cfg is None:
        if c.needs and getattr(context.config, c.needs) is None:  # the panel still runs: on the check's defaults
            cfg = c.Config.smoke() if smoke else c.Config()
        else:
            cfg = c.Config.from_audit(context.config, smoke=smoke)
    return Panel(cfg, lambda p, live=None: run_check(c.slug, p, context, live, catch=False), title=f"{c.title} ({c.slug})", widget=widget, show_result=show_finding)
