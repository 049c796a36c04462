"""The field notes' KG claims, each a declared :class:`~nbkit.claims.ClaimSpec` judged on what notebook 01
ran: ``claims.judge(ctx)`` gives the ledger, ``claims.headline(ctx)`` the numbers a reader wants first.

Each ``verdict_*`` function states its rule in its docstring and returns holds, refuted or inconclusive
from the same inputs. Noisy figures are compared through an interval across independent training runs
(seeds), never across values one run produced (its folds, steps or queries), at the level the ledger's
Holm procedure passes in. Every choice that precedes a verdict (epochs, decoder, dropout, widths, the
edge-type aggregation, rung 6's grid, which RGCN rung) was made on the selecting half of the validation
queries with seeds no judged run uses; the judging half is what these rules read.

Each measured spec's :class:`~nbkit.claims.Design` states the effect the claim makes, the value at which
it is false, and the spread of one unit, measured at the defaults (``bench/RESULTS.md``, "KG claim
designs"); a row its design cannot decide at the default n says so and names the full profile's n.
"""

from __future__ import annotations

import math
import statistics

from nbkit.claims import (
    HOLDS,
    INCONCLUSIVE,
    LIBRARY_FACT,
    MEASURED,
    REFUTED,
    ClaimSpec,
    Design,
    HeadlineSpec,
    Reading,
    Rule,
    Verdict,
    decide_at_least,
    fmt_interval,
    mean_interval,
    paired_normal_units,
)
from nbkit.kg.config import (
    ABLATION_FULL_SEEDS,
    AGGR_FULL_SEEDS,
    AblationConfig,
    AggrConfig,
    DownstreamConfig,
    ScaleConfig,
)
from nbkit.kg.experiments import REGISTRY
from nbkit.kg.field_notes import DOWNSTREAM_F1, REVERSE_AUC_AFTER, REVERSE_AUC_BEFORE
from nbkit.kg.ladder import BASELINE_RUNG, MESSAGE_PASSING_RUNGS
from nbkit.kg.metrics import (
    AblationMetrics,
    AggrMetrics,
    CoalesceMetrics,
    DownstreamMetrics,
    MinibatchMetrics,
    PitfallMetrics,
)

REVERSE_GAIN_CLAIMED = REVERSE_AUC_AFTER - REVERSE_AUC_BEFORE
REVERSE_GAIN_MIN = REVERSE_GAIN_CLAIMED / 2  # tolerance: half the claimed lift counts as "holds"
F1_TOL = 0.05  # the macro-F1 holds within 0.05 of the notes' figure
# The trained embeddings must beat structure-free (random) ones by this much macro-F1: an F1 a random
# embedding of the same width nearly reaches says nothing about what the embedding learnt.
F1_MARGIN = 0.10
# "mean is steadier than add": add's loss-curve wobble at least √2 times mean's (the geometric midpoint
# between equal wobble, where the claim is false, and twice as much, the design's planning effect).
WOBBLE_RATIO_MIN = math.sqrt(2)
# A wobble below this (RMS distance from the falling trend, relative to the loss level) is below what a
# float32 loss resolves; the log ratio adds it to both sides so a curve without wobble is not a log of 0.
WOBBLE_FLOOR = 1e-4
MP_MIN_GAIN = 0.01  # validation MRR: message passing "helps" when it adds at least this much over rung 6
# The scale curve "learns" when its last point is above its step-0 point by at least this share of the
# graph's ceiling MRR (the cluster oracle's); without a known ceiling, by CURVE_MIN_RISE validation MRR.
CURVE_MIN_RISE_SHARE = 0.25
CURVE_MIN_RISE = 0.01

