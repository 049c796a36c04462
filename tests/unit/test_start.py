"""Notebook 00's tables (``nbkit.start``): what the landing notebook shows, built from a doctor report
and from executed notebooks on disk, without running a kernel."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

import nbkit
from nbkit import start
from nbkit.record import METRIC_MIME

REPORT = {
    "device": {"torch": None, "cuda_available": False, "cpu_cores_usable": 2, "ram_total_gib": 7.8},
    "packages": {
        "core": {"pandas": {"ok": True, "version": "2.2.3"}},
        "kg": {"pykeen": {"ok": False, "why": "not installed", "fix": "pip install 'nbkit-workbook[kg]'"}},
    },
    "models": {"smollm2-gguf": {"ok": True, "path": "/m/smollm2.gguf"}},
    "binaries": {"chromium": {"ok": False, "optional": True, "why": "only the browser tier", "fix": "apt"}},
    "kernel": {"python3": {"ok": True, "path": "/k/python3"}},
}


def test_start_is_reached_from_import_nbkit():
    assert nbkit.start is start


def test_readiness_rows_and_what_is_missing():
    table = start.readiness(REPORT)
    assert list(table["what"]) == [
        "core: pandas",
        "kg: pykeen",
        "models: smollm2-gguf",
        "binaries: chromium",
        "kernel: python3",
    ]
    assert list(table["detail"]) == [
        "2.2.3",
        "pip install 'nbkit-workbook[kg]'",
        "/m/smollm2.gguf",
        "only the browser tier; fix: apt",
        "/k/python3",
    ]
    missing = start.missing(table)
    assert missing == ["kg: pykeen", "binaries: chromium"]
    assert start.readiness_line(missing) == "MISSING: kg: pykeen, binaries: chromium"
    assert start.readiness_line([]) == "everything present"
    assert len(start.readiness_view(table)) == len(table)  # something missing: every row


def test_readiness_view_shows_the_last_six_rows_when_nothing_is_missing():
    report = {
        **REPORT,
        "packages": {"core": {f"p{i}": {"ok": True, "version": "1"} for i in range(8)}},
        "binaries": {},
    }
    table = start.readiness(report)
    assert start.missing(table) == []
    assert list(start.readiness_view(table)["what"]) == list(table["what"])[-6:]


def test_machine_line():
    assert start.machine_line("cpu", REPORT) == (
        "device cpu; torch not installed; CUDA available: False; 2 cores, 7.8 GiB RAM"
    )


def _notebook(path: Path, *, title: str, duration: float | None = None, smoke: bool = False, device=None):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\nDiagnoses {title.lower()}.\n\n## more")]
    if device is not None:
        cell = nbformat.v4.new_code_cell("nbkit.record('device', DEVICE)")
        cell.outputs = [
            nbformat.v4.new_output("display_data", data={METRIC_MIME: {"name": "device", "value": device}})
        ]
        nb.cells.append(cell)
    if duration is not None:
        nb.metadata["papermill"] = {"duration": duration, "parameters": {"SMOKE": smoke}}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_title_and_purpose(tmp_path):
    path = _notebook(tmp_path / "01_a.ipynb", title="Knowledge graphs")
    assert start.title_and_purpose(path) == ("Knowledge graphs", "Diagnoses knowledge graphs.")


def test_measured_runs_and_the_workbook_table(tmp_path):
    nbs = tmp_path / "notebooks"
    paths = [_notebook(nbs / "00_start.ipynb", title="Start"), _notebook(nbs / "01_a.ipynb", title="A")]
    (nbs / "reference_seconds.json").write_text(json.dumps({"smoke": {"01_a": 9.5}, "full": {}}))
    runs = tmp_path / "runs"
    _notebook(runs / "20260101-000000" / "01_a.ipynb", title="A", duration=12.34, smoke=True, device="cuda:0")
    _notebook(
        runs / "20260102-000000" / "01_a.ipynb",
        title="A",
        duration=7.0,
        smoke=True,
        device={"device": "cuda:0", "torch": "2.13.0"},
    )  # as Context.describe records it
    _notebook(runs / "20260103-000000" / "01_a.ipynb", title="A", duration=30.0, smoke=False)
    _notebook(runs / "20260104-000000" / "01_a.ipynb", title="A")  # not executed by papermill: skipped

    measured = start.measured_runs([runs])
    assert measured.to_dict("records") == [
        {"notebook": "01_a", "run": "20260101-000000", "mode": "smoke", "device": "cuda", "seconds": 12.3},
        {"notebook": "01_a", "run": "20260102-000000", "mode": "smoke", "device": "cuda", "seconds": 7.0},
        {"notebook": "01_a", "run": "20260103-000000", "mode": "full", "device": "?", "seconds": 30.0},
    ]
    table = start.workbook_table(measured, paths)
    assert table.to_dict("records") == [
        {
            "notebook": "01_a",
            "title": "A",
            "diagnoses": "Diagnoses a.",
            "cpu smoke (s)": "not measured",
            "cuda smoke (s)": 7.0,  # the newest run of that mode and device
            "cpu full (s)": "not measured",
            "cuda full (s)": "not measured",
            "reference smoke (s, 2-core CPU)": 9.5,
            "reference full (s, 2-core CPU)": "not measured",
        }
    ]


def test_workbook_table_without_any_run(tmp_path):
    path = _notebook(tmp_path / "01_a.ipynb", title="A")
    table = start.workbook_table(start.measured_runs([]), [path])
    assert table.loc[0, "cpu smoke (s)"] == "not measured"
    assert table.loc[0, "reference full (s, 2-core CPU)"] == "not measured"


@pytest.mark.parametrize("name", ["device_name", "doctor_report", "run_folders"])
def test_the_notebook_reaches_the_core_through_start(name):
    assert callable(getattr(start, name))
