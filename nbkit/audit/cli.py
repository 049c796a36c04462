"""``nbkit audit CONFIG [--from axolotl|peft|trl|deepspeed|nbkit] [--model SPEC] [--checks lora-binding,7-11]
[--format text|json]``.

CONFIG is nbkit's audit YAML or a config the user already has (axolotl YAML, PEFT
``adapter_config.json``, TRL ``SFTConfig`` / ``TrainingArguments`` JSON, DeepSpeed ``ds_config.json``);
a foreign config is mapped by :mod:`nbkit.audit.formats` and its key table printed first.

Exit codes: 0 no check failed, 1 at least one check failed (or errored), 2 the config (or the
command line) is invalid — one line naming the file, line, key and expected type, no traceback.
``main(argv) -> int`` is the entry point ``nbkit audit`` dispatches to.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from nbkit.audit.context import STATUSES, AuditContext
from nbkit.audit.formats import read_any
from nbkit.audit.registry import REGISTRY, run_audit
from nbkit.device import pick_device
from nbkit.errors import UsageError, main_error


@contextlib.contextmanager
def stdout_to_stderr():
    """Libraries print to stdout (C++ profiler lines, DeepSpeed banners); keep stdout for the report.

    Redirected at the file-descriptor level because some of those prints come from C++.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def build_parser() -> argparse.ArgumentParser:

    ap = argparse.ArgumentParser(
        prog="nbkit audit",
        description=f"Fine-tune coupling audit ({len(REGISTRY.check_slugs)} checks) for a LoRA/SFT config.",
        epilog="checks: " + "; ".join(f"{c.number} {c.slug} ({c.title})" for c in REGISTRY.checks()),
    )
    ap.add_argument(
        "config",
        help="audit config: nbkit YAML (see nbkit/audit/examples/good.yaml), an axolotl YAML, a PEFT "
        "adapter_config.json, "
        "a TRL SFTConfig / TrainingArguments JSON or a DeepSpeed ds_config.json",
    )
    ap.add_argument(
        "--from",
        dest="source_format",
        choices=["nbkit", "axolotl", "peft", "trl", "deepspeed"],
        help="the config's format (default: detected from its keys)",
    )
    ap.add_argument(
        "--model",
        help="the base model to audit, replacing the config's: tiny | smollm2 | a Hugging Face model "
        "directory | "
        "a config.json (architecture only) | a Hub id (online)",
    )
    ap.add_argument(
        "--checks",
        help="comma list of check slugs or numbers/ranges, e.g. lora-binding,7-11 (default: all the config "
        "allows)",
    )
    ap.add_argument("--format", choices=["text", "json"], default="text")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda")
    ap.add_argument("--smoke", action="store_true", help="the checks' smoke presets (fast)")
    ap.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch intra-op threads (0: torch's default); 1 is much faster on a shared, oversubscribed CPU",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run the audit; returns the exit code (0 pass, 1 a check failed, 2 bad input)."""

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    try:
        if args.threads < 0:
            raise UsageError(f"--threads must be ≥ 0 (0 keeps torch's default), got {args.threads}")
        checks = REGISTRY.select(args.checks) if args.checks is not None else None
        mapped = read_any(args.config, args.source_format, args.model)
    except UsageError as exc:
        return main_error(str(exc), "nbkit audit")
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    config = mapped.config
    try:
        progress = sys.stderr.isatty()
        context = AuditContext(
            pick_device(args.device),  # resolved here: a device this machine lacks is bad input (exit 2)
            smoke=args.smoke,
            config=config,
            progress=progress,
            model_unavailable=mapped.model_unavailable,
        )
        with stdout_to_stderr():
            findings = run_audit(context, checks).data
    except (UsageError, RuntimeError, ValueError) as exc:  # e.g. --device cuda without CUDA
        return main_error(str(exc), "nbkit audit")
    failed = [f for f in findings if f.failed]
    if args.format == "json":
        print(
            json.dumps(
                {
                    "config": str(args.config),
                    "format": mapped.fmt,
                    "keys": mapped.keys,
                    "failed": len(failed),
                    "findings": [f.to_dict(with_table=False) for f in findings],
                },
                indent=2,
                ensure_ascii=False,
            )
        )
    else:
        if mapped.keys:
            print(mapped.table_text())
        for f in findings:
            print(f.to_text())
        counts = {s: sum(f.status == s for f in findings) for s in STATUSES}
        print("summary: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
