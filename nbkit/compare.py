"""``nbkit compare RUN_A RUN_B``: what changed between two runs — the question a CI job or an instructor
asks after a dependency bump.

Each folder is a run (``nbkit run``: ``run.json``, ``index.json``, ``metrics.json``) or a sweep
(``nbkit sweep``: ``sweep.json``, ``comparison.csv``, each combination's executed notebook under
``runs/NNN/``); both must be of one kind. The units compared are a run's notebooks, or a sweep's
combinations (each against the same combination of the other sweep, named by its grid values).
Reported:

* claims rows whose verdict changed, named by their ``key``, with both measured values and intervals;
* rows present in one run only (a unit ok in both, a key in one);
* units ok in one run only (failed, interrupted, not started or absent in the other);
* headline numbers that moved beyond the tolerance the theme stated (``headline_spec``, recorded
  beside ``headline``; an older run's ``headline_tolerance``; a number without one is compared exactly);
* parameters and package versions that differ.

Exit 1 when a verdict changed, a row exists in one run only or a unit is ok in one run only; parameter,
version and headline differences are reported with exit 0; a folder that is not a run or an unreadable
record is one line, exit 2 (:class:`~nbkit.errors.UsageError`). So is a smoke run against a default one:
a smoke run's measurements are not judged, so it has no verdicts to set beside a default run's.
"""

from __future__ import annotations

import ast
import csv
import html
import itertools
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.claims import HEADLINE_SPEC, HEADLINE_TOLERANCE
from nbkit.errors import UsageError, main_error
from nbkit.record import read_notebook
from nbkit.report import INDEX_CSS, claim_rows, is_smoke
from nbkit.runfolder import OK, RUN_RECORD, STATUS_FILE, SWEEP_RECORD, write_atomic

FORMATS = ("text", "json", "html")


@dataclass
class Unit:
    """One notebook of a run, or one combination of a sweep: its status, parameters and what it recorded."""

    name: str
    status: str
    parameters: dict[str, str]
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    source_sha256: str = ""


@dataclass
class Folder:
    """A run or sweep folder as read for a comparison."""

    path: Path
    kind: str  # "run" or "sweep"
    units: dict[str, Unit]
    packages: dict[str, str]
    settings: dict[str, str]  # smoke, kernel: how the whole run was asked for


# -- reading --------------------------------------------------------------------------------------------


def _json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise UsageError(f"{path}: missing ({what})")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not readable JSON ({exc})") from None


def _expect(cond: bool, path: Path, expected: str) -> None:
    if not cond:
        raise UsageError(f"{path}: expected {expected}")


