"""What a finished training run left in its folder, found and read: the HF Trainer's ``trainer_state.json``
(top level and the latest ``checkpoint-*/``), TensorBoard event files, a Lightning ``metrics.csv``, CUDA
memory snapshots (``*.pickle`` / ``*.pkl``) and a trainer config beside them.

Every artefact found is read before anything is judged, and a bad one is a :class:`DiagnoseError`
naming the file (exit 2), whatever the others hold. ``training_args.bin`` is a pickle of the
Trainer's arguments and is never read (unpickling it would run code); the same settings come from
``--config``, a trainer config beside the run, or the ``args`` text transformers' TensorBoard callback
writes into the event file.

Curves are taken per quantity from the first artefact that has it — ``trainer_state.json``, then the
event files, then ``metrics.csv`` — and the others are said to hold it too.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.audit.formats import detect
from nbkit.audit.safe_yaml import ConfigError, yaml_document
from nbkit.diagnose.curves import EVAL_LOSS, GRAD_NORM, LEARNING_RATE, LOSS, Series, series
from nbkit.diagnose.schedule import Schedule, read_args_text, schedule_from_values
from nbkit.diagnose.setup import DiagnoseError, _detect, _read_trainer, trainer_values
from nbkit.diagnose.snapshot import read_snapshot
from nbkit.errors import read_json_object

TRAINER_STATE = "trainer_state.json"
METRICS_CSV = "metrics.csv"
EVENTS_PREFIX = "events.out.tfevents."
SNAPSHOT_SUFFIXES = (".pickle", ".pkl")
MAX_DEPTH = 3  # sub-folders searched: runs/<stamp>/ (HF), lightning_logs/version_N/ (Lightning)
_CHECKPOINT = re.compile(r"checkpoint-(\d+)$")

# Keys of the HF Trainer's log_history, and the names TensorBoard tags and Lightning columns give the same
# quantities (first match wins).
STATE_KEYS = {LOSS: "loss", EVAL_LOSS: "eval_loss", GRAD_NORM: "grad_norm", LEARNING_RATE: "learning_rate"}
TAGS = {
    LOSS: (
        "train/loss",
        "loss",
        "train_loss",
        "train_loss_step",
        "Loss/train",
        "training_loss",
        "train/loss_step",
    ),
    EVAL_LOSS: (
        "eval/loss",
        "eval_loss",
        "val_loss",
        "val/loss",
        "validation/loss",
        "valid/loss",
        "Loss/val",
        "Loss/validation",
        "val_loss_epoch",
    ),
    GRAD_NORM: (
        "train/grad_norm",
        "grad_norm",
        "grad_norm/total",
        "grad_2.0_norm_total",
        "train/grad_norm_total",
    ),
    LEARNING_RATE: ("train/learning_rate", "learning_rate", "lr", "train/lr"),
}
LR_PREFIX = "lr-"  # Lightning's LearningRateMonitor: lr-AdamW, lr-AdamW/pg1, …

# Files at a run's top level that are never its trainer config (model, tokenizer and result files).
NOT_CONFIGS = {
    TRAINER_STATE,
    "config.json",
    "generation_config.json",
    "adapter_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "added_tokens.json",
    "vocab.json",
    "preprocessor_config.json",
    "chat_template.json",
    "all_results.json",
    "train_results.json",
    "eval_results.json",
    "test_results.json",
}
SCHEDULE_KEYS = (
    "lr_scheduler_type",
    "lr_scheduler",
    "learning_rate",
    "warmup_steps",
    "warmup_ratio",
    "max_grad_norm",
)

NO_ARTEFACT = (
    "trainer_state.json, TensorBoard events.out.tfevents.*, a Lightning metrics.csv or a memory snapshot "
    "*.pickle/*.pkl"
)


@dataclass
class Found:
    """Paths of the artefacts in a run folder (nothing read yet)."""

    trainer_states: list[Path] = field(default_factory=list)
    events: list[Path] = field(default_factory=list)
    metrics: list[Path] = field(default_factory=list)
    snapshots: list[Path] = field(default_factory=list)
    configs: list[Path] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.trainer_states or self.events or self.metrics or self.snapshots)


def is_artefact(path: Path) -> bool:
    """Whether ``path`` is named like one of a run's artefacts (a file that is read as part of its folder)."""
    return (
        path.name in (TRAINER_STATE, METRICS_CSV)
        or path.name.startswith(EVENTS_PREFIX)
        or path.suffix in SNAPSHOT_SUFFIXES
    )


