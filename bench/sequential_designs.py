"""What the sequential designs cost: every noisy row's expected units under its claimed and its false value at
both profiles, and the full profile's expected cost against the fixed-n plan it replaces.

    PYTHONPATH=$PWD .venv/bin/python bench/sequential_designs.py     # markdown tables, for bench/RESULTS.md
    PYTHONPATH=$PWD .venv/bin/python bench/sequential_designs.py --run RUN   # and a forecast at its values
    PYTHONPATH=$PWD .venv/bin/python bench/sequential_designs.py --spending pocock   # same budgets, Pocock

Each replicating experiment runs until every row it feeds that its budget can decide is decided, so its
expected units under a value are at least the largest of those rows' expected units there (the figure used;
a row its budget cannot decide does not hold the loop, and an experiment with none stops at the units its
figure needs, ``Replicates.least``). Its cost
is that times its CPU-s per unit (``Replicates.cost_s``, measured on 2 cores). The reference is the fixed-n
plan's full profile at commit 0eab162 — every unit run, whatever the data — at the same CPU-s per unit: its
units per experiment are the designs' ``full_n`` there, or their default n where a row had no full profile
(``git show 0eab162:nbkit/kg/claims.py`` and the other themes' claims and designs). Experiments whose units
need a GPU (fragmentation) are listed but not summed: no CPU run spends them.

The design's two points are where a row is hardest to decide; a row whose truth lies far from its bar
stops sooner. With ``--run`` (a folder ``nbkit run`` wrote) the full profile is also forecast where each
row's truth is the value that run measured (its ledger's ``estimate``) and its spread the measured one
(not its upper bound): the same simulation at that one value (``nbkit.claims.design.forecast``). A row
with no estimate there (a bespoke reading, a row that did not run) keeps its design-point figure.
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

from nbkit.claims.design import forecast, simulate
from nbkit.claims.judge import family_level, replicates_of

THEMES = ("kg", "zero", "signatures", "audit")
# The fixed-n plan's full profile at 0eab162: units per experiment.
FIXED_PLAN = {
    ("kg", "ablation"): 40,
    ("kg", "downstream"): 14,
    ("kg", "aggr"): 320,
    ("kg", "scale"): 5,
    ("zero", "ladder"): 5,
    ("zero", "fragmentation"): 10,
    ("zero", "specdec"): 100,
    ("signatures", "modules"): 50,
    ("signatures", "compile"): 20,
    ("audit", "kiss-lora"): 12,
    ("audit", "grad-accumulation"): 16,
    ("audit", "reward-weights"): 960,
}
GPU_ONLY = {("zero", "fragmentation")}


def rows(theme: str) -> list[dict]:
    registry = importlib.import_module(f"nbkit.{theme}.claims").REGISTRY
    level = family_level(registry.claims)
    out = []
    for spec in registry.claims:
        found = replicates_of(spec, registry.sizes) if spec.noisy else None
        if found is None:
            continue
        slug, rep = found
        entry = {
            "spec": spec,
            "level": level,
            "theme": theme,
            "key": spec.key,
            "experiment": slug,
            "cost_s": rep.cost_s,
            "unit": rep.unit,
            "least": rep.least,
            "sequential": rep.sequential,
        }
        for profile in ("default", "full"):
            budget = rep.budget(registry[slug].config(False, profile))
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
            entry[profile] = (budget, oc)
        out.append(entry)
    return out


def estimates(run: Path) -> dict[str, float]:
    """Each noisy row's estimate in the run folder ``run``, by key."""
    out: dict[str, float] = {}
    for notebook in json.loads((run / "metrics.json").read_text()).values():
        for row in notebook.get("claims") or []:
            if row.get("estimate") is not None:
                out[row["key"]] = float(row["estimate"])
    return out


