"""Bench: wall and CPU seconds of each of notebook 04's checks at the notebook's defaults.

Runs the checks the way notebook 04 does — one context on the audit's model (SmolLM2 by default), the
``kiss-lora`` section with the notebook's ``KissConfig``, the trainer-config checks on a context that
shares the loaded model — one after another in this process, and prints per check the wall seconds,
this process's CPU seconds (``time.process_time``: every thread; the ddp-eval subprocesses are
counted apart as children's CPU), the status and the summary. ``--profile SLUG`` prints the
cProfile top entries of that check.

    .venv/bin/python bench/audit_check_times.py [--model smollm2] [--threads 1]
        [--checks kiss-lora,grad-accumulation] [--profile SLUG] [--figures]
"""

from __future__ import annotations

import argparse
import resource
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--config", default="good_smollm2.yaml")
    ap.add_argument("--trainer-config", default="axolotl_smollm2.yml")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--checks", default="", help="comma-separated slugs (default: the notebook's)")
    ap.add_argument("--figures", action="store_true", help="print each finding's scalar figures")
    ap.add_argument("--profile", default="", help="slug whose cProfile top 25 (cumulative) is printed")
    args = ap.parse_args()

    import torch

    from nbkit.audit.config import config_file, load_config
    from nbkit.audit.context import AuditContext
    from nbkit.audit.formats import read_any
    from nbkit.audit.registry import REGISTRY, TRAINER_CHECKS, run_check

    torch.set_num_threads(args.threads)
    config = load_config(config_file(args.config))
    config.model.name = args.model
    t0, c0 = time.perf_counter(), time.process_time()
    ctx = AuditContext("cpu", config=config, progress=False)
    ctx.model_and_tokenizer()
    print(f"model load: {time.perf_counter() - t0:.1f} s wall, {time.process_time() - c0:.1f} s CPU")
    mapped = read_any(config_file(args.trainer_config))
    trainer_ctx = AuditContext(
        ctx.torch_device,
        config=mapped.config,
        progress=False,
        model_unavailable=mapped.model_unavailable,
        share_models_with=ctx,
    )
    trainer = TRAINER_CHECKS
    slugs = [s.strip() for s in args.checks.split(",") if s.strip()] or [
        s for s in REGISTRY.check_slugs if s not in trainer
    ] + list(trainer)
    total_w = total_c = 0.0
    print(f"{'check':24s} {'wall s':>7s} {'CPU s':>7s} {'child CPU':>9s}  status  summary")
    for slug in slugs:
        c = trainer_ctx if slug in trainer else ctx
        check = REGISTRY.check(slug)
        if slug == "kiss-lora":  # as the notebook runs it: the check's own defaults, on --model
            cfg = check.config(model=args.model)

            def one(check=check, cfg=cfg, c=c):
                return c.keep(check.slug, check.run(cfg, c, None))
        else:

            def one(check=check, c=c):
                return run_check(check, c)

        ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0, c0 = time.perf_counter(), time.process_time()
        if slug == args.profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            f = prof.runcall(one).data
        else:
            f = one().data
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        child = (ch1.ru_utime + ch1.ru_stime) - (ch0.ru_utime + ch0.ru_stime)
        total_w, total_c = total_w + wall, total_c + cpu + child
        print(f"{slug:24s} {wall:7.1f} {cpu:7.1f} {child:9.1f}  {f.status:6s}  {f.summary[:150]}", flush=True)
        if args.figures:
            print("   ", {k: v for k, v in f.figures.items() if isinstance(v, (int, float, str, type(None)))})
        if slug == args.profile:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    print(f"{'total':24s} {total_w:7.1f} {total_c:7.1f} (CPU incl. children)")


if __name__ == "__main__":
    main()
