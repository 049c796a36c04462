"""What one run found (:class:`LintReport`): the diagnostics, the counts, what was skipped and why."""

from __future__ import annotations

from dataclasses import dataclass, field

from nbkit.pscheck.diagnostic import RULE_CRASHED, UNREADABLE, Diagnostic


@dataclass
class LintReport:
    """Everything one run found; ``lint_paths`` returns ``report.diagnostics``."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    files_checked: int = 0
    models_checked: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why) — never silent
    notes: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """A file could not be read/parsed/imported, or a rule crashed (exit status 2)."""
        return any(d.code in (UNREADABLE, RULE_CRASHED) for d in self.diagnostics)

    def at_or_above(self, level: str) -> list[Diagnostic]:
        rank = {"warning": 0, "error": 1}
        return [
            d
            for d in self.diagnostics
            if d.code not in (UNREADABLE, RULE_CRASHED) and rank[d.severity] >= rank[level]
        ]
