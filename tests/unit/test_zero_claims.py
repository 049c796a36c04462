"""Every ZeRO verdict function through every outcome it can return at the notebook's real n, fed what
the specs read off typed metrics shaped like the real (CPU) and GPU paths — GPU-only fields filled with
fabricated CUDA-like values — and each spec's operating characteristics."""

import dataclasses
import math

import pytest

from nbkit.claims import DEFAULT, FULL, HOLDS, INCONCLUSIVE, NEEDS_GPU, REFUTED, operating_characteristics
from nbkit.result import Result
from nbkit.zero import claims as zc
from nbkit.zero.context import ZeroContext
from nbkit.zero.experiments import field_note_figures
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
SPECS = {s.key: s for s in zc.REGISTRY.claims}
SUB_GROUP = SubGroup(1000, 1000, 1, 7, 1e9, 100_000, 7)


def _verdict(key, *metrics):
    spec = SPECS[key]
    return spec.decide(spec.read(*metrics))


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


def _gpu_ladder(stage1_gb, stage3_gb, micro_batch=2):
    """Fabricated CUDA ladder metrics in the field notes' setting: Llama-2-7B on 8 GPU ranks, each rank's
    peak (CUDA's peak allocated bytes) as ``run_ladder`` would record it."""

    def rung(stage, gb):
        return RungPeak(f"stage{stage}", stage, [gb * 1e9] * 8, [gb * 1e9 - 1e9] * 8, [gb * 1e9] * 8)

    peaks = [rung(0, 80.0), rung(1, stage1_gb), rung(3, stage3_gb)]
    return _ladder(peaks=peaks, ranks_device="cuda", world_size=8, n_params=PSI_7B, micro_batch=micro_batch)


def test_the_field_notes_figures_are_the_memory_models_arithmetic():
    assert _verdict("stage0_peak", _memory()).verdict == REFUTED  # 78 < 0.85 × 16Ψ = 107.8 GB
    assert _verdict("optimizer_gb", _memory()).verdict == REFUTED  # 12Ψ = 80.9 GB
    assert _verdict("stage3_params_gb", _memory()).verdict == HOLDS  # 2Ψ/8 = 1.68 GB
    assert "fp32 master 27 GB" in SPECS["optimizer_gb"].read(_memory()).measured
    assert {SPECS[k].kind for k in ("stage0_peak", "optimizer_gb", "stage3_params_gb", "batch_identity")} == {
        "arithmetic"
    }


@pytest.mark.parametrize(
    ("args", "verdict"),
    [
        ((78.0, 107.8), REFUTED),  # a peak below its own model states
        ((52.0, 37.1), NEEDS_GPU),  # above the model states: the rest needs the GPUs
        ((32.0, 13.5, (31.0, 33.0)), HOLDS),  # every rank inside ±15 %
        ((32.0, 13.5, (60.0, 61.0)), REFUTED),  # ... far outside
        ((32.0, 13.5, (30.0, 40.0)), INCONCLUSIVE),  # ... the ranks' range straddles the band's edge
    ],
)
def test_verdict_peak_claim(args, verdict):
    assert zc.verdict_peak_claim(*args).verdict == verdict


@pytest.mark.parametrize(
    ("stage1_gb", "stage3_gb", "verdicts"),
    [(52.0, 31.0, (HOLDS, HOLDS)), (75.0, 70.0, (REFUTED, REFUTED))],
)
def test_stage1_and_stage3_peak_rows_are_decided_by_a_gpu_ladder(stage1_gb, stage3_gb, verdicts):
    """The GPU path end to end on CPU: the ladder's typed per-rank peaks decide the stage-1/3 rows."""
    lad = _gpu_ladder(stage1_gb, stage3_gb)
    assert (
        _verdict("stage1_peak", _memory(), lad).verdict,
        _verdict("stage3_peak", _memory(), lad).verdict,
    ) == verdicts
    assert "range over 8 ranks" in SPECS["stage3_peak"].read(_memory(), lad).n
    # not the notes' micro-batch, or CPU ranks: the rows say what would decide them
    other = _gpu_ladder(52.0, 31.0, micro_batch=4)
    assert _verdict("stage1_peak", _memory(), other).verdict == NEEDS_GPU
    cpu = _verdict("stage1_peak", _memory(), _ladder())
    assert cpu.verdict == NEEDS_GPU and "4,800,000 on 2 cpu" in cpu.why


