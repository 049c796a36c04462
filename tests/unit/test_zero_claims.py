"""Every ZeRO row driven through every outcome at the notebook's real n (its first look and its budget), on
fabricated measurements with the fields the experiments write — GPU-only fields filled with CUDA-like
values; its reader; the ledger judged through the registry from fabricated, typed results; each noisy
row's design at both profiles; and the replicate loops that stop once their rows are decided."""

import dataclasses
import math

import pytest

from nbkit.claims import (
    ARITHMETIC,
    HOLDS,
    INCONCLUSIVE,
    NEEDS_GPU,
    NOT_JUDGED,
    REFUTED,
    family_level,
)
from nbkit.claims.judge import replicates_of, size
from nbkit.result import Result
from nbkit.zero import claims
from nbkit.zero.context import ZeroContext
from nbkit.zero.experiments import REGISTRY, field_note_figures
from nbkit.zero.metrics import (
    CrossoverMetrics,
    CrossoverRow,
    DsConfigMetrics,
    FailureDrillMetrics,
    FragmentationMetrics,
    FragmentationRun,
    LadderMetrics,
    LossScaleMetrics,
    LossScaleStep,
    MemoryMetrics,
    MethodSummary,
    Persistence,
    RungPeak,
    SpecDecMetrics,
    StageRatio,
    SubGroup,
)

PSI_7B = 6_738_415_616
LEVEL = family_level(REGISTRY.claims)  # the Bonferroni level of notebook 02's family: Holm's first
SUB_GROUP = SubGroup(1000, 1000, 1, 7, 1e9, 100_000, 7)


def spec(key):
    return next(s for s in REGISTRY.claims if s.key == key)


def budget(key, profile="default"):
    slug, rep = replicates_of(spec(key), REGISTRY.sizes)
    return rep.budget(REGISTRY[slug].config(False, profile)), rep.least


def verdict(key, *metrics):
    """The verdict the judge gives row ``key`` on these metrics when they are measured: its read, then its
    rule (or bespoke verdict)."""
    s = spec(key)
    reading = s.read(*metrics)
    assert not (reading.missing or reading.needs_gpu), reading
    return s.decide(reading.sample, LEVEL)


# -- each noisy row through each outcome at its first look and at its budget -----------------------------
# (key, a per-unit value where it holds, where it is refuted, two values whose interval straddles the bar)
NOISY = [
    ("zero1_saves", 0.65, 1.0, (0.55, 1.2)),
    ("zero2_saves", 0.65, 1.0, (0.55, 1.2)),
    ("zero3_saves", 0.73, 1.0, (0.55, 1.2)),
    ("estimator2_under", 1.3, 1.0, (0.9, 1.6)),
    ("estimator3_under", 1.73, 1.0, (0.9, 1.6)),
    ("fragmentation", 0.24, 0.0, (-0.2, 0.5)),
    ("speedup", 1.81, 1.0, (1.2, 2.6)),
]


@pytest.mark.parametrize("key, up, down, straddle", NOISY)
def test_each_noisy_row_reaches_every_outcome_at_its_real_n(key, up, down, straddle):
    s = spec(key)
    n_budget, least = budget(key)
    for n in (least, n_budget):
        jitter = [0.001 * (i % 3 - 1) for i in range(n)]
        assert s.decide([up + j for j in jitter], LEVEL).verdict == HOLDS
        assert s.decide([down + j for j in jitter], LEVEL).verdict == REFUTED
        assert s.decide([straddle[i % 2] for i in range(n)], LEVEL).verdict == INCONCLUSIVE
    assert s.decide([up], LEVEL).verdict == INCONCLUSIVE  # one unit: no interval
    assert s.decide([up] * 3, LEVEL).verdict == INCONCLUSIVE  # tied units: no zero-width interval


def test_a_ratio_row_at_an_early_looks_extreme_level_is_inconclusive_not_an_overflow():
    # two launches (one degree of freedom) at a first look's nominal level: wider than exp can hold
    v = spec("zero1_saves").decide([0.65, 0.651], 1 - 1e-12)
    assert v.verdict == INCONCLUSIVE and "[0, inf]" in v.why


