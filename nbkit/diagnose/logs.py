"""A run's logged scalars from the places other than the HF Trainer's state and TensorBoard: a CSV or
JSONL history with a step column (Lightning's CSVLogger ``metrics.csv``; a W&B, Keras or other tracker's
export) and an MLflow tracking store (a ``mlruns/`` folder or a tracking URI, read with MLflow's own
client).

Every reader returns a :class:`Logged`: each logged name's ``{step: value}``, kept whole — a non-finite
value is kept wherever it is written (``nan``, ``NaN``, ``inf``, ``-inf``, ``Infinity``; JSON's
``NaN``/``Infinity`` literals), and only an empty cell (a CSV) or ``null`` / a missing key (JSONL) is a
value not logged; a step logged twice keeps its last value unless the earlier one was non-finite. Which
names are series is :mod:`nbkit.diagnose.names`' business, not the reader's: a cell that is not a number
is refused only in a column read as a series (one line naming the file, line and column), and rows that
hold none of the series are skipped and counted.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.diagnose.curves import EXPORT, LIGHTNING, MLFLOW
from nbkit.diagnose.names import STEP_COLUMNS
from nbkit.diagnose.setup import DiagnoseError
from nbkit.extras import install_line

HISTORY_SUFFIXES = (".csv", ".jsonl", ".ndjson")
METRICS_CSV = "metrics.csv"  # Lightning's CSVLogger
NON_FINITE = {"nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "infinity": math.inf}
NON_FINITE |= {"+infinity": math.inf, "-infinity": -math.inf}
LFS_POINTER = b"version https://git-lfs.github.com/spec/"


@dataclass
class Logged:
    """One artefact's logged scalars: ``points[name] = {step: value}``, where it was read, the library
    whose conventions its names follow, and what was skipped."""

    where: str
    convention: str
    points: dict[str, dict[int, float]]
    rows: int = 0  # rows / entries / points read
    skipped: int = 0  # rows holding none of the series
    notes: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)  # every name logged (points holds the rows with a series)

    def __post_init__(self):
        self.names |= set(self.points)


def is_lfs_pointer(path: Path) -> bool:
    """A Git LFS pointer checked out in place of the file (the repository was cloned without ``git lfs``)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(LFS_POINTER)) == LFS_POINTER
    except OSError:
        return False


def _value(text: str) -> float | None:
    """A logged cell as a number: None for an empty cell (not logged), NaN/±inf for their spellings,
    ValueError for anything else."""
    t = text.strip()
    if not t:
        return None
    nf = NON_FINITE.get(t.lower())
    if nf is not None:
        return nf
    return float(t)


def step_column(columns: list[str]) -> str | None:
    """The step column of a history's columns (:data:`~nbkit.diagnose.names.STEP_COLUMNS`, first found)."""
    have = set(columns)
    return next((c for c in STEP_COLUMNS if c in have), None)


def _step(where: str, value: Any) -> int:
    if isinstance(value, bool):
        raise DiagnoseError(f"{where}: expected a whole number ≥ 0 as the step, got {value!r}")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise DiagnoseError(f"{where}: expected a whole number ≥ 0 as the step, got {value!r}") from None
    if not math.isfinite(f) or f < 0 or f != int(f):
        raise DiagnoseError(f"{where}: expected a whole number ≥ 0 as the step, got {value!r}")
    return int(f)


