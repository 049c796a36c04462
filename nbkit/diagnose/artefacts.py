"""What a finished training run left, found and read: the HF Trainer's ``trainer_state.json`` (top level and
the latest ``checkpoint-*/``), TensorBoard event files, CSV and JSONL histories with a step column
(Lightning's ``metrics.csv``; a W&B, Keras or other tracker's export), an MLflow tracking store (a
``mlruns/`` folder, one run's folder in it, or a tracking URI), CUDA memory snapshots (``*.pickle`` /
``*.pkl``) and a trainer config beside them.

Every artefact found is read before anything is judged, and a bad one is a :class:`DiagnoseError`
naming the file (exit 2), whatever the others hold. What is not the run's — a CSV or JSONL with no step
column (a data set), a Git LFS pointer checked out in place of a file — is set aside with a note, never a
reason to refuse the others. ``training_args.bin`` is a pickle of the Trainer's arguments and is never
read (unpickling it would run code); the same settings come from ``--config``, a trainer config beside
the run, the ``args`` text transformers' TensorBoard callback writes into the event file, or the params
its MLflow callback logs.

Which logged names are which series is :mod:`nbkit.diagnose.names`' pattern list (or ``--series
KIND=NAME``). Each kind is taken from the first artefact that logs it — ``trainer_state.json``, then the
event files, then the histories, then MLflow — and the others are said to hold it too.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.audit.formats import detect
from nbkit.audit.safe_yaml import ConfigError, yaml_document
from nbkit.diagnose.curves import HF_TRAINER, LIGHTNING, TENSORBOARD, Series, plural, series
from nbkit.diagnose.logs import (
    HISTORY_SUFFIXES,
    METRICS_CSV,
    NON_FINITE,
    Logged,
    history_header,
    is_lfs_pointer,
    is_tracking_uri,
    mlflow_run_folder,
    mlflow_store,
    read_history,
    read_mlflow,
    step_column,
)
from nbkit.diagnose.names import (
    EVAL_LOSS,
    EVAL_WORDS,
    KIND_WORDS,
    KINDS,
    OTHER_LOSS,
    TEST_MIN_POINTS,
    TRAIN_WORDS,
    classify,
    loss_like,
)
from nbkit.diagnose.schedule import Schedule, read_args_text, schedule_from_values
from nbkit.diagnose.setup import DiagnoseError, Value, _detect, _read_trainer, _where, trainer_values
from nbkit.diagnose.snapshot import read_snapshot
from nbkit.errors import read_json_object

TRAINER_STATE = "trainer_state.json"
EVENTS_PREFIX = "events.out.tfevents."
SNAPSHOT_SUFFIXES = (".pickle", ".pkl")
MAX_DEPTH = (
    3  # sub-folders searched: runs/<stamp>/ (HF), lightning_logs/version_N/ (Lightning), wandb/run-*/files
)
_CHECKPOINT = re.compile(r"checkpoint-(\d+)$")
_SKIP_DIRS = {"__pycache__", "mlruns", "node_modules"}

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
    "trainer_state.json, TensorBoard events.out.tfevents.*, a CSV or JSONL history with a step column "
    "(Lightning's metrics.csv, a W&B export), an MLflow mlruns/ store or a memory snapshot *.pickle/*.pkl"
)


@dataclass
class Found:
    """Paths of the artefacts in a run folder (nothing read yet)."""

    trainer_states: list[Path] = field(default_factory=list)
    events: list[Path] = field(default_factory=list)
    histories: list[Path] = field(default_factory=list)
    snapshots: list[Path] = field(default_factory=list)
    configs: list[Path] = field(default_factory=list)
    mlflow: list[tuple[str, str | None]] = field(default_factory=list)  # (tracking URI, run id)
    set_aside: list[str] = field(default_factory=list)  # files that look like artefacts but are not the run's

    @property
    def any(self) -> bool:
        return bool(self.trainer_states or self.events or self.histories or self.snapshots or self.mlflow)


def is_artefact(path: Path) -> bool:
    """Whether ``path`` is named like one of a run's artefacts (a file diagnosed as a run of its own)."""
    return (
        path.name == TRAINER_STATE
        or path.name.startswith(EVENTS_PREFIX)
        or path.suffix in SNAPSHOT_SUFFIXES
        or path.suffix in HISTORY_SUFFIXES
    )


