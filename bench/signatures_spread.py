"""The spread of one unit for each measured claim of notebook 03: the planning values its designs state.

    .venv/bin/python bench/signatures_spread.py [--compiles 4] [--rs-compiles 1] [--seed 0] [--out FILE]

Runs notebook 03's experiments in this process with a fresh in-run cache (cold) on the reproducible
llama-cpp-python pool, and prints, per claim, the spread its plan in ``nbkit/signatures/claims.py`` states:

* the modules on every train, val and dev case (the full profile's questions): each module's contract-clean
  rate and the intraclass correlation (ICC) of a case's two clean flags; the ICC of prompt-bound breaches;
* the contracts experiment at its defaults: among the field notes' signature's answers that give a
  confidence at all, those giving it as a word, and their ICC by case; ChatAdapter's structural failures
  against the grammar's on the same questions, and the ICC of ChatAdapter's;
* the compile experiment with ``--compiles`` compile sets at the default mixes, then random search (DSPy's 16
  candidates, every val case) on ``--rs-compiles`` of them: for each compile claim's table (compile sets ×
  dev cases) the sds of the compile-set effect, the case effect and the residual (two-way ANOVA, method of
  moments, clamped at 0).

and per section the wall seconds, the CPU seconds of this process and of the servers, and the load average
(the machine may be shared: CPU seconds are what a section costs, wall seconds follow the load).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time

from signatures_server import server_cpu_seconds  # this folder's token bench (run as a script: on sys.path)

from nbkit.cache import use_cache_dir


def icc(successes: list[int], trials: list[int]) -> float:
    """One-way ANOVA intraclass correlation of clustered 0/1 outcomes (in [0, 1]; 0 when all are equal)."""
    pairs = [(k, n) for k, n in zip(successes, trials, strict=True) if n > 0]
    g, total = len(pairs), sum(n for _, n in pairs)
    p = sum(k for k, _ in pairs) / total if total else 0.0
    if g < 2 or p in (0.0, 1.0) or total == g:
        return 0.0
    msb = sum(n * (k / n - p) ** 2 for k, n in pairs) / (g - 1)
    msw = sum(k * (1 - k / n) for k, n in pairs) / (total - g)
    n0 = (total - sum(n * n for _, n in pairs) / total) / (g - 1)
    return min(1.0, max(0.0, (msb - msw) / (msb + (n0 - 1) * msw)))


def components(table: list[list[float]]) -> dict[str, float]:
    """sds of the row (compile set) effect, the column (case) effect and the residual of a two-way table."""
    import numpy as np

    y = np.asarray(table, dtype=float)
    r, c = y.shape
    grand = y.mean()
    ms_r = c * ((y.mean(axis=1) - grand) ** 2).sum() / (r - 1) if r > 1 else 0.0
    ms_c = r * ((y.mean(axis=0) - grand) ** 2).sum() / (c - 1) if c > 1 else 0.0
    if r > 1 and c > 1:
        resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + grand
        ms_e = (resid**2).sum() / ((r - 1) * (c - 1))
    else:
        ms_e = 0.0
    return {
        "rows": r,
        "cols": c,
        "mean": round(float(grand), 4),
        "sd_compile": round(float(max(0.0, (ms_r - ms_e) / c)) ** 0.5, 4),
        "sd_case": round(
            float(max(0.0, (ms_c - ms_e) / max(r, 1))) ** 0.5 if r > 1 else float(ms_c) ** 0.5, 4
        ),
        "sd_resid": round(float(ms_e) ** 0.5, 4),
        "sd_cell": round(float(y.std(ddof=1)), 4),
    }


class Meter:
    """Wall, own-process and server CPU seconds of one section."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __enter__(self):
        self.t = time.perf_counter()
        self.own = resource.getrusage(resource.RUSAGE_SELF)
        self.srv = server_cpu_seconds(self.ctx.server)
        self.load = os.getloadavg()[0]
        return self

    def __exit__(self, *exc):
        own = resource.getrusage(resource.RUSAGE_SELF)
        self.figures = {
            "wall_s": round(time.perf_counter() - self.t, 1),
            "own_cpu_s": round(own.ru_utime + own.ru_stime - self.own.ru_utime - self.own.ru_stime, 1),
            "server_cpu_s": round(server_cpu_seconds(self.ctx.server) - self.srv, 1),
            "load_before": round(self.load, 2),
            "load_after": round(os.getloadavg()[0], 2),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compiles", type=int, default=4)
    ap.add_argument("--rs-compiles", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="")
    ap.add_argument(
        "--skip", default="", help="comma-separated sections to skip: modules,contracts,compile,rs"
    )
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    use_cache_dir(tempfile.mkdtemp(prefix="nbkit-spread-cache-"))  # cold: a fresh cache folder

    from nbkit.signatures import claims, experiments
    from nbkit.signatures.context import SignaturesContext
    from nbkit.signatures.field_notes import COLLOQUIAL_SHARE
    from nbkit.signatures.metrics import request_breaches

    out: dict = {"seed": args.seed, "load_start": round(os.getloadavg()[0], 2), "sections": {}}
    ctx = SignaturesContext("cpu", seed=args.seed, cache="memory", server="llama-cpp-python")
    try:
        ctx.start_lm()
        print(ctx.llm.serving(), flush=True)
        if "modules" not in skip:
            with Meter(ctx) as m:
                modules = experiments.run("modules", ctx, cases=50).metrics
            out["sections"]["modules (train+val+dev)"] = m.figures
            out["modules"] = {
                r.module: {
                    "clean": f"{int(sum(r.outcomes.clean))}/{len(r.outcomes)}",
                    "icc_clean": round(icc(*zip(*r.outcomes.case_counts(r.outcomes.clean), strict=True)), 3),
                    "hit": r.hit_at_3,
                }
                for r in modules.runs
            }
            print(json.dumps(out["modules"]), m.figures, flush=True)
        if "contracts" not in skip:
            with Meter(ctx) as m:
                contracts = experiments.run("contracts", ctx).metrics
            out["sections"]["contracts"] = m.figures
            given = claims.read_confidence(contracts).sample  # per case: words, answers giving a confidence
            out["confidence_in_words"] = {
                "words": sum(k for k, _ in given),
                "given": sum(n for _, n in given),
                "cases": len(given),
                "icc": round(icc(*zip(*given, strict=True)), 3) if given else None,
            }
            structure = claims.read_grammar(contracts).sample  # per case: chat, grammar failures, questions
            out["grammar_fixes_structure"] = {
                "chat": sum(a for a, _, _ in structure),
                "grammar": sum(b for _, b, _ in structure),
                "questions": sum(n for _, _, n in structure),
                "icc_chat": round(icc([a for a, _, _ in structure], [n for _, _, n in structure]), 3)
                if structure
                else None,
            }
            if "modules" not in skip:
                bounds, requests = request_breaches(modules, contracts)
                out["prompt_bounds"] = {
                    "breaches": sum(k for k, _ in bounds),
                    "parsed": sum(n for _, n in bounds),
                    "requests": requests,
                    "cases": len(bounds),
                    "icc": round(icc(*zip(*bounds, strict=True)), 3),
                }
            shown = ("confidence_in_words", "grammar_fixes_structure", "prompt_bounds")
            print(json.dumps({k: out.get(k) for k in shown}), m.figures)
        if "compile" not in skip:
            with Meter(ctx) as m:
                compiled = experiments.run("compile", ctx, compiles=args.compiles).metrics
            out["sections"][f"compile ({args.compiles} sets × 2 mixes, BFS)"] = m.figures
            zero, mixed = compiled.of("bootstrap", 0.0), compiled.of("bootstrap", COLLOQUIAL_SHARE)
            out["gap"] = components(compiled.table(zero, None))
            out["mix_lift"] = components(compiled.table(mixed, zero, "colloquial"))
            out["programs"] = [
                {
                    "name": p.name,
                    "standard": p.standard,
                    "colloquial": p.colloquial,
                    "demos": p.demos_bootstrapped,
                }
                for p in compiled.programs
            ]
            print(json.dumps({k: out[k] for k in ("gap", "mix_lift")}), m.figures, flush=True)
        if "rs" not in skip and args.rs_compiles:
            with Meter(ctx) as m:
                compiled = experiments.run(
                    "compile", ctx, compiles=args.rs_compiles, random_search=True, n_val=0
                ).metrics
            out["sections"][f"random search ({args.rs_compiles} sets, 16 candidates, all val)"] = m.figures
            rs = compiled.of("random_search")
            out["random_search"] = components(compiled.table(rs, compiled.of("bootstrap", COLLOQUIAL_SHARE)))
            out["rs_candidates"] = [[c.val_score for c in p.candidates] for p in rs]
            print(json.dumps(out["random_search"]), m.figures, flush=True)
        out["lm_calls"] = str(ctx.llm.calls_summary())
    finally:
        ctx.close()
    out["load_end"] = round(os.getloadavg()[0], 2)
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
