"""``nbkit diagnose CONFIG [--model M] [--nodes N] [--gpus-per-node N] [--gpu-memory GiB] [--format
text|json|html] [--output FILE]``.

Exit codes as ``nbkit audit``: 0 clean, 1 findings (a coupling error or warning, a peak that does not
fit or may not, an audit check that failed), 2 bad input — one line naming the file and key, nothing
written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nbkit.audit.cli import stdout_to_stderr
from nbkit.diagnose.diagnosis import diagnose
from nbkit.diagnose.report import FORMATS
from nbkit.errors import UsageError, main_error


def _gib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected the memory of one GPU in GiB (a number > 0, e.g. 80), got {text!r}"
        ) from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(
            f"expected the memory of one GPU in GiB (a number > 0, e.g. 80), got {text!r}"
        )
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 1, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's usage block is noise for a CI log)
        print(f"nbkit diagnose: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:

    ap = _Parser(
        prog="nbkit diagnose",
        description="Will this training setup start, will it fit, which settings disagree across its files.",
    )
    ap.add_argument(
        "config",
        help="the trainer config: an axolotl YAML or a TRL SFTConfig / TrainingArguments JSON (its "
        "'deepspeed' key is followed)",
    )
    ap.add_argument(
        "--model",
        help="the base model, replacing the config's: a Hugging Face directory, a config.json, a Hub id "
        "(online)",
    )
    ap.add_argument("--nodes", type=_count, help="nodes in the job (default 1)")
    ap.add_argument("--gpus-per-node", type=_count, help="GPUs per node (default 1)")
    ap.add_argument(
        "--gpu-memory",
        type=_gib,
        metavar="GiB",
        help="memory of one GPU in GiB, e.g. 80 (without it the peak is predicted, not judged)",
    )
    ap.add_argument("--format", choices=FORMATS, default="text")
    ap.add_argument("--output", type=Path, help="write the report here instead of stdout")
    ap.add_argument(
        "--checks",
        help="the audit's checks to run (its slugs or numbers, e.g. 14-18; default: all the config allows)",
    )
    ap.add_argument("--no-audit", action="store_true", help="skip the audit's checks")
    ap.add_argument("--device", default="auto", help="device of the audit's checks: auto | cpu | cuda")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Diagnose; returns the exit code (0 clean, 1 findings, 2 bad input)."""

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    if args.output is not None and (args.output.is_dir() or not args.output.parent.is_dir()):
        return main_error(
            f"--output {args.output}: "
            f"{'is a directory' if args.output.is_dir() else 'its folder does not exist'}; "
            "expected a file path",
            "nbkit diagnose",
        )
    try:
        with stdout_to_stderr():
            d = diagnose(
                args.config,
                model=args.model,
                nodes=args.nodes,
                gpus_per_node=args.gpus_per_node,
                gpu_memory_gib=args.gpu_memory,
                checks=args.checks,
                audit=not args.no_audit,
                device=args.device,
                progress=sys.stderr.isatty(),
            )
    except UsageError as exc:
        return main_error(str(exc), "nbkit diagnose")
    except RuntimeError as exc:  # as nbkit audit: e.g. --device cuda without CUDA (nbkit.device.pick_device)
        return main_error(str(exc).strip().splitlines()[0], "nbkit diagnose")
    report = d.render(args.format)
    if args.output is not None:
        args.output.write_text(report + "\n", encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        print(report)
    return d.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
