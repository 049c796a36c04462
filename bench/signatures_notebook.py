"""Time notebook 03 headless, cold and then warm (default parameters unless --smoke), and print its LM work.

    .venv/bin/python bench/signatures_notebook.py [--smoke] [--out runs/bench-03] [--cache-dir DIR] [--no-warm]

Target (issue 15): a full default run — every dev question in both phrasings for each module — in about
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

from nbkit.runner import execute

TARGET_S = 180.0


def run(nb: Path, out: Path, smoke: bool, label: str) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    result = execute(nb, out, {"SMOKE": smoke}, progress=False)
    wall = time.perf_counter() - t0
    if not result.ok:
        raise SystemExit(f"notebook failed ({label}): {result.error}")
    m = result.metrics
    calls = m.get("lm_calls", {})
    print(f"{label}: {wall:.0f} s wall, ratio to the 3-min target {wall / TARGET_S:.2f}; LM calls served {calls.get('served')}, "
          f"from cache {calls.get('from_cache')}, completion tokens served {calls.get('completion_tokens')}; "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default="runs/bench-03")
    ap.add_argument("--cache-dir", help="DSPy disk cache folder (default: a fresh temporary one, so the first run is cold)")
    ap.add_argument("--no-warm", action="store_true", help="only the cold run")
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    nb = root / "notebooks" / "03_dspy_signatures.ipynb"
    # The kernel inherits this process's environment: both runs share the cache folder.
    os.environ["NBKIT_CACHE_DIR"] = args.cache_dir or tempfile.mkdtemp(prefix="nbkit-bench-03-cache-")
    print(f"notebook 03 ({'SMOKE' if args.smoke else 'default'}), DSPy cache in {os.environ['NBKIT_CACHE_DIR']}")
    m = run(nb, Path(args.out) / "cold", args.smoke, "cold")
    print(f"dev questions per module {m.get('dev_questions_evaluated')}; headline {m.get('headline')}")
    print(f"server tokens/s, one stream (direct probe) {m.get('max_tokens_check', {}).get('lm_tokens_per_s_one_stream')}")
    if not args.no_warm:
        warm = run(nb, Path(args.out) / "warm", args.smoke, "warm")
        same = {c["key"]: c["verdict"] for c in m.get("claims", [])} == {c["key"]: c["verdict"] for c in warm.get("claims", [])}
        print(f"warm run's claims verdicts equal the cold run's: {same}")


if __name__ == "__main__":
    main()
