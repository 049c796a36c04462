"""Bench: speculative decoding on SmolLM2 — measured speedup ÷ Leviathan's predicted speedup.

Target: within 20 %. The formula assumes verifying γ+1 tokens costs one target step
(memory-bound GPU decoding); on a CPU that assumption fails and the ratio shows by how much.

    .venv/bin/python bench/zero_specdec.py [--tokens 48] [--prompts 3] [--device auto]
"""

from __future__ import annotations

import argparse


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--draft-layers", type=int, default=6)
    args = ap.parse_args()
    from nbkit.zero.config import SpecDecConfig
    from nbkit.zero.context import ZeroContext
    from nbkit.zero.experiments import run_specdec

    out = run_specdec(
        SpecDecConfig(
            max_new_tokens=args.tokens,
            n_prompts=args.prompts,
            draft_layers=args.draft_layers,
        ),
        ZeroContext(args.device),
    )
    ok = True
    for method, s in out.metrics.methods():
        ratio = s.speedup_measured / s.speedup_predicted
        within = abs(ratio - 1) <= 0.2
        ok &= within
        print(
            f"{method:<16} {s.tok_s_baseline:.1f} → {s.tok_s_speculative:.1f} tok/s  measured "
            f"×{s.speedup_measured:.2f}  "
            f"predicted ×{s.speedup_predicted:.2f}  measured/predicted {ratio:.2f} "
            f"({'within' if within else 'OUTSIDE'} 20 %)  "
            f"α={s.acceptance_rate:.2f}  identical={s.all_identical}  "
            f"fallback {s.fallback_rounds}/{s.rounds} rounds  [{out.metrics.device}]"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
