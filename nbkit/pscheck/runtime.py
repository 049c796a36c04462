"""``--import``: opt-in runtime introspection for what static analysis cannot decide.

The checked modules are imported — i.e. *executed* — in a separate Python process
(:mod:`nbkit.pscheck.introspect`, so a module that hangs, exits, or pollutes ``sys.modules`` cannot
take pscheck down; it gets a timeout), and their models' ``model_fields`` (``FieldInfo``) are
inspected:

* a non-literal default (``= SOME_CONSTANT``, ``= make_default()``) that does not validate, in
  strict mode, against the field's own annotation and metadata → PSC001 (default-type-mismatch);
* a ``default_factory`` that is not callable → PSC004 (default-factory-called).

Findings static rules already reported on the same line are not repeated. The run says in its
notes that code was executed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from nbkit.pscheck.diagnostic import UNREADABLE, Diagnostic

if TYPE_CHECKING:
    from nbkit.pscheck.model import ModuleInfo
    from nbkit.pscheck.report import LintReport
    from nbkit.pscheck.rule import BaseRule

IMPORT_TIMEOUT_S = 120  # override with $PSCHECK_IMPORT_TIMEOUT (seconds)
_RUNTIME_CODES = {"PSC001": "default-type-mismatch", "PSC004": "default-factory-called"}


def runtime_check(modules: list[ModuleInfo], rules: list[BaseRule], report: LintReport) -> None:
    active = {r.code for r in rules} & set(_RUNTIME_CODES)
    payload = []
    for m in modules:
        models = [c for c in m.classes if c.is_model and c.node in m.tree.body]
        if not models:
            continue
        if not Path(m.path).is_file():  # lint_source text: there is nothing on disk to import
            report.notes.append(f"--import: {m.path} is not a file on disk; checked statically only")
            continue
        payload.append(
            {
                "path": m.path,
                "models": [
                    {
                        "name": c.name,
                        "line": c.node.lineno,
                        "fields": {n: s.line for n, s in c.fields.items()},
                    }
                    for c in models
                ],
            }
        )
    nested = sum(1 for m in modules for c in m.classes if c.is_model and c.node not in m.tree.body)
    if not payload:
        report.notes.append("--import: no top-level models to introspect; nothing executed")
        return
    try:
        timeout = float(os.environ.get("PSCHECK_IMPORT_TIMEOUT", IMPORT_TIMEOUT_S))
    except ValueError:
        timeout = IMPORT_TIMEOUT_S
    pkg_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [pkg_root, env.get("PYTHONPATH", "")]))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "nbkit.pscheck.introspect"],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        for item in payload:
            report.diagnostics.append(
                Diagnostic(
                    item["path"],
                    1,
                    1,
                    UNREADABLE,
                    "error",
                    f"--import: importing did not finish within {timeout:g} s "
                    f"(a module hangs at import?); static findings still reported",
                    "unreadable-file",
                )
            )
        return
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        report.diagnostics.append(
            Diagnostic(
                payload[0]["path"],
                1,
                1,
                UNREADABLE,
                "error",
                f"--import: introspection process failed (exit {proc.returncode}): {tail[0]}",
                "unreadable-file",
            )
        )
        return
    static = {(d.path, d.line) for d in report.diagnostics}  # a static finding on the line says it already
    for err in result["errors"]:
        report.diagnostics.append(
            Diagnostic(
                err["path"],
                err.get("line", 1),
                1,
                UNREADABLE,
                "error",
                f"--import: {err['message']}",
                "unreadable-file",
            )
        )
    for f in result["findings"]:
        if f["code"] not in active or (f["path"], f["line"]) in static:
            continue
        report.diagnostics.append(
            Diagnostic(
                f["path"],
                f["line"],
                f["col"],
                f["code"],
                "error",
                f"{f['message']} (found by --import)",
                _RUNTIME_CODES[f["code"]],
            )
        )
    report.notes.append(
        f"--import: executed {result['imported']} module(s) in a subprocess and introspected "
        f"{result['models']} model(s)"
        + (f"; {nested} nested model(s) not reachable by import" if nested else "")
    )
