"""Bench: the spread of the reward-weights claims' figures per scored response, at several n.

Scores the first n responses (the good config's sft.jsonl, then the bundled generator's examples) with the
audit's model, as the reward-weights check does, and prints per n the kurtosis rise (uniform → β = 8), its
bootstrap standard error, the concentrated sampler's effective sample size, the β at which KL passes its
threshold and the β at which the CI shrink passes its own, the log of their ratio and its bootstrap
standard error — each standard error also times √n (the kurtosis and kl_threshold designs' spreads) — and
the CPU-seconds of the scoring.

    .venv/bin/python bench/audit_reward_spread.py [--n 48 160 480] [--model smollm2] [--threads 1]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[48, 160, 480])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    from nbkit.audit.checks.reward_weights import check_sampling, response_scores
    from nbkit.audit.context import AuditContext

    ctx = AuditContext(
        "cpu", config="good_smollm2.yaml", model=args.model, threads=args.threads, progress=False
    )
    template = ctx.config.template.model_copy(update={"mask_pad_labels": False})
    for n in args.n:
        examples, _ = ctx.examples(n, "bench")
        c0 = time.process_time()
        rewards, log_prior = response_scores(ctx.base_example_losses(examples[:n], template))
        scored = time.process_time() - c0
        m = check_sampling(rewards, log_prior, beta=0.5, gamma=0.0).metrics
        root = n**0.5
        print(
            f"n={n}: scoring {scored:.1f} CPU-s; kurtosis rise {m.kurtosis_rise:.3f} "
            f"se {m.kurtosis_rise_se:.3f} (×√n {m.kurtosis_rise_se * root:.2f}), ESS at β=8 "
            f"{m.ess_concentrated:.1f}; β KL {m.kl_crossing_beta:.3f}, "
            f"β shrink {m.shrink_crossing_beta:.3f}, "
            f"log ratio {m.crossing_log_ratio:.3f} se {m.crossing_log_ratio_se:.3f} "
            f"(×√n {m.crossing_log_ratio_se * root:.2f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
