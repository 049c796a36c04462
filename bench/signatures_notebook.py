"""Time notebook 03 headless, cold and then warm (default parameters unless --smoke), and print its LM work.

    .venv/bin/python bench/signatures_notebook.py [--smoke] [--out runs/bench-03] [--cache-dir DIR]
        [--no-warm]
    .venv/bin/python bench/signatures_notebook.py --compare-servers [--smoke]

``--compare-servers`` runs the notebook cold once per local server kind — llama-cpp-python's server (one
request at a time) and llama.cpp's batching ``llama-server`` — each with a fresh cache, and prints each
wall time, how many recorded figures that depend on the answers (scores, violation counts, the compile table)
differ between the two, and every claim whose verdict differs (batched kernels may round differently: the
differences are counted, and each changed verdict is listed for an explanation).

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
    calls = m.get("lm_calls", {})
    print(
        f"{label}: {wall:.0f} s wall, ratio to the 3-min target {wall / TARGET_S:.2f}; "
        f"LM calls served {calls.get('served')}, "
        f"from cache {calls.get('from_cache')}, completion tokens served {calls.get('completion_tokens')}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    return m


FIGURES = (
    "dev_score_by_module",
    "contract_violations_by_kind",
    "field_notes_signature_violations",
    "compile_table",
    "max_tokens_check",
)


def figures(metrics: dict) -> dict[str, object]:
    """The recorded measurements that depend on the LM's answers, flattened to ``section/path`` keys."""
    out: dict[str, object] = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}/{k}", v)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(f"{prefix}/{v.get('program', i) if isinstance(v, dict) else i}", v)
        elif not (isinstance(value, str) or "seconds" in prefix or "tokens_per_s" in prefix):
            out[prefix] = value

    for section in FIGURES:
        walk(section, metrics.get(section))
    return out


def compare_servers(nb: Path, out: Path, smoke: bool) -> None:
    runs = {}
    for kind in ("llama-cpp-python", "llama-server"):
        use_cache_dir(tempfile.mkdtemp(prefix=f"nbkit-bench-03-{kind}-"))  # cold, never shared between kinds
        runs[kind] = run(nb, out / kind, smoke, f"cold, {kind}", {"LM_SERVER": kind, "LM_CACHE": "memory"})
    a, b = (figures(runs[k]) for k in runs)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    print(
        "measured figures (scores, violation counts, compile table, token limits): "
        f"{len(a.keys() | b.keys())}; "
        f"differing: {len(differ)}"
    )
    for key in differ[:40]:
        print(f"  {key}: llama-cpp-python {a.get(key)}, llama-server {b.get(key)}")
    va, vb = ({c["key"]: c["verdict"] for c in runs[k].get("claims", [])} for k in runs)
    changed = sorted(k for k in va.keys() | vb.keys() if va.get(k) != vb.get(k))
    print(f"claims: {len(va)}; verdicts changed: {len(changed)}")
    for key in changed:
        print(f"  {key}: llama-cpp-python {va.get(key)} -> llama-server {vb.get(key)}")


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
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    nb = root / "notebooks" / "03_dspy_signatures.ipynb"
    if args.compare_servers:
        compare_servers(nb, Path(args.out), args.smoke)
        return
    # The kernel inherits this process's environment: both runs share the cache folder.
    cache = use_cache_dir(args.cache_dir or tempfile.mkdtemp(prefix="nbkit-bench-03-cache-"))
    print(f"notebook 03 ({'SMOKE' if args.smoke else 'default'}), DSPy cache in {cache / 'dspy'}")
    m = run(nb, Path(args.out) / "cold", args.smoke, "cold")
    print(f"dev questions per module {m.get('dev_questions_evaluated')}; headline {m.get('headline')}")
    print(
        "server tokens/s, one stream (direct probe) "
        f"{m.get('max_tokens_check', {}).get('lm_tokens_per_s_one_stream')}"
    )
    if not args.no_warm:
        warm = run(nb, Path(args.out) / "warm", args.smoke, "warm")
        same = {c["key"]: c["verdict"] for c in m.get("claims", [])} == {
            c["key"]: c["verdict"] for c in warm.get("claims", [])
        }
        print(f"warm run's claims verdicts equal the cold run's: {same}")


if __name__ == "__main__":
    main()
