"""Generate ``docs/claims.md`` from the registered claim specs of the four themes.

``python -m nbkit.claims_doc --write`` rewrites the part of ``docs/claims.md`` between the
``<!-- claims:begin -->`` and ``<!-- claims:end -->`` markers; ``--check`` exits 1 when it is stale
(``make lint`` runs it). Each theme's claims module registers its specs when imported, so this
imports all four (it needs every extra installed, as the development environment has).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from nbkit.claims import ClaimSpec

BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"
THEMES = (
    ("kg", "01_kg_gnn"),
    ("zero", "02_zero_ladder"),
    ("signatures", "03_dspy_signatures"),
    ("audit", "04_finetune_audit"),
)
DOC = Path(__file__).resolve().parent.parent / "docs" / "claims.md"


def theme_specs(theme: str) -> list[ClaimSpec]:
    """The claim specs theme ``theme`` registers (importing its claims module registers them)."""
    module = importlib.import_module(f"nbkit.{theme}.claims")
    registry = getattr(module, "REGISTRY", None)  # a theme not yet on specs has none: no section
    return list(registry.claims) if registry is not None else []


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_theme(theme: str, notebook: str, specs: list[ClaimSpec]) -> list[str]:
    """One theme's section: a row per claim with its kind, reads, rule as data and the rule's words."""
    out = [
        f"## {theme} (`notebooks/{notebook}.ipynb`)",
        "",
        "| key | claim | field note | kind | reads | rule | interval · direction · threshold · unit |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in specs:
        r = s.rule
        data = " · ".join(
            str(x)
            for x in (
                r.interval,
                r.direction,
                "" if r.threshold is None else f"{r.threshold:g}",
                r.unit,
            )
            if x != ""
        )
        out.append(
            f"| `{s.key}` | {_cell(s.claim)} ({_cell(s.source)}) | {_cell(s.field_note)} | {s.kind} | "
            f"{', '.join(f'`{x}`' for x in s.reads)} | {_cell(r.text)} | {_cell(data)} |"
        )
    out.append("")
    return out


def render() -> str:
    out: list[str] = []
    for theme, notebook in THEMES:
        specs = theme_specs(theme)
        if specs:
            out += render_theme(theme, notebook, specs)
    return "\n".join(out).rstrip() + "\n"


def splice(text: str) -> str:
    """``text`` with the generated part between the markers replaced."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not (sep and sep2):
        raise SystemExit(f"{DOC}: the markers {BEGIN} and {END} are missing")
    return f"{head}{BEGIN}\n{render()}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nbkit.claims_doc", description=__doc__.split("\n")[0])
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
        print(f"{DOC.name} is stale: run python -m nbkit.claims_doc --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
