"""Launcher: pre-flight refusals, a real 2-rank ladder, a rank killed mid-run, a hang — no zombies."""

import dataclasses
import socket

import psutil
import pytest

from nbkit.zero.config import LadderConfig
from nbkit.zero.context import ZeroContext
from nbkit.zero.experiments import run_ladder
from nbkit.zero.launch import (
    LaunchError,
    RankFailed,
    RankTimeout,
    check_port,
    check_world_size,
    hostfile_command,
)


def test_port_in_use_is_refused_before_start():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(LaunchError, match="already in use"):
            check_port(s.getsockname()[1])


def test_world_size_the_machine_cannot_host():
    with pytest.raises(LaunchError, match="world_size=10000"):
        check_world_size(10000, "cpu")
    with pytest.raises(LaunchError, match="positive integer"):
        check_world_size(0, "cpu")


def test_hostfile_lines_are_validated(tmp_path):
    hf = tmp_path / "hostfile"
    hf.write_text("node1 slots=8\nnode2 slot=8\n")
    with pytest.raises(LaunchError, match="hostfile:2"):
        hostfile_command(hf, "spec.json", master_addr="node1")
    hf.write_text("node1 slots=8\n")
    assert hostfile_command(hf, "spec.json", master_addr="node1")[:3] == ["deepspeed", "--hostfile", str(hf)]


def _verdict(key, *metrics):
    """The verdict the ledger gives claim ``key`` on these metrics (its spec's read, then its rule)."""
    from nbkit.zero import claims as zc

    spec = next(s for s in zc.REGISTRY.claims if s.key == key)
    return spec.decide(spec.read(*metrics).sample).verdict


@pytest.fixture(scope="module")
def ladder():
    return run_ladder(
        LadderConfig(
            launches=1,
            stages=(0, 1, 2, 3),
            world_size=2,
            steps=2,
            hidden_size=64,
            num_hidden_layers=2,
            sub_group_elements=20_000,
            checkpoint=True,
            timeout_s=240,
        ),
        ZeroContext("cpu"),
    )


@pytest.mark.slow
def test_ladder_measures_partitioned_bytes(ladder):
    rows = {(r["rung"], r["rank"]): r for r in ladder.data["ladder"]}
    n = rows[("stage0", 0)]["n_params"]
    # bf16: stage 0 keeps 2Ψ params + 2Ψ grads + 12Ψ optimizer states per rank ...
    assert rows[("stage0", 0)]["params_bytes"] == 2 * n
    assert rows[("stage0", 0)]["optimizer_bytes"] >= 12 * n
    # ... ZeRO-1 splits the optimizer states, ZeRO-3 also the parameters (threshold 0).
    assert rows[("stage1", 1)]["optimizer_bytes"] < 0.55 * rows[("stage0", 1)]["optimizer_bytes"]
    assert rows[("stage3", 0)]["params_bytes"] == pytest.approx(n, rel=0.02)
    # DeepSpeed's default persistence threshold keeps a small model's params whole on every rank.
    assert rows[("stage3_default_persistence", 0)]["params_bytes"] > 2 * n
    for r in ladder.metrics.formula_ratios:
        assert r.ratio == pytest.approx(1.0, abs=0.05), r.stage
    # A smaller sub_group_size splits the optimizer step into more groups; the shard stays Ψ/N.
    sg = ladder.metrics.sub_group
    assert sg.n_sub_groups_small > sg.n_sub_groups_default
    assert sg.shard_bytes_small == pytest.approx(sg.shard_bytes_default, rel=0.01)


@pytest.mark.slow
def test_the_claims_read_what_the_real_ladder_writes(ladder):
    from nbkit.zero import claims as zc

    m = ladder.metrics
    # the field-note peak rows read each rank's measured peak; on 2 CPU ranks they say what would decide
    # them ...
    got, why = zc.field_note_peak_gb(m, 1, 6_738_415_616)
    assert got is None and f"Ψ = {m.n_params:,} on 2 cpu rank(s)" in why
    # ... and in the field notes' setting (8 CUDA ranks, that Ψ) the same field of this real run is the
    # measurement: the largest rank's peak
    measured = m.stage_peak(1).measured
    assert len(measured) == 2 and min(measured) > 0
    as_if = dataclasses.replace(m, ranks_device="cuda", world_size=8)
    assert zc.field_note_peak_gb(as_if, 1, m.n_params)[0] == max(measured) / 1e9
    # persistence is measured (two stage-3 rungs), not restated: at this size every tensor is under
    # DeepSpeed's 1e5
    p = m.persistence
    assert p.tensors_kept_whole == p.tensors and len(p.measured_extra_bytes) == 2
    assert _verdict("persistence", m) == "holds"


@pytest.mark.slow
def test_ladder_losses_agree_and_replicas_stay_in_sync(ladder):
    checks = ladder.data["checks"]
    assert checks["loss_agree"], checks
    assert checks["replicas_in_sync"], checks["replica_detail"]
    assert ladder.metrics.checkpoint_round_trip_ok is True
    assert all(
        r["checkpoint"]["restored_equal"] and r["checkpoint"]["state_changed_after_save"]
        for r in ladder.data["ladder"]
    )
    assert ladder.metrics.monitor_samples > 3


def _ranks_gone(pids):
    return [
        p
        for p in pids.values()
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]


