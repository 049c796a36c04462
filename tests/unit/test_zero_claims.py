"""Every ZeRO verdict function through every outcome it can return, fed the typed metrics the real
(CPU) and GPU paths return — GPU-only fields filled with fabricated CUDA-like values."""

import dataclasses
import math

import pytest

from nbkit.claims import HOLDS, INCONCLUSIVE, NEEDS_GPU, REFUTED, Claim
from nbkit.zero import claims as zc
from nbkit.zero.metrics import (
    CrossoverMetrics,
    CrossoverRow,
    DsConfigMetrics,
    FailureDrillMetrics,
    FragmentationMetrics,
    LadderMetrics,
    LossScaleMetrics,
    LossScaleStep,
    MemoryMetrics,
    MethodSummary,
    Persistence,
    RungPeak,
    SpecDecMetrics,
    SubGroup,
)

PSI_7B = 6_738_415_616
SUB_GROUP = SubGroup(
    shard_bytes_default=1000,
    shard_bytes_small=1000,
    n_sub_groups_default=1,
    n_sub_groups_small=7,
    sub_group_size_default=1e9,
    sub_group_size_small=100_000,
)


def _ladder(**over):
    """Shaped like ``run_ladder(...).metrics`` on 2 CPU ranks."""
    m = {
        "bytes_vs_formula": {"stage0": 1.0, "stage1": 1.01, "stage2": 1.03, "stage3": 0.99},
        "wall_s": 40.0,
        "ranks_device": "cpu",
        "loss_max_rel_diff": 0.004,
        "loss_tolerance": 0.02,
        "loss_agree": True,
        "replicas_in_sync": True,
        "checkpoint_round_trip_ok": True,
        "rss_peak_bytes": {},
        "monitor_samples": 10,
        "monitor_alerts": [],
        "world_size": 2,
        "steps": 8,
        "precision": "bf16",
        "overflow_step": -1,
        "loss_scale_history": [],
        "sub_group": SUB_GROUP,
    }
    m.update(over)
    return LadderMetrics(**m)


def _sg(**over):
    return _ladder(sub_group=dataclasses.replace(SUB_GROUP, **over))


def _memory():
    return MemoryMetrics(
        n_params=PSI_7B, largest_layer_params=131_072_000, plan={}, world_size=8, gpus_per_node=8, nodes=1
    )


def _ds(train_batch_size=128, micro_batch=2, grad_accum=4, world_size=8):
    return DsConfigMetrics(
        train_batch_size=train_batch_size,
        micro_batch=micro_batch,
        grad_accum=grad_accum,
        world_size=world_size,
    )


def _scale(device="cpu", precision="fp16", history=(), not_measured=None, world_size=1):
    """Shaped like ``run_loss_scale_drill(...).metrics``."""
    return LossScaleMetrics(
        ranks_device=device,
        loss_scale_history=list(history),
        not_measured=not_measured,
        precision=precision,
        world_size=world_size,
    )


CPU_FRAG = FragmentationMetrics(needs_cuda=True, steps=6, tensor_bytes_peak={}, unavailable={})


@pytest.mark.parametrize(
    ("args", "verdict"),
    [
        ((78.0, 107.8), REFUTED),  # a peak below its own model states
        ((52.0, 37.1), NEEDS_GPU),  # above the model states: the rest needs the GPUs
        ((32.0, 13.5, (31.0, 33.0)), HOLDS),  # a GPU measurement inside ±15 %
        ((32.0, 13.5, (60.0, 61.0)), REFUTED),  # ... far outside
        ((32.0, 13.5, (30.0, 40.0)), INCONCLUSIVE),  # ... straddling the band's edge
    ],
)
def test_verdict_peak_claim(args, verdict):
    assert zc.verdict_peak_claim(*args).verdict == verdict


