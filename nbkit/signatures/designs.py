"""The statistical design of each measured claim of notebook 03: its effect, its null, its unit, the spread of
one unit (measured by ``bench/signatures_spread.py``, figures and command in ``bench/RESULTS.md``), and a draw
that simulates one run's verdict arguments at a true value, so :func:`nbkit.claims.operating_characteristics`
can say whether the rule decides at the default n.

The units: a **case** (its two phrasings share the case's clinical content: answers are drawn in clusters
with the measured intraclass correlation), and for a compile claim the **compile set** × **case** table
(a compile set's demos help or hurt every case alike: rows share a random effect, columns another).
"""

from __future__ import annotations

import functools
from typing import Any

from nbkit.claims import Design
from nbkit.signatures.cases import load_cases, split_cases
from nbkit.signatures.config import FULL_COMPILES

# -- measured planning values (bench/signatures_spread.py; bench/RESULTS.md) -----------------------
CLEAN_ICC = 0.5  # intraclass correlation of a case's two contract-clean flags
BREACH_ICC = 0.3  # ... of a case's prompt-bound breaches
WORDS_ICC = 0.5  # ... of a case's non-numeric confidences
# Compile tables (hit@3 differences per compile set and case): sd of the compile-set effect, of the case
# effect, and of what is left.
GAP_SD = (0.10, 0.35, 0.30)
LIFT_SD = (0.05, 0.15, 0.25)
RS_SD = (0.08, 0.2, 0.3)
SPREAD_SOURCE = "placeholder until measured"
MODULES_FULL_MINUTES = 10.0
COMPILE_FULL_MINUTES = 60.0
DEFAULT_SEED = 0


@functools.cache
def shipped_cases(splits: tuple[str, ...], n_dev: int = 0) -> int:
    """How many shipped cases ``splits`` hold at the default seed (of dev the first ``n_dev``, 0 = all)."""
    s = split_cases(load_cases(), DEFAULT_SEED)
    total = 0
    for name in splits:
        cases = getattr(s, name)
        total += min(n_dev, len(cases)) if name == "dev" and n_dev else len(cases)
    return total


def _clustered(rng: Any, rate: float, sizes: list[int], icc: float) -> tuple[list[int], list[int]]:
    """Per cluster: successes among ``sizes[i]`` 0/1 outcomes at ``rate``, correlated within a cluster
    (beta-binomial with intraclass correlation ``icc``)."""
    rate = min(1.0, max(0.0, rate))
    if rate in (0.0, 1.0) or icc <= 0:
        p = [rate] * len(sizes)
    else:
        scale = (1 - icc) / icc
        p = list(rng.beta(rate * scale, (1 - rate) * scale, len(sizes)))
    return [int(rng.binomial(m, q)) for m, q in zip(sizes, p, strict=True)], list(sizes)


# -- modules serve the contract --------------------------------------------------------------------
CLEAN_TRUE, CLEAN_FALSE = 0.95, 0.65  # every module clean in 19 of 20 answers / one module in 13 of 20


def _draw_modules(rng: Any, value: float, n: int) -> tuple:
    """Three modules on ``n`` cases × 2 phrasings: the first at ``value``, the others at CLEAN_TRUE."""
    rates = (value, CLEAN_TRUE, CLEAN_TRUE)
    return (tuple((f"m{i}", *_clustered(rng, r, [2] * n, CLEAN_ICC)) for i, r in enumerate(rates)),)


def _modules_units(cfg: Any) -> int:
    return shipped_cases(tuple(cfg.splits), cfg.n_dev)


MODULES_CLEAN = Design(
    effect=CLEAN_TRUE,
    null=CLEAN_FALSE,
    unit="case",
    spread=CLEAN_ICC,
    spread_source=f"intraclass correlation of a case's two contract-clean flags; {SPREAD_SOURCE}",
    draw=_draw_modules,
    n=shipped_cases(("dev",)),
    units=_modules_units,
    full_n=shipped_cases(("train", "val", "dev")),
    full_minutes=MODULES_FULL_MINUTES,
    full_minutes_source="extrapolated: placeholder",
)


# -- prompt bounds ---------------------------------------------------------------------------------
NOTES_SPLITS = ("train", "val", "dev")  # ContractsConfig().field_notes_splits
DEV_ANSWERS = 8  # parsed answers per dev case: 3 modules × 2 phrasings + the field notes' signature's 2
OTHER_ANSWERS = 2  # the field notes' signature's two phrasings


