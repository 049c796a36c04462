"""Time notebook 03 headless, cold and then warm (default parameters unless --smoke), and print its LM work.

    .venv/bin/python bench/signatures_notebook.py [--smoke] [--out runs/bench-03] [--cache-dir DIR]
        [--no-warm]
    .venv/bin/python bench/signatures_notebook.py --compare-servers [--smoke]
    .venv/bin/python bench/signatures_notebook.py --twice [--smoke]

``--compare-servers`` runs the notebook cold once per local server kind — llama-cpp-python's server (one
request at a time) and llama.cpp's batching ``llama-server`` — each with a fresh cache, and prints each
wall time, how many recorded figures that depend on the answers (scores, violation counts, the compile table)
differ between the two, and every claim whose verdict differs (batched kernels may round differently: the
differences are counted, and each changed verdict is listed for an explanation). ``--twice`` runs the same
parameters cold twice and compares them the same way: on a CPU the default servers answer one request at a
time, so two runs must agree whatever the load.

Target: a full default run — every dev question in both phrasings for each module — in about
3 minutes on 2 cores. Two runs with the same DSPy disk cache (a fresh temporary folder unless
``--cache-dir``): **cold** (every LM call served by the local llama.cpp servers) and **warm** (the same
requests answered from the cache, as on a re-run after an unrelated change). Each line prints the wall
time, the ratio to the target, LM calls served vs answered from cache, completion tokens served and the
machine's load average (it may be shared) — so a warm figure is never mistaken for a cold one.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from nbkit.cache import use_cache_dir
from nbkit.execute import execute

TARGET_S = 180.0


def run(nb: Path, out: Path, smoke: bool, label: str, params: dict | None = None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    result = execute(nb, out, {"SMOKE": smoke, **(params or {})}, progress=False)
    wall = time.perf_counter() - t0
    if not result.ok:
        raise SystemExit(f"notebook failed ({label}): {result.error}")
    m = result.metrics
    calls = m.get("history", {}).get("calls", {})
    print(
        f"{label}: {wall:.0f} s wall, ratio to the 3-min target {wall / TARGET_S:.2f}; "
        f"LM calls served {calls.get('served')}, "
        f"from cache {calls.get('from_cache')}, completion tokens served {calls.get('completion_tokens')}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    return m


FIGURES = ("modules", "contracts", "compile", "token_limit")


def figures(metrics: dict) -> dict[str, object]:
    """The recorded measurements that depend on the LM's answers, flattened to ``section/path`` keys (lists
    by position, a program or run by its name)."""
    out: dict[str, object] = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}/{k}", v)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                name = (v.get("name") or v.get("module") or v.get("adapter")) if isinstance(v, dict) else None
                walk(f"{prefix}/{name or i}", v)
        elif not (isinstance(value, str) or "seconds" in prefix or "tokens_per_s" in prefix):
            out[prefix] = value

    for section in FIGURES:
        walk(section, metrics.get(section))
    return out


def cold_runs(nb: Path, out: Path, smoke: bool, params: dict[str, dict]) -> dict[str, dict]:
    """One cold run per label (a fresh cache folder each, DSPy's cache in memory only)."""
    runs = {}
    for label, extra in params.items():
        use_cache_dir(tempfile.mkdtemp(prefix=f"nbkit-bench-03-{label}-"))  # cold, never shared between runs
        runs[label] = run(nb, out / label, smoke, f"cold, {label}", {"LM_CACHE": "memory", **extra})
    return runs


def compare(runs: dict[str, dict]) -> None:
    """How many answer-dependent figures and verdicts differ between two runs, each listed."""
    (ka, ma), (kb, mb) = runs.items()
    a, b = figures(ma), figures(mb)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    print(
        f"measured figures (scores, outcomes, violation counts, compile programs, token limits): "
        f"{len(a.keys() | b.keys())}; differing: {len(differ)}"
    )
    for key in differ[:40]:
        print(f"  {key}: {ka} {a.get(key)}, {kb} {b.get(key)}")
    va, vb = ({c["key"]: c["verdict"] for c in m.get("claims", [])} for m in (ma, mb))
    changed = sorted(k for k in va.keys() | vb.keys() if va.get(k) != vb.get(k))
    print(f"claims: {len(va)}; verdicts changed: {len(changed)}")
    for key in changed:
        print(f"  {key}: {ka} {va.get(key)} -> {kb} {vb.get(key)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default="runs/bench-03")
    ap.add_argument(
        "--cache-dir",
        help="DSPy disk cache folder (default: a fresh temporary one, so the first run is cold)",
    )
    ap.add_argument("--no-warm", action="store_true", help="only the cold run")
    ap.add_argument(
        "--compare-servers",
        action="store_true",
        help="cold runs with llama-cpp-python's server and with llama-server, compared",
    )
    ap.add_argument(
        "--twice",
        action="store_true",
        help="two cold runs of the same parameters (the default server kind), compared: answers and verdicts "
        "must not depend on the machine's load",
    )
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    nb = root / "notebooks" / "03_dspy_signatures.ipynb"
    if args.compare_servers:
        kinds = {kind: {"LM_SERVER": kind} for kind in ("llama-cpp-python", "llama-server")}
        compare(cold_runs(nb, Path(args.out), args.smoke, kinds))
        return
    if args.twice:
        compare(cold_runs(nb, Path(args.out), args.smoke, {"first": {}, "second": {}}))
        return
    # The kernel inherits this process's environment: both runs share the cache folder.
    cache = use_cache_dir(args.cache_dir or tempfile.mkdtemp(prefix="nbkit-bench-03-cache-"))
    print(f"notebook 03 ({'SMOKE' if args.smoke else 'default'}), DSPy cache in {cache / 'dspy'}")
    m = run(nb, Path(args.out) / "cold", args.smoke, "cold")
    print(f"headline {m.get('headline')}")
    print(
        "server tokens/s, one stream (direct probe) "
        f"{m.get('token_limit', {}).get('lm_tokens_per_s_one_stream')}"
    )
    if not args.no_warm:
        warm = run(nb, Path(args.out) / "warm", args.smoke, "warm")
        same = {c["key"]: c["verdict"] for c in m.get("claims", [])} == {
            c["key"]: c["verdict"] for c in warm.get("claims", [])
        }
        print(f"warm run's claims verdicts equal the cold run's: {same}")


if __name__ == "__main__":
    main()