@pytest.mark.parametrize(
    ("claimed", "formula", "verdict"),
    [(1.75, 1.68, HOLDS), (28.0, 80.9, REFUTED), (28.0, math.nan, INCONCLUSIVE)],
)
def test_verdict_formula_figure(claimed, formula, verdict):
    assert zc.verdict_formula_figure(claimed, formula).verdict == verdict


@pytest.mark.parametrize(
    ("ds", "verdict"),
    [
        (DsConfigMetrics(64, 2, 4, 8), HOLDS),
        (DsConfigMetrics(128, 2, 4, 8), REFUTED),
        (DsConfigMetrics(128, 2, None, 8), INCONCLUSIVE),
    ],
)
def test_verdict_batch_identity(ds, verdict):
    assert zc.verdict_batch_identity(ds).verdict == verdict


@pytest.mark.parametrize(
    ("sg", "verdict"),
    [
        (dataclasses.replace(SUB_GROUP, shard_bytes_small=1500), HOLDS),
        (SUB_GROUP, REFUTED),
        (dataclasses.replace(SUB_GROUP, shard_bytes_small=1030), INCONCLUSIVE),
        (dataclasses.replace(SUB_GROUP, n_sub_groups_small=1), INCONCLUSIVE),
        (dataclasses.replace(SUB_GROUP, n_sub_groups_small_min=1), INCONCLUSIVE),  # one rank did not act
        (None, INCONCLUSIVE),
    ],
)
def test_verdict_sub_group_size(sg, verdict):
    assert zc.verdict_sub_group_size(sg).verdict == verdict