def _latest_checkpoint(run_dir: Path) -> Path | None:
    found = []
    for p in run_dir.iterdir():
        m = _CHECKPOINT.match(p.name)
        if m and p.is_dir() and (p / TRAINER_STATE).is_file():
            found.append((int(m.group(1)), p))
    return max(found)[1] if found else None


def _sort_into(out: Found, p: Path, depth: int, root: Path) -> None:
    name = p.name
    if name in (TRAINER_STATE,) or name.startswith(EVENTS_PREFIX) or p.suffix in SNAPSHOT_SUFFIXES:
        if is_lfs_pointer(p):
            out.set_aside.append(f"{p.relative_to(root)} (a Git LFS pointer, not the file: git lfs pull)")
        elif name == TRAINER_STATE:
            out.trainer_states.append(p)
        elif name.startswith(EVENTS_PREFIX):
            out.events.append(p)
        else:
            out.snapshots.append(p)
    elif p.suffix in HISTORY_SUFFIXES:
        header = history_header(p)
        if header is not None and step_column(header) is not None:
            out.histories.append(p)
        elif is_lfs_pointer(p):
            out.set_aside.append(f"{p.relative_to(root)} (a Git LFS pointer, not the file: git lfs pull)")
        else:
            out.set_aside.append(f"{p.relative_to(root)} (no step column: not a logged history)")
    elif depth == 0 and p.suffix in (".yaml", ".yml", ".json") and name not in NOT_CONFIGS:
        out.configs.append(p)


def find(run_dir: Path) -> Found:
    """The artefacts under ``run_dir`` (its sub-folders to depth 3; hidden folders and checkpoints skipped,
    except the latest checkpoint's trainer_state.json; an MLflow store at the top or in ``mlruns/``)."""

    out = Found()
    run = mlflow_run_folder(run_dir)
    if run is not None:
        out.mlflow.append((run[0].resolve().as_uri(), run[1]))
        return out
    store = mlflow_store(run_dir)
    if store is not None:
        out.mlflow.append((store.resolve().as_uri(), None))
    if (run_dir / TRAINER_STATE).is_file() and not is_lfs_pointer(run_dir / TRAINER_STATE):
        out.trainer_states.append(run_dir / TRAINER_STATE)
    latest = _latest_checkpoint(run_dir)
    if latest is not None:
        out.trainer_states.append(latest / TRAINER_STATE)
    for here, dirs, files in os.walk(run_dir):
        depth = len(Path(here).relative_to(run_dir).parts)
        dirs[:] = sorted(
            d
            for d in dirs
            if depth < MAX_DEPTH
            and not d.startswith(".")
            and not _CHECKPOINT.match(d)
            and d not in _SKIP_DIRS
            and Path(here, d) != store
        )
        for name in sorted(files):
            p = Path(here) / name
            if depth == 0 and name == TRAINER_STATE:
                if is_lfs_pointer(p):
                    out.set_aside.append(f"{name} (a Git LFS pointer, not the file: git lfs pull)")
                continue
            _sort_into(out, p, depth, run_dir)
    return out


# -- trainer_state.json -------------------------------------------------------------------------------


def _number(path: Path, where: str, value: Any) -> float | None:
    """A logged value: a number, NaN/±inf written as a number or one of their spellings; None not logged."""
    if value is None:
        return None
    if isinstance(value, str):
        nf = NON_FINITE.get(value.strip().lower())
        if nf is not None:
            return nf
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DiagnoseError(f"{path}: {where}: expected a number, got {value!r}")
    return float(value)