@pytest.mark.parametrize("n", [*budget("fallback_rate")[::-1], budget("fallback_rate", "full")[0]])
def test_the_fallback_rate_reaches_every_outcome_clustered_by_request(n):
    """A request is a cluster of rounds: at the first look and the defaults' budget only long requests
    decide; at the full profile's budget, requests of 8 rounds do."""
    s = spec("fallback_rate")
    rounds = 200 if n < 10 else 8

    def share(p):  # each request's fallbacks, p of all rounds spread evenly over the requests
        return [(math.floor((i + 1) * p * rounds) - math.floor(i * p * rounds), rounds) for i in range(n)]

    assert s.decide(share(0.07), LEVEL).verdict == HOLDS
    assert s.decide(share(0.5), LEVEL).verdict == REFUTED
    lumpy = [(rounds // 4 if i % 2 else 0, rounds) for i in range(n)]  # 12.5 % pooled, very unequal
    assert s.decide(lumpy, LEVEL).verdict == INCONCLUSIVE
    assert s.decide([(1, 8)], LEVEL).verdict == INCONCLUSIVE  # one request: no interval


# -- the bespoke row: loss agreement with its positive control --------------------------------------------


@pytest.mark.parametrize(
    ("sample", "outcome", "why"),
    [
        ((0.2, 2.5), HOLDS, "the control (half the learning rate): 2.5 > 1"),
        ((3.0, 2.5), REFUTED, "> 1"),
        ((0.2, 0.5), INCONCLUSIVE, "no power"),  # the control within the tolerance too
        ((0.2, None), INCONCLUSIVE, "no positive control"),
    ],
)
def test_loss_agreement_needs_its_positive_control(sample, outcome, why):
    v = spec("loss_agree").decide(sample, LEVEL)
    assert v.verdict == outcome and why in v.why


def test_the_loss_rule_is_the_one_place_its_threshold_lives(monkeypatch):
    s = spec("loss_agree")
    assert s.decide((0.8, 2.5), LEVEL).verdict == HOLDS
    tighter = claims.exact_at_most(0.5, claims.LOSS_RULE.what)
    monkeypatch.setattr(claims, "LOSS_RULE", tighter)
    v = s.decide((0.8, 2.5), LEVEL)
    assert v.verdict == REFUTED and "> 0.5" in v.why


def _ladder(**over):
    """Shaped like ``run_ladder(...).metrics`` on 2 CPU ranks, one launch."""
    m = {
        "formula_ratios": [StageRatio("stage0", 1.0), StageRatio("stage1", 1.01), StageRatio("stage2", 1.03)],
        "ranks_device": "cpu",
        "loss_max_rel_diff": 0.004,
        "loss_tolerance": 0.02,
        "loss_rungs": 6,
        "control_rel_diff": 0.05,
        "replicas_in_sync": True,
        "checkpoint_round_trip_ok": True,
        "world_size": 2,
        "steps": 4,
        "sub_group": SUB_GROUP,
        "peaks": _peak(),
        "n_params": 4_800_000,
    }
    m.update(over)
    return LadderMetrics(**m)


def test_the_loss_reading_divides_by_the_precisions_tolerance():
    r = spec("loss_agree").read(_ladder())
    assert r.sample == pytest.approx((0.2, 2.5)) and "tolerance 0.02 (bf16)" in r.measured
    assert verdict("loss_agree", _ladder()).verdict == HOLDS
    assert spec("loss_agree").read(_ladder(loss_rungs=1)).missing


# -- the exact rows: arithmetic on the notes' figures, byte counts, flags, one drill ---------------------


def _memory():
    return MemoryMetrics(
        n_params=PSI_7B,
        largest_layer_params=131_072_000,
        plan={},
        world_size=8,
        gpus_per_node=8,
        nodes=1,
        field_notes=field_note_figures(),
    )


def test_the_notes_gb_figures_against_the_formula():
    assert verdict("stage0_peak", _memory()).verdict == REFUTED  # 78 GB is 0.72 of 16Ψ = 107.8 GB
    assert verdict("optimizer_gb", _memory()).verdict == REFUTED  # 12Ψ = 80.9 GB
    assert verdict("stage3_params_gb", _memory()).verdict == HOLDS  # 2Ψ/8 = 1.68 GB
    assert "fp32 master 27 GB" in spec("optimizer_gb").read(_memory()).measured
    assert "0.72 of the model states" in spec("stage0_peak").read(_memory()).measured
    for key in ("stage0_peak", "optimizer_gb", "stage3_params_gb", "batch_identity"):
        assert spec(key).kind == ARITHMETIC and not spec(key).noisy


def _gpu_ladder(stage1_gb, stage3_gb, micro_batch=2):
    """Fabricated CUDA ladder metrics in the notes' setting: Llama-2-7B on 8 GPU ranks, each rank's peak
    (CUDA's peak allocated bytes) as ``run_ladder`` records it."""

    def rung(stage, gb):
        return RungPeak(
            f"stage{stage}", stage, [gb * 1e9] * 7 + [gb * 1.01e9], [gb * 1e9 - 1e9] * 8, [gb * 1e9] * 8
        )

    peaks = [rung(0, 80.0), rung(1, stage1_gb), rung(3, stage3_gb)]
    return _ladder(peaks=peaks, ranks_device="cuda", world_size=8, n_params=PSI_7B, micro_batch=micro_batch)


@pytest.mark.parametrize(
    ("stage1_gb", "stage3_gb", "outcomes"), [(52.0, 31.0, (HOLDS, HOLDS)), (75.0, 70.0, (REFUTED, REFUTED))]
)
def test_the_per_card_peaks_are_judged_on_a_gpu_ladder_in_the_notes_setting(stage1_gb, stage3_gb, outcomes):
    lad = _gpu_ladder(stage1_gb, stage3_gb)
    assert (
        verdict("stage1_peak", _memory(), lad).verdict,
        verdict("stage3_peak", _memory(), lad).verdict,
    ) == outcomes
    r = spec("stage3_peak").read(_memory(), lad)
    assert r.sample == pytest.approx(stage3_gb * 1.01) and r.n == "largest of 8 ranks' peaks, one launch"
    # not the notes' micro-batch, or CPU ranks: the rows say what would decide them
    assert spec("stage1_peak").read(_memory(), _gpu_ladder(52.0, 31.0, micro_batch=4)).needs_gpu
    cpu = spec("stage1_peak").read(_memory(), _ladder())
    assert "Llama-2-7B's per-card peak at ZeRO-1" in cpu.needs_gpu and "4,800,000 on 2 cpu" in cpu.measured


@pytest.mark.parametrize(
    ("ds", "outcome"),
    [(DsConfigMetrics(64, 2, 4, 8), HOLDS), (DsConfigMetrics(128, 2, 4, 8), REFUTED)],
)
def test_the_batch_identity(ds, outcome):
    assert verdict("batch_identity", ds).verdict == outcome
    assert spec("batch_identity").read(DsConfigMetrics(128, 2, None, 8)).missing


@pytest.mark.parametrize(
    ("sg", "outcome"),
    [(dataclasses.replace(SUB_GROUP, shard_bytes_small=1500), HOLDS), (SUB_GROUP, REFUTED)],
)
def test_sub_group_size(sg, outcome):
    assert verdict("sub_group_size", _ladder(sub_group=sg)).verdict == outcome
    for acted_not in (dataclasses.replace(SUB_GROUP, n_sub_groups_small=1), None):
        assert spec("sub_group_size").read(_ladder(sub_group=acted_not)).missing
    one_rank_did_not_act = dataclasses.replace(SUB_GROUP, n_sub_groups_small_min=1)
    assert (
        "no more sub-groups" in spec("sub_group_size").read(_ladder(sub_group=one_rank_did_not_act)).missing
    )


@pytest.mark.parametrize(
    ("measured", "outcome"),
    [([1_048_576, 1_048_576], HOLDS), ([0, 0], REFUTED), ([1_048_576, 0], REFUTED)],
)
def test_persistence_judges_the_rank_farthest_from_the_rule(measured, outcome):
    p = Persistence(100_000, 75, 17, 524_288, 131_072, 1_048_576, measured)
    assert verdict("persistence", _ladder(persistence=p)).verdict == outcome
    nothing_under = Persistence(100_000, 75, 0, 0, 131_072, 0, [0, 0])
    assert "no tensor has" in spec("persistence").read(_ladder(persistence=nothing_under)).missing


@pytest.mark.parametrize(
    ("ratios", "outcome"),
    [
        ([StageRatio("stage0", 1.0), StageRatio("stage1", 1.03)], HOLDS),
        ([StageRatio("stage2", 1.2)], REFUTED),
    ],
)
def test_bytes_against_the_formula(ratios, outcome):
    assert verdict("bytes_formula", _ladder(formula_ratios=ratios)).verdict == outcome
    assert spec("bytes_formula").read(_ladder(formula_ratios=[])).missing


def test_bytes_vs_formula_reports_each_stages_worst_rank():
    from nbkit.zero.ladder import summarize

    def row(rung, stage, rank, params):  # a rank row as worker.run_rung writes it (stage 0, bf16)
        return {
            "rung": rung, "stage": stage, "rank": rank, "world_size": 2, "n_params": 1000,
            "precision": "bf16", "offload_optimizer": False, "offload_param": False,
            "param_persistence_threshold": 0, "bytes": {"params": params, "grads": 2000, "optimizer": 12000},
            "peak_bytes": 10**6, "peak_kind": "rss", "step_s": [0.1], "init_s": 1.0, "mean_losses": [1.0],
            "losses": [1.0], "eval_loss": 1.0, "param_checksum": 1.0, "optimizer_class": "x",
            "baseline_bytes": 10**5, "activation_bytes": 0, "init_peak_bytes": 10**5,
        }  # fmt: skip

    spec_ = {
        "precision": "bf16",
        "model": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1},
        "micro_batch": 1,
        "seq_len": 8,
        "rungs": [{"name": "stage0", "stage": 0, "param_persistence_threshold": 0}],
        "bucket_elements": 1000,
        "steps": 1,
        "seed": 0,
    }
    # rank 0 exact, rank 1 holds 1,600 B too many (+10 %): the mean (+5 %) would pass, the worst rank does not
    out = summarize([row("stage0", 0, 0, 2000), row("stage0", 0, 1, 3600)], spec_)
    assert out["bytes_vs_formula"] == {"stage0": pytest.approx(1.10)}
    lad = _ladder(formula_ratios=[StageRatio(k, v) for k, v in out["bytes_vs_formula"].items()])
    assert verdict("bytes_formula", lad).verdict == REFUTED


@pytest.mark.parametrize(
    ("key", "field"), [("replicas", "replicas_in_sync"), ("checkpoint", "checkpoint_round_trip_ok")]
)
def test_the_ladders_flags(key, field):
    assert verdict(key, _ladder(**{field: True})).verdict == HOLDS
    assert verdict(key, _ladder(**{field: False})).verdict == REFUTED
    assert verdict(key, _ladder(**{field: None})).verdict == INCONCLUSIVE
    assert spec("replicas").read(_ladder(world_size=1)).missing == "one rank: no replicas to compare"


def _drill(**over):
    """Shaped like ``run_failure_drill(...).metrics``."""
    m = dict(
        detected=True, reported_rank=1, expected_rank=1, how="kill", timed_out=False,
        message="rank 1 failed: killed by SIGKILL", seconds_to_report=3.2, timeout_s=60.0, ready_s=9.0,
    )  # fmt: skip
    m.update(over)
    return FailureDrillMetrics(**m)


@pytest.mark.parametrize(
    ("m", "outcome"),
    [
        (_drill(), HOLDS),
        (_drill(how="hang", timed_out=True), HOLDS),
        (_drill(detected=False, reported_rank=None), REFUTED),
        (_drill(reported_rank=0), REFUTED),
        (_drill(leftover_processes=[123]), REFUTED),
        (_drill(timed_out=True), INCONCLUSIVE),  # named only by the timeout
    ],
)
def test_the_failure_drill(m, outcome):
    assert verdict("failure_drill", m).verdict == outcome


def _scale(device="cpu", precision="fp16", history=(), not_measured=None, world_size=1):
    return LossScaleMetrics(device, list(history), not_measured, precision, world_size)


def _history(overflow=True, skipped=True, drop=True, provoked=True):
    """Shaped like rank 0's typed ``loss_scale_history`` (worker.run_rung, fp16 on CUDA)."""
    return [
        LossScaleStep(step=1, scale=65536.0, provoked=False, overflow=False, skipped=False),
        LossScaleStep(2, 32768.0 if drop else 65536.0, provoked=provoked, overflow=overflow, skipped=skipped),
    ]


@pytest.mark.parametrize(
    ("m", "outcome"),
    [
        (_scale("cuda", history=_history()), HOLDS),
        (_scale("cuda", history=_history(overflow=False, skipped=False, drop=False)), REFUTED),
        (_scale("cuda", history=_history(drop=False)), REFUTED),
    ],
)
def test_the_loss_scale_drill(m, outcome):
    assert verdict("loss_scale", m).verdict == outcome


def test_the_loss_scale_drill_says_why_it_was_not_judged():
    read = spec("loss_scale").read
    assert "one GPU is enough" in read(_scale("cpu", not_measured="no fp16 on CPU")).needs_gpu
    assert "provoked" in read(_scale("cuda", history=_history(provoked=False))).missing
    assert read(_scale("cuda", precision="bf16")).missing and read(_scale("cuda")).missing


@pytest.mark.parametrize(("top", "outcome"), [((0.80, 0.85), HOLDS), ((0.80, 0.95), REFUTED)])
def test_the_crossover_judges_the_largest_sizes_worst_rank(top, outcome):
    sizes = (("256x8", 4_000_000), ("512x8", 19_000_000))
    rows = [
        CrossoverRow(s, n, 3, 1.0, 1.0, 1.0, 1.0, 1.0, lo, hi, 1.0, 0.5, "backward", "forward_backward")
        for (s, n), (lo, hi) in zip(sizes, ((1.01, 1.03), top), strict=True)
    ]
    sweep = CrossoverMetrics({}, "cpu", 200_000, 2, "256x8,512x8", rows)
    assert verdict("zero3_crossover", sweep).verdict == outcome
    assert "largest size 512x8" in spec("zero3_crossover").read(sweep).measured
    assert spec("zero1_crossover").read(sweep).missing  # no stage-1 rows in this sweep


def test_lossless():
    assert verdict("lossless", _specdec(_method([1], [8], identical=False))).verdict == HOLDS
    assert verdict("lossless", _specdec(_method([1], [8]))).verdict == REFUTED


# -- readers ------------------------------------------------------------------------------------------------


def _peak(growth0=(20e6, 21e6), growth_k=(10e6, 11e6), estimate=5e6, launch=0):
    """Shaped like ``run_ladder(...).metrics.peaks`` of one launch (ladder.peak_summary)."""

    def rung(stage, growth, est):
        return RungPeak(
            rung=f"stage{stage}",
            stage=stage,
            measured=[5e8 + g for g in growth],
            growth=list(growth),
            predicted=[5e8] * len(growth),
            deepspeed_estimate=est,
            model_states=16e6 / (4 if stage == 3 else 1),
            launch=launch,
        )

    return [
        rung(0, growth0, None),
        rung(1, growth_k, None),
        rung(2, growth_k, estimate),
        rung(3, growth_k, estimate),
    ]


def _launches(ratio_k, n, estimate=5e6):
    """``n`` launches whose stage-k growth is ``ratio_k`` × stage 0's (a little spread by launch)."""
    peaks = []
    for launch in range(n):
        k = ratio_k * (1 + 0.01 * (launch - (n - 1) / 2))
        peaks += _peak(growth_k=(20e6 * k, 21e6 * k), estimate=estimate, launch=launch)
    return _ladder(peaks=peaks, launches=n)


def test_the_saving_and_estimator_readings_are_one_ratio_per_launch():
    lad = _launches(0.65, 4, estimate=10e6)
    saves = spec("zero2_saves").read(lad)
    assert saves.sample == pytest.approx(lad.growth_ratios(2)) and len(saves.sample) == 4
    assert saves.n == "4 launch(es) × 2 ranks" and "bucket" in saves.measured
    under = spec("estimator3_under").read(lad)
    assert under.sample == pytest.approx(lad.estimate_ratios(3))
    assert "model states ÷ estimate 0.40 (exact bytes)" in under.measured
    assert "as a card's memory the factor needs CUDA ranks" in under.measured
    cuda = spec("estimator3_under").read(dataclasses.replace(lad, ranks_device="cuda"))
    assert "CUDA peak allocated bytes" in cuda.measured and "needs CUDA" not in cuda.measured
    assert spec("estimator2_under").read(_ladder(peaks=_peak(estimate=None))).missing
    assert spec("zero1_saves").read(_ladder(peaks=[])).missing


def test_the_estimator_check_says_what_a_run_answers():
    """The estimate beside the model states the ranks held (exact bytes on any device) and, per launch,
    the factor measured ÷ estimated; a CPU rank's RSS is never a card's memory, a CUDA rank's peak is."""
    cpu = _launches(0.67, 3, estimate=8e6)
    e = cpu.estimator_check(2)
    assert (e.stage, e.n_params, e.estimate_bytes) == (2, 4_800_000, 8e6)
    assert e.model_states_bytes == 16e6 and e.states_over_estimate == 2.0
    assert e.growth_over_estimate == tuple(cpu.estimate_ratios(2)) and len(e.growth_over_estimate) == 3
    assert not e.per_card and e.measured_as == "process RSS (cpu ranks)"
    cuda = dataclasses.replace(cpu, ranks_device="cuda").estimator_check(3)
    assert (
        cuda.per_card and cuda.measured_as == "CUDA peak allocated bytes" and cuda.model_states_bytes == 4e6
    )
    assert cpu.estimator_check(1) is None  # DeepSpeed has no stage-1 estimator
    assert _ladder(peaks=[]).estimator_check(2) is None  # the stage did not run


def _frag(a, b):
    """Shaped like ``run_fragmentation(...).metrics`` on CUDA: each seed's mean gap ratio per interval
    (expandable segments off), runs in a shuffled order."""
    runs = [
        FragmentationRun(interval, False, seed, order=2 * seed + k, mean_gap_ratio=g, max_inactive_split=0,
                         alloc_retries=0, checkpoints=400 // interval)
        for seed, pair in enumerate(zip(a, b, strict=True))
        for k, (interval, g) in enumerate(zip((50, 200), pair, strict=True))
    ]  # fmt: skip
    return FragmentationMetrics(needs_cuda=False, steps=400, seeds=len(a), runs=runs, intervals=(50, 200))


CPU_FRAG = FragmentationMetrics(needs_cuda=True, steps=6, tensor_bytes_peak={}, unavailable={})


def test_the_fragmentation_reading_is_one_difference_per_seed():
    r = spec("fragmentation").read(_frag([0.42, 0.43, 0.41], [0.18, 0.17, 0.19]))
    assert r.sample == pytest.approx([0.24, 0.26, 0.22]) and "OOM rates not measured" in r.measured
    assert verdict("fragmentation", _frag([0.42, 0.421, 0.419], [0.18] * 3)).verdict == HOLDS
    assert "reserved − allocated" in spec("fragmentation").read(CPU_FRAG).needs_gpu
    assert spec("fragmentation").read(FragmentationMetrics(needs_cuda=False, steps=6, intervals=(2,))).missing


def _method(fallback, rounds, speedups=(1.8, 1.85, 1.79), identical=True, per_call=1.02):
    """One method's summary, shaped like ``run_specdec(...).metrics.truncated_draft``."""
    return MethodSummary(
        tok_s_baseline=10.0, tok_s_speculative=15.0, speedup_measured=1.5, speedup_predicted=2.0,
        acceptance_rate=0.6, fallback_rate=sum(fallback) / sum(rounds), rounds=sum(rounds),
        fallback_rounds=sum(fallback), proposed=1000, accepted=600, new_tokens=round(100 * per_call),
        target_calls_speculative=100, all_identical=identical, n_prompts=len(rounds), speedups=list(speedups),
        rounds_per_prompt=list(rounds), fallback_rounds_per_prompt=list(fallback),
    )  # fmt: skip


def _specdec(method, device="cpu"):
    return SpecDecMetrics(
        prompt_lookup=method, truncated_draft=method, device=device, dtype="float32", timings=5,
        loadavg=(1.0, 1.2), draft_layers=6, target_layers=30,
    )  # fmt: skip


def test_the_fallback_rate_is_read_only_for_a_draft_the_notes_speedup_allows():
    untrained = spec("fallback_rate").read(_specdec(_method([29, 28, 30], [30, 30, 30])))
    assert "SmolLM2 truncated to 6 of 30 layers, not Medusa heads" in untrained.measured
    assert untrained.missing.startswith("needs a trained draft like the notes' Medusa heads: this one (87/90")
    assert "yields 1.02 tokens per target call" in untrained.missing
    trained = spec("fallback_rate").read(_specdec(_method([1, 0, 1], [8, 8, 8], per_call=3.0)))
    assert not trained.missing and trained.sample == [(1, 8), (0, 8), (1, 8)]


def test_the_speedup_is_judged_on_cuda_only():
    assert spec("speedup").read(_specdec(_method([1], [8]))).needs_gpu == "memory-bound decoding throughput"
    row = spec("speedup").read(_specdec(_method([1, 1], [8, 8]), device="cuda"))
    assert "load average 1.0 → 1.2" in row.measured and "5 interleaved timings" in row.n
    assert (
        verdict("speedup", _specdec(_method([1], [8], speedups=[1.8, 1.85, 1.79, 1.82] * 2), "cuda")).verdict
        == HOLDS
    )


# -- the ledger through the registry -----------------------------------------------------------------------


# the noisy rows this CPU-shaped context cannot measure (needs GPU, or a trained draft)
UNMEASURED = {"fragmentation", "speedup", "fallback_rate"}


def _results(launches):
    return {
        "memory": _memory(),
        "ds_config": DsConfigMetrics(128, 2, 4, 8),
        "ladder": _launches(0.65, launches, estimate=10e6),
        "crossover": CrossoverMetrics({}, None, 200_000, 2, ""),
        "loss_scale": _scale(not_measured="no fp16 on CPU"),
        "failure_drill": _drill(),
        "fragmentation": CPU_FRAG,
        "specdec": _specdec(_method([29, 28, 30], [30, 30, 30])),
    }


def _ctx(launches=None, **kw):
    launches = launches or budget("zero1_saves")[0]
    ctx = ZeroContext("cpu", **kw)
    for slug, metrics in _results(launches).items():
        ctx.keep(slug, Result(metrics=metrics, config=REGISTRY[slug].config(False, ctx.profile)))
    return ctx


def test_the_ledger_from_fabricated_results_in_a_context(monkeypatch):
    seen = []
    monkeypatch.setattr("nbkit.experiment.record", lambda name, value: seen.append(name))
    empty = claims.judge(ZeroContext("cpu"))
    assert [r.key for r in empty] == [s.key for s in REGISTRY.claims] and len(empty) == 26
    assert all(r.measured == "not measured" and r.verdict == INCONCLUSIVE for r in empty)
    rows = {r.key: r for r in claims.judge(_ctx())}
    assert seen == ["claims", "claims"]
    for key, row in rows.items():  # an exact row shows "exact"; a noisy row measured here, its design
        assert row.exact == (not spec(key).noisy), key
        assert (row.p_holds_if_true is None) == (
            row.exact or row.measured == "not measured" or key in UNMEASURED
        )
    assert rows["batch_identity"].verdict == REFUTED and rows["sub_group_size"].verdict == REFUTED
    assert rows["loss_agree"].verdict == HOLDS and rows["failure_drill"].verdict == HOLDS
    for key in ("loss_scale", "fragmentation", "speedup", "stage1_peak", "stage3_peak"):
        assert rows[key].verdict == NEEDS_GPU, key
    assert (
        rows["fallback_rate"].verdict == INCONCLUSIVE and "needs a trained draft" in rows["fallback_rate"].why
    )
    assert rows["zero1_crossover"].why == "not measured: no size sweep in this run (CROSSOVER_SIZES)"
    # the clear ratios decide within the launches that ran, at their first deciding look
    for key in ("zero1_saves", "zero2_saves", "zero3_saves", "estimator3_under"):
        assert rows[key].verdict == HOLDS and rows[key].decided, (key, rows[key].why)
        assert rows[key].units <= rows[key].budget and "Holm" in rows[key].why, key
    assert rows["estimator2_under"].verdict == HOLDS  # ×1.33 over the estimate
    assert rows["estimator2_under"].source == claims.OWN and rows["estimator2_under"].field_note == ""
    one = {r.key: r for r in claims.judge(_ctx(launches=1))}
    assert (
        one["zero1_saves"].verdict == INCONCLUSIVE
        and "its first look needs 2 launches" in one["zero1_saves"].why
    )
    smoke = claims.judge(_ctx(smoke=True))
    assert {r.verdict for r in smoke} == {NOT_JUDGED}


def test_a_design_that_cannot_decide_at_the_defaults_says_what_the_full_profile_runs():
    ctx = _ctx()
    frag = _frag([0.42, 0.43, 0.41], [0.18, 0.17, 0.19])
    ctx.keep("fragmentation", Result(metrics=frag, config=REGISTRY["fragmentation"].config(False)))
    row = next(r for r in claims.judge(ctx) if r.key == "fragmentation")
    assert row.verdict == INCONCLUSIVE and not row.decided
    full = budget("fragmentation", "full")[0]
    assert (
        row.why.startswith("not decided at defaults")
        and f"the full profile runs up to {full} seeds" in row.why
    )


def test_the_headline_has_its_numbers_in_words(monkeypatch):
    seen = {}
    monkeypatch.setattr("nbkit.experiment.record", lambda name, value: seen.__setitem__(name, value))
    ctx = _ctx(launches=1)
    ctx.keep("ladder", Result(metrics=_ladder(), config=None))
    head = claims.headline(ctx)
    assert head["model_params_billion"] == pytest.approx(6.738, abs=1e-3)
    assert head["stage3_over_stage0_model_states"] == 0.25 and head["worst_measured_over_formula"] == 1.03
    assert head["stage3_over_stage0_peak_growth"] == pytest.approx((10 / 20 + 11 / 21) / 2)
    assert head["prompt_lookup_acceptance"] == 0.6 and head["loss_max_rel_diff"] == 0.004
    assert seen["headline_spec"]["model_params_billion"]["unit"] == "billion"
    assert all(s["label"] for s in seen["headline_spec"].values())
    assert math.isnan(claims.headline(ZeroContext("cpu"))["loss_max_rel_diff"])


# -- the designs --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "at_defaults", "in_full"),
    [
        ("zero1_saves", True, True),
        ("zero2_saves", True, True),
        ("zero3_saves", True, True),
        ("estimator2_under", True, True),
        ("estimator3_under", True, True),
        ("fragmentation", False, True),
        ("speedup", False, True),
        ("fallback_rate", False, True),
    ],
)
def test_each_design_at_the_defaults_and_in_the_full_profile(key, at_defaults, in_full):
    s = spec(key)
    assert s.noisy and s.rule.false_values()
    for profile, expected in (("default", at_defaults), ("full", in_full)):
        n, least = budget(key, profile)
        results = {
            slug: Result(metrics=None, config=REGISTRY[slug].config(False, profile)) for slug in s.reads
        }
        sized = size(s, claims.Reading([0.0] * least, ""), results, REGISTRY.sizes, LEVEL)
        assert sized.budget == n and sized.oc.decided is expected, (profile, sized.oc)
        if expected:
            assert max(sized.oc.p_refuted_if_true, sized.oc.p_holds_if_false) <= 0.05


def test_the_saving_bar_is_the_notes_smallest_step_not_their_magnitudes():
    assert claims.SAVES_BAR == pytest.approx(68 / 78) and claims.UNDER_BAR == pytest.approx(78 / 68)
    for stage in (1, 2, 3):
        rule = spec(f"zero{stage}_saves").rule
        assert rule.threshold == claims.SAVES_BAR and rule.false_values() == (1.0,)
        assert rule.claimed == pytest.approx(claims.SAVES_CLAIMED[stage])
    assert claims.SAVES_CLAIMED[2] == pytest.approx(42 / 78)  # ZeRO-1's 52 GB less "another 10 GB"


# -- the replicate loops stop once their rows are decided --------------------------------------------------


def test_the_ladders_launch_loop_stops_once_its_rows_are_decided(monkeypatch):
    """``run_ladder`` with the launches faked (each launch's stage-k growth a seeded ratio of stage 0's): the
    loop judges the rows it feeds after each launch and stops at the first launch where all are decided."""
    from types import SimpleNamespace

    from nbkit.zero import experiments as ze
    from nbkit.zero.config import LadderConfig

    launched = []

    def fake_launch(cfg, spec_, device, live, **hooks):
        launched.append(spec_["seed"])
        res = SimpleNamespace(rows=lambda: [], wall_s=1.0, ready_s=0.5)
        monitor = SimpleNamespace(series=lambda: {}, samples=[], figure=lambda title: None)
        return res, monitor, []

    def fake_summarize(rows, spec_, wall_s=None):
        k = 0.65 * (1 + 0.01 * (spec_["seed"] % 3 - 1))
        kept = lambda p: {f.name: getattr(p, f.name) for f in dataclasses.fields(p)}  # noqa: E731
        peak = {p.rung: kept(p) for p in _peak(growth_k=(20e6 * k, 21e6 * k), estimate=10e6)}
        for p in peak.values():
            del p["rung"], p["launch"]
        checks = {"loss_max_rel_diff": 0.004, "loss_rungs": 6, "control_rel_diff": 0.05}
        checks.update(replicas_in_sync=True, checkpoint_round_trip_ok=True)
        figures = dict.fromkeys(("figure", "loss_figure", "time_figure", "waterfall_figure"))
        return {
            "ladder": [],
            "bytes_vs_formula": {},
            "checks": checks,
            "peak": peak,
            "persistence": None,
            **figures,
        }

    monkeypatch.setattr(ze, "ladder_spec", lambda cfg, device, fail=None: {"rungs": [], "seed": cfg.seed})
    monkeypatch.setattr(ze, "_launch_ladder", fake_launch)
    monkeypatch.setattr(ze, "summarize", fake_summarize)
    cfg = LadderConfig()
    out = ze.run_ladder(cfg, ZeroContext("cpu"))
    assert 2 <= out.metrics.launches == len(launched) < cfg.launches and launched == list(
        range(len(launched))
    )
    assert out.metrics.growth_ratios(1) == pytest.approx([0.65 * (1 + 0.01 * (s % 3 - 1)) for s in launched])
    # a smoke context never stops early, nor does a loop none of whose rows its budget can decide
    launched.clear()
    assert ze.run_ladder(cfg, ZeroContext("cpu", smoke=True)).metrics.launches == cfg.launches
