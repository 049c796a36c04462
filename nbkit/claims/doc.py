"""Generate ``docs/claims.md`` from the four themes' claims tables.

``python -m nbkit.claims.doc --write`` rewrites the part of ``docs/claims.md`` between the
``<!-- claims:begin -->`` and ``<!-- claims:end -->`` markers; ``--check`` exits 1 when it is stale
(``make lint`` runs it). Each row shows its rule, rendered from the rule's data, and — for a noisy
measured row — its design at both profiles' budgets: the claimed and false values, P(holds | claimed)
and P(refuted | false) with the expected units under each, simulated exactly as a run judges it (at the
Bonferroni level of the theme's noisy rows, the strictest level Holm judges a row at). Each theme's
claims module registers its rows when imported, so this imports all four (every extra installed).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from nbkit.claims.design import simulate
from nbkit.claims.judge import FAMILY_ALPHA, ClaimSpec, replicates_of
from nbkit.claims.rules import plural

BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"
THEMES = (
    ("kg", "01_kg_gnn"),
    ("zero", "02_zero_ladder"),
    ("signatures", "03_dspy_signatures"),
    ("audit", "04_finetune_audit"),
)
DOC = Path(__file__).resolve().parents[2] / "docs" / "claims.md"


def theme_registry(theme: str) -> Any:
    """Theme ``theme``'s registry, its claims registered (importing its claims module registers them)."""
    return importlib.import_module(f"nbkit.{theme}.claims").REGISTRY


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def design_cells(spec: ClaimSpec, registry: Any, level: float) -> list[str]:
    """The row's design at the default and the full profile's budgets (two cells), or "exact"."""
    if not spec.noisy:
        return ["exact", ""]
    assert spec.plan is not None
    found = replicates_of(spec, registry.sizes)
    if found is None:
        return [f"fixed: the {plural(spec.rule.unit)} the run has", ""]
    slug, rep = found
    experiment = registry[slug]
    cells = []
    for profile in ("default", "full"):
        budget = rep.budget(experiment.config(False, profile))
        oc = simulate(
            spec.key,
            spec.rule,
            spec.plan,
            budget=budget,
            least=min(rep.least, budget),
            level=level,
            sequential=rep.sequential and spec.rule.estimator.replicated,
            verdict=spec.verdict,
            head=spec.head,
        )
        unit = plural(spec.rule.unit, budget)
        mark = "decides" if oc.decided else "**not decided**"
        cells.append(
            f"up to {budget} {unit} (≈ {rep.minutes(budget):.0f} min): P(holds) {oc.p_holds_if_true:.2f} "
            f"after {oc.mean_units_true:.1f}, P(refuted) {oc.p_refuted_if_false:.2f} after "
            f"{oc.mean_units_false:.1f} — {mark}"
        )
    return cells


def render_theme(theme: str, notebook: str, registry: Any) -> list[str]:
    specs: list[ClaimSpec] = list(registry.claims)
    noisy = sum(1 for s in specs if s.noisy)
    level = 1 - FAMILY_ALPHA / max(1, noisy)
    out = [
        f"## {theme} (`notebooks/{notebook}.ipynb`)",
        "",
        f"{noisy} noisy rows: designs simulated at the family's Bonferroni level {level:.2%}.",
        "",
        "| key | claim | field note | kind | reads | rule | claimed · false | spread | default profile "
        "| full profile |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in specs:
        r = s.rule
        points = "—"
        if s.noisy:
            points = f"{r.fmt(r.claimed)} · {' or '.join(r.fmt(x) for x in r.false_values())}"
        spread = s.plan.words(r.unit) if s.plan else ""
        note = "(nbkit's own claim)" if not s.field_note else f"{s.field_note} ({s.source})"
        rule = r.text + (f" — bespoke: {s.bespoke}" if s.bespoke else "")
        out.append(
            f"| `{s.key}` | {_cell(s.claim)} | {_cell(note)} | {s.kind} | "
            f"{', '.join(f'`{x}`' for x in s.reads)} | {_cell(rule)} | {_cell(points)} | {_cell(spread)} | "
            + " | ".join(_cell(c) for c in design_cells(s, registry, level))
            + " |"
        )
    out.append("")
    return out


def render() -> str:
    out: list[str] = []
    for theme, notebook in THEMES:
        out += render_theme(theme, notebook, theme_registry(theme))
    return "\n".join(out).rstrip() + "\n"


def splice(text: str) -> str:
    """``text`` with the generated part between the markers replaced."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not (sep and sep2):
        raise SystemExit(f"{DOC}: the markers {BEGIN} and {END} are missing")
    return f"{head}{BEGIN}\n{render()}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nbkit.claims.doc", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite docs/claims.md")
    mode.add_argument("--check", action="store_true", help="exit 1 when docs/claims.md is stale")
    args = parser.parse_args(argv)
    text = DOC.read_text(encoding="utf-8")
    fresh = splice(text)
    if args.write:
        DOC.write_text(fresh, encoding="utf-8")
        return 0
    if fresh != text:
        print(f"{DOC.name} is stale: run python -m nbkit.claims.doc --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