def test_field_note_peak_is_read_from_the_ladder_only_in_the_field_notes_setting():
    peak = {"stage1": RungPeak(stage=1, measured=[50e9, 54e9], growth=[1.0, 1.0], predicted=[1.0, 1.0])}
    gpu8 = _ladder(peak=peak, ranks_device="cuda", world_size=8, n_params=PSI_7B)
    assert zc.field_note_peak_gb(gpu8, 1, PSI_7B) == ((50.0, 54.0), "2 ranks")
    cpu2 = _ladder(peak=peak, n_params=4_800_000)
    got, why = zc.field_note_peak_gb(cpu2, 1, PSI_7B)
    assert got is None and "Ψ = 4,800,000 on 2 cpu rank(s)" in why
    assert zc.field_note_peak_gb(gpu8, 3, PSI_7B)[0] is None  # stage 3 did not run
    # wired into the row: the measured peak decides it, and without it the row says what the ladder ran
    # instead
    args = (_scale(), _drill(), CPU_FRAG, SpecDecMetrics(summary={}, device="cpu"))
    row = {c.key: c for c in zc.claims(_memory(), _ds(64), gpu8, *args)}["stage1_peak"]
    assert row.verdict == HOLDS and "measured peak 50–54 GB" in row.measured
    row = {c.key: c for c in zc.claims(_memory(), _ds(64), cpu2, *args)}["stage1_peak"]
    assert row.verdict == NEEDS_GPU and "4,800,000 on 2 cpu" in row.why


def _gpu_ladder(stage1_gb, stage3_gb):
    """Fabricated CUDA-like ladder metrics in the field notes' setting: Llama-2-7B on 8 GPU ranks,
    each rank's peak (CUDA's peak allocated bytes) as ``run_ladder`` would record it."""

    def rung(stage, gb):
        return RungPeak(
            stage=stage, measured=[gb * 1e9] * 8, growth=[gb * 1e9 - 1e9] * 8, predicted=[gb * 1e9] * 8
        )

    peak = {"stage0": rung(0, 80.0), "stage1": rung(1, stage1_gb), "stage3": rung(3, stage3_gb)}
    return _ladder(peak=peak, ranks_device="cuda", world_size=8, n_params=PSI_7B)


@pytest.mark.parametrize(
    ("stage1_gb", "stage3_gb", "verdicts"),
    [
        (52.0, 31.0, (HOLDS, HOLDS)),  # the field notes' 52 / 32 GB per card, measured
        (75.0, 70.0, (REFUTED, REFUTED)),  # far above the claims
    ],
)
def test_stage1_and_stage3_peak_rows_are_decided_by_a_gpu_ladder(stage1_gb, stage3_gb, verdicts):
    """The GPU path end to end on CPU: the ladder's typed per-rank peaks decide the stage-1/3 peak rows."""
    args = (_scale(), _drill(), CPU_FRAG, SpecDecMetrics(summary={}, device="cpu"))
    rows = {c.key: c for c in zc.claims(_memory(), _ds(), _gpu_ladder(stage1_gb, stage3_gb), *args)}
    assert (rows["stage1_peak"].verdict, rows["stage3_peak"].verdict) == verdicts
    assert "8 ranks" in rows["stage3_peak"].n
    # on CPU ranks the same rows wait for that run and say so
    cpu = {c.key: c for c in zc.claims(_memory(), _ds(), _ladder(peak=_peak(), n_params=623_744), *args)}
    assert cpu["stage1_peak"].verdict == cpu["stage3_peak"].verdict == NEEDS_GPU


@pytest.mark.parametrize(
    ("claimed", "formula", "verdict"),
    [(1.75, 1.68, HOLDS), (28.0, 80.9, REFUTED), (28.0, math.nan, INCONCLUSIVE)],
)
def test_verdict_formula_figure(claimed, formula, verdict):
    assert zc.verdict_formula_figure(claimed, formula).verdict == verdict