# -- the spreads of one unit the designs rest on (measured at the defaults: bench/RESULTS.md) --------
REVERSE_GAIN_SD = 0.0108  # per-seed judging-half AUC gain, rung 3 − rung 2 (6 seeds)
# per-seed macro-F1 (6 seeds), and the random control's mean and spread
F1_SD, F1_CONTROL, F1_CONTROL_SD = 0.0447, 0.064, 0.0188
# per-seed log(wobble add / wobble mean) (8 seeds; heavy-tailed: one add run wobbled 0.15 against ~0.002)
WOBBLE_LOG_RATIO_SD = 1.64
MP_GAIN_SD = 0.0163  # per-seed judging-half MRR gain, RGCN − rung 6 (6 seeds)
SCALE_GAIN_SD, SCALE_CEILING = 0.0058, 0.0714  # per-run MRR gain on the scale graph (5 runs), its ceiling
SPREAD_SOURCE = "measured at the defaults (bench/RESULTS.md, KG claim designs)"
# What each experiment costs at the full profile's n, in minutes on 2 cores: the CPU-s per unit measured
# at the defaults times the full profile's units (bench/RESULTS.md)
ABLATION_FULL_MINUTES = 23.0  # 40 seeds × 34 CPU-s per seed (six rungs)
AGGR_FULL_MINUTES = 47.0  # 320 seeds × 8.7 CPU-s per seed (both arms)
FULL_SOURCE = (
    "extrapolated from the CPU-s per seed measured at the defaults on the shared 2-core machine (load 14–23; "
    "bench/RESULTS.md, KG claim designs)"
)


def _seeds(cfg) -> int:
    return cfg.seeds


def _mean(xs) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.fmean(xs) if xs else float("nan")


def _paired_gain(
    before: list[float], after: list[float], threshold: float, what: str, how: str, level: float
) -> Verdict:
    """Per-seed gains (after − before, NaN pairs dropped) judged by their t-interval at ``level``
    against ``threshold``."""
    gains = [a - b for b, a in zip(before, after, strict=False) if not (math.isnan(a) or math.isnan(b))]
    if not gains:
        return Verdict(INCONCLUSIVE, f"not measured: {how} to test this claim")
    if len(gains) < 2:
        return Verdict(
            INCONCLUSIVE, f"gain {gains[0]:+.3f} on one seed: no interval — n too small; run >= 3 seeds"
        )
    return decide_at_least(
        mean_interval(gains, level),
        threshold,
        what=f"{what} over {len(gains)} seeds",
        n_hint=f"n={len(gains)} seeds; more seeds narrow the interval",
    )


# -- reverse edges -------------------------------------------------------------------------------
def verdict_reverse_edges(auc_without: list[float], auc_with: list[float], level: float = 0.95) -> Verdict:
    """Rung 2 (stated direction only) vs rung 3 (+ explicit ``rel__inv``), same seeds, AUC on the judging
    half of the validation triples (their epochs and hetero SAGE's edge-type aggregation were chosen on
    the other half).

    Rule: the per-seed gain (rung 3 − rung 2) has a t-interval across seeds at ``level``; holds when its
    low end is ≥ half the claimed +0.26 (0.13), refuted when its high end is below 0.13, inconclusive
    when it straddles 0.13 or fewer than two seeds were run.
    """
    return _paired_gain(
        auc_without, auc_with, REVERSE_GAIN_MIN, "AUC gain", "run rungs 2 and 3 of the ablation", level
    )


def read_reverse_edges(ablation: AblationMetrics) -> Reading:
    r2, r3 = ablation.rung(2), ablation.rung(3)
    wo = list(r2.valid_auc_judge_per_seed) if r2 else []
    w = list(r3.valid_auc_judge_per_seed) if r3 else []
    gains = [b - a for a, b in zip(wo, w, strict=False)]
    return Reading(
        args=(wo, w),
        measured=f"{_mean(wo):.3f} -> {_mean(w):.3f} ({_mean(gains):+.3f})" if gains else "not measured",
        n=f"{len(gains)} seeds",
        interval=fmt_interval(mean_interval(gains)) if len(gains) > 1 else "",
    )


