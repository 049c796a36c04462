"""Compile programs with DSPy optimizers against a real validation set, and the colloquial-mix experiment.

* ``BootstrapFewShot``: runs a teacher (the student with labelled demos) on the compile set and keeps the
  traces the metric accepts (with ``trace`` set, our metric also demands a clean contract) as demos, topped
  up with labelled demos to ``max_labeled_demos``.
* ``BootstrapFewShotWithRandomSearch``: several such candidates, each scored on the *validation* set
  (never the compile set); the zero-shot candidate is skipped because the notebook already measured it.

BootstrapFewShot's teacher pass asks the LM one example at a time, which leaves a batching server idle.
With ``num_threads > 1`` (and the LM's cache on) each bootstrap's teacher requests are sent
``num_threads`` at a time just ahead of the sequential pass (:class:`TeacherPrefetch`), so the pass is
answered from the in-run cache — the same requests, hence the same demos and the same compiled program —
and at most ``num_threads − 1`` requests go to compile examples after the one that completed its demos.

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


class TeacherPrefetch:
    """Round-0 teacher requests of a BootstrapFewShot, sent ``width`` at a time just ahead of its sequential
    pass, so that pass finds each answer in the LM's cache.

    ``BootstrapFewShot._bootstrap_one_example`` runs, per compile example, the teacher with that example
    left out of its demos, under ``dspy.context(trace=[], **teacher_settings)``; :meth:`one` does exactly
    that (on a light copy of the teacher, so its demos are never touched) and discards the answer: the
    LM's cache keeps it. Failures are ignored here — the sequential pass meets, and counts, them again.

    Why ahead of the pass rather than the whole compile set at once: the pass stops as soon as it has
    ``max_bootstrapped_demos`` accepted traces (often after a few examples), and every request sent for an
    example after that one was served for nothing. :meth:`before` is called as the pass reaches example
    ``i``: it keeps examples ``i … i + width − 1`` requested (``width`` in flight, so every server slot stays
    busy) and waits for example ``i``'s answer. At most ``width − 1`` requests are unused when the pass
    stops; :meth:`close` waits for them (their answers only fill the cache). Only the first round is
    prefetched (later rounds change the temperature and depend on the first).
    """

    def __init__(self, bootstrap, width: int):
        from concurrent.futures import ThreadPoolExecutor

        self.teacher = bootstrap.teacher
        self.settings = dict(getattr(bootstrap, "teacher_settings", None) or {})
        self.examples = list(getattr(bootstrap, "trainset", None) or [])
        self.width = width
        self.pending: dict[int, Any] = {}
        self.sent = 0  # examples requested so far, in compile-set order
        self._pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="nbkit-teacher")

    def one(self, example) -> None:
        import dspy

        clone = _light_copy(self.teacher)
        with dspy.context(trace=[], **self.settings):
            for _name, predictor in clone.named_predictors():
                predictor.demos = [x for x in predictor.demos if x != example]
            with contextlib.suppress(Exception):
                clone(**example.inputs())

    def before(self, example) -> None:
        """The sequential pass is about to ask for ``example``: keep the next ``width`` examples requested and
        wait for this one's answer."""
        import contextvars

        i = next((k for k, x in enumerate(self.examples) if x is example), None)
        if i is None:
            return
        while self.sent < min(len(self.examples), i + self.width):
            # each request runs in a copy of the caller's context: DSPy's settings (the LM, the adapter) are
            # context variables
            self.pending[self.sent] = self._pool.submit(
                contextvars.copy_context().run, self.one, self.examples[self.sent]
            )
            self.sent += 1
        if i in self.pending:
            with contextlib.suppress(Exception):  # the sequential pass meets the same failure, and reports it
                self.pending.pop(i).result()

    def close(self, wait: bool = True) -> int:
        """Wait for the requests still in flight (``wait=False``: an error or Ctrl-C ended the pass, leave
        them); returns how many examples were requested."""
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
        return self.sent


def _prefetch_width(bootstrap, num_threads: int) -> int:
    """``num_threads`` where prefetching can help: several threads, several compile examples and an LM whose
    cache the sequential pass reads; 0 otherwise."""
    import dspy

    lm = dspy.settings.lm
    trainset = getattr(bootstrap, "trainset", None) or []
    if num_threads < 2 or len(trainset) < 2 or lm is None or not getattr(lm, "cache", False):
        return 0
    return num_threads


@contextlib.contextmanager
def concurrent_teacher_pass(num_threads: int):
    """While active, every BootstrapFewShot (also the ones random search builds) prefetches its round-0
    teacher requests ahead of its sequential pass (:class:`TeacherPrefetch`)."""
    import logging

    from dspy.teleprompt import bootstrap, random_search

    original = bootstrap.BootstrapFewShot

    class PrefetchingBootstrapFewShot(original):
        _prefetch: TeacherPrefetch | None = None

        def _bootstrap(self, *args, **kwargs):
            width = _prefetch_width(self, num_threads)
            if not width:
                return super()._bootstrap(*args, **kwargs)
            self._prefetch = TeacherPrefetch(self, width)
            quiet = logging.getLogger("dspy")
            level = quiet.level
            quiet.setLevel(logging.CRITICAL)  # a parse failure is logged by the sequential pass, once
            ok = False
            try:
                out = super()._bootstrap(*args, **kwargs)
                ok = True
                return out
            finally:
                self._prefetch.close(wait=ok)
                self._prefetch = None
                quiet.setLevel(level)

        def _bootstrap_one_example(self, example, round_idx=0):
            if self._prefetch is not None and round_idx == 0:
                self._prefetch.before(example)
            return super()._bootstrap_one_example(example, round_idx)

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
    pass (prefetched, see :class:`TeacherPrefetch`; 1 = DSPy's own sequential pass only).
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