def _bounds_sizes(n: int) -> list[int]:
    dev = shipped_cases(("dev",))
    return [DEV_ANSWERS] * min(n, dev) + [OTHER_ANSWERS] * max(0, n - dev)


def _draw_bounds(rng: Any, value: float, n: int) -> tuple:
    return (*_clustered(rng, value, _bounds_sizes(n), BREACH_ICC), "breaches")


PROMPT_BOUNDS = Design(
    effect=0.05,
    null=0.0,
    unit="case",
    spread=BREACH_ICC,
    spread_source=f"intraclass correlation of a case's breaches; {SPREAD_SOURCE}",
    draw=_draw_bounds,
    n=shipped_cases(NOTES_SPLITS),
    units=lambda cfg: shipped_cases(tuple(dict.fromkeys((*NOTES_SPLITS, *cfg.splits)))),
)


# -- confidence in words ---------------------------------------------------------------------------
def _draw_words(rng: Any, value: float, n: int) -> tuple:
    return _clustered(rng, value, [2] * n, WORDS_ICC)


CONFIDENCE_WORDS = Design(
    effect=0.9,
    null=0.1,
    unit="case",
    spread=WORDS_ICC,
    spread_source=f"intraclass correlation of a case's non-numeric confidences; {SPREAD_SOURCE}",
    draw=_draw_words,
    n=shipped_cases(NOTES_SPLITS),
    units=lambda cfg: shipped_cases(tuple(cfg.field_notes_splits), cfg.n_dev),
)


# -- compile claims --------------------------------------------------------------------------------
def crossed_draw(sd: tuple[float, float, float], cases: int, *extra: Any) -> Any:
    """A draw of a compile sets × ``cases`` table around the true value: a compile-set effect, a case
    effect and a residual with the sds ``sd``; ``extra`` follows the table in the verdict's arguments."""

    def draw(rng: Any, value: float, n: int) -> tuple:
        rows, cols = rng.normal(0, sd[0], (n, 1)), rng.normal(0, sd[1], (1, cases))
        table = value + rows + cols + rng.normal(0, sd[2], (n, cases))
        return (table.tolist(), *extra)

    return draw


def _compiles(cfg: Any) -> int:
    return cfg.compiles


def _rs_compiles(cfg: Any) -> int:
    return cfg.compiles if cfg.random_search else 0


def _compile_design(
    effect: float, sd: tuple[float, float, float], what: str, *extra: Any, **kw: Any
) -> Design:
    return Design(
        effect=effect,
        null=0.0,
        unit="compile set",
        spread=sum(s * s for s in sd) ** 0.5,
        spread_source=f"sd of one compile set × case cell of {what} (compile set {sd[0]}, case {sd[1]}, "
        f"residual {sd[2]}); {SPREAD_SOURCE}",
        draw=crossed_draw(sd, shipped_cases(("dev",)), *extra),
        full_n=FULL_COMPILES,
        full_minutes=COMPILE_FULL_MINUTES,
        full_minutes_source="extrapolated: placeholder",
        **kw,
    )


GAP = _compile_design(0.92 - 0.65, GAP_SD, "standard − colloquial", n=1, units=_compiles)
MIX_LIFT = _compile_design(0.92 - 0.65, LIFT_SD, "the 10 % mix's colloquial lift", n=1, units=_compiles)
RANDOM_SEARCH = _compile_design((0.92 - 0.65) / 2, RS_SD, "RS − BFS", 16, n=0, units=_rs_compiles)


# -- the token limit: exact figures ----------------------------------------------------------------
def _exact(*rest: Any) -> Any:
    def draw(rng: Any, value: float, n: int) -> tuple:
        return (int(value), *rest)

    return draw


RUNAWAY = Design(
    effect=213,
    null=16,
    unit="request",
    spread=0.0,
    spread_source="exact: one request's token count",
    draw=_exact(16, 256, False),
    n=1,
    units=lambda cfg: 1 if cfg.stock_server else 0,
)
LIMIT = Design(
    effect=128,
    null=256,
    unit="probe",
    spread=0.0,
    spread_source="exact: every served call and probe counted",
    draw=_exact(128, 300, (16, 16, 16), 16),
    n=3,
    units=lambda cfg: 3,
)
