"""The ``nbkit`` command: run, sweep, compare, list, doctor, audit, diagnose, init, lab.

Bad input (an unknown notebook or parameter, a value of the wrong type or outside its declared
range, an unusable output path) is one line ``nbkit: error: …`` and exit 2, before anything runs.
SIGTERM is handled like Ctrl-C: a run or sweep in progress interrupts its kernels, ends them and keeps, in
its output folder, what had finished (``--resume DIR`` completes it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

from nbkit import __version__
from nbkit.catalog import available_notebooks, field_notes_page
from nbkit.compare import add_command as add_compare
from nbkit.compare import cmd_compare
from nbkit.doctor import doctor_report
from nbkit.errors import UsageError, main_error
from nbkit.execute import skip_uri_grammar
from nbkit.extras import DIST, install_line
from nbkit.params import notebook_parameters, notes_removed, parse_value, takes
from nbkit.replicates import SCHEDULER_ENV
from nbkit.runfolder import OutputError
from nbkit.runner import packaged_fallback, run_notebooks
from nbkit.sweep import MAX_RUNS, run_sweep
from nbkit.workspace import add_commands

# `nbkit audit` and `nbkit diagnose` are the audit theme's commands (diagnose reuses the audit's readers).
# An install without that theme's extra still runs every other command; those two say what to install.
_AUDIT_MISSING = ""
try:
    from nbkit.audit import cli as audit_cli
    from nbkit.diagnose import cli as diagnose_cli
except ImportError as exc:  # a partial install: no pydantic/yaml for the audit theme
    audit_cli = diagnose_cli = None  # type: ignore[assignment]
    _AUDIT_MISSING = str(exc)

__all__ = ["OWN_RUN_EXAMPLES", "build_parser", "doctor_report", "main", "parse_params"]


def parse_params(pairs: list[list[str]] | None) -> dict:
    """``-p KEY VALUE`` pairs as a dict; a key given twice is a UsageError (not a silent last-wins)."""
    params: dict = {}
    for key, value in pairs or []:
        if key in params:
            raise UsageError(
                f"-p {key} given twice ({params[key]!r} and {parse_value(value)!r}); give each parameter once"
            )
        params[key] = parse_value(value)
    return params


_USAGE_RAISED = re.compile(r" raised (UsageError|MissingExtra|ParameterError): (.*)", re.S)


def _cmd_run(args) -> int:
    if args.resume is None and not args.all and not args.notebooks:
        args.parser.print_usage(sys.stderr)
        return main_error("name the notebooks to run (e.g. `nbkit run 01`), or pass --all for every notebook")
    if args.all and args.notebooks:
        return main_error(f"--all runs every notebook; do not also name {' '.join(args.notebooks)}")
    if args.resume is not None and args.all:
        return main_error("--resume DIR re-runs DIR's notebooks; do not also pass --all")
    if args.scheduler:
        if not re.match(r"^(tcp|tls|inproc|ucx)://\S+$", args.scheduler):
            return main_error(
                f"--scheduler {args.scheduler!r}: expected a Dask address such as tcp://host:8786"
            )
        # The kernels inherit it: each notebook's replicate loops send their units there (nbkit.replicates).
        os.environ[SCHEDULER_ENV] = args.scheduler
    try:
        params = parse_params(args.param)
        run_dir, results = run_notebooks(
            [] if args.all else args.notebooks,
            params,
            smoke=args.smoke,
            profile=args.profile,
            output=args.output,
            kernel=args.kernel,
            progress=not args.quiet,
            jobs=args.jobs,
            resume=args.resume,
        )
    except UsageError as exc:
        return main_error(str(exc))
    except OutputError as exc:
        print(
            f"nbkit: error: {exc}; the notebooks that ended before it are intact in the run folder (see "
            "above)",
            file=sys.stderr,
        )
        return 1
    failed = [r for r in results if not r.ok]
    if not failed:
        print(f"wrote {run_dir}/  (index: {run_dir / 'index.html'})")
        return 0
    # A notebook that stopped on a UsageError (bad user input it read, e.g. a DEV_SET row lacking a
    # field) is a usage error like a bad -p: its one-line message, exit 2; a new run that produced
    # nothing else is removed (nothing written, as for a bad -p).
    # MissingExtra (a theme's extra not installed) is a UsageError too: the fix is one pip line; so is a
    # ParameterError from the notebook's own first-cell check.
    usage = [m for r in failed if (m := _USAGE_RAISED.search(r.error or ""))]
    if usage and len(usage) == len(failed):
        if args.resume is None and not any(r.ok for r in results):
            shutil.rmtree(run_dir, ignore_errors=True)
        return main_error("; ".join(m.group(2) for m in usage))
    for r in failed:
        print(f"nbkit: FAILED {r.error}", file=sys.stderr)
    print(
        f"nbkit: {len(results) - len(failed)} of {len(results)} notebooks ok; the run is in {run_dir}/ "
        f"(index.html: each notebook's status; a failed notebook is kept executed up to its failing cell); "
        f"`nbkit run --resume {run_dir}` re-runs the notebooks that are not ok",
        file=sys.stderr,
    )
    return 1


def _cmd_sweep(args) -> int:
    try:
        params = parse_params(args.param)
        out, results = run_sweep(
            args.notebook,
            args.grid,
            params,
            smoke=args.smoke,
            jobs=args.jobs,
            output=args.output,
            scheduler=args.scheduler,
            yes=args.yes,
            kernel=args.kernel,
            progress=not args.quiet,
            resume=args.resume,
        )
    except UsageError as exc:
        return main_error(str(exc))
    except OutputError as exc:
        print(
            f"nbkit: error: {exc}; the runs that ended before it are intact in the sweep folder (see above)",
            file=sys.stderr,
        )
        return 1
    failed = [r for r in results if not r.ok]
    print(
        f"wrote {out}/  ({len(results)} runs, {len(failed)} failed; {out / 'comparison.csv'}, "
        f"{out / 'comparison.html'})"
    )
    if failed:
        print(
            f"nbkit: `nbkit sweep --resume {out}` runs the combinations that are not ok again",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _cmd_list(args) -> int:
    out = {}
    try:
        notebooks = available_notebooks(required=True)
        for nb in notebooks:
            out[nb.stem] = {
                name: {**info, "takes": takes(info)} for name, info in notebook_parameters(nb).items()
            }
    except UsageError as exc:
        return main_error(str(exc))
    if args.format == "json":
        print(json.dumps(out, indent=2, default=str))
        return 0
    packaged = packaged_fallback(notebooks)
    print(
        f"notebooks in {notebooks[0].parent}"
        + (
            " (the ones nbkit came with: none in this folder; `nbkit init` copies them here)"
            if packaged
            else ""
        )
    )
    rows = [
        (
            name,
            key,
            info["type"],
            _shown(info["default"]),
            info["takes"] or ("True or False" if info["type"] == "bool" else "any"),
            notes_removed(info["help"]),
        )
        for name, params in out.items()
        for key, info in params.items()
    ]
    # One width per column over every notebook, so the columns line up down the whole listing.
    widths = [max([len(r[i + 1]) for r in rows] + [len(h)]) for i, h in enumerate(LIST_HEADER)]
    for name in out:
        print(f"\n{name}")
        print("  " + "  ".join(h.ljust(w) for h, w in zip(LIST_HEADER, widths, strict=True)).rstrip())
        for row in (r for r in rows if r[0] == name):
            line = "  " + "  ".join(c.ljust(w) for c, w in zip(row[1:5], widths, strict=True))
            print(line.rstrip() + (f"  # {row[5]}" if row[5] else ""))
    return 0


LIST_HEADER = ("parameter", "type", "default", "takes")


def _shown(default) -> str:
    text = repr(default)
    return text if len(text) <= 32 else text[:31] + "…"


# One "diagnose my own …" line per theme: what a user points nbkit at (printed by `nbkit doctor`).
OWN_RUN_EXAMPLES = {
    "kg": "nbkit run 01 -p DATASET path/to/triples.tsv          "
    "# your knowledge graph (.csv/.tsv/.parquet/.nt/.ttl[.gz])",
    "zero": "nbkit run 02 -p MODEL path/to/hf_dir_or_config.json -p DS_CONFIG ds_config.json "
    "-p WORLD_SIZE 16 -p GPUS_PER_NODE 8",
    "signatures": "nbkit run 03 -p SIGNATURE '\"question -> answer\"' -p DEV_SET dev.jsonl "
    "-p METRIC contains",
    "audit": "nbkit audit axolotl.yml --model path/to/hf_dir   "
    "# or adapter_config.json, an SFTConfig/TrainingArguments JSON, ds_config.json",
}


# Which part brings each model file and binary: missing ones count only where that part is installed.
NEEDED_BY = {
    "smollm2-gguf": ("signatures", "zero", "audit"),
    "smollm2-safetensors-cache": ("zero", "audit"),
    "minilm-embedder": ("signatures",),
    "llama_cpp.server": ("signatures",),
}


def _cmd_doctor(args) -> int:
    report = doctor_report(build_cache=args.build_cache)
    extras = report["extras"]
    present = {part for part, info in extras.items() if info["ok"]}
    # Missing: the core's packages, the kernel, and what an installed extra needs (a model file, a
    # server). An extra not installed is a choice, shown on its line, not a failure.
    missing = [
        f"packages/{name}" for name, info in report["packages"].get("core", {}).items() if not info["ok"]
    ] + [
        f"{section}/{name}"
        for section in ("models", "binaries", "kernel")
        for name, info in report[section].items()
        if not info["ok"]
        and not info.get("optional")
        and (name not in NEEDED_BY or present & set(NEEDED_BY[name]))
    ]
    if args.format == "json":
        print(
            json.dumps(
                {
                    **report,
                    "missing": missing,
                    "own_run_examples": OWN_RUN_EXAMPLES,
                    "field_notes": str(field_notes_page()),
                },
                indent=2,
                default=str,
            )
        )
    else:
        dev = report["device"]
        print(
            f"python {dev['python']}  torch {dev['torch'] or 'not installed'}  cuda build "
            f"{dev['torch_cuda_build']}  cuda available {dev['cuda_available']}"
        )
        print(
            f"cores {dev['cpu_cores_usable']}  RAM {dev['ram_total_gib']} GiB  GPUs: "
            + (", ".join(f"{g['name']} ({g['memory_gib']} GiB)" for g in dev["gpus"]) or "none")
        )
        print(
            "extras: "
            + "  ".join(f"{'✔' if i['ok'] else '✘'} {part}" for part, i in extras.items() if part != "core")
        )
        for part, pkgs in report["packages"].items():
            line = "  ".join(
                f"{'✔' if i['ok'] else '✘'} {n} {i.get('version', '')}".strip() for n, i in pkgs.items()
            )
            fix = f"  — fix: {extras[part]['fix']}" if not extras[part]["ok"] else ""
            print(f"[{part}] {line}{fix}")
        for section in ("models", "binaries", "kernel"):
            for name, info in report[section].items():
                mark = "✔" if info["ok"] else "✘"
                detail = info.get("path") or info.get("how") or ""
                fix = "" if info["ok"] else f"  — {info.get('why', 'missing')}; fix: {info.get('fix')}"
                print(f"{mark} {section}/{name} {detail}{fix}")
        print("all present" if not missing else f"missing: {', '.join(missing)}")
        print(f"where each claim of the ledgers comes from (the field notes): {field_notes_page()}")
        print("diagnose your own run:")
        for theme, line in OWN_RUN_EXAMPLES.items():
            print(f"  [{theme}] {line}")
    return 0 if not missing else 1


def _cmd_audit(args) -> int:
    if audit_cli is None:
        return main_error(
            f"the audit theme is not available ({_AUDIT_MISSING}); install with: {install_line('audit')}"
        )
    return int(audit_cli.main(list(args.args)) or 0)


def _cmd_diagnose(args) -> int:
    if diagnose_cli is None:
        return main_error(
            f"nbkit diagnose is not available ({_AUDIT_MISSING}); install with: {install_line('audit')}"
        )
    return int(diagnose_cli.main(list(args.args)) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nbkit", description="Run and inspect the nbkit diagnostic workbook."
    )
    parser.add_argument("--version", action="version", version=f"nbkit {__version__} (pip package {DIST})")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="execute notebooks headless (papermill) into runs/<timestamp>/")
    run.add_argument(
        "notebooks", nargs="*", help="notebook paths, names (01_kg_gnn), numbers (01) or themes (kg)"
    )
    run.add_argument("--all", action="store_true", help="run every notebook")
    run.add_argument(
        "--resume",
        type=Path,
        metavar="DIR",
        help="re-run only the notebooks of the run folder DIR that are not ok, "
        "with the parameters recorded there",
    )
    _common_run_options(run, output_help="output directory (default runs/<timestamp>)")
    run.add_argument(
        "--profile",
        choices=("default", "full"),
        default="default",
        help="full: each claim's budget large enough to decide it (PROFILE='full'; much longer than the "
        "default)",
    )
    run.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run independent replicates (seeds) as tasks on this Dask distributed scheduler "
        "(tcp://host:8786); the notebooks themselves run here",
    )
    run.set_defaults(func=_cmd_run, parser=run)

    sweep = sub.add_parser(
        "sweep", help="run one notebook per combination of a parameter grid and compare the runs"
    )
    sweep.add_argument("notebook", nargs="?", help="notebook path, name, number or theme")
    sweep.add_argument(
        "--resume",
        type=Path,
        metavar="DIR",
        help="run only the combinations the sweep folder DIR's comparison.csv does not hold as ok "
        "(its recorded grid)",
    )
    sweep.add_argument(
        "--grid",
        action="append",
        metavar="KEY=V1,V2",
        help="a parameter and its values (Python literals); repeat for more keys",
    )
    sweep.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="submit each run to this Dask distributed scheduler (tcp://host:8786)",
    )
    sweep.add_argument("--yes", action="store_true", help=f"allow a grid of more than {MAX_RUNS} runs")
    _common_run_options(sweep, output_help="output directory (default runs/sweep-<notebook>-<timestamp>)")
    sweep.set_defaults(func=_cmd_sweep)

    lst = sub.add_parser(
        "list", help="notebooks and their parameters: type, default and the values each takes"
    )
    lst.add_argument(
        "--format", choices=["text", "json"], default="text", help="text: aligned columns; json: for tools"
    )
    lst.set_defaults(func=_cmd_list)

    doc = sub.add_parser("doctor", help="what is present, what is missing, how to get it")
    doc.add_argument(
        "--format", choices=["text", "json"], default="text", help="text: one line each; json: for tools"
    )
    doc.add_argument(
        "--build-cache", action="store_true", help="also convert SmolLM2's GGUF to the safetensors cache"
    )
    doc.set_defaults(func=_cmd_doctor)

    # Everything after `audit` (its --help included) is the audit CLI's: with "+" as this parser's only
    # prefix, no "-" argument is taken as an option here, so all of them reach nbkit.audit.cli.main.
    audit = sub.add_parser(
        "audit",
        help="fine-tune audit: nbkit audit CONFIG.yaml [--checks ...] [--format text|json]",
        add_help=False,
        prefix_chars="+",
    )
    audit.add_argument("args", nargs="*")
    audit.set_defaults(func=_cmd_audit)

    # As audit: every argument (--help included) goes to nbkit.diagnose.cli.main.
    diag = sub.add_parser(
        "diagnose",
        help="a training setup before it runs (nbkit diagnose CONFIG [--gpus-per-node N] [--nodes N] "
        "[--gpu-memory GiB]), or a finished run (nbkit diagnose RUN_DIR); --format text|json|html",
        add_help=False,
        prefix_chars="+",
    )
    diag.add_argument("args", nargs="*")
    diag.set_defaults(func=_cmd_diagnose)

    add_compare(sub)
    add_commands(sub)  # init, lab
    return parser


def _common_run_options(p: argparse.ArgumentParser, output_help: str) -> None:
    p.add_argument(
        "-p",
        "--param",
        nargs=2,
        action="append",
        metavar=("KEY", "VALUE"),
        help="set a parameter (Python literal); once per key",
    )
    p.add_argument("--smoke", action="store_true", help="set SMOKE=True (fast run)")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="run N notebooks at once, longest first, each with its share of the cores as thread counts",
    )
    p.add_argument("--output", type=Path, help=output_help)
    p.add_argument(
        "--kernel",
        default="python3",
        metavar="NAME",
        help="the Jupyter kernel that runs the notebooks (default python3: this environment's, as `make "
        "setup` or `python -m ipykernel install --sys-prefix` registers it)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no per-cell progress bar")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is so the same clean-up as Ctrl-C runs."""