REGISTRY.claim(
    ClaimSpec(
        key="reverse_edges_auc",
        claim=f"reverse (r_inv) edges lift validation AUC from {REVERSE_AUC_BEFORE} to {REVERSE_AUC_AFTER}",
        field_note=f"{REVERSE_AUC_BEFORE} -> {REVERSE_AUC_AFTER} (+{REVERSE_GAIN_CLAIMED:.2f})",
        source="§2.1",
        kind=MEASURED,
        reads=("ablation",),
        read=read_reverse_edges,
        verdict=verdict_reverse_edges,
        rule=Rule(
            "per-seed gain (rung 3 − rung 2, AUC on the judging half of validation): holds if its interval ≥ "
            f"+{REVERSE_GAIN_MIN:.2f}, refuted if < +{REVERSE_GAIN_MIN:.2f}",
            "t",
            "at least",
            REVERSE_GAIN_MIN,
            unit="seed",
        ),
        design=Design(
            effect=REVERSE_GAIN_CLAIMED,
            null=0.0,
            unit="seed",
            spread=REVERSE_GAIN_SD,
            spread_source=SPREAD_SOURCE,
            draw=paired_normal_units(REVERSE_AUC_BEFORE, REVERSE_GAIN_SD),
            n=AblationConfig().seeds,
            units=_seeds,
            full_n=ABLATION_FULL_SEEDS,
            full_minutes=ABLATION_FULL_MINUTES,
            full_minutes_source=FULL_SOURCE,
        ),
    )
)


# -- downstream macro-F1 -------------------------------------------------------------------------
def verdict_f1(
    f1_seeds: list[float], control_seeds: list[float], skipped: str = "", level: float = 0.95
) -> Verdict:
    """Macro-F1 of the trained embeddings next to a random-embedding control, one figure per embedding
    training run (seed; each the mean of its 5 cross-validation folds).

    The folds of one run share its embedding and most of their training data, so they are not
    independent draws: the interval is across seeds (Student t, at ``level``). Rule: refuted when the
    F1 interval lies wholly below the field note's figure less its tolerance (``DOWNSTREAM_F1 − F1_TOL``),
    or the interval of the paired margin over the control lies wholly below ``F1_MARGIN`` (no better than
    structure-free embeddings); holds when the F1 interval lies wholly at or above ``DOWNSTREAM_F1 −
    F1_TOL`` AND the margin interval wholly at or above ``F1_MARGIN``; otherwise inconclusive — always so
    with one seed, or when the check was skipped (``skipped`` says why).
    """
    if skipped:
        return Verdict(INCONCLUSIVE, f"not measured: {skipped}")
    if not f1_seeds:
        return Verdict(INCONCLUSIVE, "not measured in this run")
    if len(f1_seeds) < 2:
        return Verdict(
            INCONCLUSIVE,
            f"macro-F1 {f1_seeds[0]:.3f} from one embedding run: its folds share the embedding, "
            "no interval — n too small; run >= 3 seeds (DownstreamConfig.seeds)",
        )
    n = f"n={len(f1_seeds)} seeds"
    margins = [a - b for a, b in zip(f1_seeds, control_seeds, strict=True)]
    f1 = decide_at_least(mean_interval(f1_seeds, level), DOWNSTREAM_F1 - F1_TOL, what="macro-F1", n_hint=n)
    margin = decide_at_least(
        mean_interval(margins, level), F1_MARGIN, what="margin over the random control", n_hint=n
    )
    if REFUTED in (f1.verdict, margin.verdict):
        return Verdict(REFUTED, "; ".join(v.why for v in (f1, margin) if v.verdict == REFUTED))
    if f1.verdict == HOLDS and margin.verdict == HOLDS:
        return Verdict(HOLDS, f"{f1.why}; {margin.why}")
    return Verdict(INCONCLUSIVE, f"{f1.why}; {margin.why}")


def read_f1(downstream: DownstreamMetrics) -> Reading:
    d = downstream
    if d.skipped:
        return Reading(args=([], [], d.skipped), measured=f"not measured: {d.skipped}", n="0 folds")
    left = (
        f"; left out (fewer entities than folds): {', '.join(d.dropped_classes)}" if d.dropped_classes else ""
    )
    return Reading(
        args=(list(d.seed_scores), list(d.control_seed_scores), ""),
        measured=f"{d.macro_f1:.3f} (random control {d.macro_f1_control:.3f})",
        n=f"{d.seeds} embedding runs (seeds) × 5 folds, {d.samples} entities in {d.classes} classes{left}",
        interval=fmt_interval(mean_interval(d.seed_scores)) if d.seeds > 1 else "",
    )