def history_header(path: Path) -> list[str] | None:
    """The column names of a CSV or JSONL history (a JSONL's first record's keys); None when the file
    does not read as one (not UTF-8, not a CSV header, a first line that is not a JSON object)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            first = f.readline()
    except (OSError, UnicodeDecodeError):
        return None
    if path.suffix == ".csv":
        import csv

        try:
            return next(csv.reader([first]), None)
        except csv.Error:
            return None
    try:
        record = json.loads(first)
    except ValueError:
        return None
    return list(record) if isinstance(record, dict) else None


def read_history(path: Path, where: str, is_series: Callable[[str], bool]) -> Logged:
    """A CSV or JSONL history with a step column: every numeric column by step (the step column's rows
    with a value; a repeated step keeps its last value). ``is_series(name)`` says which columns are read
    as series: their cells must be numbers; other columns' cells that are not numbers are ignored."""

    convention = LIGHTNING if path.name == METRICS_CSV else EXPORT
    if path.suffix == ".csv":
        records = _csv_records(path)
    else:
        records = _jsonl_records(path)
    points: dict[str, dict[int, float]] = {}
    names: set[str] = set()
    step_col: str | None = None
    rows = skipped = 0
    for line, record in records:
        rows += 1
        if step_col is None:
            step_col = step_column(list(record))
            if step_col is None:
                raise DiagnoseError(
                    f"{path}: no step column; expected a logged history with one of "
                    f"{', '.join(STEP_COLUMNS)}, got {list(record)[:6]}"
                )
        names.update(record)
        values = {}
        for name, cell in record.items():
            if name not in STEP_COLUMNS:
                v = _cell(path, line, name, cell, is_series(name))
                if v is not None:
                    values[name] = v
        logged = [n for n in values if is_series(n)]
        if not logged:
            skipped += 1
            continue
        raw_step = record.get(step_col)
        if raw_step is None or raw_step == "":
            raise DiagnoseError(f"{path}:{line} {step_col}: empty on a row that logs {logged[0]}")
        step = _step(f"{path}:{line} {step_col}", raw_step)
        for name, v in values.items():
            into = points.setdefault(name, {})
            # A repeated step keeps its last value, except that a non-finite one is never hidden by a later
            # row (Lightning logs a skipped step's NaN and the next batch at the same global step).
            if math.isfinite(into.get(step, 0.0)):
                into[step] = v
    if step_col is None:
        raise DiagnoseError(f"{path}: empty; expected a logged history (a header with a step column)")
    out = Logged(where, convention, points, rows=rows, skipped=skipped, names=names - set(STEP_COLUMNS))
    if step_col != "step":
        out.notes.append(f"steps from its {step_col!r} column")
    return out


def _cell(path: Path, line: int, name: str, cell: Any, series: bool) -> float | None:
    if cell is None or isinstance(cell, (dict, list)):
        if series and isinstance(cell, (dict, list)):
            raise DiagnoseError(f"{path}:{line} {name}: expected a number, got {type(cell).__name__}")
        return None
    if isinstance(cell, bool):
        if series:
            raise DiagnoseError(f"{path}:{line} {name}: expected a number, got {cell!r}")
        return None
    if isinstance(cell, (int, float)):
        return float(cell)
    try:
        return _value(str(cell))
    except ValueError:
        if series:
            raise DiagnoseError(f"{path}:{line} {name}: expected a number, got {cell!r}") from None
        return None


def _csv_records(path: Path):
    """(line, {column: cell}) per data row; every cell read as text, so ``nan`` stays NaN and an empty
    cell stays empty (pandas' defaults would read both as missing)."""
    import csv

    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                return
            for row in reader:
                if not row:
                    continue
                if len(row) > len(header):
                    raise DiagnoseError(
                        f"{path}:{reader.line_num}: {len(row)} cells under a header of {len(header)} columns"
                    )
                yield reader.line_num, dict(zip(header, row, strict=False))
    except UnicodeDecodeError:
        raise DiagnoseError(f"{path}: not a readable CSV (not UTF-8 text)") from None
    except csv.Error as exc:
        raise DiagnoseError(f"{path}: not a readable CSV ({exc})") from None


def _jsonl_records(path: Path):
    try:
        with open(path, encoding="utf-8") as f:
            for i, text in enumerate(f, 1):
                if not text.strip():
                    continue
                try:
                    record = json.loads(text)  # NaN, Infinity and -Infinity are read as floats
                except ValueError as exc:
                    raise DiagnoseError(f"{path}:{i}: not a JSON object ({exc})") from None
                if not isinstance(record, dict):
                    raise DiagnoseError(f"{path}:{i}: expected one JSON object per line, got {record!r:.40}")
                yield i, record
    except UnicodeDecodeError:
        raise DiagnoseError(f"{path}: not a readable JSONL file (not UTF-8 text)") from None


# -- MLflow ------------------------------------------------------------------------------------------------


def is_tracking_uri(text: str) -> bool:
    """An MLflow tracking URI, not a path: ``http(s)://…``, ``file:…``, ``sqlite:…``, ``databricks``."""
    return "://" in text or text.startswith(("file:", "sqlite:", "databricks"))


def mlflow_run_folder(path: Path) -> tuple[Path, str] | None:
    """(the file store's root, the run id) when ``path`` is one run's folder in a ``mlruns/`` store
    (``<store>/<experiment id>/<run id>/`` with ``meta.yaml`` and ``metrics/``)."""
    if (path / "meta.yaml").is_file() and (path / "metrics").is_dir():
        return path.parent.parent, path.name
    return None


