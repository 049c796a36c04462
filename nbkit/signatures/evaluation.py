"""Score programs on labelled examples and account for every contract failure.

* :func:`make_metric` — the DSPy metric (``trace=None`` default): 1.0 when one of the top-3 predicted
  conditions names an acceptable diagnosis. While an optimizer bootstraps (``trace`` given) a demo must also
  honour the whole contract, so compiled demos teach the format, not just the answer.
* :func:`evaluate_program` — runs a program over examples with DSPy's thread pool (``ParallelExecutor``),
  one record per example: score, violations by kind, the raw LM text when parsing failed, tokens.
* :func:`violation_table` / :func:`score_table` — the per-adapter / per-module summaries the notebook shows.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from nbkit.signatures.cases import KnowledgeBase, condition_matches
from nbkit.signatures.contracts import (
    CONFIDENCE_NOT_NUMERIC,
    CONFIDENCE_OUT_OF_RANGE,
    MISSING_FIELD,
    PARSE_ERROR,
    REASONING_TOO_LONG,
    VIOLATION_KINDS,
    check_contract,
    confidence_kinds,
    diagnoses_of,
)
from nbkit.signatures.metrics import AnswerBounds, Outcomes, ViolationCounts

ADAPTERS = ("chat", "json", "json_grammar")
STRUCTURAL = {PARSE_ERROR, MISSING_FIELD}  # the answer's shape is broken: nothing to score
BOUNDS = {REASONING_TOO_LONG, CONFIDENCE_OUT_OF_RANGE}  # bounds written only in the prompt (desc)


def make_adapter(name: str):
    """The DSPy adapter for ``name``; ``json_grammar`` is JSONAdapter plus a server-side schema (the context's
    ``lm_for`` sends it)."""
    import dspy

    if name in ("json", "json_grammar"):
        return dspy.JSONAdapter()
    if name == "chat":
        # Fallback off: a ChatAdapter parse failure must show as itself, not be retried as JSON.
        return dspy.ChatAdapter(use_json_adapter_fallback=False)
    raise ValueError(f"unknown adapter {name!r}; expected one of {ADAPTERS}")


def prediction_outputs(prediction: Any) -> dict[str, Any]:
    if prediction is None:
        return {}
    if hasattr(prediction, "items"):
        return {k: v for k, v in prediction.items()}
    return dict(prediction)


def top_conditions(outputs: dict[str, Any], n: int = 3) -> list[str]:
    return [str(d.get("condition") or "") for d in diagnoses_of(outputs)[:n]]


def is_hit(outputs: dict[str, Any], acceptable: list[str], kb: KnowledgeBase, n: int = 3) -> bool:
    return any(
        condition_matches(name, cond, kb) for name in top_conditions(outputs, n) for cond in acceptable
    )


def mentions_expected(text: str, acceptable: list[str], kb: KnowledgeBase) -> bool:
    """Does the answer text name an acceptable diagnosis anywhere, in any format? Separates "the model
    knows" from "the model honoured the contract" (a parse failure can still contain the right name)."""
    return any(condition_matches(text, cond, kb) for cond in acceptable)


def make_metric(kb: KnowledgeBase, output_fields=("diagnoses", "reasoning")):
    """DSPy metric: hit@3 as a float for evaluation; hit and contract-clean (bool) while bootstrapping."""

    def diagnosis_metric(example, prediction, trace=None):
        outputs = prediction_outputs(prediction)
        hit = is_hit(outputs, list(example.conditions), kb)
        if trace is None:
            return float(hit)
        return hit and not check_contract(outputs, output_fields=output_fields)

    return diagnosis_metric


