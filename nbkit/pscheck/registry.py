"""The rule registry: :class:`RuleRegistry` holds rules by code, selects the active ones the way ruff
combines ``--select``/``--extend-select``/``--ignore``, and loads plugin rules (``--plugin`` modules and
the ``nbkit.pscheck.rules`` entry-point group).

:class:`BaseRule`, :class:`RuleContext`, :class:`Diagnostic` and the group names are re-exported here:
plugins written against ``nbkit.pscheck.registry`` keep working.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterable, Iterator
from typing import Any

from nbkit.pscheck.diagnostic import UNREADABLE, Diagnostic
from nbkit.pscheck.rule import GROUPS, OPT_IN_GROUPS, SEVERITIES, BaseRule, RuleContext, group_of, groups_of
from nbkit.pscheck.rules import BUILTIN_RULES

__all__ = [
    "ENTRY_POINT_GROUP",
    "GROUPS",
    "OPT_IN_GROUPS",
    "SEVERITIES",
    "UNREADABLE",
    "BaseRule",
    "Diagnostic",
    "PluginError",
    "RuleContext",
    "RuleRegistry",
    "group_of",
    "groups_of",
]

ENTRY_POINT_GROUP = "nbkit.pscheck.rules"


def _normalise(items: Iterable[str] | None) -> list[str]:
    """Group names lower-case, codes upper-case, blanks dropped."""
    out = []
    for s in items or ():
        s = s.strip()
        if s:
            out.append(s.lower() if s.lower() in GROUPS else s.upper())
    return out


class PluginError(Exception):
    """A plugin could not be loaded; the message names the plugin and why."""


class RuleRegistry:
    """Rules by code. ``RuleRegistry.default()`` holds the built-in rules."""

    def __init__(self) -> None:
        self._rules: dict[str, BaseRule] = {}
        self.plugin_errors: list[str] = []

    def register(self, rule: type[BaseRule] | BaseRule) -> Any:
        """Register a rule class or instance; usable as a class decorator."""
        inst = rule() if isinstance(rule, type) else rule
        type(inst).validate_definition()
        if inst.code in self._rules and type(self._rules[inst.code]) is not type(inst):
            raise ValueError(
                f"rule code {inst.code} is already registered by {type(self._rules[inst.code]).__qualname__}"
            )
        self._rules[inst.code] = inst
        return rule

    def __iter__(self) -> Iterator[BaseRule]:
        return iter(sorted(self._rules.values(), key=lambda r: r.code))

    def __len__(self) -> int:
        return len(self._rules)

    def __contains__(self, code: object) -> bool:
        return code in self._rules

    def get(self, code: str) -> BaseRule:
        return self._rules[code]

    def select(
        self,
        select: Iterable[str] | None = None,
        ignore: Iterable[str] | None = None,
        strict: bool = False,
        extend_select: Iterable[str] | None = None,
    ) -> list[BaseRule]:
        """Active rules, the way ruff combines its options.

        ``select`` replaces the default group; ``extend_select`` adds to whatever is selected;
        ``ignore`` removes; ``strict`` adds the strict group. Each item is a group name
        (``default``, ``migration``, ``strict``, ``all``; any case), an exact code, or a code
        prefix (``PSC0``). A prefix reaches only default rules: an opt-in rule is switched on by
        its exact code or its group's name, never by accident through a prefix. A group also
        selects the rules that are ``also_in`` it (``migration`` holds the default group's v1-API
        rules too).
        """
        sel = _normalise(select)
        ign = _normalise(ignore)
        ext = _normalise(extend_select) + (["strict"] if strict else [])
        out = []
        for rule in self:
            on = self._matches(rule, sel, prefix_opt_in=False) if sel else group_of(rule) == "default"
            if not on and ext:
                on = self._matches(rule, ext, prefix_opt_in=False)
            if on and ign and self._matches(rule, ign, prefix_opt_in=True):
                on = False
            if on:
                out.append(rule)
        return out

    @staticmethod
    def _matches(rule: BaseRule, items: list[str], prefix_opt_in: bool) -> bool:
        g = group_of(rule)
        for item in items:
            if item == "all" or item == g or item in rule.also_in or item == rule.code:
                return True
            if item not in GROUPS and rule.code.startswith(item) and (prefix_opt_in or g == "default"):
                return True
        return False

    def unknown_codes(self, codes: Iterable[str]) -> list[str]:
        """Items that name no group and match no rule code (an argument error)."""
        return [
            c.strip()
            for c in codes
            if c.strip()
            and c.strip().lower() not in GROUPS
            and not any(r.code.startswith(c.strip().upper()) for r in self)
        ]

    # -- plugins --------------------------------------------------------------------------------
    def load_plugin(self, target: str) -> list[str]:
        """Load rules from ``module`` or ``module:attr``. Raises :class:`PluginError` with the reason."""
        mod_name, _, attr = target.partition(":")
        try:
            obj: Any = importlib.import_module(mod_name)
            for part in filter(None, attr.split(".")):
                obj = getattr(obj, part)
        except BaseException as exc:  # a plugin may raise anything at import, even SystemExit
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise PluginError(f"plugin {target!r} failed to import: {type(exc).__name__}: {exc}") from None
        return self._register_object(obj, target)

    def _register_object(self, obj: Any, label: str) -> list[str]:
        before = set(self._rules)
        try:
            if inspect.isclass(obj) and issubclass(obj, BaseRule):
                self.register(obj)
            elif inspect.ismodule(obj):
                if callable(getattr(obj, "register", None)):
                    obj.register(self)
                elif hasattr(obj, "PSCHECK_RULES"):
                    for rule in obj.PSCHECK_RULES:
                        self.register(rule)
                else:
                    raise PluginError(
                        f"plugin {label!r} defines neither register(registry) nor PSCHECK_RULES"
                    )
            elif callable(obj):
                obj(self)
            else:
                raise PluginError(f"plugin {label!r} is not a rule class, module or register function")
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"plugin {label!r} failed to register: {type(exc).__name__}: {exc}") from None
        return sorted(set(self._rules) - before)

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> list[str]:
        """Load every rule advertised in the entry-point group; failures go to ``plugin_errors``."""
        loaded: list[str] = []
        for label, obj, error in _entry_point_objects(group):
            if error is not None:
                self.plugin_errors.append(error)
                continue
            try:
                loaded += self._register_object(obj, label)
            except PluginError as exc:
                self.plugin_errors.append(str(exc))
        return loaded

    @classmethod
    def default(cls) -> RuleRegistry:
        reg = cls()
        for rule in BUILTIN_RULES:
            reg.register(rule)
        return reg


_EP_CACHE: dict[str, list[tuple[str, Any, str | None]]] = {}


def _entry_point_objects(group: str) -> list[tuple[str, Any, str | None]]:
    """(label, loaded object, error) per entry point, cached per process: scanning every installed
    distribution's metadata costs tens of milliseconds, too much to repeat for each lint_source call."""
    if group not in _EP_CACHE:
        from importlib.metadata import entry_points

        rows: list[tuple[str, Any, str | None]] = []
        for ep in entry_points(group=group):
            label = f"{ep.name} = {ep.value}"
            try:
                rows.append((label, ep.load(), None))
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                rows.append(
                    (label, None, f"entry point {ep.name!r} ({ep.value}) failed: {type(exc).__name__}: {exc}")
                )
        _EP_CACHE[group] = rows
    return _EP_CACHE[group]