def read_folder(folder: Path | str) -> Folder:
    """The run or sweep in ``folder``; a UsageError naming the file and what was expected otherwise."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise UsageError(f"{path}: not a folder")
    if (path / RUN_RECORD).is_file():
        return _read_run(path)
    if (path / SWEEP_RECORD).is_file():
        return _read_sweep(path)
    raise UsageError(
        f"{path}: not a run folder (no {RUN_RECORD}, which `nbkit run` writes, nor {SWEEP_RECORD}, which "
        "`nbkit sweep` writes)"
    )


def _record(path: Path, kind: str) -> dict[str, Any]:
    record = _json(path, f"the {kind} record")
    _expect(
        isinstance(record, dict)
        and record.get("kind") == kind
        and isinstance(record.get("parameters"), dict),
        path,
        f"a {kind} record (an object with kind {kind!r} and its parameters)",
    )
    packages = record.get("packages", {})
    _expect(isinstance(packages, dict), path, "'packages' as an object of name → version")
    return record


def _read_run(path: Path) -> Folder:
    record = _record(path / RUN_RECORD, "run")
    status = _json(path / STATUS_FILE, "each notebook's status, written by `nbkit run`")
    _expect(
        isinstance(status, dict) and isinstance(status.get("notebooks"), list),
        path / STATUS_FILE,
        "an object with a list of notebooks",
    )
    metrics = _json(path / "metrics.json", "what each notebook recorded, written by `nbkit run`")
    _expect(isinstance(metrics, dict), path / "metrics.json", "an object of notebook → its metrics")
    sources = {
        e.get("name"): str(e.get("sha256", "")) for e in record.get("notebooks", []) if isinstance(e, dict)
    }
    units: dict[str, Unit] = {}
    for entry in status["notebooks"]:
        _expect(
            isinstance(entry, dict) and isinstance(entry.get("name"), str) and "status" in entry,
            path / STATUS_FILE,
            "each notebook entry to have a name and a status",
        )
        name = entry["name"]
        recorded = metrics.get(name, {})
        _expect(isinstance(recorded, dict), path / "metrics.json", f"{name}'s metrics as an object")
        params = record["parameters"].get(name, {})
        _expect(isinstance(params, dict), path / RUN_RECORD, f"{name}'s parameters as an object")
        units[name] = Unit(
            name,
            str(entry["status"]),
            {str(k): str(v) for k, v in params.items()},
            recorded,
            str(entry.get("error") or ""),
            sources.get(name, ""),
        )
    return Folder(path, "run", units, _packages(record), _settings(record))


def _read_sweep(path: Path) -> Folder:
    where = path / SWEEP_RECORD
    record = _record(where, "sweep")
    params = record["parameters"]
    notebook = record.get("notebook") or {}
    _expect(
        isinstance(params.get("grid"), dict) and isinstance(params.get("fixed"), dict) and "name" in notebook,
        where,
        "a sweep record with its notebook, grid and fixed parameters",
    )
    grid: dict[str, list[str]] = params["grid"]
    try:
        values = {k: [ast.literal_eval(v) for v in vs] for k, vs in grid.items()}
    except (ValueError, SyntaxError, TypeError):
        raise UsageError(f"{where}: a grid value is not a Python literal") from None
    table = path / "comparison.csv"
    if not table.is_file():
        raise UsageError(f"{table}: missing (each combination's status, written by `nbkit sweep`)")
    try:
        with open(table, newline="", encoding="utf-8") as fh:
            rows = {row.get("run", ""): row for row in csv.DictReader(fh)}
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"{table}: not readable ({exc})") from None
    keys = list(grid)
    units: dict[str, Unit] = {}
    for i, combo in enumerate(itertools.product(*(values[k] for k in keys))):
        label = " ".join(f"{k}={v!r}" for k, v in zip(keys, combo, strict=True))
        row = rows.get(f"{i:03d}", {})
        status = row.get("status") or "not started"
        nb = path / "runs" / f"{i:03d}" / f"{notebook['name']}.ipynb"
        metrics = read_notebook(nb) if status == OK else {}
        units[label] = Unit(
            label,
            status,
            {
                **{str(k): str(v) for k, v in params["fixed"].items()},
                **{k: repr(v) for k, v in zip(keys, combo, strict=True)},
            },
            metrics,
            row.get("error") or "",
            str(notebook.get("sha256", "")),
        )
    return Folder(
        path, "sweep", units, _packages(record), {**_settings(record), "notebook": str(notebook["name"])}
    )


def _packages(record: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (record.get("packages") or {}).items()}


def _settings(record: Mapping[str, Any]) -> dict[str, str]:
    return {k: repr(record.get(k)) for k in ("smoke", "kernel") if k in record}


# -- comparing --------------------------------------------------------------------------------------------


@dataclass
class Comparison:
    """What differs between runs ``a`` and ``b`` (each list holds JSON-ready dicts)."""

    a: Path
    b: Path
    kind: str
    verdicts_changed: list[dict[str, Any]] = field(default_factory=list)
    rows_in_one_only: list[dict[str, Any]] = field(default_factory=list)
    ok_in_one_only: list[dict[str, Any]] = field(default_factory=list)
    headline_moved: list[dict[str, Any]] = field(default_factory=list)
    parameters: list[dict[str, Any]] = field(default_factory=list)
    packages: list[dict[str, Any]] = field(default_factory=list)
    compared: list[str] = field(default_factory=list)  # the units ok in both

    @property
    def exit_code(self) -> int:
        """1 when a verdict changed, a row is in one run only or a unit is ok in one run only; else 0."""
        return int(bool(self.verdicts_changed or self.rows_in_one_only or self.ok_in_one_only))

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": str(self.a),
            "b": str(self.b),
            "kind": self.kind,
            "compared": self.compared,
            "verdicts_changed": self.verdicts_changed,
            "rows_in_one_only": self.rows_in_one_only,
            "ok_in_one_only": self.ok_in_one_only,
            "headline_moved": self.headline_moved,
            "parameters": self.parameters,
            "packages": self.packages,
            "exit_code": self.exit_code,
        }


def compare(run_a: Path | str, run_b: Path | str) -> Comparison:
    """Compare two run folders (or two sweep folders); bad input is a UsageError."""
    a, b = read_folder(run_a), read_folder(run_b)
    if a.kind != b.kind:
        raise UsageError(
            f"{a.path} is a {a.kind} folder and {b.path} a {b.kind} folder; compare like with like"
        )
    _same_size(a, b)
    out = Comparison(a.path, b.path, a.kind)
    for key in sorted(set(a.settings) | set(b.settings)):
        va, vb = a.settings.get(key, "not recorded"), b.settings.get(key, "not recorded")
        if va != vb:
            out.parameters.append({"unit": "(run)", "parameter": key, "a": va, "b": vb})
    for name in _ordered(a.units, b.units):
        ua, ub = a.units.get(name), b.units.get(name)
        ok_a, ok_b = ua is not None and ua.status == OK, ub is not None and ub.status == OK
        if ua is not None and ub is not None:
            _parameters(out, name, ua, ub)
        if ok_a != ok_b:
            out.ok_in_one_only.append(
                {"unit": name, "a": _state(ua), "b": _state(ub), "ok_in": "a" if ok_a else "b"}
            )
        if ok_a and ok_b:
            assert ua is not None and ub is not None
            out.compared.append(name)
            _claims(out, name, ua, ub, a.path, b.path)
            _headline(out, name, ua, ub)
    for package in sorted(set(a.packages) | set(b.packages)):
        va, vb = a.packages.get(package, "not recorded"), b.packages.get(package, "not recorded")
        if va != vb:
            out.packages.append({"package": package, "a": va, "b": vb})
    return out


def _smoke(folder: Folder, unit: Unit) -> bool:
    return folder.settings.get("smoke") == "True" or is_smoke(unit.parameters)


def _same_size(a: Folder, b: Folder) -> None:
    """Refuse a smoke run against a default one (a UsageError naming which is which): a smoke run's rows
    are measured, never judged, so a change of verdict between them would mean nothing."""
    for name in _ordered(a.units, b.units):
        ua, ub = a.units.get(name), b.units.get(name)
        if ua is None or ub is None or _smoke(a, ua) == _smoke(b, ub):
            continue
        smoke, other = (a.path, b.path) if _smoke(a, ua) else (b.path, a.path)
        which = "" if a.kind == "run" and len(a.units) == 1 else f" ({name})"
        raise UsageError(
            f"{smoke} is a smoke run and {other} is not{which}: a smoke run's measurements are not judged, "
            "so it has no verdicts to compare with; compare two smoke runs, or two runs without --smoke"
        )


def _ordered(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    return list(a) + [k for k in b if k not in a]


def _state(unit: Unit | None) -> str:
    if unit is None:
        return "absent"
    return unit.status + (f" ({unit.error})" if unit.error and unit.status != OK else "")


def _parameters(out: Comparison, name: str, ua: Unit, ub: Unit) -> None:
    for key in _ordered(ua.parameters, ub.parameters):
        # A parameter a run was not given is the notebook's default (run.json keeps only those given).
        va, vb = ua.parameters.get(key, "default"), ub.parameters.get(key, "default")
        if va != vb:
            out.parameters.append({"unit": name, "parameter": key, "a": va, "b": vb})
    if ua.source_sha256 and ub.source_sha256 and ua.source_sha256 != ub.source_sha256:
        out.parameters.append(
            {
                "unit": name,
                "parameter": "notebook source (SHA-256)",
                "a": ua.source_sha256[:12],
                "b": ub.source_sha256[:12],
            }
        )


def _rows(unit: Unit, folder: Path) -> dict[str, dict[str, Any]]:
    recorded = unit.metrics.get("claims")
    if recorded is None:
        return {}
    try:
        rows = claim_rows(recorded)
    except ValueError as exc:
        raise UsageError(f"{folder}: {unit.name}'s claims are not in the Claim shape ({exc})") from None
    return {r["key"] or r["claim"]: r for r in rows}


def _claims(out: Comparison, name: str, ua: Unit, ub: Unit, pa: Path, pb: Path) -> None:
    rows_a, rows_b = _rows(ua, pa), _rows(ub, pb)
    for key in _ordered(rows_a, rows_b):
        ra, rb = rows_a.get(key), rows_b.get(key)
        if ra is None or rb is None:
            row = ra or rb
            assert row is not None
            out.rows_in_one_only.append(
                {
                    "unit": name,
                    "key": key,
                    "in": "a" if ra else "b",
                    "verdict": row["verdict"],
                    "claim": row["claim"],
                }
            )
        elif ra["verdict"] != rb["verdict"]:
            out.verdicts_changed.append(
                {
                    "unit": name,
                    "key": key,
                    "claim": ra["claim"],
                    "a": {k: ra[k] for k in ("verdict", "measured", "interval", "n")},
                    "b": {k: rb[k] for k in ("verdict", "measured", "interval", "n")},
                }
            )


def _number(value: Any) -> float | None:
    """A headline value as a float (record keeps NaN and infinities as strings), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    return None


