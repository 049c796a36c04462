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

# -- measured planning values (bench/signatures_spread.py, cold; bench/RESULTS.md) -----------------------
# Intraclass correlation of a case's two contract-clean flags, per module on the 50 train+val+dev cases
# (seed 0): predict 0.00, cot 0.04, hybrid 0.39; the largest is planned with.
CLEAN_ICC = 0.39
# ... of a case's prompt-bound breaches (100 of 383 parsed answers, 50 cases, seed 0): 0.014, planned at 0.05.
BREACH_ICC = 0.05
# ... of a case's answers without a numeric confidence: all 96 parsed answers gave none (seed 0), so no
# spread to measure it from; assumed 0.5 (two phrasings of a case answered alike half the time beyond chance).
WORDS_ICC = 0.5
# Compile tables, hit@3 differences per compile set and dev case, 4 compile sets × 15 dev cases at seeds 0
# and 1 (each seed its own split, so its own dev cases): the sds of the compile-set effect, the case effect
# and the residual (two-way ANOVA, clamped at 0), planned with the mean of the two seeds' variances.
# standard − colloquial of the 0 % programs: (0.04, 0.33, 0.45) and (0.20, 0.30, 0.56).
# Colloquial hit@3 of the 10 % − the 0 % program of one compile set: (0, 0, 0.28) and (0.10, 0.11, 0.33).
GAP_SD = (0.14, 0.31, 0.51)
LIFT_SD = (0.07, 0.08, 0.31)
# RS − BFS on one compile set (16 candidates scored on the 20 val questions, seed 0), per dev case: cell sd
# 0.41; one set cannot split it, so it is split in the proportions of standard − colloquial's.
RS_SD = (0.09, 0.21, 0.34)
SPREAD_SOURCE = "bench/signatures_spread.py, cold (bench/RESULTS.md)"
# CPU seconds measured by the same runs (servers + this process, on the shared 2-core machine): the modules
# on the 50 train+val+dev cases; one BootstrapFewShot program compiled and scored on the dev questions
# (110 at seed 0, 155 at seed 1); one random-search program.
MODULES_FULL_CPU_S = 614
BFS_PROGRAM_CPU_S = 130
RS_PROGRAM_CPU_S = 1956
# Standard − colloquial and RS − BFS need more dev cases than the data has; the n they name is for this
# many compile sets.
NEEDED_AT_COMPILES = {"gap": 40, "rs": FULL_COMPILES}
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
# A module that honours the contract breaks it in at most 1 answer in 50; one that does not, in 2 of 5:
# the two sides of CLEAN (0.8), 0.2 from it on either hand (the notes give no figure).
CLEAN_TRUE, CLEAN_FALSE = 0.98, 0.6


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
    spread_source="intraclass correlation of a case's two contract-clean flags (the largest module's); "
    + SPREAD_SOURCE,
    draw=_draw_modules,
    n=shipped_cases(("dev",)),
    units=_modules_units,
    full_n=shipped_cases(("train", "val", "dev")),
    full_minutes=MODULES_FULL_CPU_S / 2 / 60,
    full_minutes_source=f"measured: the modules section on the 50 cases took {MODULES_FULL_CPU_S} CPU-s, "
    "over 2 cores",
)


# -- prompt bounds ---------------------------------------------------------------------------------
NOTES_SPLITS = ("train", "val", "dev")  # ContractsConfig().field_notes_splits
# Parsed answers per dev case: 3 modules × 2 phrasings and the field notes' signature's 2, less about one
# structural failure (383 of 430 requests parsed in the measuring run); per train or val case the field
# notes' signature's 2.
DEV_ANSWERS = 7
OTHER_ANSWERS = 2  # the field notes' signature's two phrasings


def _bounds_sizes(n: int) -> list[int]:
    dev = shipped_cases(("dev",))
    return [DEV_ANSWERS] * min(n, dev) + [OTHER_ANSWERS] * max(0, n - dev)


def _draw_bounds(rng: Any, value: float, n: int) -> tuple:
    return (*_clustered(rng, value, _bounds_sizes(n), BREACH_ICC), "breaches")


# "Kept in practice" is a breach rate below RARE (5 %): the claim is true at any rate above, so the design
# draws at RARE itself, the hardest true rate to tell from 0.
RARE = 0.05

PROMPT_BOUNDS = Design(
    effect=RARE,
    null=0.0,
    unit="case",
    spread=BREACH_ICC,
    spread_source=f"intraclass correlation of a case's breaches, measured 0.014; {SPREAD_SOURCE}",
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
    spread_source="assumed: intraclass correlation 0.5 of a case's answers without a number (every parsed "
    f"answer gave none in {SPREAD_SOURCE}: no spread to measure it from)",
    draw=_draw_words,
    n=shipped_cases(NOTES_SPLITS),
    units=lambda cfg: shipped_cases(tuple(cfg.field_notes_splits), cfg.n_dev),
)