def mlflow_store(path: Path) -> Path | None:
    """The ``mlruns/`` file store at or directly under ``path`` (experiment folders holding ``meta.yaml``)."""
    for root in (path, path / "mlruns"):
        if root.is_dir() and any((e / "meta.yaml").is_file() for e in root.iterdir() if e.is_dir()):
            if not (root / "metrics").is_dir():
                return root
    return None


def _client(uri: str):
    if uri.startswith("file:"):
        from urllib.parse import urlparse
        from urllib.request import url2pathname

        # MLflow's file store creates a missing root: a mistyped path must not leave a new store behind.
        if not Path(url2pathname(urlparse(uri).path)).is_dir():
            raise DiagnoseError(
                f"{uri}: no such folder; expected an MLflow tracking store (a mlruns/ folder)"
            )
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise DiagnoseError(
            f"{uri}: an MLflow tracking store; reading it needs MLflow's client: {install_line('mlflow')}"
        ) from None
    # MLflow 3 refuses to open a ./mlruns file store unless told to: reading a user's existing store is
    # exactly what is asked here (nothing is written to it).
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    # A server that does not answer is one line after seconds, not minutes of MLflow's default retries.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    return MlflowClient(tracking_uri=uri)


def _mlflow_error(uri: str, exc: Exception) -> DiagnoseError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return DiagnoseError(f"{uri}: not a readable MLflow tracking store ({first[:200]})")


def read_mlflow(
    uri: str, run_id: str | None, is_series: Callable[[str], bool]
) -> tuple[Logged, dict[str, str]]:
    """One run of an MLflow tracking store: every metric's history by step, and the run's params (the HF
    Trainer's MLflowCallback logs its TrainingArguments there). ``run_id`` may be omitted when the store
    holds one run; a run's id or its name selects it."""

    client = _client(uri)
    try:
        run = _pick_run(client, uri, run_id)
        points: dict[str, dict[int, float]] = {}
        notes: list[str] = []
        rows = 0
        for key in sorted(run.data.metrics):
            history = sorted(
                client.get_metric_history(run.info.run_id, key), key=lambda m: (m.step, m.timestamp)
            )
            rows += len(history)
            steps = [int(m.step) for m in history]
            if len(history) > 1 and len(set(steps)) == 1 and is_series(key):
                # log_metric without a step logs every value at step 0: their order is the logging order.
                notes.append(
                    f"{key}: every value logged at step {steps[0]}: read in logging order as steps 0…"
                )
                history = sorted(history, key=lambda m: m.timestamp)
                points[key] = {i: float(m.value) for i, m in enumerate(history)}
            else:
                points[key] = {int(m.step): float(m.value) for m in history}
    except DiagnoseError:
        raise
    except Exception as exc:  # MLflow's own errors: an unreachable server, a damaged store
        raise _mlflow_error(uri, exc) from None
    name = run.data.tags.get("mlflow.runName", "")
    where = f"{uri} run {run.info.run_id}" + (f" ({name})" if name else "")
    out = Logged(where, MLFLOW, points, rows=rows)
    out.notes += notes
    return out, dict(run.data.params)


def _pick_run(client, uri: str, run_id: str | None):
    if run_id:
        try:
            return client.get_run(run_id)
        except Exception:
            found = client.search_runs(
                [e.experiment_id for e in client.search_experiments()],
                filter_string=f"tags.`mlflow.runName` = '{run_id}'",
                max_results=2,
            )
            if len(found) == 1:
                return found[0]
            raise DiagnoseError(
                f"--run-id {run_id}: no run of that id or name in {uri}"
                + (" (several runs have that name: give its id)" if found else "")
            ) from None
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, max_results=6) if experiments else []
    if len(runs) == 1:
        return runs[0]
    if not runs:
        raise DiagnoseError(f"{uri}: an MLflow tracking store with no run in it")
    listed = ", ".join(
        f"{r.info.run_id}"
        + (f" ({r.data.tags.get('mlflow.runName')})" if r.data.tags.get("mlflow.runName") else "")
        for r in runs[:5]
    )
    raise DiagnoseError(
        f"{uri}: an MLflow tracking store with several runs ({listed}{', …' if len(runs) > 5 else ''}); "
        "pass --run-id RUN (its id or name)"
    )