def _headline(out: Comparison, name: str, ua: Unit, ub: Unit) -> None:
    ha, hb = ua.metrics.get("headline"), ub.metrics.get("headline")
    if not isinstance(ha, dict) or not isinstance(hb, dict):
        return
    tolerances = {**_tolerances(ua), **_tolerances(ub)}  # the newer run's statement wins
    for key in _ordered(ha, hb):
        if key not in ha or key not in hb:
            out.headline_moved.append(
                {
                    "unit": name,
                    "name": key,
                    "a": ha.get(key, "absent"),
                    "b": hb.get(key, "absent"),
                    "tolerance": None,
                }
            )
            continue
        va, vb = ha[key], hb[key]
        stated = tolerances.get(key)
        moved = _moved(va, vb, stated)
        if moved:
            out.headline_moved.append({"unit": name, "name": key, "a": va, "b": vb, "tolerance": stated})


def _tolerances(unit: Unit) -> dict[str, dict[str, Any]]:
    """Each headline number's tolerance: from ``headline_spec``, else from an older run's
    ``headline_tolerance``."""
    raw = unit.metrics.get(HEADLINE_SPEC)
    if not isinstance(raw, dict):
        raw = unit.metrics.get(HEADLINE_TOLERANCE)
    if not isinstance(raw, dict):
        return {}
    return {
        k: {"tolerance": float(v.get("tolerance", 0.0)), "relative": bool(v.get("relative", False))}
        for k, v in raw.items()
        if isinstance(v, dict)
        and isinstance(v.get("tolerance", 0.0), (int, float))
        and not isinstance(v.get("tolerance", 0.0), bool)
    }