@pytest.mark.parametrize(
    ("ratios", "verdict"),
    [
        ([StageRatio("stage0", 1.0), StageRatio("stage1", 1.03)], HOLDS),
        ([StageRatio("stage0", 1.0), StageRatio("stage2", 1.2)], REFUTED),
        ([], INCONCLUSIVE),
    ],
)
def test_verdict_bytes_formula(ratios, verdict):
    assert zc.verdict_bytes_formula(ratios).verdict == verdict


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

    spec = {
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
    out = summarize([row("stage0", 0, 0, 2000), row("stage0", 0, 1, 3600)], spec)
    assert out["bytes_vs_formula"] == {"stage0": pytest.approx(1.10)}
    lad = _ladder(formula_ratios=[StageRatio(k, v) for k, v in out["bytes_vs_formula"].items()])
    assert _verdict("bytes_formula", lad).verdict == REFUTED


@pytest.mark.parametrize(
    ("args", "verdict", "why"),
    [
        ((0.004, 0.02, 0.05, 6), HOLDS, "control differs"),
        ((0.3, 0.02, 0.05, 6), REFUTED, "> 0.02"),
        ((0.004, 0.02, 0.01, 6), INCONCLUSIVE, "cannot see a changed update"),  # no power
        ((0.004, 0.02, None, 6), INCONCLUSIVE, "no positive control"),
        ((0.0, 0.02, 0.05, 1), INCONCLUSIVE, "fewer than two rungs"),
    ],
)
def test_verdict_loss_agreement_needs_its_positive_control(args, verdict, why):
    v = zc.verdict_loss_agreement(*args)
    assert v.verdict == verdict and why in v.why


@pytest.mark.parametrize(
    ("args", "verdict"),
    [((True, 2), HOLDS), ((False, 2), REFUTED), ((True, 1), INCONCLUSIVE), ((None, 2), INCONCLUSIVE)],
)
def test_verdict_replicas(args, verdict):
    assert zc.verdict_replicas(*args).verdict == verdict


@pytest.mark.parametrize(("ok", "verdict"), [(True, HOLDS), (False, REFUTED), (None, INCONCLUSIVE)])
def test_verdict_checkpoint(ok, verdict):
    assert zc.verdict_checkpoint(ok).verdict == verdict


def _drill(**over):
    """Shaped like ``run_failure_drill(...).metrics``."""
    m = dict(
        detected=True, reported_rank=1, expected_rank=1, how="kill", timed_out=False,
        message="rank 1 failed: killed by SIGKILL", seconds_to_report=3.2, timeout_s=60.0, ready_s=9.0,
    )  # fmt: skip
    m.update(over)
    return FailureDrillMetrics(**m)


@pytest.mark.parametrize(
    ("m", "verdict"),
    [
        (_drill(), HOLDS),
        (_drill(how="hang", timed_out=True), HOLDS),
        (_drill(detected=False, reported_rank=None), REFUTED),
        (_drill(reported_rank=0), REFUTED),
        (_drill(leftover_processes=[123]), REFUTED),
        (_drill(timed_out=True), INCONCLUSIVE),
    ],
)
def test_verdict_failure_drill(m, verdict):
    assert zc.verdict_failure_drill(m).verdict == verdict


def _scale(device="cpu", precision="fp16", history=(), not_measured=None, world_size=1):
    return LossScaleMetrics(device, list(history), not_measured, precision, world_size)


def _history(overflow=True, skipped=True, drop=True, provoked=True):
    """Shaped like rank 0's typed ``loss_scale_history`` (worker.run_rung, fp16 on CUDA)."""
    return [
        LossScaleStep(step=0, scale=65536.0, provoked=False, overflow=False, skipped=False),
        LossScaleStep(step=1, scale=65536.0, provoked=False, overflow=False, skipped=False),
        LossScaleStep(
            step=2, scale=32768.0 if drop else 65536.0, provoked=provoked, overflow=overflow, skipped=skipped
        ),
    ]


@pytest.mark.parametrize(
    ("m", "verdict"),
    [
        (_scale("cuda", history=_history()), HOLDS),
        (_scale("cuda", history=_history(overflow=False, skipped=False, drop=False)), REFUTED),
        (_scale("cuda", history=_history(drop=False)), REFUTED),
        (_scale("cuda", history=_history(provoked=False)), INCONCLUSIVE),
        (_scale("cuda", precision="bf16"), INCONCLUSIVE),
        (_scale("cuda"), INCONCLUSIVE),  # ran on a GPU, recorded nothing
        (_scale("cpu", not_measured="no fp16 on CPU"), NEEDS_GPU),
    ],
)
def test_verdict_loss_scale(m, verdict):
    assert zc.verdict_loss_scale(m).verdict == verdict


@pytest.mark.parametrize(("gpus", "ranks"), [(0, None), (1, 1), (2, 2), (4, 2)])
def test_loss_scale_drill_runs_on_the_gpus_there_are(monkeypatch, gpus, ranks):
    """0 GPUs: nothing launched, the result says it needs one GPU; 1 GPU: one rank; 2+: the drill's 2."""
    import torch

    from nbkit.zero import experiments as ze
    from nbkit.zero.config import LossScaleConfig

    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    ctx = ZeroContext("auto")
    ctx._resolved = torch.device("cuda" if gpus else "cpu")  # a fabricated CUDA machine
    launched = []

    def fake_ladder(cfg, ctx=None, live=None):
        launched.append(cfg)
        assert ctx.ranks_device(cfg.world_size) == "cuda"  # one GPU per rank: really on CUDA
        return Result(metrics=_ladder(ranks_device="cuda", precision=cfg.precision, world_size=cfg.world_size,
                                      loss_scale_history=_history()))  # fmt: skip

    monkeypatch.setattr(ze, "run_ladder", fake_ladder)
    out = ze.run_loss_scale_drill(LossScaleConfig.smoke(), ctx)
    if ranks is None:
        assert launched == [] and "needs one CUDA GPU" in out.metrics.not_measured
        assert zc.verdict_loss_scale(out.metrics).verdict == NEEDS_GPU
    else:
        assert [c.world_size for c in launched] == [ranks] and launched[0].precision == "fp16"
        assert zc.verdict_loss_scale(out.metrics).verdict == HOLDS


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


@pytest.mark.parametrize(
    ("m", "verdict", "why"),
    [
        (_frag([0.42, 0.43, 0.41], [0.18, 0.17, 0.19]), HOLDS, "≥ 0.12"),
        (_frag([0.20, 0.21, 0.19], [0.18, 0.17, 0.19]), REFUTED, "< 0.12"),
        (_frag([0.20, 0.50, 0.35], [0.18, 0.17, 0.19]), INCONCLUSIVE, "n too small"),
        (_frag([0.42], [0.18]), INCONCLUSIVE, "one run"),  # one run's per-step values are not independent
        (FragmentationMetrics(needs_cuda=False, steps=6, intervals=(2,)), INCONCLUSIVE, "not measured"),
        (CPU_FRAG, NEEDS_GPU, "CUDA"),
    ],
)
def test_verdict_fragmentation_at_three_seeds(m, verdict, why):
    v = _verdict("fragmentation", m)
    assert v.verdict == verdict and why in v.why


def test_fragmentation_decides_only_in_the_full_profile_and_the_audit_api_is_kept():
    spec = SPECS["fragmentation"]
    assert (
        not operating_characteristics(spec, DEFAULT).decided and operating_characteristics(spec, FULL).decided
    )
    # the audit's check calls the one verdict with its own label
    assert zc.verdict_gap_difference([0.3, 0.31, 0.29], what="gap(10) − gap(200)").verdict == HOLDS


def test_fragmentation_order_is_shuffled_per_seed_and_checkpoints_copy_on_the_device(tmp_path):
    import torch

    from nbkit.zero.config import FragmentationConfig
    from nbkit.zero.fragmentation import checkpoint_on_device, run_order

    order = run_order(FragmentationConfig(seeds=6, expandable_segments=(False,)))
    firsts = {order[2 * k][2] for k in range(6)}
    assert firsts == {50, 200} and sorted(order) == sorted((s, False, i) for s in range(6) for i in (50, 200))
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 4)).sum().backward()
    opt.step()
    copied = checkpoint_on_device(model, opt, tmp_path / "c.pt")
    assert copied == 20 * 4 * 3 + 2 * 4  # weights + both Adam moments (fp32) + a step counter per tensor
    assert set(torch.load(tmp_path / "c.pt")) == {"model", "opt"}


