"""What a rule is: :class:`BaseRule` (code, name, group, severity, documentation, checks), the
:class:`RuleContext` it checks a model in, and the rule groups ``--select``/``--ignore`` name.

Built-in rules (:mod:`nbkit.pscheck.rules`) and plugins subclass :class:`BaseRule`; this module needs
nothing of the registry that collects them, so rules never import it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from nbkit.pscheck.diagnostic import Diagnostic

if TYPE_CHECKING:
    from nbkit.pscheck.class_index import ClassIndex
    from nbkit.pscheck.model import ModelInfo, ModuleInfo

SEVERITIES = ("warning", "error")
# Rule groups, selectable by name like ruff's rule sets. "default" runs unless --select says
# otherwise; "migration" (v1-to-v2 advice: code that is correct v2 but meant something else in v1)
# and "strict" (tooling/style) are opt-in; "all" is every registered rule.
GROUPS = ("default", "migration", "strict", "all")
OPT_IN_GROUPS = ("migration", "strict")


@dataclass
class RuleContext:
    """What a rule may look at besides the model: the whole run."""

    models: list[ModelInfo]
    strict: bool = False
    index: ClassIndex | None = None

    def __post_init__(self) -> None:
        self.model_names: frozenset[str] = frozenset(m.name for m in self.models)

    def model_for(self, qualname: str, module: ModuleInfo) -> ModelInfo | None:
        """The model of the run that ``qualname`` (as spelled in ``module``) refers to, if any."""
        if self.index is None:
            return None
        return self.index.model(qualname, module)

    def model_at(self, node: ast.expr, module: ModuleInfo) -> ModelInfo | None:
        """The model of the run a name/attribute expression in ``module`` refers to, if any."""
        if isinstance(node, ast.Subscript):
            node = node.value
        q = module.resolver.qualname(node)
        return self.model_for(q, module) if q else None


class BaseRule:
    """Base class of every rule, built-in or plugin.

    Subclasses set the class attributes and override :meth:`check_model` (called once per
    Pydantic model of the run) and/or :meth:`check_module` (once per parsed file). They yield
    diagnostics made with :meth:`diag`. The documentation attributes (``bad``, ``good``,
    ``rationale``) feed ``docs/pscheck.md`` and are checked by the tests: ``bad`` must trigger the
    rule and ``good`` must not.
    """

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    severity: ClassVar[str] = "error"
    summary: ClassVar[str] = ""  # one line: what is wrong
    strict_only: ClassVar[bool] = False  # enabled by --strict (or by selecting the code)
    group: ClassVar[str] = "default"  # "default" or an opt-in group ("migration"); strict_only means "strict"
    # Opt-in groups that select this rule too: the default group's v1-API rules are also "migration",
    # so that --select migration alone lists every place a v1-to-v2 port must touch.
    also_in: ClassVar[tuple[str, ...]] = ()
    bad: ClassVar[str] = ""
    good: ClassVar[str] = ""
    rationale: ClassVar[str] = ""

    def check_model(self, model: ModelInfo, ctx: RuleContext) -> Iterable[Diagnostic]:
        return ()

    def check_module(self, module: ModuleInfo, ctx: RuleContext) -> Iterable[Diagnostic]:
        return ()

    def diag(
        self, where: ModelInfo | ModuleInfo, node: ast.AST | None, message: str, severity: str | None = None
    ) -> Diagnostic:
        line = getattr(node, "lineno", 1) or 1
        col = (getattr(node, "col_offset", 0) or 0) + 1
        return Diagnostic(
            path=where.path,
            line=line,
            col=col,
            code=self.code,
            severity=severity or self.severity,
            message=message,
            rule=self.name,
        )

    @classmethod
    def validate_definition(cls) -> None:
        if not cls.code or not cls.name:
            raise ValueError(f"rule {cls.__qualname__} needs a code and a name")
        if cls.group not in ("default", *OPT_IN_GROUPS):
            raise ValueError(
                f"rule {cls.code}: group must be 'default' or one of {OPT_IN_GROUPS}, got {cls.group!r}"
            )
        if any(g not in OPT_IN_GROUPS or g == cls.group for g in cls.also_in):
            raise ValueError(f"rule {cls.code}: also_in must name other opt-in groups {OPT_IN_GROUPS}")
        if cls.severity not in SEVERITIES:
            raise ValueError(f"rule {cls.code}: severity must be one of {SEVERITIES}, got {cls.severity!r}")


def group_of(rule: BaseRule) -> str:
    """The group a rule belongs to: ``strict`` for strict-only rules, else its ``group``."""
    return "strict" if rule.strict_only else (rule.group or "default")


def groups_of(rule: BaseRule) -> tuple[str, ...]:
    """Every group that selects ``rule``: its own (:func:`group_of`), then those it is ``also_in``."""
    return (group_of(rule), *rule.also_in)