@pytest.mark.parametrize(
    ("ds", "verdict"),
    [
        (_ds(64), HOLDS),
        (_ds(128), REFUTED),
        (_ds(128, grad_accum=None), INCONCLUSIVE),
    ],
)
def test_verdict_batch_identity(ds, verdict):
    assert zc.verdict_batch_identity(ds).verdict == verdict


@pytest.mark.parametrize(
    ("m", "verdict"),
    [
        (_sg(shard_bytes_small=1500), HOLDS),
        (_sg(), REFUTED),
        (_sg(shard_bytes_small=1030), INCONCLUSIVE),
        (_sg(n_sub_groups_small=1), INCONCLUSIVE),
        (_ladder(sub_group=None), INCONCLUSIVE),
    ],
)
def test_verdict_sub_group_size(m, verdict):
    assert zc.verdict_sub_group_size(m).verdict == verdict


@pytest.mark.parametrize(
    ("m", "verdict"),
    [
        (_ladder(), HOLDS),
        (_ladder(bytes_vs_formula={"stage0": 1.0, "stage2": 1.2}), REFUTED),
        (_ladder(bytes_vs_formula={}), INCONCLUSIVE),
    ],
)
def test_verdict_bytes_formula(m, verdict):
    assert zc.verdict_bytes_formula(m).verdict == verdict


def test_bytes_vs_formula_reports_each_stages_worst_rank():
    from nbkit.zero.ladder import summarize

    def row(
        rung, stage, rank, params
    ):  # a rank row as worker.run_rung writes it (stage 0, bf16: formula 16 B per parameter)
        return {
            "rung": rung,
            "stage": stage,
            "rank": rank,
            "world_size": 2,
            "n_params": 1000,
            "precision": "bf16",
            "offload_optimizer": False,
            "offload_param": False,
            "param_persistence_threshold": 0,
            "bytes": {"params": params, "grads": 2000, "optimizer": 12000},
            "peak_bytes": 10**6,
            "peak_kind": "rss",
            "step_s": [0.1],
            "init_s": 1.0,
            "mean_losses": [1.0],
            "losses": [1.0],
            "eval_loss": 1.0,
            "param_checksum": 1.0,
            "optimizer_class": "x",
            "baseline_bytes": 10**5,
            "activation_bytes": 0,
            "init_peak_bytes": 10**5,
        }

    spec = {
        "precision": "bf16",
        "model": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1},
        "micro_batch": 1,
        "seq_len": 8,
        "rungs": [
            {
                "name": "stage0",
                "stage": 0,
                "offload_optimizer": False,
                "offload_param": False,
                "param_persistence_threshold": 0,
            }
        ],
        "bucket_elements": 1000,
        "steps": 1,
        "seed": 0,
    }
    # rank 0 exact, rank 1 holds 1,600 B too many (+10 %): the mean (+5 %) would pass, the worst rank does not
    out = summarize([row("stage0", 0, 0, 2000), row("stage0", 0, 1, 3600)], spec)
    assert out["bytes_vs_formula"] == {"stage0": pytest.approx(1.10)}
    assert zc.verdict_bytes_formula(_ladder(bytes_vs_formula=out["bytes_vs_formula"])).verdict == REFUTED


@pytest.mark.parametrize(
    ("m", "verdict"),
    [
        (_ladder(), HOLDS),
        (_ladder(loss_max_rel_diff=0.3), REFUTED),
        (_ladder(bytes_vs_formula={"stage0": 1.0}), INCONCLUSIVE),
    ],
)
def test_verdict_loss_agreement(m, verdict):
    assert zc.verdict_loss_agreement(m).verdict == verdict


@pytest.mark.parametrize(
    ("m", "verdict"),
    [
        (_ladder(), HOLDS),
        (_ladder(replicas_in_sync=False), REFUTED),
        (_ladder(world_size=1), INCONCLUSIVE),
        (_ladder(replicas_in_sync=None), INCONCLUSIVE),
    ],
)
def test_verdict_replicas(m, verdict):
    assert zc.verdict_replicas(m).verdict == verdict