def _method(fallback, rounds, speedups=(1.8, 1.85, 1.79), identical=True):
    """One method's summary, shaped like ``run_specdec(...).metrics.truncated_draft``."""
    return MethodSummary(
        tok_s_baseline=10.0, tok_s_speculative=15.0, speedup_measured=1.5, speedup_predicted=2.0,
        acceptance_rate=0.6, fallback_rate=sum(fallback) / sum(rounds), rounds=sum(rounds),
        fallback_rounds=sum(fallback), proposed=1000, accepted=600, new_tokens=144,
        target_calls_speculative=60, all_identical=identical, n_prompts=len(rounds), speedups=list(speedups),
        rounds_per_prompt=list(rounds), fallback_rounds_per_prompt=list(fallback),
    )  # fmt: skip


def _specdec(method, device="cpu"):
    return SpecDecMetrics(
        prompt_lookup=method, truncated_draft=method, device=device, dtype="float32", timings=5,
        loadavg=(1.0, 1.2), draft_layers=6, target_layers=30,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("fallback", "rounds", "verdict", "why"),
    [
        ([1, 0, 1, 0] * 25, [8] * 100, HOLDS, "within"),  # 6 % over 100 requests (the full profile)
        ([2, 1, 2, 2] * 25, [8] * 100, REFUTED, "outside"),  # 22 %
        ([0, 1, 2], [8, 8, 8], INCONCLUSIVE, "overlaps"),  # 3 requests (the defaults): no decision
        ([29, 28, 30], [30, 30, 30], REFUTED, "outside"),  # the truncated draft: almost every round
        ([1], [8], INCONCLUSIVE, "one request"),
        ([], [], INCONCLUSIVE, "no verification rounds"),
    ],
)
def test_verdict_fallback_rate_is_clustered_by_request(fallback, rounds, verdict, why):
    v = zc.verdict_fallback_rate(fallback, rounds)
    assert v.verdict == verdict and why in v.why


def test_the_clustered_interval_is_never_narrower_than_wilson_and_widens_with_clustering():
    from nbkit.claims import rate_interval

    even = zc.clustered_rate_interval([2] * 10, [20] * 10)
    assert even == pytest.approx(rate_interval(20, 200))  # no between-request spread: Wilson itself
    lumpy = zc.clustered_rate_interval([10, 0] * 5, [20] * 10)
    assert lumpy[1] - lumpy[0] > even[1] - even[0] + 0.1
    assert all(map(math.isnan, zc.clustered_rate_interval([0], [8])))
    lo, hi = zc.clustered_rate_interval([0, 0, 0], [8, 8, 8])
    assert lo == 0 and hi > 0  # all tied at 0: a positive width, never (0, 0)


def test_fallback_row_names_the_truncated_draft():
    row = SPECS["fallback_rate"].read(_specdec(_method([28, 29], [30, 30])))
    assert "SmolLM2 truncated to 6 of 30 layers, not Medusa heads" in row.measured
    assert "Medusa" in SPECS["fallback_rate"].claim


