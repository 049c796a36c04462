"""``pscheck`` command line.

Exit status: 0 no finding at or above ``--error-level``; 1 at least one; 2 a file could not be
read/parsed/imported, a rule or plugin failed, or the arguments are wrong. A reader that closes stdout
early (``pscheck --list-rules | head``) ends the output quietly, as ruff does: no traceback, the same
exit status.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from nbkit.pscheck.engine import build_registry, lint
from nbkit.pscheck.registry import PluginError
from nbkit.pscheck.rule import GROUPS, group_of
from nbkit.pscheck.sources import DEFAULT_MAX_BYTES

JSON_SCHEMA_VERSION = 1


def _codes(text: str | None) -> list[str]:
    return [c.strip() for c in (text or "").split(",") if c.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pscheck",
        description="Static linter for Pydantic v2 models (parses with ast; never imports your code "
        "unless --import).",
        epilog="Exit status: 0 clean, 1 findings at/above --error-level, 2 unreadable input or bad "
        "arguments.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (walked for *.py)")
    p.add_argument(
        "--path",
        dest="extra_paths",
        action="append",
        default=[],
        metavar="PATH",
        help="same as a positional PATH (repeatable)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="also run the strict-only rules (PSC1xx); same as --extend-select strict",
    )
    p.add_argument(
        "--error-level",
        choices=("warning", "error"),
        default="error",
        help="lowest severity that makes the exit status 1 (default: error)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--select",
        metavar="CODES",
        help="comma-separated groups (default, migration, strict, all), codes or prefixes to run "
        "instead of the default group (e.g. PSC0,PSC101)",
    )
    p.add_argument(
        "--extend-select",
        metavar="CODES",
        help="groups/codes to run in addition (e.g. migration: v1-to-v2 advice)",
    )
    p.add_argument("--ignore", metavar="CODES", help="comma-separated groups, codes or prefixes to skip")
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import rules from MODULE (or MODULE:ATTR); its rules are enabled (repeatable)",
    )
    p.add_argument(
        "--import",
        dest="use_import",
        action="store_true",
        help="also import the files (executes them, in a subprocess) to introspect model_fields",
    )
    p.add_argument(
        "--max-bytes",
        type=int,
        default=None,
        metavar="N",
        help="skip (and report) files larger than N bytes (default 2 MiB: pscheck needs about "
        "1.6 CPU-s and 110 MB per MiB; 0 = no limit)",
    )
    p.add_argument(
        "--no-entry-points",
        action="store_true",
        help="do not load rules advertised in the 'nbkit.pscheck.rules' entry-point group",
    )
    p.add_argument("--list-rules", action="store_true", help="print the available rules and exit")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The ``pscheck`` console script; returns the exit status (see the module docstring)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("pscheck: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout closed outside the guarded writes (e.g. ``--help | head``)
        _stdout_closed()
        return 0


def _stdout_closed() -> None:
    """Send what is still buffered for the closed stdout to /dev/null.

    Without this, the interpreter's final flush of stdout raises ``BrokenPipeError`` again at exit
    and prints "Exception ignored ..." (the recipe of Python's ``signal`` documentation).
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (captured in a test): nothing to flush
        pass


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: exit 2 on bad arguments, 0 for --help
        return int(exc.code or 0)
    try:
        registry, _, notes = build_registry(args.plugin, load_entry_points=not args.no_entry_points)
    except PluginError as exc:
        print(f"pscheck: error: {exc}", file=sys.stderr)
        return 2
    if args.list_rules:
        try:
            for rule in registry:
                group = group_of(rule)
                flag = "" if group == "default" else f" ({group}, opt-in)"
                flag += "".join(f" (also in {g})" for g in rule.also_in)
                print(f"{rule.code}  {rule.severity:<7}  {rule.name}{flag}: {rule.summary}")
            sys.stdout.flush()
        except BrokenPipeError:
            _stdout_closed()
        for n in notes:
            print(f"note: {n}", file=sys.stderr)
        return 0
    select, ignore, extend = _codes(args.select), _codes(args.ignore), _codes(args.extend_select)
    for option, items in (("--select", select), ("--extend-select", extend), ("--ignore", ignore)):
        unknown = registry.unknown_codes(items)
        if unknown:
            print(
                f"pscheck: error: {option}: unknown rule code or group: {', '.join(unknown)} (groups: "
                f"{', '.join(GROUPS)}; codes: pscheck --list-rules)",
                file=sys.stderr,
            )
            return 2
    paths = list(args.paths) + list(args.extra_paths)
    if not paths:
        parser.print_usage(sys.stderr)
        print("pscheck: error: no PATH given", file=sys.stderr)
        return 2
    if args.max_bytes is not None and args.max_bytes < 0:
        print("pscheck: error: --max-bytes must be >= 0", file=sys.stderr)
        return 2
    try:
        report = lint(
            (),
            paths=paths,
            select=select or None,
            ignore=ignore,
            strict=args.strict,
            extend_select=extend,
            plugins=args.plugin,
            use_import=args.use_import,
            max_bytes=DEFAULT_MAX_BYTES if args.max_bytes is None else args.max_bytes,
            load_entry_points=not args.no_entry_points,
        )
    except PluginError as exc:
        print(f"pscheck: error: {exc}", file=sys.stderr)
        return 2
    failing = report.at_or_above(args.error_level)
    status = 2 if report.failed else (1 if failing else 0)
    n_err = sum(d.severity == "error" for d in report.diagnostics)
    n_warn = sum(d.severity == "warning" for d in report.diagnostics)
    if args.format == "json":
        doc = {
            "tool": "pscheck",
            "schema_version": JSON_SCHEMA_VERSION,
            "summary": {
                "files_checked": report.files_checked,
                "models_checked": report.models_checked,
                "errors": n_err,
                "warnings": n_warn,
                "unreadable": sum(d.code == "PSC000" for d in report.diagnostics),
                "error_level": args.error_level,
                "exit_code": status,
                "imported": bool(args.use_import),
            },
            "rules": report.rules,
            "diagnostics": [d.to_dict() for d in report.diagnostics],
            "skipped": [{"path": p, "reason": r} for p, r in report.skipped],
            "notes": report.notes,
        }
        try:
            json.dump(doc, sys.stdout, indent=2)
            sys.stdout.write("\n")
            sys.stdout.flush()
        except BrokenPipeError:
            _stdout_closed()
    else:
        try:
            for d in report.diagnostics:
                print(d.format())
            sys.stdout.flush()
        except BrokenPipeError:
            _stdout_closed()
        for p, r in report.skipped:
            print(f"note: skipped {p}: {r}", file=sys.stderr)
        for n in report.notes:
            print(f"note: {n}", file=sys.stderr)
        print(
            f"pscheck: {report.files_checked} file(s), {report.models_checked} model(s): {n_err} error(s), "
            f"{n_warn} warning(s)" + (" — some input could not be checked" if report.failed else ""),
            file=sys.stderr,
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
