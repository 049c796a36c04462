"""The audit's checks: one module per check, each registering a :class:`Check` under its slug.

A check module holds what the check is about (its measurements) and ends with::

    CHECK = REGISTRY.register(Check(SLUG, TITLE, XConfig, run, number=N, needs="section"))

``run(context, cfg, live=None) -> Finding`` gets the shared :class:`~nbkit.audit.experiments.AuditContext`
(model, tokenizer and data loaded once, the device resolved once) and the check's own config dataclass
(from :mod:`nbkit.audit.config`). Slugs are the keys everywhere: ``--checks``, findings, claims,
panels. ``number`` is the check's place in the field notes' list of thirteen (14–18: the axolotl/TRL
config checks that read the ``trainer`` section); ``--checks 2,7-11``
still selects by it, mapped through this registry. Modelled on pscheck's ``RuleRegistry``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from nbkit.errors import UsageError


@dataclass(frozen=True)
class Check:
    """One audit check: ``slug`` (its key), ``title``, its ``Config`` dataclass and its ``run`` function.

    ``needs`` names the audit-config section the check reads; when that section is missing from a
    YAML config the check is reported as skipped (and says which section would run it).
    """

    slug: str
    title: str
    Config: type
    run: Callable[..., Any]
    number: int
    needs: str = ""


class CheckRegistry:
    """Checks by slug, iterated in the field notes' order."""

    def __init__(self) -> None:
        self._checks: dict[str, Check] = {}

    def register(self, check: Check) -> Check:
        if check.slug in self._checks:
            raise ValueError(f"audit check {check.slug!r} registered twice")
        if any(c.number == check.number for c in self._checks.values()):
            raise ValueError(f"audit check number {check.number} used twice")
        self._checks[check.slug] = check
        return check

    def __iter__(self) -> Iterator[Check]:
        return iter(sorted(self._checks.values(), key=lambda c: c.number))

    def __len__(self) -> int:
        return len(self._checks)

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    @property
    def slugs(self) -> list[str]:
        return [c.slug for c in self]

    def __getitem__(self, key: str | int) -> Check:
        """A check by slug, or by its number (an int or a string of digits)."""
        if isinstance(key, bool):
            raise KeyError(key)
        if isinstance(key, int) or (isinstance(key, str) and key.strip().isdigit()):
            for c in self._checks.values():
                if c.number == int(key):
                    return c
            raise KeyError(key)
        if isinstance(key, str) and key.strip() in self._checks:
            return self._checks[key.strip()]
        raise KeyError(key)

    def known(self) -> str:
        return ", ".join(f"{c.number} {c.slug}" for c in self)

    def select(self, spec: str) -> list[str]:
        """Slugs selected by a ``--checks`` value: slugs, numbers and number ranges, comma separated.

        An empty selection, a reversed range (``5-2``) or an unknown name is a :class:`UsageError`.
        """
        parts = [p.strip() for p in str(spec).split(",")]
        if not any(parts):
            raise UsageError(f"--checks {spec!r} selects no check; give slugs or numbers, e.g. lora-binding,7-11 (known: {self.known()})")
        out: list[str] = []
        for part in parts:
            if not part:
                raise UsageError(f"--checks {spec!r}: empty item between commas")
            lo, sep, hi = part.partition("-")
            if sep and lo.strip().isdigit() and hi.strip().isdigit():
                a, b = int(lo), int(hi)
                if a > b:
                    raise UsageError(f"--checks {spec!r}: range {part!r} is reversed (write {b}-{a})")
                keys: list[str | int] = list(range(a, b + 1))
            else:
                keys = [part]
            for key in keys:
                try:
                    slug = self[key].slug
                except KeyError:
                    raise UsageError(f"--checks {spec!r}: unknown check {key!r} (known: {self.known()})") from None
                if slug not in out:
                    out.append(slug)
        return out


REGISTRY = CheckRegistry()

# Importing the modules registers their checks (each module's top level is light: torch, peft and
# transformers load inside the run functions).
from nbkit.audit.checks import (  # noqa: E402,F401
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
