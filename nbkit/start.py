"""Notebook 00's tables: is this machine ready for the workbook, and what each notebook took here.

The landing notebook only narrates and calls these (``import nbkit`` then ``nbkit.start.…``):
:func:`readiness` turns :func:`~nbkit.doctor.doctor_report` into one row per package, model file,
binary and kernel; :func:`measured_runs` reads the executed notebooks under the run folders
(papermill stores each one's duration and parameters) and :func:`workbook_table` puts them beside
each notebook's title, purpose and the reference seconds shipped with the notebooks. pandas and
nbformat are imported inside the functions: ``import nbkit`` imports this module and stays instant.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbkit.catalog import available_notebooks
from nbkit.device import device_name
from nbkit.doctor import doctor_report
from nbkit.record import read_notebook
from nbkit.timings import reference_seconds
from nbkit.workspace import run_folders

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "device_name",
    "doctor_report",
    "machine_line",
    "measured_runs",
    "missing",
    "readiness",
    "readiness_line",
    "readiness_view",
    "run_folders",
    "title_and_purpose",
    "workbook_table",
]

MODES = ("smoke", "full")
DEVICE_KINDS = ("cpu", "cuda")
NOT_MEASURED = "not measured"


# -- is this machine ready? ------------------------------------------------------------------------


def readiness(report: dict[str, Any]) -> pd.DataFrame:
    """One row per package of each part, then per model file, binary and kernel: what, ok, detail
    (the version or path found, or why it is missing and the fix)."""
    import pandas as pd

    rows = [
        {"what": f"{theme}: {name}", "ok": info["ok"], "detail": info.get("version") or info.get("fix") or ""}
        for theme, pkgs in report["packages"].items()
        for name, info in pkgs.items()
    ] + [
        {
            "what": f"{section}: {name}",
            "ok": info["ok"],
            "detail": (info.get("path") or info.get("how") or "")
            if info["ok"]
            else f"{info.get('why', 'missing')}; fix: {info.get('fix')}",
        }
        for section in ("models", "binaries", "kernel")
        for name, info in report[section].items()
    ]
    return pd.DataFrame(rows)


def missing(table: pd.DataFrame) -> list[str]:
    """The ``what`` of every row of :func:`readiness` that is not ok."""
    return table.loc[~table["ok"], "what"].tolist()


def _device_type(recorded: Any) -> str:
    """ "cpu" or "cuda" from a notebook's recorded ``device`` (``{"device": "cuda:0", ...}``; a run recorded
    before it was a mapping holds the bare string)."""
    name = recorded.get("device", "?") if isinstance(recorded, dict) else recorded
    return str(name if name is not None else "?").split(":")[0]


def machine_line(device: str, report: dict[str, Any]) -> str:
    """One line on the machine: device, torch, CUDA, cores and RAM."""
    dev = report["device"]
    return (
        f"device {device}; torch {dev['torch'] or 'not installed'}; CUDA available: {dev['cuda_available']}; "
        f"{dev['cpu_cores_usable']} cores, {dev['ram_total_gib']} GiB RAM"
    )


def readiness_line(missing: Sequence[str]) -> str:
    return "everything present" if not missing else f"MISSING: {', '.join(missing)}"


def readiness_view(table: pd.DataFrame) -> pd.DataFrame:
    """What the notebook shows: every row when something is missing, else the last six."""
    return table if missing(table) else table.tail(6)


# -- the notebooks, and how long they took here ----------------------------------------------------


def title_and_purpose(path: Path) -> tuple[str, str]:
    """A notebook's title line and its 'Diagnoses …' sentence, from its first markdown cell."""
    import nbformat

    cell = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    lines = [ln.strip() for ln in cell.source.splitlines() if ln.strip()]
    purpose = next((ln for ln in lines[1:] if not ln.startswith("#")), "")
    return lines[0].lstrip("# "), purpose


def measured_runs(runs_dirs: Sequence[Path]) -> pd.DataFrame:
    """One row per executed notebook found under <runs dir>/<stamp>/: seconds, SMOKE, device."""
    import nbformat
    import pandas as pd

    rows = []
    for executed in sorted(p for runs_dir in runs_dirs for p in runs_dir.glob("*/[0-9][0-9]_*.ipynb")):
        meta = nbformat.read(executed, as_version=4).metadata.get("papermill", {})
        if meta.get("duration") is None:
            continue
        metrics = read_notebook(executed)
        rows.append(
            {
                "notebook": executed.stem,
                "run": executed.parent.name,
                "mode": "smoke" if meta.get("parameters", {}).get("SMOKE") else "full",
                "device": _device_type(metrics.get("device")),
                "seconds": round(float(meta["duration"]), 1),
            }
        )
    return pd.DataFrame(rows, columns=["notebook", "run", "mode", "device", "seconds"])


def workbook_table(runs: pd.DataFrame, notebooks: Sequence[Path] | None = None) -> pd.DataFrame:
    """One row per theme notebook: title, what it diagnoses, the newest measured seconds here per mode
    and device kind (``not measured`` without one), and the shipped reference seconds per mode."""
    import pandas as pd

    paths = list(available_notebooks() if notebooks is None else notebooks)
    if len(runs):
        latest = runs.sort_values("run").groupby(["notebook", "mode", "device"]).last()["seconds"]
    else:
        latest = pd.Series(dtype=float)
    reference = {mode: reference_seconds(paths, smoke=mode == "smoke") for mode in MODES}
    table = []
    for path in paths:
        if path.stem.startswith("00_"):
            continue
        title, purpose = title_and_purpose(path)
        row: dict[str, Any] = {"notebook": path.stem, "title": title, "diagnoses": purpose}
        for mode in MODES:
            for kind in DEVICE_KINDS:
                value = latest.get((path.stem, mode, kind))
                row[f"{kind} {mode} (s)"] = value if value is not None else NOT_MEASURED
        for mode in MODES:
            row[f"reference {mode} (s, 2-core CPU)"] = reference[mode].get(path.stem, NOT_MEASURED)
        table.append(row)
    return pd.DataFrame(table)