@pytest.mark.parametrize(
    ("m", "verdict"),
    [
        (_ladder(), HOLDS),
        (_ladder(checkpoint_round_trip_ok=False), REFUTED),
        (_ladder(checkpoint_round_trip_ok=None), INCONCLUSIVE),
    ],
)
def test_verdict_checkpoint(m, verdict):
    assert zc.verdict_checkpoint(m).verdict == verdict


def _drill(**over):
    """Shaped like ``run_failure_drill(...).metrics``."""
    m = {
        "detected": True,
        "reported_rank": 1,
        "expected_rank": 1,
        "how": "kill",
        "timed_out": False,
        "message": "rank 1 failed: killed by SIGKILL",
        "seconds_to_report": 3.2,
        "timeout_s": 60.0,
        "leftover_processes": [],
    }
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
    """0 GPUs: nothing launched, the result says it needs one GPU; 1 GPU: one rank; 2+: the drill's 2
    ranks."""
    import torch

    from nbkit.result import Result
    from nbkit.zero import experiments as ze
    from nbkit.zero.config import LossScaleConfig

    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(ze, "pick_device", lambda name="auto": torch.device("cuda" if gpus else "cpu"))
    launched = []

    def fake_ladder(cfg, ctx=None, live=None):
        launched.append(cfg)
        assert (
            ze.ladder_device(cfg) == "cuda"
        )  # one GPU per rank: the ranks really run on CUDA, not on the CPU fallback
        return Result(
            metrics=_ladder(
                ranks_device="cuda",
                precision=cfg.precision,
                world_size=cfg.world_size,
                loss_scale_history=_history(),
            )
        )

    monkeypatch.setattr(ze, "run_ladder", fake_ladder)
    out = ze.run_loss_scale_drill(LossScaleConfig.smoke(), ze.ZeroContext())
    assert isinstance(out.metrics, LossScaleMetrics)
    if ranks is None:
        assert launched == [] and "needs one CUDA GPU" in out.metrics.not_measured
        v = zc.verdict_loss_scale(out.metrics)
        assert v.verdict == NEEDS_GPU and "one GPU is enough" in v.why
    else:
        assert [c.world_size for c in launched] == [ranks] and launched[0].precision == "fp16"
        assert zc.verdict_loss_scale(out.metrics).verdict == HOLDS


def _frag(a, b):
    """Shaped like ``run_fragmentation(...).metrics`` on CUDA: per "<interval>/<expandable>", each seed's
    mean gap
    ratio (FragmentationConfig.seeds = 3 in the notebook), and the first seed's per-step series."""
    return FragmentationMetrics(
        needs_cuda=False,
        steps=400,
        seeds=len(a),
        runs=[],
        model="Llama-2-7B shapes, 2 layer(s)",
        gap_ratio_means={"50/False": a, "200/False": b, "50/True": a, "200/True": b},
        gap_ratios={"50/False": [a[0]] * 400, "200/False": [b[0]] * 400},
    )


@pytest.mark.parametrize(
    ("m", "verdict", "why"),
    [
        (_frag([0.42, 0.43, 0.41], [0.18, 0.17, 0.19]), HOLDS, "≥ 0.12"),
        (_frag([0.20, 0.21, 0.19], [0.18, 0.17, 0.19]), REFUTED, "< 0.12"),
        (_frag([0.20, 0.50, 0.35], [0.18, 0.17, 0.19]), INCONCLUSIVE, "n too small"),
        (_frag([0.42], [0.18]), INCONCLUSIVE, "one run"),  # one run's per-step values are not independent
        (
            FragmentationMetrics(needs_cuda=False, steps=6, runs=[], gap_ratio_means={"2/False": [0.1] * 3}),
            INCONCLUSIVE,
            "not both run",
        ),
        (CPU_FRAG, NEEDS_GPU, "CUDA"),
    ],
)
def test_verdict_fragmentation(m, verdict, why):
    v = zc.verdict_fragmentation(m)
    assert v.verdict == verdict and why in v.why


