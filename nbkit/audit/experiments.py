"""The audit's experiments: its checks in one registry, the context they share, and the audit of a config.

``REGISTRY`` holds the eighteen checks (one module each under :mod:`nbkit.audit.checks`) by slug and
by number. :class:`AuditContext` is what the checks of one audit share: the audit config, the device
(resolved once), the model, tokenizer and data (loaded once, cached in the context) and the results
its checks produced. :func:`run_check` runs one check, :func:`run_audit` every check a config allows.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import CheckRegistry, NotRunnable, finding_result
from nbkit.audit.checks import (
    attention,
    chat_template_eot,
    data_schema,
    ddp_eval,
    dtypes,
    eval_batch,
    fragmentation,
    grad_accumulation,
    kiss,
    label_alignment,
    lora_binding,
    loss_mask,
    packing_attention,
    reward_weights,
    schedulers,
    tied_embeddings,
    train_on_inputs,
    zero3_layout,
)
from nbkit.audit.sft import example_losses, load_model_and_tokenizer, make_sft_examples
from nbkit.device import pick_device
from nbkit.errors import UsageError
from nbkit.experiment import Context
from nbkit.findings import Finding, error_finding, findings_frame
from nbkit.model_files import load_model, load_tokenizer, resolve_model
from nbkit.result import Result

if TYPE_CHECKING:
    import pandas as pd

    from nbkit.audit.config import AuditConfig

__all__ = [
    "REGISTRY",
    "STATUSES",
    "AuditContext",
    "AuditSummary",
    "NotRunnable",
    "make_context",
    "run_audit",
    "run_check",
]

STATUSES = ("pass", "warn", "fail", "error", "needs_gpu", "skipped")
# The checks that read a trainer config's ``trainer`` section (axolotl / TRL keys).
TRAINER_CHECKS = (
    "train-on-inputs",
    "chat-template-eot",
    "tied-embeddings-lora",
    "packing-attention",
    "eval-batch",
)

REGISTRY = CheckRegistry("audit")
for _module in (
    kiss,
    lora_binding,
    label_alignment,
    attention,
    grad_accumulation,
    dtypes,
    data_schema,
    loss_mask,
    reward_weights,
    zero3_layout,
    schedulers,
    fragmentation,
    ddp_eval,
    train_on_inputs,
    chat_template_eot,
    tied_embeddings,
    packing_attention,
    eval_batch,
):
    REGISTRY.register(_module.CHECK)


class AuditContext(Context):
    """What the checks of one audit share: the config, the resolved device, loaded models and data.

    Models, tokenizers, the untrained model's per-example losses and the DDP ranks' measurements are
    cached in ``shared``: this context, or the one given as ``share_models_with`` (a second config on
    the same model loads nothing again). ``results`` keeps each check's last headless result by slug.
    """

    def __init__(
        self,
        config: AuditConfig,
        device: Any = "auto",
        *,
        progress: bool = True,
        model_unavailable: str = "",
        share_models_with: AuditContext | None = None,
    ) -> None:
        resolved = device if hasattr(device, "type") else pick_device(device)
        super().__init__(str(resolved))
        self._resolved = resolved
        self.config = config
        self.progress = progress
        self.model_unavailable = (
            model_unavailable  # why no model can be loaded (a foreign config naming one nbkit cannot load)
        )
        self.shared: AuditContext = share_models_with.shared if share_models_with is not None else self
        self.results: dict[str, Result[Any]] = {}

    def model_and_tokenizer(self, name: str = ""):
        """(model, tokenizer) of ``name`` (default: the config's model), loaded once.

        ``name`` is a preset (``tiny``, ``smollm2``) or what :func:`nbkit.model_files.resolve_model`
        accepts: a model directory or a Hub id is loaded with its weights and tokenizer; a config.json
        alone (architecture only) leaves the checks that need weights "not run".
        """
        if self.model_unavailable and not name:
            raise NotRunnable(self.model_unavailable)
        name = name or self.config.model.name
        return self.shared.cached(("model", name), lambda: self._load(name))

    def _load(self, name: str):
        import torch

        dtype = getattr(torch, self.config.model.dtype)
        if name in ("tiny", "smollm2"):
            return load_model_and_tokenizer(name, self.torch_device, dtype, seed=self.config.model.seed)
        source = resolve_model(name, need_weights=False)
        if source.kind == "config":
            raise NotRunnable(f"the model's weights (model {name} is a config.json alone: architecture only)")
        if not source.has_tokenizer:
            raise NotRunnable(f"a tokenizer (model directory {source.path} has no tokenizer files)")
        return load_model(name, self.torch_device, dtype), load_tokenizer(name)

    def base_example_losses(self, examples, template, model: str = "") -> list[tuple[float, int]]:
        """(summed token loss, trained-token count) of each example under the loaded (untrained) model
        ``model``.

        Scored once per (model, template, example) and shared: kiss-lora's untrained validation loss,
        reward-weights' scores and eval-batch's losses read the same forward passes.
        """
        name = model or self.config.model.name
        m, tok = self.model_and_tokenizer(model)
        store: dict = self.shared.cached(("base-losses",), dict)
        keys = [
            (name, template.model_dump_json(), json.dumps(e, sort_keys=True, default=str)) for e in examples
        ]
        todo = {k: e for k, e in zip(keys, examples, strict=True) if k not in store}
        if todo:
            store.update(zip(todo, example_losses(m, tok, list(todo.values()), template), strict=True))
        return [store[k] for k in keys]

    def model_config(self):
        """The transformers config of the audit's model (architecture only: nothing is loaded for a path)."""
        if self.model_unavailable:
            raise NotRunnable(self.model_unavailable)
        name = self.config.model.name
        if name in ("tiny", "smollm2"):
            return self.model_and_tokenizer()[0].config
        return resolve_model(name, need_weights=False).config

    def data(self) -> tuple[Finding | None, list]:
        """(the data-schema finding, valid records); the bundled SFT set when the config has no data
        section."""
        return self.cached(("data",), self._load_data)

    def _load_data(self) -> tuple[Finding | None, list]:
        if self.config.data is None:
            return None, make_sft_examples(160)
        d = self.config.data
        finding, rep = data_schema.check_jsonl_schema(
            d.path, d.schema_ref, strict=d.strict, max_lines=d.max_lines
        )
        return finding, rep.records if rep is not None else []

    def examples(self, minimum: int, what: str):
        """At least ``minimum`` SFT records, and a note when the bundled set had to stand in."""
        _, recs = self.data()
        if len(recs) < minimum:
            note = (
                f" (the config's data has only {len(recs)} valid records; used the bundled SFT set for "
                f"{what})"
            )
            return make_sft_examples(max(minimum, 160)), note
        return recs, ""

    def findings(self) -> list[Finding]:
        """The findings of the checks run headless in this context, in the order they ran."""
        return [r.data for r in self.results.values()]

    def finding_dicts(self) -> list[dict[str, Any]]:
        """What a notebook records of them (no evidence tables)."""
        return [f.to_dict(with_table=False) for f in self.findings()]

    def findings_frame(self) -> pd.DataFrame:
        """The findings as one table (one row per check)."""
        return findings_frame(self.findings())

    def status_counts(self) -> dict[str, int]:
        return {s: sum(f.status == s for f in self.findings()) for s in STATUSES}


def make_context(
    config: AuditConfig,
    device: Any = "auto",
    *,
    progress: bool = True,
    model_unavailable: str = "",
    share_models_with: AuditContext | None = None,
) -> AuditContext:
    """The shared context of an audit; ``device`` ("auto", "cpu", "cuda", a torch.device) is resolved here."""
    return AuditContext(
        config,
        device,
        progress=progress,
        model_unavailable=model_unavailable,
        share_models_with=share_models_with,
    )


def check_config(check: str, config: AuditConfig, smoke: bool = False):
    """The check's config dataclass from the audit config (``None`` when the section it needs is missing)."""
    return REGISTRY[check].config_from(config, smoke)


def run_check(check: str, cfg: Any, context: AuditContext, live=None, *, catch: bool = True) -> Result[Any]:
    """Run one check (slug or number) with its config dataclass; ``Result.data`` is the :class:`Finding`.

    ``cfg`` ``None`` means the audit config lacks the section the check reads: a skipped finding.
    With ``catch`` an exception becomes an ``error`` finding (one line); panels pass ``catch=False``
    so the panel shows the failure itself.
    """
    c = REGISTRY[check]
    model = context.config.model.name
    if cfg is None:
        return finding_result(
            Finding(c.slug, c.title, "skipped", f"not run: needs the config's '{c.needs}' section"),
            c.Metrics,
            model,
        )
    t0 = time.perf_counter()
    try:
        return c.run(cfg, context, live)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        if not catch:
            raise
        f = error_finding(c.slug, c.title, exc)
        f.seconds = time.perf_counter() - t0
        return finding_result(f, c.Metrics, model)


@dataclass(frozen=True)
class AuditSummary:
    """The audit of one config: each finding as a dict (no evidence tables) and the status counts."""

    findings: list
    status_counts: dict


def run_audit(
    config: AuditConfig,
    checks: list[str] | None = None,
    *,
    device: Any = "auto",
    smoke: bool = False,
    progress: bool = True,
    context: AuditContext | None = None,
) -> Result[AuditSummary]:
    """Run ``checks`` (slugs; default: the config's ``checks`` or all) → ``Result``.

    ``data`` is the list of findings, ``table`` one row per finding, ``metrics`` the findings as
    dicts and the status counts. Each check's result is kept in the context's ``results``.
    """
    from tqdm.auto import tqdm

    slugs = [REGISTRY[c].slug for c in (checks if checks is not None else (config.checks or REGISTRY.slugs))]
    if not slugs:
        raise UsageError("the selection of checks is empty")
    ctx = context or make_context(config, device, progress=progress)
    bar = tqdm(slugs, desc="audit", disable=not progress, leave=False)
    for slug in bar:
        bar.set_postfix_str(slug)
        c = REGISTRY[slug]
        try:
            cfg = check_config(slug, ctx.config, smoke)
        except NotRunnable as exc:  # the audit config's value is one the check does not run
            f = Finding(c.slug, c.title, "skipped", f"not run: needs {exc}")
            ctx.results[slug] = finding_result(f, c.Metrics, ctx.config.model.name)
            continue
        except UsageError as exc:  # the audit config's value is one the check's config refuses
            ctx.results[slug] = finding_result(
                error_finding(c.slug, c.title, exc), c.Metrics, ctx.config.model.name
            )
            continue
        ctx.results[slug] = run_check(slug, cfg, ctx)
    findings = [ctx.results[s].data for s in slugs]
    counts = {s: sum(f.status == s for f in findings) for s in STATUSES}
    summary = AuditSummary([f.to_dict(with_table=False) for f in findings], counts)
    return Result(metrics=summary, table=findings_frame(findings), data=findings)


def findings_table(good: AuditContext, broken: AuditContext) -> pd.DataFrame:
    """The findings of both contexts in one table, with a ``config`` column ("good" / "broken")."""
    g, b = good.findings(), broken.findings()
    return findings_frame(g + b).assign(config=["good"] * len(g) + ["broken"] * len(b))
