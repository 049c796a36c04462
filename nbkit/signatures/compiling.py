"""Compile programs with DSPy optimizers against a real validation set, and the colloquial-mix experiment.

* ``BootstrapFewShot``: runs a teacher (the student with labelled demos) on the compile set and keeps the
  traces the metric accepts (with ``trace`` set, our metric also demands a clean contract) as demos, topped
  up with labelled demos to ``max_labeled_demos``.
* ``BootstrapFewShotWithRandomSearch``: several such candidates, each scored on the *validation* set
  (never the compile set); the zero-shot candidate is skipped because the notebook already measured it.

BootstrapFewShot's teacher pass asks the LM one example at a time, which leaves a batching server idle.
With ``num_threads > 1`` (and the LM's cache on) each bootstrap is preceded by :func:`prefetch_teacher_calls`:
the same teacher requests for every compile example, sent at once, so the sequential pass that follows is
answered from the in-run cache — the same requests, hence the same demos and the same compiled program.

The field notes' claim — compiled on standard questions only, a program does much worse on real users'
wording; remedy: ≥ 10 % colloquial examples in the compile set — is :func:`mix_experiment`: the same student
compiled on sets that differ only in the share of colloquial phrasings, scored per slice on the dev set.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from nbkit.signatures.cases import compile_mix
from nbkit.signatures.evaluation import evaluate_program

OPTIMIZERS = ("bootstrap", "random_search")


def _quiet():
    # DSPy's optimizers print per-candidate chatter; the notebook reports the numbers itself.
    return contextlib.redirect_stdout(io.StringIO())


def _light_copy(module):
    """A copy of ``module`` whose sub-modules and predictors are copies (demos lists included), sharing
    everything else (a retriever's index or encoder): enough to change demos without touching ``module``."""
    import copy

    import dspy

    clone = copy.copy(module)
    for attr, value in vars(module).items():
        if isinstance(value, dspy.BaseModule):
            setattr(clone, attr, _light_copy(value))
    if isinstance(module, dspy.Predict):
        clone.demos = list(module.demos)
    return clone


def prefetch_teacher_calls(bootstrap, num_threads: int) -> int:
    """Send a prepared BootstrapFewShot's round-0 teacher requests for its whole compile set concurrently.

    ``BootstrapFewShot._bootstrap_one_example`` runs, per example, the teacher with that example left out of
    its demos, under ``dspy.context(trace=[], **teacher_settings)``. This does exactly that for
    every example at once (on light copies of the teacher, so its demos are never touched), discarding the
    answers: the LM's cache keeps them, and the sequential pass then finds each request answered. Failures
    are ignored here — the sequential pass meets, and counts, them again. Returns how many examples ran.
    Only the first round is prefetched (later rounds change the temperature and depend on the first).
    """
    import logging

    import dspy
    from dspy.utils.parallelizer import ParallelExecutor

    lm = dspy.settings.lm
    trainset = list(getattr(bootstrap, "trainset", None) or [])
    if num_threads < 2 or len(trainset) < 2 or lm is None or not getattr(lm, "cache", False):
        return 0
    teacher, settings = bootstrap.teacher, dict(getattr(bootstrap, "teacher_settings", None) or {})

    def one(example):
        clone = _light_copy(teacher)
        with dspy.context(trace=[], **settings):
            for _name, predictor in clone.named_predictors():
                predictor.demos = [x for x in predictor.demos if x != example]
            with contextlib.suppress(Exception):
                clone(**example.inputs())
        return True

    quiet = logging.getLogger("dspy")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # a parse failure is logged by the sequential pass, once
    try:
        done = ParallelExecutor(
            num_threads=num_threads, disable_progress_bar=True, max_errors=len(trainset) + 1
        ).execute(one, trainset)
    finally:
        quiet.setLevel(level)
    return sum(1 for d in done if d)


@contextlib.contextmanager
def concurrent_teacher_pass(num_threads: int):
    """While active, every BootstrapFewShot (also the ones random search builds) prefetches its teacher
    requests."""
    from dspy.teleprompt import bootstrap, random_search

    original = bootstrap.BootstrapFewShot

    class PrefetchingBootstrapFewShot(original):
        def _bootstrap(self, *args, **kwargs):
            prefetch_teacher_calls(self, num_threads)
            return super()._bootstrap(*args, **kwargs)

    random_search.BootstrapFewShot = PrefetchingBootstrapFewShot
    try:
        yield PrefetchingBootstrapFewShot
    finally:
        random_search.BootstrapFewShot = original


def compile_program(
    optimizer: str,
    student,
    trainset,
    *,
    metric,
    lm,
    adapter=None,
    valset=None,
    max_demos: int = 2,
    num_candidates: int = 1,
    num_threads: int = 1,
):
    """Compile ``student`` (a fresh copy is compiled; ``student`` itself is untouched).

    ``num_threads`` requests at once: random search's candidate scoring, and every bootstrap's teacher
    pass (prefetched, see :func:`prefetch_teacher_calls`; 1 = DSPy's own sequential pass only).
    """
    import dspy
    from dspy.teleprompt import BootstrapFewShotWithRandomSearch

    if not trainset:
        raise ValueError("compile_program: empty compile set")
    adapter = adapter or dspy.ChatAdapter(use_json_adapter_fallback=False)
    with (
        dspy.context(lm=lm, adapter=adapter),
        _quiet(),
        concurrent_teacher_pass(num_threads) as BootstrapFewShot,
    ):  # noqa: N806
        if optimizer == "bootstrap":
            opt = BootstrapFewShot(
                metric=metric,
                max_bootstrapped_demos=max_demos,
                max_labeled_demos=max_demos,
                max_rounds=1,
                max_errors=len(trainset) + 1,
            )
            program = opt.compile(student.reset_copy(), trainset=list(trainset))
        elif optimizer == "random_search":
            if not valset:
                raise ValueError("random_search needs a validation set distinct from the compile set")
            opt = BootstrapFewShotWithRandomSearch(
                metric=metric,
                max_bootstrapped_demos=max_demos,
                max_labeled_demos=max_demos,
                num_candidate_programs=num_candidates,
                num_threads=num_threads,
                max_errors=10 * (len(trainset) + len(valset)),
            )
            restrict = [-2, -1, *range(num_candidates)]  # -3 (zero-shot) is the notebook's baseline already
            program = opt.compile(
                student.reset_copy(), trainset=list(trainset), valset=list(valset), restrict=restrict
            )
        else:
            raise ValueError(f"unknown optimizer {optimizer!r}; expected one of {OPTIMIZERS}")
    return program


def demo_counts(program) -> dict[str, int]:
    """Demos in a compiled program: bootstrapped (model traces the metric accepted) vs labelled (gold)."""
    boot = labeled = 0
    for _name, predictor in program.named_predictors():
        for demo in predictor.demos:
            if demo.get("augmented"):
                boot += 1
            else:
                labeled += 1
    return {"bootstrapped": boot, "labeled": labeled}


def candidate_scores(program) -> list[dict[str, Any]]:
    """Validation scores of RandomSearch's candidates (seed -2: labelled only, -1: unshuffled bootstrap)."""
    return [{"seed": c["seed"], "val score": c["score"]} for c in getattr(program, "candidate_programs", [])]


def save_program(program, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    program.save(str(path))
    return path


def load_program(fresh_program, path: str | Path):
    """Load demos/state saved by :func:`save_program` into ``fresh_program`` (same module type)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no saved program at {path}")
    try:
        json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path}: not a saved DSPy program (invalid JSON: {exc.msg} at line {exc.lineno})"
        ) from None
    fresh_program.load(str(path))
    return fresh_program


def mix_experiment(
    make_student,
    train_cases,
    dev_examples,
    *,
    mixes=(0.0, 0.125, 0.5),
    size: int = 8,
    metric,
    lm,
    kb,
    adapter=None,
    max_demos: int = 2,
    seed: int = 0,
    num_threads: int = 1,
    server=None,
    progress=None,
):
    """Compile one student per colloquial share in ``mixes`` and score each on the dev set by slice.

    Returns a list of dicts (one per mix) with scores by slice, the compile set's actual composition and
    its demo counts. ``progress`` is called as ``progress(mix, result)`` after each mix (live plots).
    """
    rows = []
    for mix in mixes:
        compile_set = compile_mix(train_cases, size, mix, seed=seed)
        n_coll = sum(1 for e in compile_set if e.slice == "colloquial")
        program = compile_program(
            "bootstrap",
            make_student(),
            compile_set,
            metric=metric,
            lm=lm,
            adapter=adapter,
            max_demos=max_demos,
            num_threads=num_threads,
        )
        result = evaluate_program(
            program,
            dev_examples,
            lm=lm,
            kb=kb,
            adapter=adapter,
            label=f"mix {mix:.0%}",
            num_threads=num_threads,
            server=server,
            progress=False,
        )
        by_slice = result.score_by_slice()
        demos = demo_counts(program)
        demo_slices = [d.get("slice") for _n, p in program.named_predictors() for d in p.demos]
        row = {
            "colloquial share": mix,
            "compile set": len(compile_set),
            "colloquial in compile set": n_coll,
            "demos bootstrapped": demos["bootstrapped"],
            "demos labeled": demos["labeled"],
            "colloquial demos": sum(1 for s in demo_slices if s == "colloquial"),
            "hit@3 standard": by_slice.get("standard"),
            "hit@3 colloquial": by_slice.get("colloquial"),
            "contract violation rate": result.violation_rate,
            "program": program,
            "result": result,
        }
        rows.append(row)
        if progress is not None:
            progress(mix, row)
    return rows
