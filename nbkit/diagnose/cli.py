"""``nbkit diagnose CONFIG [--model M] [--nodes N] [--gpus-per-node N] [--gpu-memory GiB] [--format
text|json|html] [--output FILE]`` for a setup before launch, and ``nbkit diagnose RUN_DIR [--config
TRAINER_CONFIG] [--series KIND=NAME …] [--run-id RUN] [--format text|json|html] [--output FILE]`` for a
finished run: a folder holding run artefacts (``trainer_state.json``, TensorBoard event files, a CSV or
JSONL history with a step column such as Lightning's ``metrics.csv`` or a W&B export, an MLflow
``mlruns/`` store, CUDA memory snapshots), one such file, or an MLflow tracking URI is recognised as one.

Exit codes as ``nbkit audit``: 0 clean, 1 findings (a coupling error or warning, a peak that does not
fit or may not, an audit check that failed; for a run, a row whose rule establishes a problem), 2 bad
input — one line naming the file and key, nothing written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nbkit.audit.cli import stdout_to_stderr
from nbkit.diagnose.artefacts import is_artefact as is_run_file
from nbkit.diagnose.diagnosis import diagnose
from nbkit.diagnose.finished import diagnose_run, run_folder
from nbkit.diagnose.finished import render as render_run
from nbkit.diagnose.logs import is_tracking_uri
from nbkit.diagnose.names import parse_override
from nbkit.diagnose.report import FORMATS
from nbkit.errors import UsageError, main_error
from nbkit.report import PLOTLY_JS, ensure_plotly_js
from nbkit.runfolder import write_atomic


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


def _series(text: str) -> tuple[str, str]:
    try:
        return parse_override(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
        description="Will this training setup start, will it fit, which settings disagree across its files; "
        "or, given a finished run's folder, what went wrong in it.",
    )
    ap.add_argument(
        "config",
        help="CONFIG | RUN_DIR: the trainer config: an axolotl YAML or a TRL SFTConfig / TrainingArguments "
        "JSON (its 'deepspeed' key is followed); or a finished run's folder (trainer_state.json, "
        "checkpoint-*/, TensorBoard events, a CSV or JSONL history with a step column such as Lightning's "
        "metrics.csv or a W&B export, an MLflow mlruns/ store, CUDA memory snapshots *.pickle/*.pkl), one "
        "such file, or an MLflow tracking URI",
    )
    ap.add_argument(
        "--config",
        dest="trainer_config",
        metavar="TRAINER_CONFIG",
        help="with RUN_DIR: the run's trainer config (axolotl YAML or TrainingArguments JSON), for its LR "
        "schedule and max_grad_norm (default: a trainer config beside the run, else the arguments the "
        "Trainer recorded in its TensorBoard events)",
    )
    ap.add_argument(
        "--series",
        type=_series,
        action="append",
        default=[],
        metavar="KIND=NAME",
        help="with RUN_DIR: read the logged series NAME as KIND (loss, eval_loss, learning_rate, grad_norm), "
        "instead of the names recognised by their words (train_loss_step, val_loss, eval_<set>_loss, "
        "lr-AdamW, grad_norm…); repeat eval_loss=NAME for several eval sets",
    )
    ap.add_argument(
        "--run-id",
        metavar="RUN",
        help="with an MLflow tracking store or URI holding several runs: the run's id or name",
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


# Options of the setup form that mean nothing for a finished run (dest → flag).
SETUP_ONLY = {
    "model": "--model",
    "nodes": "--nodes",
    "gpus_per_node": "--gpus-per-node",
    "gpu_memory": "--gpu-memory",
    "checks": "--checks",
    "no_audit": "--no-audit",
}


def _run_main(args) -> int:
    """``nbkit diagnose RUN_DIR``: every artefact read (a bad one: exit 2 whatever the others hold), then
    the rows."""

    given = [flag for dest, flag in SETUP_ONLY.items() if getattr(args, dest) not in (None, False)]
    if given or args.device != "auto":
        flag = given[0] if given else "--device"
        return main_error(
            f"{flag}: applies to a trainer config, not to a finished run's folder ({args.config})",
            "nbkit diagnose",
        )
    try:
        with stdout_to_stderr():
            run = diagnose_run(args.config, args.trainer_config, series_names=args.series, run_id=args.run_id)
            if args.format == "html" and args.output is not None:
                ensure_plotly_js(args.output.parent)
            report = render_run(run, args.format, plotly_js=PLOTLY_JS, inline_js=args.output is None)
    except UsageError as exc:
        return main_error(str(exc), "nbkit diagnose")
    if args.output is not None:
        write_atomic(args.output, report + "\n")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        print(report)
    return run.exit_code


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
    target = run_folder(args.config)  # a folder, else a bundled example run by its bare name
    if target.is_dir() or is_tracking_uri(args.config) or (target.is_file() and is_run_file(target)):
        if target.is_dir():
            args.config = str(target)
        return _run_main(args)
    for flag, given in (("--series", args.series), ("--run-id", args.run_id)):
        if given:
            return main_error(
                f"{flag}: applies to a finished run's folder, not to a trainer config ({args.config})",
                "nbkit diagnose",
            )
    if args.trainer_config is not None:
        return main_error(
            f"--config: names a finished run's trainer config; {args.config} is not a run folder "
            "(give the trainer config as CONFIG)",
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