def _spec(**over):
    """One method's summary, shaped like ``run_specdec(...).metrics.summary[method]``."""
    s = {
        "tok_s_baseline": 10.0,
        "tok_s_speculative": 15.0,
        "speedup_measured": 1.5,
        "speedup_predicted": 2.0,
        "acceptance_rate": 0.6,
        "fallback_rate": 0.07,
        "rounds": 400,
        "fallback_rounds": 28,
        "proposed": 1000,
        "accepted": 600,
        "new_tokens": 144,
        "target_calls_speculative": 60,
        "all_identical": True,
        "n_prompts": 3,
        "speedups": [1.8, 1.85, 1.79],
        "fallback_rates": [0.07, 0.068, 0.072],
    }
    s.update(over)
    return MethodSummary(**s)


# per-prompt rates over the notebook's SPEC_PROMPTS = 3 prompts: the prompt, not the round, is the
# independent unit
@pytest.mark.parametrize(
    ("s", "verdict", "why"),
    [
        (_spec(), HOLDS, "within"),
        (_spec(fallback_rounds=200, fallback_rates=[0.5, 0.52, 0.48]), REFUTED, "outside"),
        (_spec(fallback_rates=[0.0, 0.2, 0.1]), INCONCLUSIVE, "n too small"),
        (_spec(rounds=130, fallback_rounds=9, fallback_rates=[0.07]), INCONCLUSIVE, "one prompt"),
        (_spec(rounds=0, fallback_rounds=0, fallback_rates=[]), INCONCLUSIVE, "no verification rounds"),
    ],
)
def test_verdict_fallback_rate(s, verdict, why):
    v = zc.verdict_fallback_rate(s)
    assert v.verdict == verdict and why in v.why


def _persistence(measured, predicted=1_048_576, threshold=100_000):
    """Shaped like ``run_ladder(...).metrics.persistence`` (ladder.persistence_summary), 2 ranks."""
    return _ladder(
        persistence=Persistence(
            threshold=threshold,
            tensors=75,
            tensors_kept_whole=17,
            elements_kept_whole=predicted // 2,
            largest_tensor=131_072,
            predicted_extra_bytes=predicted,
            measured_extra_bytes=list(measured),
        )
    )


@pytest.mark.parametrize(
    ("m", "verdict"),
    [
        (_persistence([1_048_576, 1_048_576]), HOLDS),
        (_persistence([0, 0]), REFUTED),  # DeepSpeed kept nothing whole that the rule keeps
        (_persistence([1_048_576, 0]), INCONCLUSIVE),  # ranks disagree
        (_persistence([0, 0], predicted=0), INCONCLUSIVE),  # nothing under the threshold at this size
        (_persistence([4096, 4096], predicted=0), REFUTED),
        (_ladder(), INCONCLUSIVE),
    ],
)
def test_verdict_persistence(m, verdict):
    assert zc.verdict_persistence(m).verdict == verdict


@pytest.mark.parametrize(
    ("s", "device", "verdict"),
    [
        (_spec(), "cuda:0", HOLDS),
        (_spec(speedups=[1.0, 1.05, 1.02]), "cuda", REFUTED),
        (_spec(speedups=[1.0, 2.6, 1.8]), "cuda", INCONCLUSIVE),
        (_spec(), "cpu", NEEDS_GPU),
    ],
)
def test_verdict_speedup(s, device, verdict):
    assert zc.verdict_speedup(s, device).verdict == verdict