def _f1_draw(rng, value: float, n: int) -> tuple:
    """One simulated downstream run: n per-seed macro-F1s at the true value, and n random controls."""
    return list(rng.normal(value, F1_SD, n)), list(rng.normal(F1_CONTROL, F1_CONTROL_SD, n)), ""


REGISTRY.claim(
    ClaimSpec(
        key="downstream_f1",
        claim=f"node embeddings -> logistic regression reach macro-F1 {DOWNSTREAM_F1}",
        field_note=f"{DOWNSTREAM_F1}",
        source="§3.1",
        kind=MEASURED,
        reads=("downstream",),
        read=read_f1,
        verdict=verdict_f1,
        rule=Rule(
            "per-seed macro-F1 (mean of 5 folds), t-interval across seeds: holds if ≥ "
            f"{DOWNSTREAM_F1 - F1_TOL:.2f} and the margin over a random control ≥ {F1_MARGIN:.2f}; "
            "refuted if "
            "either lies wholly below; one seed: inconclusive",
            "t",
            "at least",
            DOWNSTREAM_F1 - F1_TOL,
            F1_TOL,
            unit="seed",
        ),
        design=Design(
            effect=DOWNSTREAM_F1,
            null=DOWNSTREAM_F1 - 2 * F1_TOL,
            unit="seed",
            spread=F1_SD,
            spread_source=SPREAD_SOURCE,
            draw=_f1_draw,
            n=DownstreamConfig().seeds,
            units=_seeds,
        ),
    )
)


# -- aggr="mean" vs "add" ------------------------------------------------------------------------
def verdict_aggr(
    div_mean: int, runs_mean: int, div_add: int, runs_add: int, log_ratios: list[float], level: float = 0.95
) -> Verdict:
    """``aggr='mean'`` vs ``'add'`` on the RGCN rung, same seeds, each with its own choices.

    Rule, in order: (1) divergence (a non-finite loss), by Boschloo's exact test on the 2×2 table at
    α = 1 − ``level``: add diverging significantly more often than mean holds, mean diverging
    significantly more often refutes; (2) otherwise, per seed where neither diverged, the log ratio of
    the loss curves' wobble, log(wobble add / wobble mean), has a t-interval at ``level``: holds when
    its low end is ≥ log √2 (add wobbles at least √2 times as much), refuted when its high end is below
    log √2, inconclusive when it straddles, with fewer than two paired seeds, or with every seed tied.
    """
    from scipy.stats import boschloo_exact

    alpha = 1 - level
    if div_mean or div_add:
        table = [[div_add, runs_add - div_add], [div_mean, runs_mean - div_mean]]
        more_add = boschloo_exact(table, alternative="greater").pvalue
        more_mean = boschloo_exact(table, alternative="less").pvalue
        counts = f"add diverged in {div_add} of {runs_add} runs, mean in {div_mean} of {runs_mean}"
        if more_add <= alpha:
            return Verdict(HOLDS, f"{counts} (Boschloo p = {more_add:.3g} ≤ {alpha:.3g})")
        if more_mean <= alpha:
            return Verdict(REFUTED, f"{counts} (Boschloo p = {more_mean:.3g} ≤ {alpha:.3g})")
    if len(log_ratios) < 2:
        return Verdict(
            INCONCLUSIVE,
            f"{len(log_ratios)} paired seed(s) without divergence: no interval — n too small; run >= 3 seeds",
        )
    return decide_at_least(
        mean_interval(log_ratios, level),
        math.log(WOBBLE_RATIO_MIN),
        what=f"log(wobble add / wobble mean) over {len(log_ratios)} seeds",
        n_hint=f"n={len(log_ratios)} seeds",
    )


