"""Run one audit check, or the audit of a whole config: ``run_check`` / ``run_audit`` → ``Result``.

The device is resolved here, once (:func:`make_context`), and handed to every check as a
``torch.device``; the model, tokenizer and data are loaded once per context and shared by the checks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from nbkit.audit.config import AuditConfig
from nbkit.findings import Finding, error_finding, findings_frame
from nbkit.result import Result

STATUSES = ("pass", "warn", "fail", "error", "needs_gpu", "skipped")


class NotRunnable(Exception):
    """A check lacks an input it needs (``str()`` says which): reported as "not run: needs …", never a pass."""


@dataclass
class AuditContext:
    """What the checks of one audit share: the config, the resolved ``torch.device``, loaded models and data."""

    config: AuditConfig
    device: Any
    progress: bool = True
    model_unavailable: str = ""  # why no model can be loaded (a foreign config naming one nbkit cannot load)
    _models: dict = field(default_factory=dict, repr=False)
    _base_losses: dict = field(default_factory=dict, repr=False)
    _data: Any = field(default=None, repr=False)
    _data_finding: Finding | None = field(default=None, repr=False)

    def model_and_tokenizer(self, name: str = ""):
        """(model, tokenizer) of ``name`` (default: the config's model), loaded once.

        ``name`` is a preset (``tiny``, ``smollm2``) or what :func:`nbkit.model_files.resolve_model`
        accepts: a model directory or a Hub id is loaded with its weights and tokenizer; a config.json
        alone (architecture only) leaves the checks that need weights "not run".
        """
        if self.model_unavailable and not name:
            raise NotRunnable(self.model_unavailable)
        name = name or self.config.model.name
        if name not in self._models:
            import torch

            dtype = getattr(torch, self.config.model.dtype)
            if name in ("tiny", "smollm2"):
                from nbkit.audit.sft import load_model_and_tokenizer

                self._models[name] = load_model_and_tokenizer(name, self.device, dtype, seed=self.config.model.seed)
            else:
                from nbkit.model_files import load_model, load_tokenizer, resolve_model

                source = resolve_model(name, need_weights=False)
                if source.kind == "config":
                    raise NotRunnable(f"the model's weights (model {name} is a config.json alone: architecture only)")
                if not source.has_tokenizer:
                    raise NotRunnable(f"a tokenizer (model directory {source.path} has no tokenizer files)")
                self._models[name] = (load_model(name, self.device, dtype), load_tokenizer(name))
        return self._models[name]

    def base_example_losses(self, examples, template, model: str = "") -> list[tuple[float, int]]:
        """(summed token loss, trained-token count) of each example under the loaded (untrained) model ``model``.

        Scored once per (model, template, example) and shared: kiss-lora's untrained validation loss,
        reward-weights' scores and eval-batch's losses read the same forward passes.
        """
        import json

        from nbkit.audit.sft import example_losses

        name = model or self.config.model.name
        m, tok = self.model_and_tokenizer(model)
        keys = [(name, template.model_dump_json(), json.dumps(e, sort_keys=True, default=str)) for e in examples]
        todo = {k: e for k, e in zip(keys, examples, strict=True) if k not in self._base_losses}
        if todo:
            self._base_losses.update(zip(todo, example_losses(m, tok, list(todo.values()), template), strict=True))
        return [self._base_losses[k] for k in keys]

    def model_config(self):
        """The transformers config of the audit's model (architecture only: nothing is loaded for a path)."""
        if self.model_unavailable:
            raise NotRunnable(self.model_unavailable)
        name = self.config.model.name
        if name in ("tiny", "smollm2"):
            return self.model_and_tokenizer()[0].config
        from nbkit.model_files import resolve_model

        return resolve_model(name, need_weights=False).config

    def data(self):
        """(the data-schema finding, valid records); the bundled SFT set when the config has no data section."""
        if self._data is None:
            if self.config.data is None:
                from nbkit.audit.sft import make_sft_examples

                self._data_finding, self._data = None, make_sft_examples(160)
            else:
                from nbkit.audit.checks.data_schema import check_jsonl_schema

                d = self.config.data
                self._data_finding, rep = check_jsonl_schema(d.path, d.schema_ref, strict=d.strict, max_lines=d.max_lines)
                self._data = rep.records if rep is not None else []
        return self._data_finding, self._data

    def examples(self, minimum: int, what: str):
        """At least ``minimum`` SFT records, and a note when the bundled set had to stand in."""
        _, recs = self.data()
        if len(recs) < minimum:
            from nbkit.audit.sft import make_sft_examples

            return make_sft_examples(max(minimum, 160)), f" (the config's data has only {len(recs)} valid records; used the bundled SFT set for {what})"
        return recs, ""


def make_context(config: AuditConfig, device: Any = "auto", *, progress: bool = True, model_unavailable: str = "",
                 share_models_with: AuditContext | None = None) -> AuditContext:
    """The shared context of an audit; ``device`` ("auto", "cpu", "cuda", a torch.device) is resolved here.

    ``share_models_with``: another context whose loaded models this one reuses (a second config on
    the same model loads nothing again).
    """
    from nbkit.device import pick_device

    ctx = AuditContext(config, pick_device(device) if not hasattr(device, "type") else device, progress, model_unavailable)
    if share_models_with is not None:
        ctx._models, ctx._base_losses = share_models_with._models, share_models_with._base_losses
    return ctx


def check_config(check: str, config: AuditConfig, smoke: bool = False):
    """The check's config dataclass from the audit config (``None`` when the section it needs is missing)."""
    from nbkit.audit.checks import REGISTRY

    c = REGISTRY[check]
    if c.needs and getattr(config, c.needs) is None:
        return None
    return c.Config.from_audit(config, smoke=smoke)


def _finding_result(f: Finding) -> Result:
    import pandas as pd

    return Result(metrics=dict(f.figures), table=pd.DataFrame(f.table) if f.table else None, figure=f.figure, data=f)


def run_check(check: str, cfg: Any, context: AuditContext, live=None, *, catch: bool = True) -> Result:
    """Run one check (slug or number) with its config dataclass; ``Result.data`` is the :class:`Finding`.

    ``cfg`` ``None`` means the audit config lacks the section the check reads: a skipped finding.
    With ``catch`` an exception becomes an ``error`` finding (one line); panels pass ``catch=False``
    so the panel shows the failure itself.
    """
    from nbkit.audit.checks import REGISTRY

    c = REGISTRY[check]
    t0 = time.perf_counter()
    if cfg is None:
        f = Finding(c.slug, c.title, "skipped", f"not run: needs the config's '{c.needs}' section")
    else:
        try:
            f = c.run(context, cfg, live=live)
        except NotRunnable as exc:
            f = Finding(c.slug, c.title, "skipped", f"not run: needs {exc}")
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            if not catch:
                raise
            f = error_finding(c.slug, c.title, exc)
    f.seconds = time.perf_counter() - t0
    return _finding_result(f)


def run_audit(config: AuditConfig, checks: list[str] | None = None, *, device: Any = "auto", smoke: bool = False,
              progress: bool = True, context: AuditContext | None = None) -> Result:
    """Run ``checks`` (slugs; default: the config's ``checks`` or all) → ``Result``.

    ``data`` is the list of findings, ``table`` one row per finding, ``metrics`` the findings as
    dicts and the status counts.
    """
    from tqdm.auto import tqdm

    from nbkit.audit.checks import REGISTRY

    slugs = [REGISTRY[c].slug for c in (checks if checks is not None else (config.checks or REGISTRY.slugs))]
    if not slugs:
        from nbkit.errors import UsageError

        raise UsageError("the selection of checks is empty")
    ctx = context or make_context(config, device, progress=progress)
    findings = []
    bar = tqdm(slugs, desc="audit", disable=not progress, leave=False)
    for slug in bar:
        bar.set_postfix_str(slug)
        findings.append(run_check(slug, check_config(slug, ctx.config, smoke), ctx).data)
    counts = {s: sum(f.status == s for f in findings) for s in STATUSES}
    return Result(metrics={"findings": [f.to_dict(with_table=False) for f in findings], "status_counts": counts},
                  table=findings_frame(findings), data=findings)