@pytest.mark.parametrize(
    ("summary", "verdict"),
    [
        ({"prompt_lookup": _spec(all_identical=False)}, HOLDS),
        ({"prompt_lookup": _spec()}, REFUTED),
        ({}, INCONCLUSIVE),
    ],
)
def test_verdict_lossless(summary, verdict):
    assert zc.verdict_lossless(summary).verdict == verdict


def test_claims_table_from_cpu_and_gpu_shaped_metrics():
    memory, ds = _memory(), _ds()
    spec_cpu = SpecDecMetrics(summary={"prompt_lookup": _spec(), "truncated_draft": _spec()}, device="cpu")
    cpu = zc.claims(memory, ds, _ladder(), _scale(not_measured="x"), _drill(), CPU_FRAG, spec_cpu)
    by = {c.key: c for c in cpu}
    assert all(isinstance(c, Claim) for c in cpu)
    assert by["stage0_peak"].verdict == REFUTED and by["stage3_params_gb"].verdict == HOLDS
    assert by["optimizer_gb"].verdict == REFUTED and by["batch_identity"].verdict == REFUTED
    assert by["sub_group_size"].verdict == REFUTED and by["fallback_rate"].verdict == HOLDS
    assert by["optimizer_gb"].measured.endswith("(formula, not measured)") and by[
        "stage3_params_gb"
    ].measured.endswith("(formula, not measured)")
    assert {
        by[k].verdict for k in ("loss_scale", "fragmentation", "speedup", "stage1_peak", "stage3_peak")
    } == {NEEDS_GPU}
    gpu = zc.claims(
        memory,
        ds,
        _ladder(ranks_device="cuda"),
        _scale("cuda", history=_history(), world_size=2),
        _drill(),
        _frag([0.42, 0.43, 0.41], [0.18, 0.19, 0.18]),
        dataclasses.replace(spec_cpu, device="cuda"),
    )
    by = {c.key: c for c in gpu}
    assert (
        by["loss_scale"].verdict == HOLDS
        and by["fragmentation"].verdict == HOLDS
        and by["speedup"].verdict == HOLDS
    )
    head = zc.headline(memory, _ladder(peak=_peak(), model_states={"stage0": 16e6, "stage3": 4e6}), spec_cpu)
    assert len(head) == 6 and head["worst_measured_over_formula"] == 1.03
    assert head["stage3_over_stage0_model_states"] == 0.25 and head[
        "stage3_over_stage0_peak_growth"
    ] == pytest.approx(10.5 / 20.5)


def _peak(growth0=(20e6, 21e6), growth_k=(10e6, 11e6), estimate=5e6):
    """Shaped like ``run_ladder(...).metrics.peak`` (ladder.peak_summary)."""

    def rung(stage, growth, est):
        return RungPeak(
            stage=stage,
            measured=[5e8 + g for g in growth],
            growth=list(growth),
            predicted=[5e8] * len(growth),
            deepspeed_estimate=est,
        )

    return {
        "stage0": rung(0, growth0, None),
        "stage1": rung(1, growth_k, None),
        "stage2": rung(2, growth_k, estimate),
        "stage3": rung(3, growth_k, estimate),
    }


@pytest.mark.parametrize(
    ("m", "stage", "verdict"),
    [
        (_ladder(peak=_peak()), 3, HOLDS),
        (_ladder(peak=_peak(growth_k=(22e6, 23e6))), 1, REFUTED),
        (_ladder(peak=_peak(growth_k=(15e6, 21e6))), 2, INCONCLUSIVE),
        (_ladder(peak={}), 1, INCONCLUSIVE),
    ],
)
def test_verdict_zero_saves_memory(m, stage, verdict):
    assert zc.verdict_zero_saves_memory(m, stage).verdict == verdict


