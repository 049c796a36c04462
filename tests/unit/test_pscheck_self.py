"""The project lints its own Pydantic models with pscheck (whatever models exist at test time)."""

from __future__ import annotations

from pathlib import Path

from nbkit.pscheck import lint_paths_report

ROOT = Path(__file__).resolve().parents[2]


def test_nbkit_package_has_no_error_level_findings():
    report = lint_paths_report([ROOT / "nbkit"])
    assert report.files_checked > 0
    errors = [d.format() for d in report.diagnostics if d.severity == "error"]
    assert errors == [], "\n".join(errors)