def _moved(va: Any, vb: Any, stated: dict[str, Any] | None) -> bool:
    """Whether a headline number moved beyond its tolerance (exactly, when none was stated)."""
    fa, fb = _number(va), _number(vb)
    if fa is None or fb is None:
        return va != vb
    if math.isnan(fa) or math.isnan(fb):
        return math.isnan(fa) != math.isnan(fb)
    if math.isinf(fa) or math.isinf(fb):
        return fa != fb
    tolerance = 0.0 if stated is None else stated["tolerance"]
    if stated is not None and stated["relative"]:
        tolerance *= max(abs(fa), abs(fb))
    return abs(fb - fa) > tolerance


# -- rendering --------------------------------------------------------------------------------------------


def _tol_text(stated: dict[str, Any] | None) -> str:
    if stated is None:
        return "no tolerance recorded: compared exactly"
    if stated["relative"]:
        return f"tolerance ±{stated['tolerance']:.3g} relative"
    return f"tolerance ±{stated['tolerance']:.3g}"


def _value(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _side(row: Mapping[str, Any]) -> str:
    interval = f" {row['interval']}" if row.get("interval") else ""
    return f"{row.get('measured') or 'not recorded'}{interval} (n {row.get('n') or 'not recorded'})"


def lines(c: Comparison) -> list[tuple[str, list[str]]]:
    """Each section's title and its lines (what text and HTML both show)."""
    unit = "combination" if c.kind == "sweep" else "notebook"
    return [
        (
            "verdicts changed",
            [
                f"{r['unit']}  {r['key']}: {r['a']['verdict']} → {r['b']['verdict']}  "
                f"(A: {_side(r['a'])}; B: {_side(r['b'])})"
                for r in c.verdicts_changed
            ],
        ),
        (
            "rows in one run only",
            [
                f"{r['unit']}  {r['key']}: only in {r['in'].upper()} ({r['verdict']})"
                for r in c.rows_in_one_only
            ],
        ),
        (
            f"{unit}s ok in one run only",
            [f"{r['unit']}: A {r['a']}; B {r['b']}" for r in c.ok_in_one_only],
        ),
        (
            "headline numbers beyond their tolerance",
            [
                f"{r['unit']}  {r['name']}: {_value(r['a'])} → {_value(r['b'])} ({_tol_text(r['tolerance'])})"
                for r in c.headline_moved
            ],
        ),
        (
            "parameters that differ",
            [f"{r['unit']}  {r['parameter']}: {r['a']} → {r['b']}" for r in c.parameters],
        ),
        ("package versions that differ", [f"{r['package']}: {r['a']} → {r['b']}" for r in c.packages]),
    ]


def _verdict_line(c: Comparison, where: str = "above") -> str:
    if c.exit_code:
        return (
            "differ: "
            + ", ".join(
                f"{n} {what}"
                for n, what in (
                    (len(c.verdicts_changed), "verdict(s) changed"),
                    (len(c.rows_in_one_only), "row(s) in one run only"),
                    (len(c.ok_in_one_only), "ok in one run only"),
                )
                if n
            )
            + " (exit 1)"
        )
    return "same verdicts" + (
        f" (parameters, versions or headline numbers differ: listed {where}; exit 0)"
        if c.parameters or c.packages or c.headline_moved
        else " and nothing else differs (exit 0)"
    )


def text(c: Comparison) -> str:
    out = [f"nbkit compare  A: {c.a}  B: {c.b}  ({c.kind}s; {len(c.compared)} compared ok in both)"]
    for title, items in lines(c):
        out.append(f"{title}: {len(items) or 'none'}")
        out.extend(f"  {item}" for item in items)
    out.append(_verdict_line(c))
    return "\n".join(out)


def html_page(c: Comparison) -> str:
    esc = html.escape
    body = "".join(
        f"<h2>{esc(title)} ({len(items)})</h2>"
        + (
            "<ul>" + "".join(f"<li><code>{esc(item)}</code></li>" for item in items) + "</ul>"
            if items
            else "<p class='note'>none</p>"
        )
        for title, items in lines(c)
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>nbkit compare {esc(c.a.name)} {esc(c.b.name)}</title><style>{INDEX_CSS}</style></head><body>"
        f"<h1>nbkit compare</h1><p>A: <code>{esc(str(c.a))}</code><br>B: <code>{esc(str(c.b))}</code><br>"
        f"{c.kind}s; {len(c.compared)} compared (ok in both)</p>"
        f"<p><b>{esc(_verdict_line(c, 'below'))}</b></p>{body}</body></html>"
    )


def render(c: Comparison, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(c.to_dict(), indent=2, ensure_ascii=False)
    if fmt == "html":
        return html_page(c)
    return text(c)


def add_command(sub) -> None:
    """Add ``compare`` to ``nbkit``'s subcommand parsers."""
    p = sub.add_parser(
        "compare",
        help="what changed between two runs (or two sweeps): verdicts, rows, notebooks, headline numbers, "
        "parameters, package versions; exit 1 when a verdict or a row changed",
    )
    p.add_argument("run_a", type=Path, metavar="RUN_A", help="the earlier run's folder (or sweep's)")
    p.add_argument("run_b", type=Path, metavar="RUN_B", help="the later one, of the same kind and size")
    p.add_argument("--format", choices=FORMATS, default="text", help="how the report is written")
    p.add_argument("--output", type=Path, help="write the report to this file instead of stdout")
    p.set_defaults(func=cmd_compare)


def cmd_compare(args) -> int:
    if args.output is not None and (args.output.is_dir() or not args.output.parent.is_dir()):
        reason = "is a folder" if args.output.is_dir() else "its folder does not exist"
        return main_error(f"--output {args.output}: {reason}; give a file path")
    try:
        c = compare(args.run_a, args.run_b)
    except UsageError as exc:
        return main_error(str(exc))
    report = render(c, args.format)
    if args.output is not None:
        write_atomic(args.output, report + "\n")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        print(report)
    return c.exit_code
