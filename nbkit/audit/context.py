"""The audit's context: what the checks of one audit share.

One :class:`AuditContext` per audited config, opened one way::

    ctx = AuditContext(DEVICE, smoke=SMOKE, profile=PROFILE, config=CONFIG, model=MODEL, seed=SEED)

It holds the audit config (read from a YAML file, a bundled example by bare name, or given as an
:class:`~nbkit.audit.config.AuditConfig`), the device (resolved once), the model, tokenizer and data
(loaded once, cached in the context, or in the context given as ``share_models_with``), each check's
latest finding and the typed results of those that measured. It gives each check the values its
section of the audit config sets (:meth:`AuditContext.config_values`), so a notebook's panel starts
from the user's settings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, NotRunnable
from nbkit.audit.config import AuditConfig, config_file, load_config
from nbkit.audit.jsonl_schema import SchemaLoadError, load_schema, validate_jsonl
from nbkit.audit.sft import example_losses, load_model_and_tokenizer, make_sft_examples
from nbkit.claims import DEFAULT
from nbkit.experiment import Context, Experiment
from nbkit.findings import STATUSES, Finding, findings_frame
from nbkit.model_files import load_model, load_tokenizer, resolve_model
from nbkit.record import record
from nbkit.result import Result

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["STATUSES", "AuditContext"]


class AuditContext(Context):
    """What the checks of one audit share: the config, the resolved device, loaded models and data.

    ``config`` is an :class:`AuditConfig`, or the path of a YAML audit config (a bundled example by
    bare name, e.g. ``"good_smollm2.yaml"``); ``model`` and ``seed`` replace its model section's when
    given; ``threads`` > 0 sets torch's intra-op threads. ``model_unavailable`` says why no model can
    be loaded (a foreign config naming one nbkit cannot load). Models, tokenizers, the untrained
    model's per-example losses and the DDP ranks' measurements are cached in ``shared``: this context,
    or the one given as ``share_models_with`` (a second config on the same model loads nothing again).
    """

    def __init__(
        self,
        device: Any = "auto",
        *,
        smoke: bool = False,
        profile: str = DEFAULT,
        config: AuditConfig | str | Path | None = None,
        model: str = "",
        seed: int | None = None,
        threads: int = 0,
        progress: bool = True,
        model_unavailable: str = "",
        share_models_with: AuditContext | None = None,
    ) -> None:
        super().__init__(str(device), smoke=smoke, profile=profile)
        if hasattr(device, "type"):  # an already resolved torch.device (a second context on the same one)
            self._resolved = device
        if threads > 0:
            import torch

            torch.set_num_threads(threads)
        cfg = config if isinstance(config, AuditConfig) else AuditConfig()
        if isinstance(config, (str, Path)):
            cfg = load_config(config_file(config))
        update = {k: v for k, v in (("name", model), ("seed", seed)) if v not in ("", None)}
        if update:
            cfg = cfg.model_copy(update={"model": cfg.model.model_copy(update=update)})
        self.config = cfg
        self.progress = progress
        self.model_unavailable = model_unavailable
        self.shared: AuditContext = share_models_with.shared if share_models_with is not None else self
        self.checked: dict[str, Finding] = {}

    def config_values(self, experiment: Experiment[Any, Any]) -> dict[str, Any]:
        """A check's values from the audit config's section it reads (none for a missing section, or
        for an experiment that is not a check)."""
        return experiment.audit_values(self.config) if isinstance(experiment, Check) else {}

    def keep(self, slug: str, result: Result[Any]) -> Result[Any]:
        """Keep a check's finding (every check that ran, in order) and its result when it measured
        something; a check that measured nothing leaves no result for claims to read."""
        if isinstance(result.data, Finding):
            self.checked.pop(slug, None)
            self.checked[slug] = result.data
        if result.metrics is None:
            self.results.pop(slug, None)
            return result
        return super().keep(slug, result)

    def describe(self) -> None:
        """The device line (recorded as ``device``) and a line with the audited model's name, size, head
        layout and pad/eos ids (recorded as ``model``: what a reader checks first)."""
        super().describe()
        model, tok = self.model_and_tokenizer()
        summary = {
            "name": self.config.model.name,
            "params": sum(p.numel() for p in model.parameters()),
            "heads": model.config.num_attention_heads,
            "kv_heads": model.config.num_key_value_heads,
            "pad_id": tok.pad_token_id,
            "eos_id": tok.eos_token_id,
        }
        record("model", summary)
        print(
            f"model {summary['name']} · {summary['params']:,} parameters · "
            f"{summary['heads']} attention heads, {summary['kv_heads']} key/value heads · "
            f"pad id {summary['pad_id']}, eos id {summary['eos_id']}"
        )

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

    def records(self) -> list:
        """The valid records of the config's data file (the bundled SFT set when it has no data
        section; none when its schema or file cannot be read — the data-schema check says why)."""
        return self.cached(("data",), self._load_records)

    def _load_records(self) -> list:
        if self.config.data is None:
            return make_sft_examples(160)
        d = self.config.data
        try:
            schema = load_schema(d.schema_ref)
        except SchemaLoadError:
            return []
        if not Path(d.path).is_file():
            return []
        return validate_jsonl(d.path, schema, max_lines=d.max_lines).records

    def examples(self, minimum: int, what: str):
        """At least ``minimum`` SFT records, and a note when the bundled set had to stand in."""
        recs = self.records()
        if len(recs) < minimum:
            note = (
                f" (the config's data has only {len(recs)} valid records; used the bundled SFT set for "
                f"{what})"
            )
            return make_sft_examples(max(minimum, 160)), note
        return recs, ""

    def findings(self) -> list[Finding]:
        """The findings of the checks run in this context, in the order they ran."""
        return list(self.checked.values())

    def finding_dicts(self) -> list[dict[str, Any]]:
        """What a notebook records of them (no evidence tables)."""
        return [f.to_dict(with_table=False) for f in self.findings()]

    def findings_frame(self) -> pd.DataFrame:
        """The findings as one table (one row per check)."""
        return findings_frame(self.findings())

    def status_counts(self) -> dict[str, int]:
        return {s: sum(f.status == s for f in self.findings()) for s in STATUSES}
