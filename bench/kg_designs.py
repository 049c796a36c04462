"""Measure the spreads notebook 01's claim designs rest on: each experiment at its defaults, with more
seeds than the notebook runs, the per-unit figure each claim judges, its standard deviation across
units, and the CPU seconds per unit (what the full profile's minutes are extrapolated from).

    PYTHONPATH=$PWD .venv/bin/python bench/kg_designs.py --ablation-seeds 6 --downstream-seeds 6 \\
        --aggr-seeds 8 --scale-seeds 5 [--json out.json]

The selection runs first at its defaults (its choices feed the ablation, downstream and aggr runs, as in
the notebook); the load average at each experiment's start and end is printed beside its CPU seconds.
The figures go to bench/RESULTS.md ("KG claim designs") and into ``nbkit/kg/claims.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import resource
import statistics
import time


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _sd(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else float("nan")


def spreads(m: dict) -> dict[str, dict]:
    """The per-unit figures each KG claim judges, from the experiments' metrics (as dicts)."""
    from nbkit.kg.claims import WOBBLE_FLOOR

    out: dict[str, dict] = {}
    rungs = {r["rung"]: r for r in m["ablation"]["rungs"]}
    without, with_ = rungs[2]["valid_auc_judge_per_seed"], rungs[3]["valid_auc_judge_per_seed"]
    rev = [b - a for a, b in zip(without, with_, strict=True)]
    out["reverse_edges_auc"] = {"unit": "seed", "values": rev}
    best = max((rungs[k] for k in (4, 5)), key=lambda r: statistics.fmean(r["valid_mrr_select_per_seed"]))
    mp = [
        a - b
        for a, b in zip(best["valid_mrr_judge_per_seed"], rungs[6]["valid_mrr_judge_per_seed"], strict=True)
    ]
    out["message_passing_helps"] = {"unit": "seed", "values": mp, "rgcn_rung": best["rung"]}
    d = m["downstream"]
    out["downstream_f1"] = {"unit": "seed", "values": d["seed_scores"], "control": d["control_seed_scores"]}
    by = {(r["aggr"], r["seed"]): r for r in m["aggr"]["runs"] if not r["diverged"]}
    seeds = sorted({s for a, s in by if a == "mean"} & {s for a, s in by if a == "add"})
    logs = [
        math.log((by["add", s]["roughness"] + WOBBLE_FLOOR) / (by["mean", s]["roughness"] + WOBBLE_FLOOR))
        for s in seeds
    ]
    diverged = [f"{r['aggr']} seed {r['seed']}" for r in m["aggr"]["runs"] if r["diverged"]]
    out["aggr_mean_stable"] = {"unit": "seed", "values": logs, "diverged": diverged}
    rows = m["scale"]["rows"]
    gains = [r["curve_valid_mrr"][-1] - r["curve_valid_mrr"][0] for r in rows]
    out["scale_curve_rises"] = {"unit": "training run", "values": gains, "ceiling": rows[0]["ceiling_mrr"]}
    for v in out.values():
        v["mean"], v["sd"] = statistics.fmean(v["values"]), _sd(v["values"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("ablation", 6), ("downstream", 6), ("aggr", 8), ("scale", 5)):
        ap.add_argument(f"--{name}-seeds", type=int, default=default)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", help="also write every experiment's metrics and the spreads here")
    args = ap.parse_args()

    from nbkit.kg import context, experiments

    ctx = context.KGContext(args.device)
    seeds = {k: getattr(args, f"{k}_seeds") for k in ("ablation", "downstream", "aggr", "scale")}
    record: dict[str, dict] = {}
    chosen: dict = {}
    for slug in ("selection", "ablation", "downstream", "aggr", "scale"):
        overrides = dict(chosen) if slug in ("ablation", "downstream", "aggr") else {}
        if slug in seeds:
            overrides["seeds"] = seeds[slug]
        c0, t0, load0 = _cpu(), time.perf_counter(), os.getloadavg()[0]
        res = experiments.run(slug, ctx, **overrides)
        cpu = _cpu() - c0
        if slug == "selection":
            chosen = res.metrics.chosen.overrides()
        units = seeds.get(slug, 1)
        record[slug] = json.loads(json.dumps(dataclasses.asdict(res.metrics), default=str))
        print(
            f"{slug}: {cpu:.1f} CPU-s ({cpu / units:.1f} per unit of {units}), "
            f"{time.perf_counter() - t0:.0f} s wall, load {load0:.1f} -> {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    print(f"chosen: {chosen}")
    result = spreads(record)
    for key, v in result.items():
        extra = {k: x for k, x in v.items() if k not in ("values", "mean", "sd", "unit")}
        print(
            f"{key}: per {v['unit']} "
            + ", ".join(f"{x:+.4f}" for x in v["values"])
            + f"; mean {v['mean']:+.4f}, sd {v['sd']:.4f} {extra or ''}"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"metrics": record, "spreads": result}, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