def read_trainer_state(path: Path, is_series: Callable[[str], bool]) -> tuple[Logged, dict[str, Any]]:
    """Every numeric key of ``log_history`` by step, and the state's other keys. Entries that hold none of
    the series (a script's ``predict_*`` or ``test_*`` metrics appended after training, without a step) are
    skipped and counted; bad JSON, a missing or empty ``log_history``, or an entry that logs a series
    with no whole-number step is a :class:`DiagnoseError` naming the file."""

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
    points: dict[str, dict[int, float]] = {}
    reads: dict[str, bool] = {}  # each key seen: whether it is a series (a long log repeats a few keys)
    skipped = 0
    for i, entry in enumerate(history):
        if type(entry) is not dict:
            raise DiagnoseError(f"{path}: log_history[{i}]: expected an object, got {entry!r:.60}")
        values = {}
        for key, value in entry.items():
            read = reads.get(key)
            if read is None:
                read = reads[key] = key != "step" and is_series(key)
            if not read:
                continue
            kind = type(value)
            v = (
                float(value)
                if kind is float or kind is int
                else _number(path, f"log_history[{i}].{key}", value)
            )
            if v is not None:
                values[key] = v
        if not values:
            skipped += 1
            continue
        step = entry.get("step")
        if type(step) is not int or step < 0:
            if not any(classify(k) is not None for k in values):
                skipped += 1  # only loss-like metrics no rule reads (predict_loss, test_loss) and no step
                continue
            raise DiagnoseError(
                f"{path}: log_history[{i}].step: expected a whole number ≥ 0 (the entry logs "
                f"{next(iter(values))}), got {step!r}"
            )
        for key, v in values.items():
            into = points.get(key)
            if into is None:
                into = points[key] = {}
            into[step] = v
    names = set(reads) - {"step"}
    meta = {k: v for k, v in state.items() if k != "log_history"}
    meta["logged_entries"] = len(history)
    meta["skipped_entries"] = skipped
    return Logged("", HF_TRAINER, points, rows=len(history), skipped=skipped, names=names), meta


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


# -- trainer config ---------------------------------------------------------------------------------------


def scheduler_kwargs(data: dict[str, Any], where: str) -> dict[str, Any]:
    """A trainer config's ``lr_scheduler_kwargs``: {} when it sets none (transformers' defaults then apply,
    as in the run), a mapping as written, or the text of one (TrainingArguments accepts a JSON string; an
    MLflow param holds the dict's Python repr, read with ``ast.literal_eval``, which evaluates literals
    only); anything else is a :class:`DiagnoseError` naming ``where``."""
    raw = data.get("lr_scheduler_kwargs")
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            try:
                raw = ast.literal_eval(raw)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                pass
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        raise DiagnoseError(
            f"{where}: expected a mapping of the schedule's arguments (e.g. {{num_cycles: 2}}), "
            f"got {raw!r:.60}"
        )
    return raw


def read_config(path: Path) -> tuple[Schedule, tuple[str | None, str]]:
    """The schedule (with its ``lr_scheduler_kwargs``), ``max_grad_norm`` and precision
    (:func:`precision_of`) of a trainer config (axolotl YAML or TrainingArguments JSON), read as ``nbkit
    diagnose CONFIG`` reads it (bad input: file:line and key)."""
    data, lines = _read_trainer(path)
    fmt = _detect(path, data)
    values = trainer_values(path, fmt, data, lines)
    options = scheduler_kwargs(data, _where(path, lines, "lr_scheduler_kwargs"))
    return schedule_from_values(values, path.name, options), precision_of(values)


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