@pytest.mark.parametrize(
    ("speedups", "device", "verdict"),
    [
        ([1.8, 1.85, 1.79, 1.82, 1.81], "cuda:0", HOLDS),
        ([1.0, 1.05, 1.02, 1.01, 1.03], "cuda", REFUTED),
        ([1.0, 2.6, 1.8], "cuda", INCONCLUSIVE),
        ([1.8, 1.85, 1.79], "cpu", NEEDS_GPU),
    ],
)
def test_verdict_speedup(speedups, device, verdict):
    assert zc.verdict_speedup(speedups, device).verdict == verdict


def test_speedup_row_records_the_load_average_and_the_timings():
    row = SPECS["speedup"].read(_specdec(_method([1, 1], [8, 8]), device="cuda"))
    assert "load average 1.0 → 1.2" in row.measured and "5 interleaved timings" in row.n


@pytest.mark.parametrize(
    ("identical", "verdict"), [([False, True], HOLDS), ([True, True], REFUTED), ([], INCONCLUSIVE)]
)
def test_verdict_lossless(identical, verdict):
    assert zc.verdict_lossless(identical).verdict == verdict


@pytest.mark.parametrize(
    ("p", "verdict"),
    [
        (Persistence(100_000, 75, 17, 524_288, 131_072, 1_048_576, [1_048_576, 1_048_576]), HOLDS),
        (Persistence(100_000, 75, 17, 524_288, 131_072, 1_048_576, [0, 0]), REFUTED),
        (Persistence(100_000, 75, 17, 524_288, 131_072, 1_048_576, [1_048_576, 0]), INCONCLUSIVE),
        (Persistence(100_000, 75, 0, 0, 131_072, 0, [0, 0]), INCONCLUSIVE),
        (Persistence(100_000, 75, 0, 0, 131_072, 0, [4096, 4096]), REFUTED),
        (None, INCONCLUSIVE),
    ],
)
def test_verdict_persistence(p, verdict):
    assert zc.verdict_persistence(p).verdict == verdict


def _launches(ratio_k, n, estimate=5e6):
    """``n`` launches whose stage-k growth is ``ratio_k`` × stage 0's (a little spread by launch)."""
    peaks = []
    for launch in range(n):
        k = ratio_k + 0.01 * (launch - (n - 1) / 2)
        peaks += _peak(growth_k=(20e6 * k, 21e6 * k), estimate=estimate, launch=launch)
    return _ladder(peaks=peaks, launches=n)


@pytest.mark.parametrize(
    ("ladder", "verdict"),
    [
        (_launches(0.67, 5), HOLDS),  # the defaults' 5 launches
        (_launches(1.10, 5), REFUTED),
        (_launches(0.97, 5), INCONCLUSIVE),
        (_launches(0.67, 1), INCONCLUSIVE),  # one launch (SMOKE's): a range, no interval
    ],
)
def test_verdict_zero_saves_memory_across_launches(ladder, verdict):
    assert _verdict("zero1_saves", ladder).verdict == verdict
    assert "range over the ranks of launch 0" in SPECS["zero1_saves"].read(ladder).measured


@pytest.mark.parametrize(
    ("ladder", "verdict"),
    [
        (_launches(0.67, 5, estimate=1e6), HOLDS),  # growth ≈ 14 × the estimate
        (_launches(0.67, 5, estimate=10e6), REFUTED),  # ≈ × 1.4: the magnitude of this run's ladder
        (_launches(0.67, 1, estimate=10e6), INCONCLUSIVE),
        (_ladder(peaks=_peak(estimate=None)), INCONCLUSIVE),
    ],
)
def test_verdict_estimator_tests_the_notes_magnitude(ladder, verdict):
    assert _verdict("estimator2_under", ladder).verdict == verdict
    assert zc.UNDERPREDICT == pytest.approx(13 / 0.77 / 2)


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


def _sweep(stage3_min_max):
    """Stage-3 rows of ``run_crossover(...).metrics.rows`` at two sizes."""
    return [
        CrossoverRow(s, n, 3, 1.0, 1.0, 1.0, 1.0, 1.0, lo, hi, 1.0, 0.5, "backward", "forward_backward")
        for (s, n), (lo, hi) in zip(
            (("256x8", 4_000_000), ("512x8", 19_000_000)), stage3_min_max, strict=True
        )
    ]