def _pocock_spending() -> None:
    """Every look spends α as Lan & DeMets' Pocock-type function, ``α · ln(1 + (e − 1) t)``, in place of
    nbkit's O'Brien–Fleming type. The design cache keys do not name the spending function, so the designs
    are simulated into a temporary cache that nothing else reads."""
    import math
    import os
    import tempfile

    from nbkit.cache import CACHE_ENV
    from nbkit.claims import sequential

    def pocock(alpha: float, t: float) -> float:
        return alpha if t >= 1 else float(alpha * math.log(1 + (math.e - 1) * t))

    os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="nbkit-pocock-")
    sequential.spent = pocock
    sequential.boundaries.cache_clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, help="a run folder: forecast the full profile at its values")
    parser.add_argument(
        "--spending",
        choices=("obrien-fleming", "pocock"),
        default="obrien-fleming",
        help="the error-spending function of every look (pocock: a what-if at the same budgets, simulated "
        "in a throw-away cache)",
    )
    args = parser.parse_args(argv)
    if args.spending == "pocock":
        _pocock_spending()
    table = [r for theme in THEMES for r in rows(theme)]
    print(
        "| theme | row | unit | default: budget · P(holds) · P(refuted) · E[units] true / false "
        "| full: same |"
    )
    print("|---|---|---|---|---|")
    for r in table:
        cells = []
        for profile in ("default", "full"):
            budget, oc = r[profile]
            mark = "" if oc.decided else " (not decided)"
            cells.append(
                f"{budget} · {oc.p_holds_if_true:.2f} · {oc.p_refuted_if_false:.2f} · "
                f"{oc.mean_units_true:.1f} / {oc.mean_units_false:.1f}{mark}"
            )
        print(f"| {r['theme']} | `{r['key']}` | {r['unit']} | {cells[0]} | {cells[1]} |")
    experiments: dict[tuple[str, str], dict] = {}
    for r in table:
        budget, oc = r["full"]
        e = experiments.setdefault(
            (r["theme"], r["experiment"]),
            {"cost_s": r["cost_s"], "true": 0.0, "false": 0.0, "least": r["least"]},
        )
        if not r["sequential"]:  # its units run as one batch: all of its budget
            e["least"] = e["true"] = e["false"] = float(budget)
        elif oc.decided:  # only a row its budget decides holds the loop
            e["true"] = max(e["true"], oc.mean_units_true)
            e["false"] = max(e["false"], oc.mean_units_false)
    for e in experiments.values():
        if not (e["true"] or e["false"]):  # nothing it feeds can decide: the units its figure needs
            e["true"] = e["false"] = float(e["least"])
    print()
    print(
        "| experiment | CPU-s per unit | full profile, expected units true / false "
        "| CPU-minutes true / false | fixed-n plan: units, CPU-minutes |"
    )
    print("|---|---|---|---|---|")
    total = {"true": 0.0, "false": 0.0, "fixed": 0.0}
    for (theme, slug), e in experiments.items():
        minutes = {h: e[h] * e["cost_s"] / 60 for h in ("true", "false")}
        fixed = FIXED_PLAN.get((theme, slug), 0)
        fixed_minutes = fixed * e["cost_s"] / 60
        gpu = (theme, slug) in GPU_ONLY
        if not gpu:
            total["true"] += minutes["true"]
            total["false"] += minutes["false"]
            total["fixed"] += fixed_minutes
        print(
            f"| {theme}/{slug}{' (GPU, not summed)' if gpu else ''} | {e['cost_s']:g} | {e['true']:.1f} / "
            f"{e['false']:.1f} | {minutes['true']:.1f} / {minutes['false']:.1f} | {fixed}, "
            f"{fixed_minutes:.1f} |"
        )
    mean = (total["true"] + total["false"]) / 2
    print()
    print(
        f"full profile, expected: {total['true']:.0f} CPU-minutes if every claim is true, "
        f"{total['false']:.0f} if every claim is false; the fixed-n plan: {total['fixed']:.0f}; "
        f"ratio {mean / total['fixed']:.2f} "
        "(mean of the two against the fixed plan)"
    )
    if args.run is not None:
        print()
        print(forecast_table(table, experiments, estimates(args.run), total["fixed"]))
    return 0


def forecast_table(table: list[dict], experiments: dict, measured: dict[str, float], fixed: float) -> str:
    """The full profile where each row's truth is the value a run measured (see the module docstring)."""
    lines = [
        "| theme | row | measured estimate | full: P(holds) · P(refuted) · E[units] there |",
        "|---|---|---|---|",
    ]
    units: dict[tuple[str, str], float] = {}
    for r in table:
        budget, oc = r["full"]
        if not (r["sequential"] and oc.decided):
            continue
        spec, key = r["spec"], (r["theme"], r["experiment"])
        if spec.key in measured:
            held, refuted, mean = forecast(
                spec.key,
                spec.rule,
                spec.plan,
                measured[spec.key],
                budget=budget,
                least=min(r["least"], budget),
                level=r["level"],
                sequential=True,
                verdict=spec.verdict,
                head=spec.head,
            )
            cell = f"{measured[spec.key]:.4g} | {held:.2f} · {refuted:.2f} · {mean:.1f}"
        else:
            mean = max(oc.mean_units_true, oc.mean_units_false)
            cell = f"— | the design's points: {mean:.1f}"
        units[key] = max(units.get(key, 0.0), mean)
        lines.append(f"| {r['theme']} | `{spec.key}` | {cell} |")
    lines += [
        "",
        "| experiment | CPU-s per unit | expected units at the measured values | CPU-minutes |",
        "|---|---|---|---|",
    ]
    total = 0.0
    for (theme, slug), e in experiments.items():
        n = units.get((theme, slug), max(e["true"], e["false"]))
        minutes = n * e["cost_s"] / 60
        gpu = (theme, slug) in GPU_ONLY
        total += 0.0 if gpu else minutes
        name = f"{theme}/{slug}{' (GPU, not summed)' if gpu else ''}"
        lines.append(f"| {name} | {e['cost_s']:g} | {n:.1f} | {minutes:.1f} |")
    ratio = total / fixed
    lines += ["", f"full profile at the measured values: {total:.0f} CPU-minutes, {ratio:.2f}× the fixed"]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