def precision_of(values: dict[str, Value]) -> tuple[str | None, str]:
    """("fp16" | "bf16" | "fp32" | None, where it was read) from a trainer's fp16 / bf16 settings; None
    for "auto" (decided at launch by the GPU)."""
    fp16, bf16 = values["fp16"], values["bf16"]
    for v, name in ((fp16, "fp16"), (bf16, "bf16")):
        if v.value == "auto":
            return None, v.text()
        if v.value is True:
            return name, v.text()
    if not fp16.set and not bf16.set:
        return "fp32", f"{fp16.where.split(' ')[0]}: fp16 and bf16 not set (the trainer's default: fp32)"
    return "fp32", f"{fp16.text()}, {bf16.text()}"


def _param_value(text: str) -> Any:
    """An MLflow param (always text) as the value TrainingArguments had: bool, None, a number, else text."""
    special = {"True": True, "False": False, "None": None}
    if text in special:
        return special[text]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


# -- the series --------------------------------------------------------------------------------------------


def _agg_rank(kind: str, agg: str) -> int:
    """Which of a name's aggregations to prefer: a training curve per step; an eval curve per evaluation
    (Lightning's _step variant of a validation metric is one value per validation batch)."""
    if kind == EVAL_LOSS:
        return {"": 0, "epoch": 0, "step": 1}[agg]
    return {"": 0, "step": 0, "epoch": 1}[agg]


def unread_loss(name: str, points: dict[int, float]) -> bool:
    """A logged loss no rule but the non-finite one reads: a loss-like name the pattern list does not read
    (a GAN's gen/disc losses), or a test loss logged too few times to be an eval curve."""
    if loss_like(name):
        return True
    c = classify(name)
    return c is not None and c.test and len(points) < TEST_MIN_POINTS


def choose(
    sources: list[Logged], overrides: Iterable[tuple[str, str]], notes: list[str]
) -> dict[str, Series]:
    """The run's curves keyed ``kind`` (``kind:set`` for each of several eval sets): each kind from the
    first source that logs it (``overrides``: the named series instead), with a note for the others."""

    curves: dict[str, Series] = {}
    named: dict[str, list[str]] = {}
    for kind, name in overrides:
        named.setdefault(kind, []).append(name)
    for kind in KINDS:
        if kind in named:
            picked = []
            for name in named[kind]:
                src = next((s for s in sources if s.points.get(name)), None)
                if src is None:
                    seen = sorted({n for s in sources for n in s.names})
                    raise DiagnoseError(
                        f"--series {kind}={name}: no artefact read logs {name!r} (logged: "
                        f"{', '.join(seen[:12])}{', …' if len(seen) > 12 else ''})"
                    )
                c = classify(name)
                eval_set = c.eval_set if c is not None and c.kind == kind else ""
                if kind == EVAL_LOSS and len(named[kind]) > 1 and not eval_set:
                    eval_set = name
                picked.append((src, name, eval_set))
        else:
            picked = []
            for src in sources:
                cands = [
                    (n, c)
                    for n, c in ((n, classify(n)) for n in src.points)
                    if c is not None and c.kind == kind and src.points[n]
                ]
                once = [n for n, c in cands if c.test and len(src.points[n]) < TEST_MIN_POINTS]
                if once:
                    notes.append(
                        f"{src.where}: {', '.join(once)} logged at fewer than {TEST_MIN_POINTS} steps: the "
                        "test split, evaluated after training, not an eval curve (not read)"
                    )
                    cands = [(n, c) for n, c in cands if n not in once]
                if not cands:
                    continue
                if picked:
                    notes.append(
                        f"{src.where} logs {KIND_WORDS[kind]} too "
                        f"({', '.join(sorted(n for n, _ in cands))}): "
                        f"{picked[0][0].where}'s is used"
                    )
                    continue
                # One series per eval set; the names of a set (or of the run's one eval loss: val_loss,
                # val_loss_epoch, loss/val, val/rmse_loss) are variants of it, and so are all the names of a
                # training curve.
                groups: dict[str, list] = {}
                for n, c in cands:
                    groups.setdefault(c.eval_set if kind == EVAL_LOSS else "", []).append((n, c))
                for _, members in sorted(groups.items()):
                    members.sort(
                        key=lambda nc: (
                            _agg_rank(kind, nc[1].agg),
                            bool(nc[1].detail),  # a typed name (mse_loss) may be a component of the loss
                            -len(src.points[nc[0]]),
                            nc[0],
                        )
                    )
                    best, c = members[0]
                    picked.append((src, best, c.eval_set))
                    if len(members) > 1:
                        notes.append(
                            f"{src.where}: {KIND_WORDS[kind]} read from {best}; also logged, not read: "
                            + ", ".join(n for n, _ in members[1:])
                        )
        evals = kind == EVAL_LOSS and len(picked) > 1
        for src, name, eval_set in picked:
            key = f"{kind}:{eval_set}" if evals or eval_set else kind
            curves[key] = series(
                kind,
                src.points[name],
                f"{src.where}: {name}",
                logged=name,
                eval_set=eval_set,
                convention=src.convention,
            )
    return curves