@pytest.mark.parametrize(
    ("rows", "verdict"),
    [
        (_sweep([(1.01, 1.03), (0.80, 0.85)]), HOLDS),
        (_sweep([(1.01, 1.03), (0.99, 1.02)]), REFUTED),
        (_sweep([(0.90, 0.95), (0.97, 0.99)]), INCONCLUSIVE),
        ([], INCONCLUSIVE),
    ],
)
def test_verdict_crossover(rows, verdict):
    assert zc.verdict_crossover(rows, 3).verdict == verdict
    sweep = CrossoverMetrics({}, "cpu", 200_000, 2, "256x8,512x8", rows)
    assert _verdict("zero3_crossover", sweep).verdict == verdict


def test_operating_characteristics_of_every_measured_spec():
    """Decided at defaults: the exact figures and flags, and the memory-saving and estimator rows across
    the ladder's 5 launches; decided only in the full profile: fragmentation, fallback and speedup."""
    across_launches = {"zero1_saves", "zero2_saves", "zero3_saves", "estimator2_under", "estimator3_under"}
    noisy = {"fragmentation", "fallback_rate", "speedup"} | across_launches
    for spec in zc.REGISTRY.claims:
        if spec.kind != "measured":
            continue
        at_defaults = operating_characteristics(spec, DEFAULT)
        assert spec.noisy == (spec.key in noisy), spec.key
        if spec.key in across_launches:
            assert at_defaults.decided, (spec.key, at_defaults)
            assert max(at_defaults.p_refuted_if_true, at_defaults.p_holds_if_false) <= 0.05, spec.key
        elif spec.noisy:
            assert not at_defaults.decided and at_defaults.p_holds_if_true < 0.5, spec.key
            full = operating_characteristics(spec, FULL)
            assert full.decided and full.p_refuted_if_true <= 0.05 and full.p_holds_if_false <= 0.05, spec.key
        else:
            assert at_defaults.p_holds_if_true == 1.0 and at_defaults.p_refuted_if_false == 1.0, spec.key


def test_the_ledger_from_cpu_shaped_metrics():
    """Every row of the notebook's ledger on CPU-shaped metrics: kinds, GPU rows, undecided rows."""
    ctx = ZeroContext("cpu")
    for slug, m in (
        ("memory", _memory()),
        ("ds_config", DsConfigMetrics(128, 2, 4, 8)),
        ("ladder", _ladder()),
        ("crossover", CrossoverMetrics({}, None, 200_000, 2, "")),
        ("loss_scale", _scale(not_measured="x")),
        ("failure_drill", _drill()),
        ("fragmentation", CPU_FRAG),
        ("specdec", _specdec(_method([29, 28, 30], [30, 30, 30]))),
    ):
        ctx.keep(slug, Result(metrics=m))
    rows = {r.key: r for r in zc.judge(ctx)}
    assert len(rows) == 26
    assert rows["batch_identity"].verdict == REFUTED and rows["sub_group_size"].verdict == REFUTED
    assert rows["loss_agree"].verdict == HOLDS and rows["failure_drill"].verdict == HOLDS
    assert {rows[k].verdict for k in ("loss_scale", "fragmentation", "speedup", "stage1_peak")} == {NEEDS_GPU}
    # a GPU row this machine cannot measure says so first, then what n it needs on CUDA
    assert "on CUDA, not decided at defaults: needs n ≥ 10 seeds" in rows["fragmentation"].why
    assert rows["fragmentation"].decided_at_defaults is False
    assert rows["fallback_rate"].verdict == INCONCLUSIVE
    assert rows["fallback_rate"].why.startswith("not decided at defaults")
    assert rows["fallback_rate"].decided_at_defaults is False
    for key in ("zero1_saves", "estimator3_under"):  # decided at the defaults' 5 launches; this ladder ran 1
        assert rows[key].decided_at_defaults is True and rows[key].verdict == INCONCLUSIVE, key
    assert rows["stage0_peak"].kind == "arithmetic" and rows["stage0_peak"].p_holds_if_true is None
    head = zc.headline(ctx)
    assert head["model_params_billion"] == pytest.approx(6.738, abs=1e-3)
    assert head["stage3_over_stage0_model_states"] == 0.25 and head["worst_measured_over_formula"] == 1.03
    assert head["stage3_over_stage0_peak_growth"] == pytest.approx((10 / 20 + 11 / 21) / 2)