def _latest_checkpoint(run_dir: Path) -> Path | None:
    found = []
    for p in run_dir.iterdir():
        m = _CHECKPOINT.match(p.name)
        if m and p.is_dir() and (p / TRAINER_STATE).is_file():
            found.append((int(m.group(1)), p))
    return max(found)[1] if found else None


def find(run_dir: Path) -> Found:
    """The artefacts under ``run_dir`` (its sub-folders to depth 3; hidden folders and checkpoints skipped,
    except the latest checkpoint's trainer_state.json)."""

    out = Found()
    if (run_dir / TRAINER_STATE).is_file():
        out.trainer_states.append(run_dir / TRAINER_STATE)
    latest = _latest_checkpoint(run_dir)
    if latest is not None:
        out.trainer_states.append(latest / TRAINER_STATE)
    for here, dirs, files in os.walk(run_dir):
        depth = len(Path(here).relative_to(run_dir).parts)
        dirs[:] = sorted(
            d
            for d in dirs
            if depth < MAX_DEPTH and not d.startswith(".") and not _CHECKPOINT.match(d) and d != "__pycache__"
        )
        for name in sorted(files):
            p = Path(here) / name
            if name.startswith(EVENTS_PREFIX):
                out.events.append(p)
            elif name == METRICS_CSV:
                out.metrics.append(p)
            elif p.suffix in SNAPSHOT_SUFFIXES:
                out.snapshots.append(p)
            elif depth == 0 and p.suffix in (".yaml", ".yml", ".json") and name not in NOT_CONFIGS:
                out.configs.append(p)
    return out


# -- trainer_state.json -------------------------------------------------------------------------------


