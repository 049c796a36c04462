"""The ZeRO theme's experiments: ``run_x(cfg, ctx, live) -> Result[XMetrics]``, each registered with
``REGISTRY.register(Experiment(...))``.

One experiment per config in ``config.py``; its metrics dataclass is in ``metrics.py``; they share a
:class:`nbkit.zero.context.ZeroContext` (the device, resolved once, the ranks this machine runs for the
user's plan, a loaded speculative-decoding model) and hand a ``torch.device`` (or, to rank processes,
its type) down to the domain modules: ``memory`` (formula and estimators), ``ladder``/``launch``/
``worker`` (real DeepSpeed ranks), ``fragmentation`` (CUDA caching allocator), ``specdec`` (assisted
generation). What a notebook cell shows of a run is its experiment's ``show_result``.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from typing import TYPE_CHECKING, Any

from nbkit.errors import UsageError
from nbkit.experiment import Experiment, Registry, Replicates
from nbkit.model_files import smollm2_135m_config, tiny_llama_config
from nbkit.result import Result
from nbkit.zero import field_notes as notes
from nbkit.zero.config import (
    FRAGMENTATION_FULL_SEEDS,
    FULL_LAUNCHES,
    FULL_REQUESTS,
    CrossoverConfig,
    DsConfigConfig,
    FailureDrillConfig,
    FragmentationConfig,
    LadderConfig,
    LossScaleConfig,
    MemoryConfig,
    SpecDecConfig,
)
from nbkit.zero.context import ZeroContext
from nbkit.zero.dsconfig import explain, memory_plan, validate_ds_config
from nbkit.zero.fragmentation import cpu_accounting, cuda_runs
from nbkit.zero.ladder import ladder_spec, stage_rungs, summarize
from nbkit.zero.launch import RankFailed, RankTimeout, launch
from nbkit.zero.memory import (
    GB,
    config_from_path,
    formula_bytes,
    llama2_7b_config,
    memory_figure,
    memory_table,
    model_size,
)
from nbkit.zero.metrics import (
    CrossoverMetrics,
    CrossoverRow,
    DsConfigMetrics,
    FailureDrillMetrics,
    FieldNoteFigures,
    FragmentationMetrics,
    FragmentationRun,
    LadderMetrics,
    LossScaleMetrics,
    LossScaleStep,
    MemoryMetrics,
    MethodSummary,
    OffloadHeadroom,
    Persistence,
    RungPeak,
    SpecDecMetrics,
    StageRatio,
    SubGroup,
)
from nbkit.zero.monitor import MemoryMonitor, offload_headroom, process_tree_rss
from nbkit.zero.peak import crossover_figure, crossover_rows, crossover_sizes
from nbkit.zero.specdec import measure_specdec

if TYPE_CHECKING:
    from nbkit.live import LiveFigure

REGISTRY = Registry("zero", summary="ladder")
# A registered experiment by slug in a context: headless (run), as a panel (panel), or the notebook
# cell's one call (show: panel, run, record).
run = REGISTRY.run
show = REGISTRY.show
panel = REGISTRY.panel

CUDA_TIMINGS = 5  # interleaved timings per request where the speedup is judged


class Shown:
    """Several things shown one after another under a panel (tables, figures, lines of text)."""

    def __init__(self, *items: Any) -> None:
        self.items = [i for i in items if i is not None and not (isinstance(i, str) and not i)]

    def _ipython_display_(self) -> None:
        from IPython.display import Markdown, display

        for item in self.items:
            display(Markdown(item) if isinstance(item, str) else item)


# -- the memory model -----------------------------------------------------------------------------

PRESET_CONFIGS = {
    "Llama-2-7B": llama2_7b_config,
    "SmolLM2-135M": smollm2_135m_config,
    "tiny Llama (ladder)": tiny_llama_config,
}


def preset_size(name: str):
    """Ψ and the largest layer of a named architecture, counted on the meta device."""
    if name not in PRESET_CONFIGS:
        raise UsageError(f"model: expected one of {sorted(PRESET_CONFIGS)}, got {name!r}")
    return model_size(PRESET_CONFIGS[name](), name)


def field_note_figures() -> FieldNoteFigures:
    """The paper's per-card model-state figures for the field notes' Llama-2-7B on 8 cards (bf16 Adam),
    Ψ counted on the meta device: what the notes' GB claims are held against, whatever model the
    memory panel shows."""
    psi = model_size(llama2_7b_config()).n_params
    total = {s: formula_bytes(psi, notes.CARDS, s)["total"] / GB for s in (0, 1, 3)}
    return FieldNoteFigures(
        n_params=psi,
        world_size=notes.CARDS,
        stage0_gb=total[0],
        stage1_gb=total[1],
        stage3_gb=total[3],
        optimizer_gb=12 * psi / GB,
        adam_moments_gb=8 * psi / GB,
        fp32_master_gb=4 * psi / GB,
        stage3_params_gb=2 * psi / notes.CARDS / GB,
    )


def _plan(cfg: MemoryConfig) -> dict[str, Any]:
    """The stage, precision and offload the memory model runs: the user's ds_config's (a config
    DeepSpeed would reject fails here, named) or the panel's controls."""
    if cfg.ds_config:
        plan = memory_plan(validate_ds_config(cfg.ds_config))
        plan["ds_config"] = cfg.ds_config
        return plan
    return {
        "stage": None,
        "precision": cfg.precision,
        "offload_optimizer": cfg.offload_optimizer,
        "offload_param": cfg.offload_param,
    }