@dataclass
class EvalResult:
    label: str
    records: list[dict[str, Any]]
    seconds: float
    calls: int
    completion_tokens: int
    info: dict = field(default_factory=dict)

    def frame(self):
        import pandas as pd

        return pd.DataFrame(self.records)

    @property
    def score(self) -> float:
        return _mean([r["score"] for r in self.records])

    def score_by_slice(self) -> dict[str, float]:
        out = {}
        for slice_name in ("standard", "colloquial"):
            vals = [r["score"] for r in self.records if r["slice"] == slice_name]
            if vals:
                out[slice_name] = _mean(vals)
        return out

    @property
    def mention_rate(self) -> float:
        """Share of answers naming an acceptable diagnosis anywhere in the text (format ignored)."""
        return _mean([r.get("mentions_expected", 0.0) for r in self.records])

    @property
    def violation_rate(self) -> float:
        """Share of examples with at least one contract violation."""
        return _mean([1.0 if r["violations"] else 0.0 for r in self.records])

    def violation_counts(self) -> ViolationCounts:
        """Contract violations by kind over every answer."""
        counts = dict.fromkeys(VIOLATION_KINDS, 0)
        for r in self.records:
            for kind in r["violations"]:
                counts[kind] = counts.get(kind, 0) + 1
        return ViolationCounts(**counts)

    def outcomes(self) -> Outcomes:
        """Every answer, question by question (keyed ``case_id:slice``, so two programs pair up question by
        question and the two phrasings of a case group into one case): hit@3, no contract violation, a
        structural failure, the prompt-only bounds a parsed answer breaks, its diagnosis items, whether
        an item's confidence is not a number, and how many confidence values it gives as numbers and as
        words (the last five only for parsed answers)."""
        structural = [bool(STRUCTURAL & set(r["violations"])) for r in self.records]
        parsed = list(zip(self.records, structural, strict=True))
        return Outcomes(
            keys=tuple(f"{r['case_id']}:{r['slice']}" for r in self.records),
            hit=tuple(float(r["score"]) for r in self.records),
            clean=tuple(0.0 if r["violations"] else 1.0 for r in self.records),
            structural=tuple(1.0 if s else 0.0 for s in structural),
            bound_breaches=tuple(
                () if s else tuple(k for k in r["violations"] if k in BOUNDS) for r, s in parsed
            ),
            items=tuple(0 if s else int(r.get("items", 0)) for r, s in parsed),
            not_numeric=tuple(
                0.0 if s else float(CONFIDENCE_NOT_NUMERIC in r["violations"]) for r, s in parsed
            ),
            confidence_numbers=tuple(0 if s else r.get("confidence_kinds", (0, 0))[0] for r, s in parsed),
            confidence_words=tuple(0 if s else r.get("confidence_kinds", (0, 0))[1] for r, s in parsed),
        )

    def bounds(self) -> AnswerBounds:
        """Breaches of the prompt-only bounds among *parsed* answers (a parse failure has no bounds to
        breach)."""
        parsed = [r for r in self.records if not STRUCTURAL & set(r["violations"])]
        return AnswerBounds(
            parsed_answers=len(parsed),
            diagnosis_items=sum(int(r.get("items", 0)) for r in parsed),
            answers_over_bounds=sum(1 for r in parsed if BOUNDS & set(r["violations"])),
            reasoning_over_50_words=sum(r["violations"].count(REASONING_TOO_LONG) for r in parsed),
            confidence_out_of_range=sum(r["violations"].count(CONFIDENCE_OUT_OF_RANGE) for r in parsed),
            confidence_not_numeric=sum(r["violations"].count(CONFIDENCE_NOT_NUMERIC) for r in parsed),
        )

    @property
    def tokens_per_s(self) -> float:
        return (
            self.completion_tokens / self.seconds
            if self.seconds > 0 and self.completion_tokens
            else float("nan")
        )


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def _usage_tokens(entry: dict) -> int:
    usage = entry.get("usage") or {}
    value = (
        usage.get("completion_tokens")
        if isinstance(usage, dict)
        else getattr(usage, "completion_tokens", None)
    )
    return int(value or 0)


