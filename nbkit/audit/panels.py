"""Notebook 04's panels and the calls around them: open an audit, show a check's panel, read a trainer config.

A check's panel is a :class:`nbkit.panels.Panel` over the check's config (controls from its fields'
metadata; the Run button runs the registered check in the audit's context, so the model, tokenizer
and data load once). Its config starts from the audit config's values for the check (``from_config``)
or from the check's defaults; under ``smoke`` the smoke preset's sizes win.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nbkit.audit.check import from_audit_values
from nbkit.audit.config import config_file, load_config
from nbkit.audit.experiments import REGISTRY, AuditContext, make_context
from nbkit.audit.formats import Mapped, read_any
from nbkit.device import device_report
from nbkit.diagnose.diagnosis import diagnose
from nbkit.diagnose.finished import finished_run
from nbkit.errors import UsageError
from nbkit.findings import Finding
from nbkit.panels import Panel

__all__ = [
    "check_panel",
    "device_summary",
    "diagnose",
    "finished_run",
    "model_summary",
    "open_audit",
    "read_trainer_config",
    "show",
    "show_all",
    "trainer_config_summary",
    "trainer_context",
]


def open_audit(
    config: str | Path, *, model: str = "", seed: int | None = None, device: Any = "auto", threads: int = 0
) -> AuditContext:
    """The context of an audit config file (a bundled example by bare name), its ``model`` and ``seed``
    replaced when given; ``threads`` > 0 sets torch's intra-op threads first."""
    if threads > 0:
        import torch

        torch.set_num_threads(threads)
    cfg = load_config(config_file(config))
    update = {k: v for k, v in (("name", model), ("seed", seed)) if v not in ("", None)}
    if update:
        cfg = cfg.model_copy(update={"model": cfg.model.model_copy(update=update)})
    return make_context(cfg, device)


def model_summary(ctx: AuditContext) -> dict[str, Any]:
    """The loaded model's name, size, head layout and pad/eos ids (what a reader checks first)."""
    model, tok = ctx.model_and_tokenizer()
    return {
        "name": ctx.config.model.name,
        "params": sum(p.numel() for p in model.parameters()),
        "heads": model.config.num_attention_heads,
        "kv_heads": model.config.num_key_value_heads,
        "pad_id": tok.pad_token_id,
        "eos_id": tok.eos_token_id,
    }


def device_summary() -> dict[str, Any]:
    """This machine's device report without the per-GPU list."""
    return {k: v for k, v in device_report().items() if k != "gpus"}


def show_finding(result):
    """Card + evidence table (first rows) for a panel's output area."""
    import pandas as pd
    from IPython.display import HTML

    f = result.data
    table = pd.DataFrame(f.table[:12]).to_html(index=False) if f.table else ""
    more = (
        f"<div><i>{len(f.table) - 12} more evidence rows in result.data.table</i></div>"
        if len(f.table) > 12
        else ""
    )
    return HTML(f.card_html() + table + more)


def check_panel(
    check: str,
    context: AuditContext,
    cfg=None,
    *,
    smoke: bool = False,
    widget: bool | None = None,
    from_config: bool = True,
    **overrides: Any,
) -> Panel:
    """The panel of one check (slug): ``cfg``, or the check's config built from the audit config's
    values for it (none when ``from_config`` is false or the config lacks the check's section) and
    ``overrides`` (``None`` keeps the config's value); under ``smoke`` the smoke preset's sizes win."""
    c = REGISTRY[check]
    if cfg is None:
        values = c.audit_values(context.config) if from_config and not c.lacks_section(context.config) else {}
        given = _checked(c.Config, {k: v for k, v in overrides.items() if v is not None})
        cfg = from_audit_values(c.Config, {**values, **given}, smoke)
    return Panel(
        cfg,
        lambda p, live=None: c.run(p, context, live),
        title=f"{c.title} ({c.slug})",
        widget=widget,
        show_result=show_finding,
    )


def _checked(Config: type, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` of ``Config``'s fields, each of its default's type (a :class:`UsageError` names the
    field otherwise: a notebook parameter of the wrong type must fail as one line, not deep in a check)."""
    defaults = {f.name: getattr(Config(), f.name) for f in dataclasses.fields(Config)}
    for key, value in overrides.items():
        if key not in defaults:
            raise UsageError(
                f"{Config.__name__} has no field {key}; its fields: {', '.join(sorted(defaults))}"
            )
        default = defaults[key]
        same = isinstance(value, bool) == isinstance(default, bool) and isinstance(
            value, (int, float) if isinstance(default, float) else type(default)
        )
        if not same:
            raise UsageError(
                f"{Config.__name__}.{key} expects {type(default).__name__} (default {default!r}), "
                f"got {value!r}"
            )
    return overrides


def show(
    check: str, context: AuditContext, *, smoke: bool = False, from_config: bool = True, **overrides: Any
) -> Finding:
    """Display the check's panel and run its default headless; the result is kept in ``context.results``."""
    p = check_panel(check, context, smoke=smoke, from_config=from_config, **overrides)
    p.display()
    context.results[REGISTRY[check].slug] = result = p.run()
    return result.data


def show_all(checks: Iterable[str], context: AuditContext, *, smoke: bool = False) -> list[Finding]:
    """:func:`show` for each check in turn."""
    return [show(c, context, smoke=smoke) for c in checks]


def read_trainer_config(path: str | Path, model: str = "") -> Mapped:
    """A user's trainer config (axolotl YAML, TRL/TrainingArguments JSON, PEFT or DeepSpeed JSON; a
    bundled example by bare name) mapped onto the audit; ``model`` replaces its base model."""
    return read_any(config_file(path), model=model or None)


def trainer_context(mapped: Mapped, context: AuditContext) -> AuditContext:
    """The context of a mapped trainer config, on ``context``'s device, sharing its loaded models."""
    return make_context(
        mapped.config,
        context.torch_device,
        model_unavailable=mapped.model_unavailable,
        share_models_with=context,
    )


def trainer_config_summary(mapped: Mapped, name: str) -> dict[str, Any]:
    """What a notebook records of a mapped trainer config: file, format, model, keys per status."""
    keys = {s: sum(r["status"] == s for r in mapped.keys) for s in ("audited", "defaulted", "not covered")}
    return {"file": name, "format": mapped.fmt, "model": mapped.config.model.name, "keys": keys}
