"""``nbkit audit CONFIG.yaml [--checks 2,7,11] [--format text|json]``.

Exit codes: 0 no check failed, 1 at least one check failed (or errored), 2 the config (or the
command line) is invalid — the message names the file, line, key and expected type.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys


def _parse_checks(text: str) -> list[int]:
    out = []
    for part in text.replace(" ", ",").split(","):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out += list(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return out


@contextlib.contextmanager
def _stdout_to_stderr():
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


def main(argv: list[str] | None = None) -> int:
    from nbkit.audit.config import ConfigError, load_config
    from nbkit.audit.runner import CHECK_NAMES, Sizes, run_audit

    ap = argparse.ArgumentParser(prog="nbkit audit", description="Fine-tune coupling audit (13 checks) for a LoRA/SFT config.",
                                 epilog="checks: " + "; ".join(f"{k} {v}" for k, v in CHECK_NAMES.items()))
    ap.add_argument("config", help="YAML audit config (see nbkit/audit/examples/good.yaml)")
    ap.add_argument("--checks", help="comma list / ranges of check ids, e.g. 2,7-11 (default: all the config allows)")
    ap.add_argument("--format", choices=["text", "json"], default="text")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda")
    ap.add_argument("--smoke", action="store_true", help="smaller work sizes (fast)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads (0: torch's default); 1 is much faster on a shared, oversubscribed CPU")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    try:
        checks = _parse_checks(args.checks) if args.checks else None
    except ValueError:
        print(f"nbkit audit: --checks expects ids like 2,7-11, got {args.checks!r}", file=sys.stderr)
        return 2
    if checks:
        bad = [c for c in checks if c not in CHECK_NAMES]
        if bad:
            print(f"nbkit audit: unknown check id(s) {bad}; known 1-13", file=sys.stderr)
            return 2
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"nbkit audit: {exc}", file=sys.stderr)
        return 2
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    try:
        with _stdout_to_stderr():
            findings = run_audit(config, checks, device=args.device, sizes=Sizes.smoke() if args.smoke else Sizes(), progress=sys.stderr.isatty())
    except (RuntimeError, ValueError) as exc:  # e.g. --device cuda without CUDA
        print(f"nbkit audit: {exc}", file=sys.stderr)
        return 2
    failed = [f for f in findings if f.failed]
    if args.format == "json":
        print(json.dumps({"config": str(args.config), "failed": len(failed), "findings": [f.to_dict(with_table=False) for f in findings]}, indent=2, ensure_ascii=False))
    else:
        for f in findings:
            print(f.to_text())
        counts = {s: sum(f.status == s for f in findings) for s in ("pass", "warn", "fail", "error", "needs_gpu", "skipped")}
        print("summary: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