def run_memory_model(
    cfg: MemoryConfig, ctx: ZeroContext, live: LiveFigure | None = None
) -> Result[MemoryMetrics]:
    """Model-state bytes per device by the paper's formula beside DeepSpeed's estimators, the CPU
    headroom a full ZeRO-3 offload of one node would need here, and the field notes' 7B figures."""
    if cfg.model_path:
        size = model_size(config_from_path(cfg.model_path, where="MemoryConfig.model_path"), cfg.model_path)
    else:
        size = preset_size(cfg.model)
    if cfg.world_size > cfg.gpus_per_node and cfg.world_size % cfg.gpus_per_node:
        raise UsageError(
            f"MemoryConfig.world_size: {cfg.world_size} GPUs is not a whole number of nodes of "
            f"gpus_per_node={cfg.gpus_per_node}"
        )
    plan = _plan(cfg)
    table = memory_table(
        size,
        cfg.world_size,
        precision=plan["precision"],
        offload_optimizer=plan["offload_optimizer"],
        offload_param=plan["offload_param"],
        gpus_per_node=cfg.gpus_per_node,
    )
    gpus, n_nodes = (min(cfg.gpus_per_node, cfg.world_size), max(1, cfg.world_size // cfg.gpus_per_node))
    where = f"N = {cfg.world_size} ({n_nodes} node{'s' if n_nodes > 1 else ''} × {gpus} GPUs)"
    title = f"{size.name} (Ψ = {size.n_params / 1e9:.3f} B) on {where}: model states per device"
    if plan["stage"] is not None:
        row = table[table["stage"] == plan["stage"]].iloc[0]
        ds_gib = row["deepspeed_device_gib"]
        plan.update(
            formula_device_gib=float(row["formula_device_gib"]),
            formula_cpu_gib=float(row["formula_cpu_gib"]),
            deepspeed_device_gib=None if ds_gib != ds_gib else float(ds_gib),
        )
        title += f" — your ds_config runs stage {plan['stage']}"
    headroom = offload_headroom(
        size.n_params,
        cfg.world_size,
        3,
        offload_optimizer=True,
        offload_param=True,
        ranks_per_node=cfg.gpus_per_node,
    )
    metrics = MemoryMetrics(
        n_params=size.n_params,
        largest_layer_params=size.largest_layer_params,
        plan=plan,
        world_size=cfg.world_size,
        gpus_per_node=gpus,
        nodes=n_nodes,
        field_notes=field_note_figures(),
        model_name=size.name,
        offload_headroom=OffloadHeadroom(**headroom),
    )
    return Result(metrics=metrics, table=table, figure=memory_figure(table, title), data={"size": size})


def plan_summary(m: MemoryMetrics) -> str:
    """One line on what the user's ds_config costs per GPU (empty without a ds_config)."""
    p = m.plan
    if p["stage"] is None:
        return ""
    return (
        f"your ds_config: stage {p['stage']}, {p['precision']}, offload optimizer {p['offload_optimizer']}, "
        f"offload params {p['offload_param']} → {p['formula_device_gib']:.1f} GiB of model states per GPU "
        f"(paper), {p['formula_cpu_gib']:.1f} GiB offloaded per GPU"
    )


def headroom_summary(m: MemoryMetrics) -> str:
    """One line: does a full ZeRO-3 offload of one node fit this machine's free CPU memory?"""
    h = m.offload_headroom
    if h is None:
        return "offload headroom not computed"
    verdict = "OK" if h.ok else "would not fit: refuse before launch"
    return (
        f"{m.model_name}: ZeRO-3 offload of a {m.gpus_per_node}-GPU node needs "
        f"{h.cpu_needed_bytes / 2**30:.0f} GiB CPU RAM, "
        f"{h.cpu_available_bytes / 2**30:.0f} GiB free → {verdict}"
    )


def show_memory(result: Result[MemoryMetrics]) -> Shown:
    """The per-stage table (GiB), what your ds_config costs, and whether a full offload fits here."""
    return Shown(result.table.round(2), plan_summary(result.metrics), headroom_summary(result.metrics))


# -- the ds_config --------------------------------------------------------------------------------


def run_ds_config(
    cfg: DsConfigConfig, ctx: ZeroContext, live: LiveFigure | None = None
) -> Result[DsConfigMetrics]:
    """The user's ds_config (or the field notes' with its launch line) explained key by key; the batch
    identity's inputs at ``world_size`` GPUs. A config DeepSpeed would reject fails here, named."""
    table, findings, identity = explain(cfg.ds_config, world_size=cfg.world_size)
    metrics = DsConfigMetrics(
        train_batch_size=identity["train_batch_size"],
        micro_batch=identity["micro_batch"],
        grad_accum=identity["grad_accum"],
        world_size=identity["world_size"],
        findings=list(findings),
    )
    return Result(metrics=metrics, table=table)


def show_ds_config(result: Result[DsConfigMetrics]) -> Shown:
    """The problems found (one line each), then every key with what it does."""
    findings = "\n".join(f"* {f}" for f in result.metrics.findings)
    return Shown(findings, result.table.style.set_properties(**{"text-align": "left"}))


# -- the ladder -----------------------------------------------------------------------------------


def _loss_scale_history(rows: list[dict[str, Any]]) -> list[LossScaleStep]:
    """Rank 0's fp16 loss-scale history (the first rung that has one)."""
    for t in rows:
        if t["rank"] == 0 and t["loss_scale_history"]:
            return [LossScaleStep(**h) for h in t["loss_scale_history"]]
    return []


def _launch_ladder(cfg: LadderConfig, spec: dict[str, Any], device: str, live, **hooks):
    """One launch of ``spec``'s rungs under a memory monitor: (launch result, monitor, alerts)."""
    from tqdm.auto import tqdm

    bar = tqdm(
        total=len(spec["rungs"]) * cfg.steps * cfg.world_size, desc="ZeRO ladder (rank-steps)", leave=False
    )
    on_progress, on_start = hooks.get("on_progress"), hooks.get("on_start")

    def progress(d):
        bar.update(1)
        if live is not None and d["rank"] == 0:
            live.add(f"{d['rung']} (mean over ranks)", d["step"], d["mean_loss"])
            live.flush()
        if on_progress is not None:
            on_progress(d)

    pids: dict[int, int] = {}
    alerts: list[dict[str, Any]] = []

    def sampler():
        by_pid = process_tree_rss(list(pids.values()))()
        return {f"rank {r} RSS": by_pid[f"pid{pid}"] for r, pid in pids.items() if f"pid{pid}" in by_pid}

    def started(p):
        pids.update(p)
        if on_start is not None:
            on_start(p)

    monitor = MemoryMonitor(sampler, interval_s=0.25)
    for r in range(cfg.world_size):
        monitor.on_threshold(f"rank {r} RSS", cfg.monitor_limit_mib * 2**20, alerts.append)
    # Rank JSON, logs and round-trip checkpoints live only for the run: everything a later cell
    # reads (loss-scale history included) is copied into the result.
    try:
        with tempfile.TemporaryDirectory(prefix="nbkit-zero-") as out_dir, monitor:
            res = launch(
                spec,
                world_size=cfg.world_size,
                device=device,
                timeout_s=cfg.timeout_s,
                on_progress=progress,
                on_start=started,
                out_dir=out_dir,
            )
    finally:
        bar.close()
    return res, monitor, alerts


def _peaks(peak: dict[str, dict[str, Any]], launch: int) -> list[RungPeak]:
    return [RungPeak(rung=rung, launch=launch, **p) for rung, p in peak.items()]


def run_ladder(
    cfg: LadderConfig,
    ctx: ZeroContext,
    live: LiveFigure | None = None,
    *,
    on_progress=None,
    on_start=None,
    fail: dict | None = None,
) -> Result[LadderMetrics]:
    """Launch ``world_size`` DeepSpeed ranks once with every rung; then up to ``launches − 1`` more
    launches of stages 0–3 alone, each with a fresh seed (the memory-saving rows' unit), until those rows
    are decided; return rows, ratios, checks. ``fail`` (``{"rank", "step", "how"}``) makes one rank fail
    on purpose (the failure drill)."""
    import pandas as pd

    device = ctx.ranks_device(cfg.world_size)
    if device == "cpu" and cfg.precision == "fp16":
        raise UsageError(
            "LadderConfig.precision: DeepSpeed's CPU accelerator has no fp16; use bf16 or fp32, or CUDA ranks"
        )
    spec = ladder_spec(cfg, device, fail=fail)  # every rung's ds_config is validated before a rank starts
    res, monitor, alerts = _launch_ladder(cfg, spec, device, live, on_progress=on_progress, on_start=on_start)
    out = summarize(res.rows(), spec, wall_s=res.wall_s)
    checks = out["checks"]
    rows = out["ladder"]
    metrics = LadderMetrics(
        formula_ratios=[StageRatio(k, v) for k, v in out["bytes_vs_formula"].items()],
        wall_s=res.wall_s,
        ranks_device=device,
        loss_max_rel_diff=checks["loss_max_rel_diff"],
        loss_tolerance=checks.get("loss_tolerance"),
        loss_rungs=checks["loss_rungs"],
        control_rel_diff=checks["control_rel_diff"],
        replicas_in_sync=checks["replicas_in_sync"],
        checkpoint_round_trip_ok=checks["checkpoint_round_trip_ok"],
        rss_peak_bytes={k: max(ys) for k, (_xs, ys) in monitor.series().items()},
        monitor_samples=len(monitor.samples),
        monitor_alerts=alerts,
        world_size=cfg.world_size,
        steps=cfg.steps,
        micro_batch=cfg.micro_batch,
        seq_len=cfg.seq_len,
        bucket_elements=cfg.bucket_elements,
        precision=cfg.precision,
        overflow_step=cfg.overflow_step,
        loss_scale_history=_loss_scale_history(rows),
        sub_group=sub_group_comparison(rows),
        persistence=Persistence(**out["persistence"]) if out["persistence"] else None,
        peaks=_peaks(out["peak"], 0),
        launches=1,
        n_params=rows[0]["n_params"] if rows else 0,
    )
    stop = REGISTRY.stopper("ladder", ctx, cfg)
    # Launch by launch (stages 0–3, a fresh seed each): the rows they feed are judged after each, and the
    # loop stops once every one of them is decided (at most cfg.launches launches).
    for launch_ in range(1, cfg.launches):
        again = dict(spec, rungs=stage_rungs(cfg), seed=cfg.seed + launch_, checkpoint=False)
        more, _mon, _alerts = _launch_ladder(cfg, again, device, None)
        metrics = dataclasses.replace(
            metrics,
            peaks=metrics.peaks + _peaks(summarize(more.rows(), again)["peak"], launch_),
            launches=launch_ + 1,
            wall_s=metrics.wall_s + more.wall_s,
        )
        if stop(metrics):
            break
    table = pd.DataFrame([{k: v for k, v in row.items() if k not in ("local_losses",)} for row in rows])
    data = {
        "ladder": rows,
        "checks": checks,
        "ready_s": res.ready_s,
        "checkpoint_table": pd.DataFrame(checks.get("checkpoint_detail") or {}).T,
        "loss_figure": out["loss_figure"],
        "time_figure": out["time_figure"],
        "waterfall_figure": out["waterfall_figure"],
        "memory_timeline": monitor.figure("Rank RSS during the ladder (sampler thread)"),
        **ladder_tables(table),
    }
    return Result(metrics=metrics, table=table, figure=out["figure"], data=data)


BYTES_COLUMNS = (
    "rung",
    "rank",
    "params_bytes",
    "grads_bytes",
    "optimizer_bytes",
    "buffers_bytes",
    "formula_bytes",
    "ratio",
    "optimizer_class",
    "peak_bytes",
    "step_s_median",
)
PEAK_COLUMNS = (
    "rung",
    "rank",
    "baseline_bytes",
    "init_peak_bytes",
    "peak_bytes",
    "predicted_peak_bytes",
    "peak_over_predicted",
    "activation_bytes",
    "deepspeed_estimate_bytes",
)
STAGE3_COLUMNS = (
    "rung",
    "rank",
    "persistence_threshold",
    "sub_group_size",
    "n_sub_groups",
    "params_bytes",
    "optimizer_bytes",
    "formula_params",
)


def ladder_tables(table) -> dict[str, Any]:
    """The ladder's views a reader looks at: bytes against the formula, where each rank's peak goes,
    the stage-3 rungs (persistence threshold, sub-groups), and measured ÷ formula per stage."""
    if table.empty:
        return {"bytes_table": table, "peak_table": table, "stage3_table": table}
    return {
        "bytes_table": table[list(BYTES_COLUMNS)],
        "peak_table": table[list(PEAK_COLUMNS)],
        "stage3_table": table[table["stage"] == 3][list(STAGE3_COLUMNS)],
    }


def show_ladder(result: Result[LadderMetrics]) -> Shown:
    """How long the ranks took, and each rank's model-state bytes against the formula."""
    m = result.metrics
    line = (
        f"ladder: {len(result.table)} rank-rungs on {m.ranks_device} in {m.wall_s:.1f} s "
        f"({m.launches} launch{'es' if m.launches > 1 else ''})"
    )
    return Shown(line, result.data["bytes_table"])


def sub_group_comparison(rows: list[dict[str, Any]]) -> SubGroup | None:
    """Per-rank shard bytes (params + optimizer states, mean over ranks) of the two stage-3 rungs that
    differ only in ``sub_group_size``; None when the second rung did not run."""
    base = [r for r in rows if r["rung"] == "stage3"]
    small = [r for r in rows if r["rung"] == "stage3_sub_group"]
    if not base or not small:
        return None

    def shard(rs):
        return int(round(sum(r["params_bytes"] + r["optimizer_bytes"] for r in rs) / len(rs)))

    return SubGroup(
        shard_bytes_default=shard(base),
        shard_bytes_small=shard(small),
        n_sub_groups_default=max(r["n_sub_groups"] for r in base),
        n_sub_groups_small=small[0]["n_sub_groups"],
        sub_group_size_default=base[0]["sub_group_size"] or 1e9,
        sub_group_size_small=small[0]["sub_group_size"],
        n_sub_groups_small_min=min(r["n_sub_groups"] for r in small),
    )


def run_crossover(
    cfg: CrossoverConfig, ctx: ZeroContext, live: LiveFigure | None = None, *, on_size=None
) -> Result[CrossoverMetrics]:
    """One ladder launch (stages 0–3) per model size; per stage and size the measured and predicted per-rank
    peak, and the smallest size from which each ZeRO stage saves ≥ 2 % of stage 0's peak growth on every rank
    at that size and every larger one (``metrics.crossover``). No sizes: nothing runs."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    device = None
    for hidden, layers in cfg.parsed_sizes():
        lad = run_ladder(
            LadderConfig(
                launches=1,
                stages=(0, 1, 2, 3),
                world_size=cfg.world_size,
                steps=cfg.steps,
                precision=cfg.precision,
                show_persistence=False,
                sub_group_elements=0,
                checkpoint=False,
                control=False,
                hidden_size=hidden,
                num_hidden_layers=layers,
                bucket_elements=cfg.bucket_elements,
                model_path=cfg.model_path,
                timeout_s=3600,
            ),
            ctx,
        )
        device = lad.metrics.ranks_device
        peak = {p.rung: dataclasses.asdict(p) for p in lad.metrics.peaks}
        new = crossover_rows(f"{hidden}x{layers}", lad.data["ladder"], peak)
        for r in new:
            r["wall_s"] = lad.metrics.wall_s
        rows += new
        if on_size is not None:
            on_size(new)
    crossover = crossover_sizes(rows) if rows else {}
    metrics = CrossoverMetrics(
        crossover=crossover,
        ranks_device=device,
        bucket_elements=cfg.bucket_elements,
        world_size=cfg.world_size,
        sizes=cfg.sizes,
        rows=[CrossoverRow(**r) for r in rows],
    )
    if not rows:
        return Result(metrics=metrics, data={"rows": []})
    figure = crossover_figure(rows, crossover, cfg.bucket_elements)
    return Result(metrics=metrics, table=pd.DataFrame(rows), figure=figure, data={"rows": rows})


def show_crossover(result: Result[CrossoverMetrics]) -> Any:
    """The sweep's figure, or one line saying no size was asked for."""
    if not result.metrics.rows:
        return Shown('no size sweep in this run (set `CROSSOVER_SIZES`, e.g. `"256x8,512x8"`)')
    return result.figure


# -- silent failures ------------------------------------------------------------------------------

NO_FP16 = (
    "needs one CUDA GPU: DeepSpeed's CPU accelerator has no fp16 (is_fp16_supported() is false) "
    "and this machine has no GPU"
)


def run_loss_scale_drill(
    cfg: LossScaleConfig, ctx: ZeroContext, live: LiveFigure | None = None
) -> Result[LossScaleMetrics]:
    """fp16 dynamic loss scaling with a provoked overflow (default: stage 2, overflow at step 2).

    Loss scaling is each rank's own business, so one GPU is enough: the drill runs on
    min(``cfg.world_size``, local GPUs) ranks. DeepSpeed's CPU accelerator has no fp16, so without a
    GPU nothing is launched and the result says so (``not_measured``); on GPUs the per-step history
    (scale, overflow, skipped) is in the metrics.
    """
    gpus = ctx.gpus
    if gpus == 0:
        metrics = LossScaleMetrics(
            ranks_device="cpu", loss_scale_history=[], not_measured=NO_FP16, precision="fp16", world_size=0
        )
        return Result(metrics=metrics)
    lad = run_ladder(cfg.ladder_config(max(1, min(cfg.world_size, gpus))), ctx, live)
    m = lad.metrics
    metrics = LossScaleMetrics(
        ranks_device=m.ranks_device,
        loss_scale_history=m.loss_scale_history,
        precision=m.precision,
        world_size=m.world_size,
    )
    return Result(metrics=metrics, table=lad.table, figure=lad.figure, data=lad.data)


def show_loss_scale(result: Result[LossScaleMetrics]) -> Shown:
    """Rank 0's fp16 loss-scale history, or why it was not measured."""
    m = result.metrics
    steps = ", ".join(
        f"step {h.step}: {h.scale:g}{' overflow' if h.overflow else ''}{' skipped' if h.skipped else ''}"
        for h in m.loss_scale_history
    )
    return Shown(f"fp16 loss-scale history: {steps or m.not_measured or 'none recorded'}")


def run_failure_drill(
    cfg: FailureDrillConfig, ctx: ZeroContext, live: LiveFigure | None = None
) -> Result[FailureDrillMetrics]:
    """Kill/raise/hang one rank mid-run: the launcher must name it, within the timeout (counted from the
    moment every rank is ready), and leave no process."""
    import psutil

    pids: dict[int, int] = {}
    lcfg = LadderConfig(
        launches=1,
        stages=(2,),
        world_size=cfg.world_size,
        steps=cfg.step + 2,
        show_persistence=False,
        sub_group_elements=0,
        control=False,
        hidden_size=64,
        num_hidden_layers=2,
        checkpoint=False,
        warm_up=False,
        timeout_s=max(30.0, cfg.timeout_s),
    )
    t = time.perf_counter()
    caught: RankFailed | None = None
    try:
        run_ladder(lcfg, ctx, on_start=pids.update, fail={"rank": cfg.rank, "step": cfg.step, "how": cfg.how})
    except RankFailed as exc:
        caught = exc
    elapsed = time.perf_counter() - t
    survivors = [
        pid
        for pid in pids.values()
        if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]
    metrics = FailureDrillMetrics(
        detected=caught is not None,
        reported_rank=getattr(caught, "rank", None),
        expected_rank=cfg.rank,
        how=cfg.how,
        timed_out=isinstance(caught, RankTimeout),
        message=str(caught) if caught else "no failure reported",
        seconds_to_report=elapsed,
        timeout_s=lcfg.timeout_s,
        leftover_processes=survivors,
        ready_s=getattr(caught, "ready_s", None),
    )
    return Result(metrics=metrics, data={"traceback_tail": caught.traceback_tail[-600:] if caught else ""})


def show_failure_drill(result: Result[FailureDrillMetrics]) -> Shown:
    """What the launcher said, how fast, and what it left behind."""
    m = result.metrics
    ready = f" (every rank ready after {m.ready_s:.1f} s)" if m.ready_s is not None else ""
    return Shown(
        f"`{m.message}`",
        f"reported in {m.seconds_to_report:.1f} s{ready}; leftover processes: {m.leftover_processes}",
    )


# -- fragmentation --------------------------------------------------------------------------------


def run_fragmentation(
    cfg: FragmentationConfig, ctx: ZeroContext, live: LiveFigure | None = None
) -> Result[FragmentationMetrics]:
    """Gap ratio per step vs checkpoint interval (CUDA); on CPU the figures are named unavailable."""
    import pandas as pd

    device = ctx.torch_device
    if device.type != "cuda":
        out = cpu_accounting(cfg)
        metrics = FragmentationMetrics(
            needs_cuda=True,
            steps=cfg.steps,
            tensor_bytes_peak=out["tensor_bytes_peak"],
            unavailable=out["unavailable"],
        )
        return Result(metrics=metrics, figure=out["figure"], data=out)
    stop = REGISTRY.stopper("fragmentation", ctx, cfg)
    # Seed by seed (each seed's runs in its shuffled order); stops once the claim it feeds is decided.
    out = cuda_runs(cfg, device, live=live, stop=lambda runs: stop(_fragmentation_metrics(cfg, runs, "")))
    metrics = _fragmentation_metrics(cfg, out["runs"], out["model"])
    table = pd.DataFrame([dataclasses.asdict(r) for r in metrics.runs])
    return Result(metrics=metrics, table=table, figure=out["figure"], data=out)


def _fragmentation_metrics(
    cfg: FragmentationConfig, runs: list[dict[str, Any]], model: str
) -> FragmentationMetrics:
    """The CUDA metrics of the runs done so far."""
    return FragmentationMetrics(
        needs_cuda=False,
        steps=cfg.steps,
        seeds=len({r["seed"] for r in runs}),
        runs=[
            FragmentationRun(**{f.name: r[f.name] for f in dataclasses.fields(FragmentationRun)})
            for r in runs
        ],
        model=model,
        intervals=tuple(int(i) for i in cfg.intervals),
        gap_ratios={
            f"{r['interval']}/{r['expandable_segments']}": r["gap_ratios"]
            for r in runs
            if r["seed"] == cfg.seed
        },
    )


def unavailable_summary(m: FragmentationMetrics) -> str:
    """The figures a CPU cannot measure, one per line with the reason."""
    lines = ["needs CUDA — not measurable here:"]
    lines += [f"* {name}: {why}" for name, why in (m.unavailable or {}).items()]
    return "\n".join(lines)


def show_fragmentation(result: Result[FragmentationMetrics]) -> Any:
    """On CUDA every run (interval, allocator setting, seed, its place in the run order); on CPU the
    figures that need CUDA, with the reason."""
    if result.metrics.needs_cuda:
        return Shown(unavailable_summary(result.metrics))
    return result.table


# -- speculative decoding -------------------------------------------------------------------------


def run_specdec(
    cfg: SpecDecConfig, ctx: ZeroContext, live: LiveFigure | None = None
) -> Result[SpecDecMetrics]:
    """Greedy generation with and without speculation on SmolLM2 or ``cfg.model_path``, one request per
    prompt of nbkit's neutral set: acceptance, fallbacks, speedups (interleaved timings), identity. A
    bad model path is a UsageError before anything is timed; the model is loaded once per context."""
    import torch

    device = ctx.torch_device
    if not cfg.timings:
        cfg = dataclasses.replace(cfg, timings=CUDA_TIMINGS if device.type == "cuda" else 1)
    threads = torch.get_num_threads()
    if cfg.cpu_threads and device.type == "cpu":
        torch.set_num_threads(cfg.cpu_threads)
    stop = REGISTRY.stopper("specdec", ctx, cfg)
    try:
        model, tok = ctx.causal_lm(cfg.model_path)
        # Request by request; stops once the claims they feed are decided (at most cfg.n_prompts requests).
        out = measure_specdec(
            cfg, device, model, tok, live=live, stop=lambda so_far: stop(_specdec_metrics(cfg, model, so_far))
        )
    finally:
        torch.set_num_threads(threads)
    return Result(
        metrics=_specdec_metrics(cfg, model, out), table=out["table"], figure=out["figure"], data=out
    )


def _specdec_metrics(cfg: SpecDecConfig, model: Any, out: dict[str, Any]) -> SpecDecMetrics:
    """The metrics of ``out`` (``measure_specdec``'s result, or the requests done so far)."""
    summary = {k: MethodSummary(**v) for k, v in out["summary"].items()}
    return SpecDecMetrics(
        prompt_lookup=summary.get("prompt_lookup"),
        truncated_draft=summary.get("truncated_draft"),
        device=out["device"],
        dtype=out["dtype"],
        timings=out["timings"],
        loadavg=out["loadavg"],
        draft_layers=cfg.draft_layers if "truncated_draft" in cfg.methods else 0,
        target_layers=int(model.config.num_hidden_layers),
    )


def show_specdec(result: Result[SpecDecMetrics]) -> Any:
    """One row per request and method: throughputs, acceptance, rounds and fallbacks, identity."""
    return result.table.round(3)


REGISTRY.register(
    Experiment(
        "memory",
        "ZeRO memory model: paper formula vs DeepSpeed's estimator",
        MemoryConfig,
        MemoryMetrics,
        run_memory_model,
        show_result=show_memory,
    )
)
REGISTRY.register(
    Experiment(
        "ds_config",
        "Your ds_config, key by key",
        DsConfigConfig,
        DsConfigMetrics,
        run_ds_config,
        show_result=show_ds_config,
    )
)
REGISTRY.register(
    Experiment(
        "ladder",
        "ZeRO ladder: real DeepSpeed ranks",
        LadderConfig,
        LadderMetrics,
        run_ladder,
        figure_title="ZeRO ladder: loss per step (streamed from rank 0)",
        replicates=Replicates(
            "launch",
            "launches",
            full=FULL_LAUNCHES,
            cost_s=76.0,
            cost_source="CPU-s of a ladder of 8 launches on 2 CPU ranks (the first with every rung) ÷ 8, "
            "loaded: bench/RESULTS.md, Notebook 02's rows as rules that run",
        ),
        xaxis="step",
        yaxis="loss",
        show_result=show_ladder,
    )
)
REGISTRY.register(
    Experiment(
        "crossover",
        "Where ZeRO starts to pay: per-rank peak vs model size",
        CrossoverConfig,
        CrossoverMetrics,
        run_crossover,
        show_result=show_crossover,
    )
)
REGISTRY.register(
    Experiment(
        "loss_scale",
        "fp16 loss scaling: a provoked overflow",
        LossScaleConfig,
        LossScaleMetrics,
        run_loss_scale_drill,
        show_result=show_loss_scale,
    )
)
REGISTRY.register(
    Experiment(
        "failure_drill",
        "Failure drill: a rank dies mid-run",
        FailureDrillConfig,
        FailureDrillMetrics,
        run_failure_drill,
        show_result=show_failure_drill,
    )
)
REGISTRY.register(
    Experiment(
        "fragmentation",
        "Fragmentation vs checkpoint interval",
        FragmentationConfig,
        FragmentationMetrics,
        run_fragmentation,
        figure_title="allocator gap ratio per step",
        replicates=Replicates(
            "seed",
            "seeds",
            full=FRAGMENTATION_FULL_SEEDS,
            cost_s=90.0,
            cost_source="GPU-seconds, not CPU (it runs only on CUDA), extrapolated for one H200-class GPU: a "
            "seed's two 400-step runs at ≈ 20 ms a step with 8 or 2 device-side checkpoints of ≈ 4 GB each",
            full_also={"expandable_segments": (False,)},
        ),
        xaxis="step",
        yaxis="(reserved − allocated) / reserved",
        show_result=show_fragmentation,
    )
)
REGISTRY.register(
    Experiment(
        "specdec",
        "Speculative decoding on SmolLM2 (assisted generation)",
        SpecDecConfig,
        SpecDecMetrics,
        run_specdec,
        figure_title="speculative speedup per request",
        replicates=Replicates(
            "request",
            "n_prompts",
            full=FULL_REQUESTS,
            cost_s=13.6,
            cost_source="one request (greedy, prompt lookup and the truncated draft, one timing each, one "
            "thread) on the shared 2-core machine (bench/RESULTS.md, Notebook 02's claim designs)",
        ),
        xaxis="request",
        yaxis="× tokens/s",
        show_result=show_specdec,
    )
)