@contextlib.contextmanager
def terminate_as_interrupt():
    """SIGTERM and Ctrl-C stop a run the same way: the kernels are interrupted first, then the run unwinds."""

    def _raise(signum, frame):
        # What a terminal's Ctrl-C reaches is nbkit's process group; each kernel runs in a session of its
        # own. So every process of ours gets SIGINT here, and a running kernel stops its cell and answers
        # before papermill shuts it down (else it prints a traceback about a closed socket). Only our
        # descendants: never our parent's group. Pool workers ignore SIGINT (the parent ends them).
        try:
            import psutil

            children = psutil.Process().children(recursive=True)
            for child in children:
                with contextlib.suppress(psutil.Error):
                    child.send_signal(signal.SIGINT)
            if children:
                time.sleep(1.0)  # let an interrupted cell send its reply before the kernel is shut down
        except ImportError:
            pass
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    # A SIGINT ignored when nbkit started (a background job of a shell) stays ignored, as Python leaves it.
    wanted = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) != signal.SIG_IGN else [])
    try:
        previous = {sig: signal.signal(sig, _raise) for sig in wanted}
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.func in (_cmd_run, _cmd_sweep, _cmd_list, cmd_compare):
        skip_uri_grammar()  # seconds off every notebook read; scoped to nbkit's own processes
    try:
        with terminate_as_interrupt():
            return int(args.func(args) or 0)
    except BrokenPipeError:
        # The reader went away (`nbkit list | head`): what it wanted was printed; say nothing more. stdout is
        # pointed at /dev/null so the interpreter's own flush at exit does not fail again (Python's advice).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt as exc:
        # The interrupted cell's error is left on an asyncio task of nbclient's; asyncio would log it
        # with two tracebacks when the task is collected. The run is over: say it once, here.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        if isinstance(exc, Terminated):
            print("nbkit: terminated; what had finished is kept in the run folder", file=sys.stderr)
            return 128 + signal.SIGTERM
        print("nbkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
