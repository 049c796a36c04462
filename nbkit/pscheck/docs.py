"""Generate the rules reference of ``docs/pscheck.md`` from the rule classes.

``python -m nbkit.pscheck.docs --write docs/pscheck.md`` rewrites the part between the
``<!-- rules:begin -->`` and ``<!-- rules:end -->`` markers; ``--check`` exits 1 when it is stale
(the test suite runs the same comparison).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nbkit.pscheck.plugins.created_at import CreatedAtDatetimeFactory
from nbkit.pscheck.registry import RuleRegistry
from nbkit.pscheck.rule import BaseRule, group_of

BEGIN, END = "<!-- rules:begin -->", "<!-- rules:end -->"


def _rules() -> list[BaseRule]:
    """Every documented rule: the built-ins and the shipped plugin (documented although opt-in)."""
    reg = RuleRegistry.default()
    reg.register(CreatedAtDatetimeFactory)
    return list(reg)


def render_rules() -> str:
    """The rules reference: a summary table, then per rule its bad/good examples and why."""
    rules = _rules()
    out = ["| Code | Name | Severity | Tier | What it flags |", "|---|---|---|---|---|"]
    for r in rules:
        group = group_of(r)
        tier = (
            "plugin (opt-in)"
            if r.code.startswith("PSP")
            else (group if group == "default" else f"{group} (opt-in)")
        )
        tier += "".join(f", also `{g}`" for g in r.also_in)
        summary = r.summary.replace("|", "\\|")
        out.append(f"| [{r.code}](#{r.code.lower()}) | `{r.name}` | {r.severity} | {tier} | {summary} |")
    out.append("")
    for r in rules:
        out += [
            f"### {r.code}",
            "",
            f"**`{r.name}`** — severity **{r.severity}**"
            + (" — strict only" if r.strict_only else "")
            + (f" — opt-in group `{r.group}` (`--extend-select {r.group}`)" if r.group != "default" else "")
            + "".join(f" — also in opt-in group `{g}` (`--select {g}`)" for g in r.also_in)
            + f". {r.summary}",
            "",
            "Bad:",
            "",
            "```python",
            r.bad.strip(),
            "```",
            "",
            "Good:",
            "",
            "```python",
            r.good.strip(),
            "```",
            "",
            "Why: " + " ".join(r.rationale.split()),
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


def splice(doc: str) -> str:
    """``doc`` with the part between the markers replaced by :func:`render_rules`."""
    if BEGIN not in doc or END not in doc:
        raise ValueError(f"markers {BEGIN} / {END} not found")
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{render_rules()}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nbkit.pscheck.docs")
    p.add_argument("--write", metavar="FILE")
    p.add_argument("--check", metavar="FILE")
    a = p.parse_args(argv)
    if a.write:
        path = Path(a.write)
        path.write_text(splice(path.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    if a.check:
        path = Path(a.check)
        text = path.read_text(encoding="utf-8")
        if splice(text) != text:
            print(
                f"{path}: rules reference is stale; run python -m nbkit.pscheck.docs --write {path}",
                file=sys.stderr,
            )
            return 1
        return 0
    sys.stdout.write(render_rules())
    return 0


if __name__ == "__main__":
    sys.exit(main())