@pytest.mark.slow
def test_killed_rank_is_named_and_nothing_is_left():
    pids = {}
    with pytest.raises(RankFailed, match="rank 1 failed: killed by SIGKILL") as info:
        run_ladder(
            LadderConfig(
                launches=1,
                stages=(1,),
                world_size=2,
                steps=3,
                show_persistence=False,
                sub_group_elements=0,
                hidden_size=64,
                num_hidden_layers=2,
                checkpoint=False,
                warm_up=False,
                timeout_s=120,
            ),
            ZeroContext("cpu"),
            on_start=pids.update,
            fail={"rank": 1, "step": 1, "how": "kill"},
        )
    assert not isinstance(info.value, RankTimeout)
    assert info.value.ready_s is not None  # it died after every rank was up: the run's timeout was counting
    assert not _ranks_gone(pids)


@pytest.mark.slow
def test_hung_rank_times_out_and_is_located():
    pids = {}
    with pytest.raises(RankTimeout, match="rank 1 was stuck outside any collective") as info:
        run_ladder(
            LadderConfig(
                launches=1,
                stages=(0,),
                world_size=2,
                steps=3,
                show_persistence=False,
                sub_group_elements=0,
                hidden_size=64,
                num_hidden_layers=2,
                checkpoint=False,
                warm_up=False,
                timeout_s=35,
            ),
            ZeroContext("cpu"),
            on_start=pids.update,
            fail={"rank": 1, "step": 1, "how": "hang"},
        )
    assert info.value.rank == 1 and "after every rank was ready" in str(info.value)
    assert not _ranks_gone(pids)


@pytest.mark.slow
def test_rank_exception_surfaces_its_traceback():
    with pytest.raises(RankFailed) as info:
        run_ladder(
            LadderConfig(
                launches=1,
                stages=(2,),
                world_size=2,
                steps=2,
                show_persistence=False,
                sub_group_elements=0,
                hidden_size=64,
                num_hidden_layers=2,
                checkpoint=False,
                warm_up=False,
                timeout_s=120,
            ),
            ZeroContext("cpu"),
            fail={"rank": 0, "step": 0, "how": "raise"},
        )
    assert info.value.rank == 0
    assert "injected failure" in str(info.value)
    assert "_inject_failure" in info.value.traceback_tail


@pytest.mark.slow
def test_offload_rungs_run_and_account_for_fp32_grad_partition():
    out = run_ladder(
        LadderConfig(
            launches=1,
            stages=(2, 3),
            world_size=2,
            steps=1,
            offload_optimizer=True,
            offload_param=True,
            show_persistence=False,
            sub_group_elements=0,
            hidden_size=64,
            num_hidden_layers=2,
            checkpoint=False,
            timeout_s=200,
        ),
        ZeroContext("cpu"),
    )
    for r in out.data["ladder"]:
        assert r["offload_fp32_grad_bytes"] > 0
        assert r["ratio_accounted"] == pytest.approx(1.0, abs=0.05), (
            r["rung"],
            r["rank"],
            r["ratio"],
            r["ratio_accounted"],
        )


@pytest.mark.slow
def test_real_ladder_metrics_feed_the_verdicts(ladder):
    """The keys the verdict functions read are the ones a real run writes, with the expected outcomes."""

    m = ladder.metrics
    assert _verdict("bytes_formula", m) == "holds"
    assert _verdict("replicas", m) == "holds"
    assert _verdict("checkpoint", m) == "holds"
    assert _verdict("sub_group_size", m) == "refuted"  # the shard is Ψ/N whatever sub_group_size says
    # the positive control (stage 0 at half the learning rate) ran beside the ZeRO rungs
    assert m.control_rel_diff is not None and m.loss_rungs >= 4
    assert _verdict("loss_agree", m) in {"holds", "inconclusive"}
    assert {p.rung: len(p.growth) for p in m.peaks if p.rung in ("stage0", "stage1", "stage2", "stage3")} == (
        dict.fromkeys(("stage0", "stage1", "stage2", "stage3"), 2)
    )
    for stage in (1, 2, 3):  # one launch: a range over its ranks, no interval across launches
        assert len(m.growth_ratios(stage)) == 1 and _verdict(f"zero{stage}_saves", m) == "inconclusive"
    for row in ladder.data["ladder"]:
        w = row["waterfall"]
        assert w["baseline"] > 0 and w["activations"] > 0 and row["peak_bytes"] >= w["baseline"]
        # at this size the runtime baseline dominates, so the predicted peak is within a few per cent
        assert row["peak_over_predicted"] == pytest.approx(1.0, abs=0.10), (row["rung"], row["rank"], w)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sabotage", "metric", "key"),
    [
        ("diverge", "replicas_in_sync", "replicas"),
        ("corrupt_checkpoint", "checkpoint_round_trip_ok", "checkpoint"),
    ],
)
def test_silent_failure_checks_catch_a_broken_run(sabotage, metric, key):
    """The checks can say no: a rank nudged off its replicas, or a checkpoint file altered on disk."""

    out = run_ladder(
        LadderConfig(
            launches=1,
            stages=(1,),
            world_size=2,
            steps=1,
            show_persistence=False,
            sub_group_elements=0,
            hidden_size=64,
            num_hidden_layers=2,
            checkpoint=True,
            sabotage=sabotage,
            warm_up=False,
            timeout_s=200,
        ),
        ZeroContext("cpu"),
    )
    assert getattr(out.metrics, metric) is False
    assert _verdict(key, out.metrics) == "refuted"
    if sabotage == "corrupt_checkpoint":
        assert out.metrics.replicas_in_sync is True  # the weights in memory were never touched