@pytest.mark.parametrize(
    ("m", "stage", "verdict"),
    [
        (_ladder(peak=_peak()), 2, HOLDS),
        (_ladder(peak=_peak(estimate=50e6)), 3, REFUTED),
        (_ladder(peak=_peak(growth_k=(5e6, 6e6), estimate=5.2e6)), 3, INCONCLUSIVE),
        (_ladder(peak=_peak()), 1, INCONCLUSIVE),  # DeepSpeed has no stage-1 estimator
    ],
)
def test_verdict_estimator_underpredicts(m, stage, verdict):
    assert zc.verdict_estimator_underpredicts(m, stage).verdict == verdict


def test_memory_claims_rows():
    rows = {c.key: c for c in zc.memory_claims(_ladder(peak=_peak(), n_params=623_744))}
    assert [
        rows[k].verdict
        for k in ("zero1_saves", "zero2_saves", "zero3_saves", "estimator2_under", "estimator3_under")
    ] == [HOLDS] * 5
    assert "×2.0–2.2" in rows["estimator2_under"].measured


def test_saved_activations_counts_what_backward_keeps_and_the_meta_prediction_is_close():
    import torch

    from nbkit.model_files import tiny_llama
    from nbkit.zero.peak import SavedActivations, predict_activation_bytes

    model = tiny_llama(seed=0, hidden_size=64, intermediate_size=128, num_hidden_layers=2)
    ids = torch.randint(0, 256, (2, 16))
    with SavedActivations(model) as acts:
        model(input_ids=ids, labels=ids)
    with SavedActivations(model) as twice:
        model(input_ids=torch.cat([ids, ids]), labels=torch.cat([ids, ids]))
    assert acts.bytes > 0 and twice.bytes == pytest.approx(2 * acts.bytes, rel=0.1)  # linear in the batch
    with torch.no_grad(), SavedActivations(model) as none:
        model(input_ids=ids)
    assert none.bytes == 0  # nothing is saved without autograd: parameters never count
    predicted = predict_activation_bytes(
        {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}, 2, 16, "fp32"
    )
    assert predicted == pytest.approx(
        acts.bytes, rel=0.35
    )  # meta takes the math attention path (see nbkit.zero.peak)


def _sweep(stage3_min_max):
    """Stage-3 rows of ``run_crossover(...).metrics.rows`` at two sizes."""
    return [
        CrossoverRow(
            size=s,
            n_params=n,
            stage=3,
            predicted_mib=1.0,
            measured_mib=1.0,
            pred_over_meas=1.0,
            growth_mib=1.0,
            growth_pred_over_meas=1.0,
            growth_vs_stage0_min=lo,
            growth_vs_stage0_max=hi,
            model_states_mib=1.0,
            model_states_share=0.5,
            predicted_phase="backward",
            measured_phase="forward_backward",
        )
        for (s, n), (lo, hi) in zip(
            (("256x8", 4_000_000), ("512x8", 19_000_000)), stage3_min_max, strict=True
        )
    ]


@pytest.mark.parametrize(
    ("rows", "verdict"),
    [
        (_sweep([(1.01, 1.03), (0.80, 0.85)]), "holds"),
        (_sweep([(1.01, 1.03), (0.99, 1.02)]), "refuted"),
        (_sweep([(0.90, 0.95), (0.97, 0.99)]), "inconclusive"),
        ([], "inconclusive"),
    ],
)
def test_verdict_crossover(rows, verdict):
    from nbkit.zero.claims import verdict_crossover

    assert verdict_crossover(rows, 3).verdict == verdict


def test_crossover_rows_join_the_claims_table():
    from nbkit.zero.claims import memory_claims

    sweep = CrossoverMetrics(
        crossover={},
        ranks_device="cpu",
        bucket_elements=200_000,
        world_size=2,
        sizes="256x8,512x8",
        rows=_sweep([(1.01, 1.03), (0.80, 0.85)]),
    )
    rows = memory_claims(LadderMetrics(), sweep)
    assert [r.key for r in rows][:3] == ["zero1_crossover", "zero2_crossover", "zero3_crossover"]
    assert rows[2].verdict == "holds" and "512x8" in rows[2].why
