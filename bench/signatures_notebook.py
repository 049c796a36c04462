"""Time notebook 03 headless (default parameters unless --smoke) and print its LM throughput.

    .venv/bin/python bench/signatures_notebook.py [--smoke] [--out runs/bench-03]

Target (issue 15): a full default run — every dev question in both phrasings for each module — in about
3 minutes on 2 cores. Prints wall time, the ratio to that target, questions per module, LM calls,
completion tokens and tokens/s as measured inside the run, and the machine's load average (it may be shared).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from nbkit.runner import execute

TARGET_S = 180.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default="runs/bench-03")
    args = ap.parse_args()
    root = Path(__file__).resolve().parents[1]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    result = execute(root / "notebooks" / "03_dspy_signatures.ipynb", out, {"SMOKE": args.smoke}, progress=False)
    wall = time.perf_counter() - t0
    if not result.ok:
        raise SystemExit(f"notebook failed: {result.error}")
    m = result.metrics
    calls = m.get("lm_calls", {})
    print(f"notebook 03 ({'SMOKE' if args.smoke else 'default'}): {wall:.0f} s wall, ratio to the 3-min target {wall / TARGET_S:.2f}, "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"dev questions per module {m.get('dev_questions_evaluated')}; headline {m.get('headline')}")
    print(f"LM calls {calls.get('calls')}, completion tokens {calls.get('completion_tokens')}, over max_tokens {calls.get('over_max_tokens')}")
    print(f"server tokens/s, one stream (direct probe) {m.get('max_tokens_check', {}).get('lm_tokens_per_s_one_stream')}; executed notebook: {result.output}")


if __name__ == "__main__":
    main()