# -- the run ----------------------------------------------------------------------------------------------


@dataclass
class RunArtefacts:
    """Everything read from one run folder (or tracking store)."""

    path: Path
    curves: dict[str, Series]
    read: list[str]  # one line per artefact read
    notes: list[str]
    state: dict[str, Any] | None
    schedule: Schedule | None
    total_steps: int | None
    total_where: str
    snapshots: list[tuple[Path, dict[str, Any]]]
    precision: str | None = None  # "fp16", "bf16", "fp32"; None not known
    precision_where: str = ""
    unread: list[str] = field(default_factory=list)  # loss-like names the pattern list does not read
    others: list[Series] = field(default_factory=list)  # those names' series: checked for NaN, no other rule

    def rel(self, p: Path) -> str:
        try:
            return str(p.relative_to(self.path))
        except ValueError:
            return str(p)

    def of(self, kind: str) -> list[Series]:
        """The curves of one kind (every eval set of ``eval_loss``)."""
        return [s for s in self.curves.values() if s.kind == kind]


def _trainer_states(root: Path, states: list, read: list[str]) -> tuple[Logged | None, dict | None]:
    """The trainer_state.json that went furthest (the latest checkpoint's when the run stopped before
    save_state; the top level's on a tie), and a line per file read."""
    if not states:
        return None, None
    used, logged, meta = max(
        states, key=lambda st: (int(st[2].get("global_step") or 0), st[0] == root / TRAINER_STATE)
    )
    for path, _, m in states:
        skipped = (
            f"; {m['skipped_entries']} holding none of the series skipped" if m["skipped_entries"] else ""
        )
        read.append(
            f"{path.relative_to(root)}: {plural(m['logged_entries'], 'log entry', 'log entries')} to step "
            f"{m.get('global_step')}"
            + skipped
            + (
                " (used)"
                if path == used
                else " (not used: the other trainer_state.json went as far or further)"
            )
        )
    logged.where = str(used.relative_to(root))
    return logged, meta


def _event_sources(root: Path, events: list, read: list[str]) -> list[Logged]:
    """Every event file's scalars merged by tag (a resumed run re-logs steps: the later write wins), one
    source per run folder; tags in a folder named train / validation (Keras' layout) carry its name."""
    merged: dict[str, dict[str, dict[int, tuple[float, float]]]] = {}
    hf: set[str] = set()
    for path, scalars, args in events:
        where = path.relative_to(root)
        read.append(f"{where}: {len(scalars)} scalar tags" if scalars else f"{where}: no scalars")
        folder = path.parent
        split = folder.name.lower() in TRAIN_WORDS | EVAL_WORDS
        group = str((folder.parent if split else folder).relative_to(root))
        if args:
            hf.add(group)
        into_group = merged.setdefault(group, {})
        for tag, timed in scalars.items():
            name = f"{folder.name}/{tag}" if split else tag
            into = into_group.setdefault(name, {})
            for step, (wall, value) in timed.items():
                if step not in into or wall >= into[step][0]:
                    into[step] = (wall, value)
    out = []
    for group, tags in merged.items():
        folder = root / group
        convention = (
            HF_TRAINER if group in hf else LIGHTNING if (folder / "hparams.yaml").is_file() else TENSORBOARD
        )
        points = {tag: {s: v for s, (_, v) in timed.items()} for tag, timed in tags.items()}
        out.append(Logged(group if group != "." else "event files", convention, points))
    return out