def wobble_log_ratios(aggr: AggrMetrics) -> list[float]:
    """Per seed where neither aggregation diverged: log((wobble add + floor) / (wobble mean + floor));
    a NaN wobble (too short a curve) drops the seed."""
    by = {(r.aggr, r.seed): r for r in aggr.runs if not r.diverged}
    seeds = sorted({s for a, s in by if a == "mean"} & {s for a, s in by if a == "add"})
    out = []
    for s in seeds:
        add, mean = by["add", s].roughness, by["mean", s].roughness
        if not (math.isnan(add) or math.isnan(mean)):
            out.append(math.log((add + WOBBLE_FLOOR) / (mean + WOBBLE_FLOOR)))
    return out


def read_aggr(aggr: AggrMetrics) -> Reading:
    m, a = aggr.mean, aggr.add
    ratios = wobble_log_ratios(aggr)
    return Reading(
        args=(m.diverged, m.runs, a.diverged, a.runs, ratios),
        measured=(
            f"mean ({m.decoder}, dropout {m.dropout}, width {m.width}): wobble {m.roughness_mean:.4f}, "
            f"diverged {m.diverged} of {m.runs}; add ({a.decoder}, dropout {a.dropout}, width {a.width}): "
            f"wobble {a.roughness_mean:.4f}, diverged {a.diverged} of {a.runs}; lr {aggr.lr}"
        ),
        n=f"{aggr.seeds} seeds per aggregation",
        interval=fmt_interval(mean_interval(ratios)) if len(ratios) > 1 else "",
    )


def _aggr_draw(rng, value: float, n: int) -> tuple:
    """One simulated aggr run: no divergence in either arm (none at the ladder's learning rate, measured)
    and n per-seed wobble log ratios around the true value."""
    return 0, n, 0, n, list(rng.normal(value, WOBBLE_LOG_RATIO_SD, n))


REGISTRY.claim(
    ClaimSpec(
        key="aggr_mean_stable",
        claim="aggr='mean' is more stable than 'add' on long-tailed relations",
        field_note="mean steadier than add",
        source="§2.1",
        kind=MEASURED,
        reads=("aggr",),
        read=read_aggr,
        verdict=verdict_aggr,
        rule=Rule(
            "divergence: Boschloo's exact test, add more often holds / mean more often refutes; else the "
            "per-seed log(wobble add / wobble mean) of the loss curves: holds if its interval ≥ log √2, "
            "refuted if < log √2",
            "t",
            "at least",
            math.log(WOBBLE_RATIO_MIN),
            unit="seed",
        ),
        design=Design(
            # add twice as wobbly where the claim is true (a planning value: the notes give no figure), as
            # wobbly where it is false; the bar, √2, lies midway on the log scale
            effect=math.log(2),
            null=0.0,
            unit="seed",
            spread=WOBBLE_LOG_RATIO_SD,
            spread_source=SPREAD_SOURCE,
            draw=_aggr_draw,
            n=AggrConfig().seeds,
            units=_seeds,
            full_n=AGGR_FULL_SEEDS,
            full_minutes=AGGR_FULL_MINUTES,
            full_minutes_source=FULL_SOURCE,
        ),
    )
)


# -- message passing vs no message passing -------------------------------------------------------
def verdict_message_passing(baseline_mrr: list[float], mp_mrr: list[float], level: float = 0.95) -> Verdict:
    """The better RGCN rung (4 or 5) vs rung 6 (ComplEx-N3, no message passing), same seeds, each tuned
    on the selecting half with grids of the same size and epoch cap. The rung is chosen on the
    selecting half of the validation queries and judged on the other (:func:`message_passing_pair`):
    ``baseline_mrr`` (rung 6) and ``mp_mrr`` (the RGCN) are the judging half's MRRs, per seed.

    Rule: the per-seed gain (RGCN − rung 6) has a t-interval across seeds at ``level``; holds when its
    low end is ≥ +0.01 MRR, refuted when its high end is below +0.01 (message passing adds less than
    0.01, or loses), inconclusive when it straddles +0.01 or fewer than two paired seeds were run.
    """
    return _paired_gain(
        baseline_mrr,
        mp_mrr,
        MP_MIN_GAIN,
        "validation-MRR gain of message passing",
        "run an RGCN rung (4 or 5) and rung 6 of the ablation",
        level,
    )