# -- compile claims --------------------------------------------------------------------------------
def crossed_draw(sd: tuple[float, float, float], cases: int, *extra: Any) -> Any:
    """A draw of ``n`` compile sets × ``cases`` table around the true value: a compile-set effect, a case
    effect and a residual with the sds ``sd``; ``extra`` follows the table in the verdict's arguments."""

    def draw(rng: Any, value: float, n: int) -> tuple:
        rows, cols = rng.normal(0, sd[0], (n, 1)), rng.normal(0, sd[1], (1, cases))
        table = value + rows + cols + rng.normal(0, sd[2], (n, cases))
        return (table.tolist(), *extra)

    return draw


def _case_draw(sd: tuple[float, float, float], compiles: int, *extra: Any) -> Any:
    """The same table with ``n`` cases and ``compiles`` compile sets."""

    def draw(rng: Any, value: float, n: int) -> tuple:
        return crossed_draw(sd, n, *extra)(rng, value, compiles)

    return draw


def _compiles(cfg: Any) -> int:
    return cfg.compiles


def _full_minutes(per_set_cpu_s: float) -> float:
    return FULL_COMPILES * per_set_cpu_s / 2 / 60


# The field notes' F1 with GPT-4 on standard vs colloquial questions (§4.3): the effect the three compile
# claims are designed for, and (claims.py) the figure their rows show and their thresholds.
NOTES_STANDARD_F1, NOTES_COLLOQUIAL_F1 = 0.92, 0.65
GAP_CLAIMED = NOTES_STANDARD_F1 - NOTES_COLLOQUIAL_F1
DEV_CASES = shipped_cases(("dev",))
# Standard − colloquial: the case effect does not shrink with more compile sets, so the dev cases bound it:
# with 40 compile sets the rule needs about 150 dev cases (simulated; with FULL_COMPILES about 300), the
# data has 15.
GAP = Design(
    effect=GAP_CLAIMED,
    null=0.0,
    unit="dev case",
    spread=sum(s * s for s in GAP_SD) ** 0.5,
    spread_source=f"sd of one compile set × case cell of standard − colloquial (compile set {GAP_SD[0]}, "
    f"case {GAP_SD[1]}, residual {GAP_SD[2]}); {SPREAD_SOURCE}",
    draw=_case_draw(GAP_SD, NEEDED_AT_COMPILES["gap"]),
    n=DEV_CASES,
    units=lambda cfg: shipped_cases(("dev",), cfg.n_dev),
    needed_n=150,
    beyond_data=f"with {NEEDED_AT_COMPILES['gap']} compile sets; the shipped data has {DEV_CASES} dev cases "
    "(63 in all)",
)
MIX_LIFT = Design(
    effect=GAP_CLAIMED,
    null=0.0,
    unit="compile set",
    spread=sum(s * s for s in LIFT_SD) ** 0.5,
    spread_source=f"sd of one compile set × case cell of the 10 % mix's colloquial lift (compile set "
    f"{LIFT_SD[0]}, case {LIFT_SD[1]}, residual {LIFT_SD[2]}); {SPREAD_SOURCE}",
    draw=crossed_draw(LIFT_SD, DEV_CASES),
    n=1,
    units=_compiles,
    full_n=FULL_COMPILES,
    full_minutes=_full_minutes(2 * BFS_PROGRAM_CPU_S),
    full_minutes_source=f"extrapolated: {FULL_COMPILES} compile sets × 2 programs × {BFS_PROGRAM_CPU_S} "
    "CPU-s measured per program, over 2 cores",
)
# RS − BFS: as standard − colloquial, the case effect bounds it: with FULL_COMPILES sets the rule needs
# about 80 dev cases (simulated). Random search costs RS_PROGRAM_CPU_S per compile set, so no profile runs
# it for a claim the data cannot decide; its panel does, at DSPy's documented 16 candidates.
RANDOM_SEARCH = Design(
    effect=GAP_CLAIMED,
    null=0.0,
    unit="dev case",
    spread=sum(s * s for s in RS_SD) ** 0.5,
    spread_source=f"sd of one compile set × case cell of RS − BFS, measured 0.41 on one set, split in the "
    f"proportions of standard − colloquial's (compile set {RS_SD[0]}, case {RS_SD[1]}, residual {RS_SD[2]}); "
    + SPREAD_SOURCE,
    draw=_case_draw(RS_SD, NEEDED_AT_COMPILES["rs"], 16),
    n=0,
    units=lambda cfg: shipped_cases(("dev",), cfg.n_dev) if cfg.random_search else 0,
    needed_n=80,
    beyond_data=f"with {NEEDED_AT_COMPILES['rs']} compile sets; the shipped data has {DEV_CASES} dev cases "
    "(63 in all)",
)


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