def _number(path: Path, where: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DiagnoseError(f"{path}: {where}: expected a number, got {value!r}")
    return float(value)


def read_trainer_state(path: Path) -> tuple[dict[str, dict[int, float]], dict[str, Any]]:
    """``{quantity: {step: value}}`` from ``log_history`` and the state's other keys; bad JSON, a missing or
    empty ``log_history`` or an entry without a step is a :class:`DiagnoseError` naming the file."""

    state = read_json_object(path, what="the HF Trainer's trainer_state.json", error=DiagnoseError)
    history = state.get("log_history")
    if not isinstance(history, list):
        raise DiagnoseError(
            f"{path}: log_history: expected the Trainer's list of logged steps, got {history!r:.60}"
        )
    if not history:
        raise DiagnoseError(
            f"{path}: log_history is empty; expected the Trainer's logged steps (nothing was logged)"
        )
    points: dict[str, dict[int, float]] = {k: {} for k in STATE_KEYS}
    for i, entry in enumerate(history):
        if not isinstance(entry, dict):
            raise DiagnoseError(f"{path}: log_history[{i}]: expected an object, got {entry!r:.60}")
        step = entry.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise DiagnoseError(f"{path}: log_history[{i}].step: expected a whole number ≥ 0, got {step!r}")
        for name, key in STATE_KEYS.items():
            if key in entry:
                v = _number(path, f"log_history[{i}].{key}", entry[key])
                if v is not None:
                    points[name][step] = v
    meta = {k: v for k, v in state.items() if k != "log_history"}
    meta["logged_entries"] = len(history)
    return points, meta


# -- TensorBoard ----------------------------------------------------------------------------------------


def read_events(path: Path) -> tuple[dict[str, dict[int, tuple[float, float]]], str | None]:
    """``{tag: {step: (wall_time, value)}}`` of one event file's scalars (TensorBoard's own reader,
    every point kept), and the ``args`` text transformers writes there. A non-empty file with no readable
    event is a :class:`DiagnoseError`; a truncated last record is TensorBoard's normal end of file."""

    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    if path.stat().st_size == 0:
        return {}, None
    logging.getLogger("tensorboard").setLevel(logging.ERROR)
    acc = ea.EventAccumulator(str(path), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    try:
        acc.Reload()
    except Exception as exc:  # the reader's own errors on a damaged file
        raise DiagnoseError(f"{path}: not a readable TensorBoard event file ({exc})") from None
    if acc.file_version is None:
        raise DiagnoseError(f"{path}: not a TensorBoard event file (no readable event record)")
    tags = acc.Tags()
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for tag in tags.get("scalars", []):
        out[tag] = {int(e.step): (float(e.wall_time), float(e.value)) for e in acc.Scalars(tag)}
    args = None
    for tag in tags.get("tensors", []):
        events = acc.Tensors(tag)
        if tag.startswith("args") and events:
            value = tensor_util.make_ndarray(events[-1].tensor_proto)
            raw = value.reshape(-1)[0] if value.size else b""
            args = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        elif events and events[0].tensor_proto.dtype in (1, 2):  # float / double scalars written as tensors
            values = {}
            for e in events:
                arr = tensor_util.make_ndarray(e.tensor_proto)
                if arr.size == 1:
                    values[int(e.step)] = (float(e.wall_time), float(arr.reshape(-1)[0]))
            if values:
                out.setdefault(tag, values)
    return out, args


def _pick_tag(tags: dict[str, Any], name: str) -> str | None:
    for t in TAGS[name]:
        if t in tags:
            return t
    if name == LEARNING_RATE:
        lr = sorted(t for t in tags if t.startswith(LR_PREFIX))
        return lr[0] if lr else None
    return None


# -- Lightning metrics.csv -----------------------------------------------------------------------------


def read_metrics_csv(path: Path) -> dict[str, dict[int, float]]:
    """Every numeric column of a Lightning CSVLogger ``metrics.csv`` by step (empty cells skipped)."""
    import pandas as pd

    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise DiagnoseError(
            f"{path}: empty; expected Lightning's metrics.csv (a header with 'step')"
        ) from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise DiagnoseError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    if "step" not in frame.columns:
        raise DiagnoseError(
            f"{path}: no 'step' column; expected Lightning's metrics.csv (columns: step, epoch and the "
            f"logged metrics), got {list(frame.columns)[:6]}"
        )
    out: dict[str, dict[int, float]] = {}
    for col in frame.columns:
        if col == "step":
            continue
        values = pd.to_numeric(frame[col], errors="coerce")
        bad = frame[col].notna() & values.isna()
        if bad.any():
            row = int(bad.idxmax()) + 2
            raise DiagnoseError(f"{path}:{row} {col}: expected a number, got {frame[col][bad.idxmax()]!r}")
        keep = values.notna() & frame["step"].notna()
        steps = pd.to_numeric(frame["step"][keep], errors="coerce")
        if steps.isna().any() or (steps < 0).any() or (steps != steps.round()).any():
            raise DiagnoseError(f"{path}: step: expected whole numbers ≥ 0")
        out[col] = {int(s): float(v) for s, v in zip(steps, values[keep], strict=True)}
    return out


def _version(path: Path) -> tuple[int, str]:
    m = re.search(r"version_(\d+)", str(path))
    return (int(m.group(1)) if m else -1, str(path))


# -- trainer config ---------------------------------------------------------------------------------------


def read_config(path: Path) -> Schedule:
    """The schedule and ``max_grad_norm`` of a trainer config (axolotl YAML or TrainingArguments JSON),
    read as ``nbkit diagnose CONFIG`` reads it (bad input: file:line and key)."""
    data, lines = _read_trainer(path)
    fmt = _detect(path, data)
    return schedule_from_values(trainer_values(path, fmt, data, lines), path.name)


def _config_beside(paths: list[Path], notes: list[str]) -> Path | None:
    """The one trainer config at the run's top level (a file with a schedule or clipping key that reads as
    an axolotl YAML or a TrainingArguments JSON); None, with a note, when there are several."""
    found = []
    for p in paths:
        try:
            text = p.read_text(encoding="utf-8")
            data = json.loads(text) if p.suffix == ".json" else yaml_document(text, str(p))[0]
        except (OSError, UnicodeDecodeError, ValueError, ConfigError):
            continue  # not a config this reader understands: not the run's trainer config either
        if (
            isinstance(data, dict)
            and detect(p, data) in ("axolotl", "trl")
            and any(k in data for k in SCHEDULE_KEYS)
        ):
            found.append(p)
    if len(found) > 1:
        notes.append(
            f"several trainer configs beside the run ({', '.join(p.name for p in found)}): none used; "
            "pass --config"
        )
        return None
    return found[0] if found else None


# -- the run ----------------------------------------------------------------------------------------------


@dataclass
class RunArtefacts:
    """Everything read from one run folder."""

    path: Path
    curves: dict[str, Series]
    read: list[str]  # one line per artefact read
    notes: list[str]
    state: dict[str, Any] | None
    schedule: Schedule | None
    total_steps: int | None
    total_where: str
    snapshots: list[tuple[Path, dict[str, Any]]]

    def rel(self, p: Path) -> str:
        try:
            return str(p.relative_to(self.path))
        except ValueError:
            return str(p)


def _use_trainer_state(root: Path, states: list, curves: dict[str, Series], read: list[str]) -> dict | None:
    """The curves of the trainer_state.json that went furthest (the latest checkpoint's when the run stopped
    before save_state; the top level's on a tie), and a line per file read."""
    if not states:
        return None
    used, points, meta = max(
        states, key=lambda st: (int(st[2].get("global_step") or 0), st[0] == root / TRAINER_STATE)
    )
    for path, _, m in states:
        read.append(
            f"{path.relative_to(root)}: {m['logged_entries']} log entries to step {m.get('global_step')}"
            + (
                " (used)"
                if path == used
                else " (not used: the other trainer_state.json went as far or further)"
            )
        )
    for name, pts in points.items():
        if pts:
            curves[name] = series(name, pts, str(used.relative_to(root)))
    return meta


def _use_events(
    root: Path, events: list, curves: dict[str, Series], read: list[str], notes: list[str]
) -> None:
    """Every event file's scalars merged by tag (a resumed run re-logs steps: the later write wins), and the
    curves no earlier artefact gave."""
    merged: dict[str, dict[int, tuple[float, float]]] = {}
    for path, scalars, _ in events:
        where = path.relative_to(root)
        read.append(f"{where}: {len(scalars)} scalar tags" if scalars else f"{where}: no scalars")
        for tag, timed in scalars.items():
            into = merged.setdefault(tag, {})
            for step, (wall, value) in timed.items():
                if step not in into or wall >= into[step][0]:
                    into[step] = (wall, value)
    folders = {path.parent for path, _, _ in events}
    label = str(folders.pop().relative_to(root)) if len(folders) == 1 else "event files"
    for name in TAGS:
        tag = _pick_tag(merged, name)
        if tag is None:
            continue
        values = {step: v for step, (_, v) in merged[tag].items()}
        if name in curves:
            notes.append(
                f"{label} holds {name} too ({tag}, {len(values)} points): {curves[name].source}'s is used"
            )
        else:
            curves[name] = series(name, values, f"{label}: {tag}")


def _use_metrics(
    root: Path, metrics: list, curves: dict[str, Series], read: list[str], notes: list[str]
) -> None:
    """The latest Lightning version's metrics.csv (the others read and named) for the curves not given."""
    latest, cols = metrics[-1]
    where = latest.relative_to(root)
    read.append(f"{where}: columns {', '.join(sorted(cols))}")
    for older, _ in metrics[:-1]:
        read.append(f"{older.relative_to(root)}: read, not used (an earlier version than {where})")
    for name in TAGS:
        col = _pick_tag(cols, name)
        if col is None:
            continue
        if name in curves:
            notes.append(f"{where} holds {name} too ({col}): {curves[name].source}'s is used")
        else:
            curves[name] = series(name, cols[col], f"{where}: {col}")


def read_run(run_dir: str | Path, config: str | Path | None = None) -> RunArtefacts:
    """Find and read every artefact of the run in ``run_dir``; bad input anywhere is a DiagnoseError."""

    root = Path(run_dir)
    if not root.is_dir():
        raise DiagnoseError(f"{root}: not a folder; expected a finished run's output folder")
    found = find(root)
    if not found.any:
        extra = (
            " (training_args.bin is a pickle and is never read)"
            if (root / "training_args.bin").exists()
            else ""
        )
        raise DiagnoseError(
            f"{root}: is a directory with no training-run artefact ({NO_ARTEFACT}){extra}; expected a "
            "trainer config file or a finished run's folder"
        )

    def rel(p: Path) -> str:
        return str(p.relative_to(root))

    read: list[str] = []
    notes: list[str] = []
    # Read everything first: a bad artefact stops the diagnosis whatever the others hold.
    states = []
    for p in found.trainer_states:
        points, meta = read_trainer_state(p)
        states.append((p, points, meta))
    events = []
    for p in found.events:
        scalars, args = read_events(p)
        events.append((p, scalars, args))
    metrics = sorted(((p, read_metrics_csv(p)) for p in found.metrics), key=lambda x: _version(x[0]))
    snapshots = [(p, read_snapshot(p)) for p in found.snapshots]
    schedule = read_config(Path(config)) if config is not None else None

    curves: dict[str, Series] = {}
    state = _use_trainer_state(root, states, curves, read)
    if events:
        _use_events(root, events, curves, read, notes)
    if metrics:
        _use_metrics(root, metrics, curves, read, notes)
    for p, snap in snapshots:
        read.append(f"{rel(p)}: memory snapshot, {len(snap['segments'])} segments")

    if schedule is None:
        beside = _config_beside(found.configs, notes)
        if beside is not None:
            schedule = read_config(beside)
            read.append(f"{rel(beside)}: trainer config beside the run (schedule, max_grad_norm)")
    if schedule is None:
        for p, _, args in events:
            data = read_args_text(args) if args else None
            if data is None:
                continue
            try:
                values = trainer_values(p, "trl", data, {})
            except DiagnoseError as exc:
                notes.append(f"{rel(p)}: the recorded TrainingArguments were not used ({exc})")
                continue
            schedule = schedule_from_values(values, f"{rel(p)} (the TrainingArguments the Trainer recorded)")
            break
    total, total_where = None, ""
    if state is not None and isinstance(state.get("max_steps"), int) and state["max_steps"] > 0:
        total, total_where = state["max_steps"], "trainer_state.json max_steps"
    elif schedule is not None and schedule.max_steps > 0:
        total, total_where = schedule.max_steps, f"{schedule.source} max_steps"
    if "training_args.bin" in os.listdir(root):
        notes.append("training_args.bin is a pickle: never read")
    return RunArtefacts(
        path=root,
        curves=curves,
        read=read,
        notes=notes,
        state=state,
        schedule=schedule,
        total_steps=total,
        total_where=total_where,
        snapshots=snapshots,
    )