def message_passing_pair(ablation: AblationMetrics) -> tuple[int | None, list[float], list[float]]:
    """(the RGCN rung compared, its per-seed judging-half MRRs, rung 6's). The rung — the better of 4 and
    5 — is chosen by mean MRR on the SELECTING half of the validation queries; the MRRs returned are the
    JUDGING half's, so the choice does not score itself. Empty lists when either side was not run."""
    mp = [r for r in (ablation.rung(k) for k in MESSAGE_PASSING_RUNGS) if r is not None]
    base = ablation.rung(BASELINE_RUNG)
    if not mp or base is None:
        return None, [], []
    best = max(mp, key=lambda r: statistics.fmean(r.valid_mrr_select_per_seed))
    return best.rung, list(best.valid_mrr_judge_per_seed), list(base.valid_mrr_judge_per_seed)


def read_message_passing(ablation: AblationMetrics) -> Reading:
    rung, mp, base = message_passing_pair(ablation)
    gains = [a - b for a, b in zip(mp, base, strict=False)]
    return Reading(
        args=(base, mp),
        measured=(
            f"rung {rung} (RGCN) {_mean(mp):.3f} vs rung 6 (ComplEx-N3) {_mean(base):.3f}: "
            f"{_mean(gains):+.3f} validation MRR (judging half)"
            if gains
            else "not measured"
        ),
        n=f"{len(gains)} seeds",
        interval=fmt_interval(mean_interval(gains)) if len(gains) > 1 else "",
    )


REGISTRY.claim(
    ClaimSpec(
        key="message_passing_helps",
        claim="message passing (RGCN) helps link prediction on this graph, against the no-message-passing "
        "baseline",
        field_note="(the ablation's premise)",
        source="this notebook",
        kind=MEASURED,
        reads=("ablation",),
        read=read_message_passing,
        verdict=verdict_message_passing,
        rule=Rule(
            "RGCN rung (4 or 5) chosen on the selecting half of validation; per-seed gain over rung 6 on the "
            f"judging half: holds if its interval ≥ +{MP_MIN_GAIN:.2f}, refuted if < +{MP_MIN_GAIN:.2f}",
            "t",
            "at least",
            MP_MIN_GAIN,
            unit="seed",
        ),
        design=Design(
            # planning values (the notes give no figure): "helps" at twice the smallest gain that counts,
            # false at no gain; the threshold lies midway
            effect=2 * MP_MIN_GAIN,
            null=0.0,
            unit="seed",
            spread=MP_GAIN_SD,
            spread_source=SPREAD_SOURCE,
            draw=paired_normal_units(0.9, MP_GAIN_SD),
            n=AblationConfig().seeds,
            units=_seeds,
            full_n=ABLATION_FULL_SEEDS,
            full_minutes=ABLATION_FULL_MINUTES,
            full_minutes_source=FULL_SOURCE,
        ),
    )
)


# -- coalesce ------------------------------------------------------------------------------------
def verdict_coalesce(c: CoalesceMetrics) -> Verdict:
    """Does PyG's RGCNConv raise on unsorted, duplicated edges without ``coalesce``?

    Rule: holds when it raises under both ``aggr='add'`` and ``'mean'``; refuted when it raises under
    neither (whatever coalescing then changes is a different claim, reported in ``why``); inconclusive
    when only one aggregation raises.
    """
    if c.error_add and c.error_mean:
        return Verdict(
            HOLDS, f"RGCNConv (PyG {c.pyg_version}) raised on uncoalesced edges under add and mean"
        )
    if c.error_add or c.error_mean:
        return Verdict(INCONCLUSIVE, f"raised only under {'add' if c.error_add else 'mean'}")
    detail = (
        f"PyG {c.pyg_version}: unsorted edges with {c.edges - c.distinct_typed_edges} exact duplicates ran "
        "without error; coalescing per (src, dst, relation) removed only those (outputs change by max "
        f"|diff| add {c.max_abs_diff_add:.3g}, mean {c.max_abs_diff_mean:.3g})"
    )
    if c.out_of_range_after_coalesce_error:
        detail += (
            f"; an out-of-range id fails with or without coalesce ({c.out_of_range_after_coalesce_error})"
        )
    return Verdict(REFUTED, detail)