def _history_sources(root: Path, histories: list[tuple[Path, Logged]], read: list[str]) -> list[Logged]:
    """Each history read; of Lightning's version_N/metrics.csv only the latest version is used."""

    def version(p: Path) -> int:
        m = re.search(r"version_(\d+)", str(p))
        return int(m.group(1)) if m else -1

    lightning = [(p, lg) for p, lg in histories if p.name == METRICS_CSV and version(p) >= 0]
    latest = max(lightning, key=lambda x: (version(x[0]), str(x[0])))[0] if lightning else None
    out = []
    for p, lg in histories:
        where = p.relative_to(root)
        if latest is not None and (p, lg) in lightning and p != latest:
            read.append(f"{where}: read, not used (an earlier version than {latest.relative_to(root)})")
            continue
        skipped = f"; {lg.skipped} holding none of the series skipped" if lg.skipped else ""
        extra = "".join(f"; {n}" for n in lg.notes)
        read.append(f"{where}: {lg.rows} rows, columns {', '.join(sorted(lg.names))}{skipped}{extra}")
        lg.where = str(where)
        out.append(lg)
    return out


def read_run(
    run_dir: str | Path,
    config: str | Path | None = None,
    *,
    series_names: Iterable[tuple[str, str]] = (),
    run_id: str | None = None,
) -> RunArtefacts:
    """Find and read every artefact of the run in ``run_dir`` (a folder, one artefact file read alone, or
    an MLflow tracking URI); ``series_names``: ``(kind, name)`` pairs naming series the pattern list would
    not read (``--series``); ``run_id``: the run of an MLflow store. Bad input anywhere is a DiagnoseError."""

    overrides = list(series_names)
    named = {name for _, name in overrides}

    def is_series(name: str) -> bool:
        # loss-like names too: no rule but the non-finite one reads them, and it reads every loss logged
        return name in named or classify(name) is not None or loss_like(name)

    text = str(run_dir)
    if is_tracking_uri(text):
        root, found = Path("."), Found(mlflow=[(text, run_id)])
    else:
        root = Path(run_dir)
        if root.is_file() and is_artefact(root):
            found = Found()
            _sort_into(found, root, 1, root.parent)
            root = root.parent
        elif not root.is_dir():
            raise DiagnoseError(f"{root}: not a folder; expected a finished run's output folder")
        else:
            found = find(root)
        if run_id is not None:
            found.mlflow = [(uri, run_id) for uri, _ in found.mlflow]
            if not found.mlflow:
                raise DiagnoseError(f"--run-id {run_id}: {root} holds no MLflow tracking store")
    if not found.any:
        extra = (
            " (training_args.bin is a pickle and is never read)"
            if root.is_dir() and (root / "training_args.bin").exists()
            else ""
        )
        aside = f"; set aside: {'; '.join(found.set_aside[:5])}" if found.set_aside else ""
        raise DiagnoseError(
            f"{root}: is a directory with no training-run artefact ({NO_ARTEFACT}){extra}{aside}; expected a "
            "trainer config file or a finished run's folder"
        )

    def rel(p: Path) -> str:
        return str(p.relative_to(root))

    read: list[str] = []
    notes: list[str] = []
    # Read everything first: a bad artefact stops the diagnosis whatever the others hold.
    states = []
    for p in found.trainer_states:
        logged, meta = read_trainer_state(p, is_series)
        states.append((p, logged, meta))
    events = []
    for p in found.events:
        scalars, args = read_events(p)
        events.append((p, scalars, args))
    histories = [(p, read_history(p, rel(p), is_series)) for p in found.histories]
    stores = [read_mlflow(uri, rid, is_series) for uri, rid in found.mlflow]
    snapshots = [(p, read_snapshot(p)) for p in found.snapshots]
    schedule, precision = None, (None, "")
    if config is not None:
        schedule, precision = read_config(Path(config))

    sources: list[Logged] = []
    state_log, state = _trainer_states(root, states, read)
    if state_log is not None:
        sources.append(state_log)
    sources += _event_sources(root, events, read)
    sources += _history_sources(root, histories, read)
    for logged, _ in stores:
        read.append(f"{logged.where}: {len(logged.points)} metrics, {logged.rows} logged values (MLflow)")
        notes += [f"{logged.where}: {n}" for n in logged.notes]
        sources.append(logged)
    for p, snap in snapshots:
        read.append(f"{rel(p)}: memory snapshot, {len(snap['segments'])} segments")
    notes += [f"set aside: {x}" for x in found.set_aside]
    curves = choose(sources, overrides, notes)
    if sources and not curves:
        logged = sorted({n for src in sources for n in src.names})
        notes.append(
            f"no series recognised among {', '.join(logged[:12])}{', …' if len(logged) > 12 else ''}: name "
            "them with --series KIND=NAME (KIND: loss, eval_loss, learning_rate, grad_norm)"
        )
    used = {s.logged for s in curves.values()}
    others = [
        series(OTHER_LOSS, src.points[n], f"{src.where}: {n}", logged=n, convention=src.convention)
        for src in sources
        for n in sorted(src.points)
        if n not in named and src.points[n] and unread_loss(n, src.points[n])
    ]
    unread = sorted(
        {n for src in sources for n in src.names if loss_like(n) and n not in used and n not in named}
    )

    if schedule is None:
        beside = _config_beside(found.configs, notes)
        if beside is not None:
            schedule, precision = read_config(beside)
            read.append(f"{rel(beside)}: trainer config beside the run (schedule, max_grad_norm, precision)")
    recorded: list[tuple[str, dict[str, Any]]] = []
    for p, _, args in events:
        data = read_args_text(args) if args else None
        if data is not None:
            recorded.append((f"{rel(p)} (the TrainingArguments the Trainer recorded)", data))
    for logged, params in stores:
        if "lr_scheduler_type" in params:
            data = {k: _param_value(v) for k, v in params.items()}
            recorded.append((f"{logged.where} params (the TrainingArguments the Trainer recorded)", data))
    if schedule is None:
        for where, data in recorded:
            try:
                values = trainer_values(Path(where.split(" ")[0]), "trl", data, {})
            except DiagnoseError as exc:
                notes.append(f"{where}: not used ({exc})")
                continue
            try:
                options: dict[str, Any] | None = scheduler_kwargs(data, f"{where} lr_scheduler_kwargs")
            except DiagnoseError as exc:
                notes.append(f"{exc}: read as not given")
                options = None
            schedule = schedule_from_values(values, where, options)
            precision = precision_of(values)
            break
    total, total_where = None, ""
    if state is not None and isinstance(state.get("max_steps"), int) and state["max_steps"] > 0:
        total, total_where = state["max_steps"], "trainer_state.json max_steps"
    elif schedule is not None and schedule.max_steps > 0:
        total, total_where = schedule.max_steps, f"{schedule.source} max_steps"
    if root.is_dir() and "training_args.bin" in os.listdir(root):
        notes.append("training_args.bin is a pickle: never read")
    return RunArtefacts(
        path=root if not is_tracking_uri(text) else Path(text),
        curves=curves,
        read=read,
        notes=notes,
        state=state,
        schedule=schedule,
        total_steps=total,
        total_where=total_where,
        snapshots=snapshots,
        precision=precision[0],
        precision_where=precision[1],
        unread=unread,
        others=others,
    )