def evaluate_program(
    program,
    examples,
    *,
    lm,
    kb: KnowledgeBase,
    adapter=None,
    label: str = "",
    num_threads: int = 1,
    output_fields=("diagnoses", "reasoning"),
    progress: bool = True,
    server=None,
) -> EvalResult:
    """Run ``program`` on every example under ``lm``/``adapter``; never raises for a bad answer, only records
    it.

    ``num_threads`` requests are in flight at once (a batching server needs as many as it has slots).
    ``server`` (a LocalLMServer or pool) is checked after a failed call: when it has died, the remaining
    examples are not sent, and the run stops with one ``LMServerError`` naming the server and its log,
    instead of recording dozens of connection errors as model failures.
    """
    import threading

    import dspy
    from dspy.utils.parallelizer import ParallelExecutor

    if not examples:
        raise ValueError(f"evaluate_program({label!r}): no examples to evaluate")
    adapter = adapter or dspy.ChatAdapter(use_json_adapter_fallback=False)
    history_before = len(lm.history)
    server_down = threading.Event()

    def run_one(example):
        if server_down.is_set():
            return None  # the server died: nothing more is sent, the error is raised once below
        start = time.perf_counter()
        outputs, error = None, None
        try:
            outputs = prediction_outputs(program(**example.inputs()))
        except dspy.utils.exceptions.AdapterParseError as exc:
            error = exc
        except Exception as exc:
            if server is not None and not server_running(server):
                server_down.set()
                return None
            error = exc
            if not _is_model_output_error(exc):
                raise
        violations = check_contract(outputs, error, output_fields=output_fields)
        answer_text = (getattr(error, "lm_response", None) or "") if error is not None else str(outputs)
        return {
            "case_id": example.case_id,
            "slice": example.slice,
            "symptoms": example.symptoms,
            "expected": list(example.conditions),
            "predicted": top_conditions(outputs or {}),
            "score": float(is_hit(outputs or {}, list(example.conditions), kb)),
            "mentions_expected": float(mentions_expected(answer_text, list(example.conditions), kb)),
            "items": len(diagnoses_of(outputs or {})),
            "confidence_kinds": confidence_kinds(outputs or {}),
            "violations": [v.kind for v in violations],
            "violation_details": [v.detail for v in violations],
            "raw": (getattr(error, "lm_response", None) or "")[:600] if error is not None else "",
            "seconds": time.perf_counter() - start,
        }

    start = time.perf_counter()
    with dspy.context(lm=lm, adapter=adapter):
        executor = ParallelExecutor(
            num_threads=num_threads,
            disable_progress_bar=not progress,
            max_errors=len(examples) + 1,
            timeout=600,
        )
        records = executor.execute(run_one, list(examples))
    seconds = time.perf_counter() - start
    missing = [i for i, r in enumerate(records) if r is None]
    if missing and server is not None:
        # a crashed server: one error with its name, exit code and log, not a generic count
        server.ensure_running()
    if missing:
        raise RuntimeError(
            f"evaluate_program({label!r}): {len(missing)} of {len(records)} examples failed outside the "
            "model (see the log above)"
        )
    new_entries = lm.history[history_before:]
    tokens = sum(_usage_tokens(e) for e in new_entries)
    return EvalResult(
        label,
        records,
        seconds,
        len(new_entries),
        tokens,
        {"num_threads": num_threads, "adapter": type(adapter).__name__},
    )


def server_running(server) -> bool:
    """False when ``server`` (or a server of a pool) has stopped: its ``ensure_running`` raises."""
    try:
        server.ensure_running()
    except Exception:
        return False
    return True


def _is_model_output_error(exc: Exception) -> bool:
    """Errors that mean "the model's answer was unusable", as opposed to a bug or a dead server."""
    name = type(exc).__name__
    return name in {"AdapterParseError", "ValidationError", "JSONDecodeError", "ValueError"}


def score_table(results: dict[str, EvalResult]):
    """One row per labelled result: overall and per-slice hit@3, violation rate, tokens/s."""
    import pandas as pd

    rows = []
    for label, res in results.items():
        by_slice = res.score_by_slice()
        rows.append(
            {
                "program": label,
                "n": len(res.records),
                "hit@3": res.score,
                "hit@3 standard": by_slice.get("standard"),
                "hit@3 colloquial": by_slice.get("colloquial"),
                "mentions expected (any format)": res.mention_rate,
                "contract violation rate": res.violation_rate,
                "calls": res.calls,
                "seconds": res.seconds,
                "tokens/s": res.tokens_per_s,
            }
        )
    return pd.DataFrame(rows)


def violation_table(results: dict[str, EvalResult]):
    """Violations by kind (rows) for each labelled result (columns)."""
    import pandas as pd

    return pd.DataFrame({label: dataclasses.asdict(res.violation_counts()) for label, res in results.items()})


def violation_examples(result: EvalResult, per_kind: int = 1) -> list[dict[str, Any]]:
    """A few concrete failures per kind: the input, what broke, and the raw LM text."""
    shown: dict[str, int] = {}
    out = []
    for r in result.records:
        for kind, detail in zip(r["violations"], r["violation_details"], strict=True):
            if shown.get(kind, 0) >= per_kind:
                continue
            shown[kind] = shown.get(kind, 0) + 1
            out.append(
                {
                    "kind": kind,
                    "case": r["case_id"],
                    "slice": r["slice"],
                    "detail": detail,
                    "raw LM text": r["raw"][:300],
                }
            )
    return out