def read_coalesce(pitfalls: PitfallMetrics) -> Reading:
    c = pitfalls.coalesce
    return Reading(
        args=(c,),
        measured=f"{'error' if c.error_add or c.error_mean else 'no error'} (PyG {c.pyg_version})",
        n=f"1 graph, {c.edges} edges, 2 aggregations (deterministic; PyG {c.pyg_version})",
    )


REGISTRY.claim(
    ClaimSpec(
        key="coalesce_indexerror",
        claim="coalesce() is required; without it RGCNConv raises IndexError",
        field_note="IndexError",
        source="§3.1",
        kind=LIBRARY_FACT,
        reads=("pitfalls",),
        read=read_coalesce,
        verdict=verdict_coalesce,
        rule=Rule(
            "holds if RGCNConv raises on unsorted, duplicated edges under add and mean; refuted if under "
            "neither",
            "flag",
            "flag",
        ),
    )
)


# -- the scale curve -----------------------------------------------------------------------------
def verdict_curve_rises(gains: list[float], min_rise: float, level: float = 0.95) -> Verdict:
    """Does a learning curve rise? One gain per training run (seed): its last validation point's MRR
    minus its step-0 point's, both on the SAME validation queries.

    The queries of one run share its model, so resampling them says nothing about another run: the
    interval is across runs (t, at ``level``). Rule: **rises** (holds) when its low end is ≥
    ``min_rise``, **flat** (refuted: gained less than ``min_rise``, or fell) when its high end is below
    ``min_rise``, inconclusive when it straddles ``min_rise``, with one run, or with no curve.
    """
    if not gains:
        return Verdict(INCONCLUSIVE, "not measured: the run drew fewer than two validation points")
    if len(gains) < 2:
        return Verdict(
            INCONCLUSIVE,
            f"gain {gains[0]:+.4f} from one training run: no interval across runs — n too small; "
            "run >= 3 seeds (ScaleConfig.seeds)",
        )
    v = decide_at_least(
        mean_interval(gains, level),
        min_rise,
        what=f"validation-MRR gain from step 0 to the last point over {len(gains)} runs",
        n_hint=f"n={len(gains)} runs; more seeds narrow the interval, or train longer",
    )
    return Verdict(
        v.verdict, ("rises: " if v.verdict == HOLDS else "flat: " if v.verdict == REFUTED else "") + v.why
    )


def curve_min_rise(ceiling_mrr: float | None) -> float:
    """The rise the scale curve must show: CURVE_MIN_RISE_SHARE of the ceiling MRR, or CURVE_MIN_RISE
    without one."""
    return CURVE_MIN_RISE_SHARE * ceiling_mrr if ceiling_mrr else CURVE_MIN_RISE


