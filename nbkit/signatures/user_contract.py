"""Check *your* contract: a DSPy signature of your own, your dev set, a stated metric, on your LM.

* ``SIGNATURE`` — a DSPy string signature (``"question -> answer"``, ``"question: str -> answer: int"``)
  or a ``module:Class`` path to a ``dspy.Signature`` subclass.
* ``DEV_SET`` — a JSONL file, one example per line, with every input and output field of the signature
  (extra keys are ignored: a dev set often carries ids or notes). A row lacking a field is an error naming
  the file, the line and the field.
* ``METRIC`` — ``exact`` (normalised equality of every output field), ``contains`` (each gold output
  appears in the answer, case-insensitive) or a ``module:function`` taking ``(example, prediction,
  trace=None)`` like any DSPy metric.

The same accounting as the medical example: contract violations by kind (``parse_error``,
``missing_field``) per adapter, and modules compared question by question.
"""

from __future__ import annotations

import importlib
import re
import time
from pathlib import Path
from typing import Any

from nbkit.errors import UsageError
from nbkit.signatures.cases import json_objects
from nbkit.signatures.contracts import MISSING_FIELD, PARSE_ERROR, check_contract
from nbkit.signatures.evaluation import server_running

METRICS = ("exact", "contains")


def _import(spec: str, what: str):
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"{what} {spec!r}: expected 'module:name'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"{what} {spec!r}: cannot import module {module_name!r} ({exc})") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UsageError(f"{what} {spec!r}: module {module_name!r} has no {attr!r}") from None


def load_signature(spec: str):
    """A ``dspy.Signature`` class from a string signature or a ``module:Class`` path."""
    import dspy

    spec = (spec or "").strip()
    if not spec:
        raise UsageError(
            "SIGNATURE is empty; expected a DSPy string signature like 'question -> answer' or 'module:Class'"
        )
    if "->" in spec or ":" not in spec:
        try:
            return dspy.Signature(spec)
        except Exception as exc:  # DSPy raises ValueError/SyntaxError/TypeError for a malformed string
            raise UsageError(f"SIGNATURE {spec!r} is not a DSPy string signature: {exc}") from None
    sig = _import(spec, "SIGNATURE")
    if not (isinstance(sig, type) and issubclass(sig, dspy.Signature)):
        raise UsageError(f"SIGNATURE {spec!r} is not a dspy.Signature subclass (got {type(sig).__name__})")
    return sig


def load_dev_set(path: str | Path, signature) -> list:
    """``dspy.Example``s from a JSONL file holding every field of ``signature``; each tagged with its line."""
    import dspy

    path = Path(path)
    fields = [*signature.input_fields, *signature.output_fields]
    examples = []
    for line_no, row in json_objects(path):
        missing = [f for f in fields if f not in row]
        if missing:
            raise UsageError(
                f"{path}:{line_no}: missing field {missing[0]!r} of the signature (fields {fields})"
            )
        values = {f: row[f] for f in fields}
        examples.append(dspy.Example(**values, line=line_no).with_inputs(*signature.input_fields))
    if not examples:
        raise UsageError(f"{path}: no examples (the file is empty)")
    return examples


def load_contract(signature: str, dev_set: str | Path, metric: str):
    """``(signature class, examples, metric)`` of a user's contract, or None when neither SIGNATURE nor
    DEV_SET is given. One of the two without the other is an error (never silently skipped); so is every
    problem :func:`load_signature`, :func:`load_dev_set` and :func:`make_metric` name."""
    signature, dev_set = (signature or "").strip(), str(dev_set or "").strip()
    if not signature and not dev_set:
        return None
    if not dev_set:
        raise UsageError(
            f"SIGNATURE {signature!r} is set but DEV_SET is empty; give the JSONL file of examples to score "
            "it on"
        )
    if not signature:
        raise UsageError(
            f"DEV_SET {dev_set!r} is set but SIGNATURE is empty; give its DSPy signature, e.g. 'question -> "
            "answer'"
        )
    sig = load_signature(signature)
    return sig, load_dev_set(dev_set, sig), make_metric(metric, sig)


def _norm(value: Any) -> str:
    return re.sub(r"\s+", " ", str(value).strip().lower()).strip(" .")


def make_metric(spec: str, signature):
    """The metric named by ``spec``: exact, contains, or module:function."""
    outputs = list(signature.output_fields)
    if spec == "exact":

        def exact(example, prediction, trace=None):
            return float(all(_norm(prediction.get(f, "")) == _norm(example[f]) for f in outputs))

        return exact
    if spec == "contains":

        def contains(example, prediction, trace=None):
            return float(all(_norm(example[f]) in _norm(prediction.get(f, "")) for f in outputs))

        return contains
    if ":" in (spec or ""):
        fn = _import(spec, "METRIC")
        if not callable(fn):
            raise UsageError(f"METRIC {spec!r} is not callable")
        return fn
    raise UsageError(f"METRIC {spec!r}: expected one of {METRICS} or 'module:function'")


def evaluate(
    program, examples, *, metric, lm, adapter, output_fields, num_threads: int = 1, server=None
) -> dict[str, Any]:
    """Run ``program`` on every example; per-question score and structural contract violations."""
    import threading

    import dspy
    from dspy.utils.parallelizer import ParallelExecutor

    server_down = threading.Event()

    def run_one(example):
        if server_down.is_set():
            return None
        outputs, error = None, None
        try:
            pred = program(**example.inputs())
            outputs = {k: v for k, v in pred.items()}
        except (
            Exception
        ) as exc:  # an unusable answer is recorded as a violation, a dead server stops the run (once, below)
            if server is not None and not server_running(server):
                server_down.set()
                return None
            error = exc
        violations = [
            v.kind
            for v in check_contract(outputs, error, output_fields=output_fields)
            if v.kind in (PARSE_ERROR, MISSING_FIELD)
        ]
        score = (
            float(metric(example, dspy.Prediction(**outputs)))
            if outputs is not None and not violations
            else 0.0
        )
        return {"key": f"line {example.line}", "score": score, "violations": violations}

    start = time.perf_counter()
    with dspy.context(lm=lm, adapter=adapter):
        records = ParallelExecutor(
            num_threads=num_threads, disable_progress_bar=True, max_errors=len(examples) + 1
        ).execute(run_one, list(examples))
    if any(r is None for r in records):
        if server is not None:
            server.ensure_running()  # a dead server: its name, exit code and log
        raise RuntimeError("some examples failed outside the model (see the log above)")
    return {"records": records, "seconds": time.perf_counter() - start}


def questions(records: list[dict]) -> dict[str, list]:
    """The per-question shape ``claims.paired`` reads (``hit`` is the metric's score)."""
    return {
        "keys": [r["key"] for r in records],
        "hit": [r["score"] for r in records],
        "clean": [0.0 if r["violations"] else 1.0 for r in records],
        "structural": [1.0 if r["violations"] else 0.0 for r in records],
    }