def read_curve(scale: MinibatchMetrics) -> Reading:
    runs = [r for r in scale.rows if r.mode == "mini-batch" and len(r.curve_valid_mrr) >= 2]
    gains = [r.curve_valid_mrr[-1] - r.curve_valid_mrr[0] for r in runs]
    ceiling = scale.rows[0].ceiling_mrr if scale.rows else None
    min_rise = curve_min_rise(ceiling)
    limit = f"{CURVE_MIN_RISE_SHARE:.0%} of the ceiling MRR" if ceiling else "absolute, no ceiling known"
    first = runs[0] if runs else None
    measured = (
        f"graph seed {scale.graph_seed}, run seed {first.seed}: validation MRR "
        f"{first.curve_valid_mrr[0]:.4f} at step 0 → {first.curve_valid_mrr[-1]:.4f} after "
        f"{first.steps} steps"
        + (f" (ceiling {ceiling:.4f})" if ceiling else "")
        + "; gain per run "
        + ", ".join(f"{g:+.4f}" for g in gains)
        if first is not None
        else "not measured"
    )
    queries = 2 * first.evaluated_triples if first else 0
    return Reading(
        args=(gains, min_rise),
        measured=measured,
        n=f"{len(gains)} training runs (seeds) on one graph, each scored on {queries} validation queries",
        interval=fmt_interval(mean_interval(gains)) if len(gains) > 1 else "",
        rule=(
            "per training run, the gain from the step-0 point to the last on the same validation queries, on "
            f"a graph the defaults were not chosen on: rises (holds) if the interval across runs ≥ "
            f"{min_rise:.4g} ({limit}), flat (refuted) if < {min_rise:.4g}; one run: inconclusive"
        ),
    )


def _curve_draw(rng, value: float, n: int) -> tuple:
    """One simulated scale run: n per-run gains at ``value`` × the planning ceiling, judged against the
    bar that ceiling sets."""
    return list(rng.normal(value * SCALE_CEILING, SCALE_GAIN_SD, n)), curve_min_rise(SCALE_CEILING)


REGISTRY.claim(
    ClaimSpec(
        key="scale_curve_rises",
        claim="mini-batch RGCN training on a Hetionet-sized graph learns within the default step budget (its "
        "validation curve climbs a quarter of the way to the ceiling)",
        field_note="(what the mini-batch path is for)",
        source="this notebook",
        kind=MEASURED,
        reads=("scale",),
        read=read_curve,
        verdict=verdict_curve_rises,
        rule=Rule(
            "per training run, the validation-MRR gain from step 0 to the last point: holds if its interval "
            f"≥ {CURVE_MIN_RISE_SHARE:.0%} of the ceiling MRR, refuted if below",
            "t",
            "at least",
            CURVE_MIN_RISE_SHARE,
            unit="training run",
        ),
        design=Design(
            # on the share of the ceiling: true when the curve climbs half-way (a planning value), false when
            # it stays flat; the bar, a quarter, lies midway
            effect=0.5,
            null=0.0,
            unit="training run",
            spread=SCALE_GAIN_SD,
            spread_source=SPREAD_SOURCE,
            draw=_curve_draw,
            n=ScaleConfig().seeds,
            units=_seeds,
        ),
    )
)


# -- the headline --------------------------------------------------------------------------------
# How far a headline number may move between two runs before a comparison reports it: about the 95% range
# of the difference of two means of the default seeds, 2.8 × sd / √n, from the per-seed spreads above
# (test MRR: sd 0.0043 over 6 seeds of rung 6, bench/RESULTS.md).
def _reverse_gain(ablation: AblationMetrics) -> float:
    r2, r3 = ablation.rung(2), ablation.rung(3)
    return r3.valid_auc_judge - r2.valid_auc_judge if r2 and r3 else float("nan")


REGISTRY.headline_number(
    HeadlineSpec(
        "best_rung", ("ablation",), lambda a: a.best_rung, help="chosen on validation (selecting half)"
    )
)
REGISTRY.headline_number(
    HeadlineSpec("test_mrr", ("ablation",), lambda a: a.test_mrr, tolerance=0.01, help="the best rung, once")
)
REGISTRY.headline_number(
    HeadlineSpec("test_hits_at_10", ("ablation",), lambda a: a.test_hits_at_10, tolerance=0.01)
)
REGISTRY.headline_number(
    HeadlineSpec(
        "reverse_edge_valid_auc_gain",
        ("ablation",),
        _reverse_gain,
        tolerance=0.02,
        help="rung 3 − rung 2, judging half",
    )
)
REGISTRY.headline_number(
    HeadlineSpec("downstream_macro_f1", ("downstream",), lambda d: d.macro_f1, tolerance=0.07)
)

judge = REGISTRY.judge
headline = REGISTRY.headline
