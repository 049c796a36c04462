"""The ZeRO theme's experiments: ``run_x(cfg, ctx, live) -> Result[XMetrics]``, registered in ``REGISTRY``.

One experiment per config in ``config.py``; its metrics dataclass is in ``metrics.py``. They share a
:class:`ZeroContext` (the devices resolved once, how many ranks this machine runs for the user's plan,
a loaded speculative-decoding model) and hand a ``torch.device`` (or, to rank processes, its type) down
to the domain modules: ``memory`` (formula and estimators), ``ladder``/``launch``/``worker`` (real
DeepSpeed ranks), ``fragmentation`` (CUDA caching allocator), ``specdec`` (assisted generation).

``ctx`` may be left out when a run is called directly (a bench, a test): a fresh context is made.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from typing import TYPE_CHECKING, Any

from nbkit.device import device_report, pick_device
from nbkit.errors import UsageError
from nbkit.experiment import Context, Experiment, Registry
from nbkit.model_files import load_model, load_smollm2, load_tokenizer, tiny_llama_config
from nbkit.result import Result
from nbkit.zero.config import (
    CrossoverConfig,
    DsConfigConfig,
    FailureDrillConfig,
    FragmentationConfig,
    LadderConfig,
    LossScaleConfig,
    MemoryConfig,
    SpecDecConfig,
)
from nbkit.zero.dsconfig import explain, memory_plan, validate_ds_config
from nbkit.zero.fragmentation import cpu_accounting, cuda_runs
from nbkit.zero.ladder import ladder_spec, summarize
from nbkit.zero.launch import RankFailed, RankTimeout, launch
from nbkit.zero.memory import (
    config_from_path,
    llama2_7b_config,
    memory_figure,
    memory_table,
    model_size,
    smollm2_135m_config,
)
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
    OffloadHeadroom,
    Persistence,
    RungPeak,
    SpecDecMetrics,
    SubGroup,
)
from nbkit.zero.monitor import MemoryMonitor, offload_headroom, process_tree_rss
from nbkit.zero.peak import crossover_figure, crossover_rows, crossover_sizes
from nbkit.zero.specdec import measure_specdec

if TYPE_CHECKING:
    from nbkit.live import LiveFigure

REGISTRY = Registry("zero")
# A registered experiment run headless by slug (its SMOKE preset or defaults, then overrides): what a
# panel's Run button runs, without the panel.
run = REGISTRY.run

CPU_RANKS = 2  # rank processes a CPU ladder starts at most: each holds a full runtime and a core


class ZeroContext(Context):
    """What notebook 02's experiments share: each requested device resolved once, the user's plan of
    ``world_size`` GPUs (how many ranks this machine runs for it), and the speculative-decoding model."""

    def __init__(self, device: str = "auto", world_size: int = 2) -> None:
        super().__init__(device)
        self.world_size = world_size

    @property
    def torch_device(self) -> Any:
        """The ``torch.device`` of the context's own device (see :meth:`device_for`)."""
        return self.device_for()

    def device_for(self, name: str | None = None) -> Any:
        """The ``torch.device`` of ``name`` (default: the context's), resolved once per name."""
        name = self.device if name is None else name
        return self.cached(("device", name), lambda: pick_device(name))

    def gpus(self, name: str | None = None) -> int:
        """Local CUDA devices usable for ``name`` (0 unless it resolves to CUDA)."""
        import torch

        return torch.cuda.device_count() if self.device_for(name).type == "cuda" else 0

    @property
    def ranks(self) -> int:
        """Ranks this machine runs for the plan (see :func:`local_ranks`)."""
        return local_ranks(self.world_size, self.device, ctx=self)

    @property
    def drill_ranks(self) -> int:
        """Ranks of the failure drill and the size sweep: the ladder's, at least two."""
        return max(2, self.ranks)

    @property
    def drill_rank(self) -> int:
        """The rank the failure drill kills: the last one."""
        return self.drill_ranks - 1

    def device_report(self) -> dict[str, Any]:
        """What this machine offers (torch build, CUDA, GPU, cores, RAM)."""
        return device_report()

    def causal_lm(self, model_path: str, device: Any) -> tuple[Any, Any]:
        """(model, tokenizer) of ``model_path`` ('' = SmolLM2) on ``device``, loaded once per context."""

        def load() -> tuple[Any, Any]:
            if model_path:
                return load_model(model_path, device), load_tokenizer(model_path)
            return load_smollm2(device)

        return self.cached(("causal_lm", model_path, str(device)), load)


def _ctx(ctx: ZeroContext | None) -> ZeroContext:
    return ctx if ctx is not None else ZeroContext()


def unless_smoke(smoke: bool, **overrides: Any) -> dict[str, Any]:
    """``overrides`` for a full run, nothing under SMOKE (the smoke preset keeps its own sizes)."""
    return {} if smoke else overrides


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


def run_memory_model(
    cfg: MemoryConfig, ctx: ZeroContext | None = None, live: LiveFigure | None = None
) -> Result[MemoryMetrics]:
    """Model-state bytes per device by the paper's formula beside DeepSpeed's estimators, and the CPU
    headroom a full ZeRO-3 offload of one node would need here."""
    if cfg.model_path:
        size = model_size(config_from_path(cfg.model_path, where="MemoryConfig.model_path"), cfg.model_path)
    else:
        size = preset_size(cfg.model)
    if cfg.world_size > cfg.gpus_per_node and cfg.world_size % cfg.gpus_per_node:
        raise UsageError(
            f"MemoryConfig.world_size: {cfg.world_size} GPUs is not a whole number of nodes of "
            f"gpus_per_node={cfg.gpus_per_node}"
        )
    plan: dict[str, Any] = {
        "stage": None,
        "precision": cfg.precision,
        "offload_optimizer": cfg.offload_optimizer,
        "offload_param": cfg.offload_param,
    }
    if cfg.ds_config:
        # a config DeepSpeed would reject fails here, named
        plan = memory_plan(validate_ds_config(cfg.ds_config))
        plan["ds_config"] = cfg.ds_config
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
        model_name=size.name,
        offload_headroom=OffloadHeadroom(**headroom),
    )
    return Result(metrics=metrics, table=table, figure=memory_figure(table, title), data={"size": size})


def plan_summary(m: MemoryMetrics) -> str:
    """One line on what the user's ds_config costs per GPU (empty without a ds_config)."""
    p = m.plan
    if p.get("stage") is None:
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


# -- the ds_config --------------------------------------------------------------------------------


def run_ds_config(
    cfg: DsConfigConfig, ctx: ZeroContext | None = None, live: LiveFigure | None = None
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


# -- the ladder -----------------------------------------------------------------------------------


def local_ranks(world_size: int, device: str = "auto", *, ctx: ZeroContext | None = None) -> int:
    """Ranks this machine runs for a plan of ``world_size`` GPUs: one per local GPU when there are at
    least two, else ``CPU_RANKS`` CPU ranks (never more than the plan); the memory model and the
    ds_config check keep the plan's full ``world_size``."""
    gpus = _ctx(ctx).gpus(device)
    return max(1, min(world_size, gpus if gpus >= 2 else CPU_RANKS))


def ladder_device(cfg: LadderConfig, ctx: ZeroContext | None = None) -> str:
    """The ranks' device type: one GPU per rank, else — only when the user said ``auto`` — CPU ranks."""
    ctx = _ctx(ctx)
    device = ctx.device_for(cfg.device)
    if device.type == "cuda":
        gpus = ctx.gpus(cfg.device)
        if gpus < cfg.world_size:
            if cfg.device != "auto":
                raise UsageError(
                    f"LadderConfig.world_size: {cfg.world_size} ranks need {cfg.world_size} GPUs "
                    f"(one per rank); this machine has {gpus}"
                )
            return "cpu"
    return device.type


def _loss_scale_history(rows: list[dict[str, Any]]) -> list[LossScaleStep]:
    """Rank 0's fp16 loss-scale history (the first rung that has one)."""
    for t in rows:
        if t["rank"] == 0 and t["loss_scale_history"]:
            return [LossScaleStep(**h) for h in t["loss_scale_history"]]
    return []


def _model_states(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per rung, the model-state bytes a rank holds (mean over ranks)."""
    by_rung: dict[str, list[float]] = {}
    for r in rows:
        by_rung.setdefault(r["rung"], []).append(r["measured_bytes"])
    return {rung: sum(v) / len(v) for rung, v in by_rung.items()}


def run_ladder(
    cfg: LadderConfig,
    ctx: ZeroContext | None = None,
    live: LiveFigure | None = None,
    *,
    on_progress=None,
    on_start=None,
    fail: dict | None = None,
) -> Result[LadderMetrics]:
    """Launch ``world_size`` DeepSpeed ranks once; every rung runs inside them; return rows, ratios, checks.

    ``fail`` (``{"rank", "step", "how"}``) makes one rank fail on purpose (the failure drill).
    """
    import pandas as pd
    from tqdm.auto import tqdm

    device = ladder_device(cfg, ctx)
    if device == "cpu" and cfg.precision == "fp16":
        raise UsageError(
            "LadderConfig.precision: DeepSpeed's CPU accelerator has no fp16; use bf16 or fp32, or CUDA ranks"
        )
    spec = ladder_spec(cfg, device, fail=fail)  # every rung's ds_config is validated before a rank starts
    bar = tqdm(
        total=len(spec["rungs"]) * cfg.steps * cfg.world_size, desc="ZeRO ladder (rank-steps)", leave=False
    )

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
    out = summarize(res.rows(), spec, wall_s=res.wall_s)
    checks = out["checks"]
    rows = out["ladder"]
    metrics = LadderMetrics(
        bytes_vs_formula=out["bytes_vs_formula"],
        wall_s=res.wall_s,
        ranks_device=device,
        loss_max_rel_diff=checks["loss_max_rel_diff"],
        loss_tolerance=checks.get("loss_tolerance"),
        loss_agree=checks["loss_agree"],
        replicas_in_sync=checks["replicas_in_sync"],
        checkpoint_round_trip_ok=checks["checkpoint_round_trip_ok"],
        rss_peak_bytes={k: max(ys) for k, (_xs, ys) in monitor.series().items()},
        monitor_samples=len(monitor.samples),
        monitor_alerts=alerts,
        world_size=cfg.world_size,
        steps=cfg.steps,
        precision=cfg.precision,
        overflow_step=cfg.overflow_step,
        loss_scale_history=_loss_scale_history(rows),
        sub_group=sub_group_comparison(rows),
        persistence=Persistence(**out["persistence"]) if out["persistence"] else None,
        peak={rung: RungPeak(**p) for rung, p in out["peak"].items()},
        model_states=_model_states(rows),
        n_params=rows[0]["n_params"] if rows else 0,
    )
    table = pd.DataFrame([{k: v for k, v in row.items() if k not in ("local_losses",)} for row in rows])
    data = {
        "ladder": rows,
        "checks": checks,
        "checkpoint_table": pd.DataFrame(checks.get("checkpoint_detail") or {}).T,
        "loss_figure": out["loss_figure"],
        "time_figure": out["time_figure"],
        "waterfall_figure": out["waterfall_figure"],
        "memory_timeline": monitor.figure("Rank RSS during the ladder (sampler thread)"),
    }
    return Result(metrics=metrics, table=table, figure=out["figure"], data=data)


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
        n_sub_groups_default=base[0]["n_sub_groups"],
        n_sub_groups_small=small[0]["n_sub_groups"],
        sub_group_size_default=base[0]["sub_group_size"] or 1e9,
        sub_group_size_small=small[0]["sub_group_size"],
    )


def run_crossover(
    cfg: CrossoverConfig, ctx: ZeroContext | None = None, live: LiveFigure | None = None, *, on_size=None
) -> Result[CrossoverMetrics]:
    """One ladder launch (stages 0–3) per model size; per stage and size the measured and predicted per-rank
    peak, and the smallest size from which each ZeRO stage saves ≥ 2 % of stage 0's peak growth on every rank
    at that size and every larger one (``metrics.crossover``). No sizes: nothing runs."""
    import pandas as pd

    ctx = _ctx(ctx)
    rows: list[dict[str, Any]] = []
    device = None
    for hidden, layers in cfg.parsed_sizes():
        lad = run_ladder(
            LadderConfig(
                stages=(0, 1, 2, 3),
                world_size=cfg.world_size,
                steps=cfg.steps,
                precision=cfg.precision,
                show_persistence=False,
                sub_group_elements=0,
                checkpoint=False,
                hidden_size=hidden,
                num_hidden_layers=layers,
                bucket_elements=cfg.bucket_elements,
                model_path=cfg.model_path,
                device=cfg.device,
                timeout_s=3600,
            ),
            ctx,
        )
        device = lad.metrics.ranks_device
        peak = {rung: dataclasses.asdict(p) for rung, p in lad.metrics.peak.items()}
        new = crossover_rows(f"{hidden}x{layers}", lad.data["ladder"], peak)
        for r in new:
            r["wall_s"] = lad.metrics.wall_s
        rows += new
        if on_size is not None:
            on_size(new)
    if not rows:
        empty = CrossoverMetrics(
            crossover={},
            ranks_device=None,
            bucket_elements=cfg.bucket_elements,
            world_size=cfg.world_size,
            sizes=cfg.sizes,
        )
        return Result(metrics=empty, data={"rows": []})
    crossover = crossover_sizes(rows)
    metrics = CrossoverMetrics(
        crossover=crossover,
        ranks_device=device,
        bucket_elements=cfg.bucket_elements,
        world_size=cfg.world_size,
        sizes=cfg.sizes,
        rows=[CrossoverRow(**r) for r in rows],
    )
    figure = crossover_figure(rows, crossover, cfg.bucket_elements)
    return Result(metrics=metrics, table=pd.DataFrame(rows), figure=figure, data={"rows": rows})


# -- silent failures ------------------------------------------------------------------------------

NO_FP16 = (
    "needs one CUDA GPU: DeepSpeed's CPU accelerator has no fp16 (is_fp16_supported() is false) "
    "and this machine has no GPU"
)


def run_loss_scale_drill(
    cfg: LossScaleConfig, ctx: ZeroContext | None = None, live: LiveFigure | None = None
) -> Result[LossScaleMetrics]:
    """fp16 dynamic loss scaling with a provoked overflow (default: stage 2, overflow at step 2).

    Loss scaling is each rank's own business, so one GPU is enough: the drill runs on
    min(``cfg.world_size``, local GPUs) ranks. DeepSpeed's CPU accelerator has no fp16, so without a
    GPU nothing is launched and the result says so (``not_measured``); on GPUs the per-step history
    (scale, overflow, skipped) is in the metrics.
    """
    ctx = _ctx(ctx)
    gpus = ctx.gpus(cfg.device)
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


def run_failure_drill(
    cfg: FailureDrillConfig, ctx: ZeroContext | None = None, live: LiveFigure | None = None
) -> Result[FailureDrillMetrics]:
    """Kill/raise/hang one rank mid-run: the launcher must name it, within the timeout, and leave no
    process."""
    import psutil

    pids: dict[int, int] = {}
    lcfg = LadderConfig(
        stages=(2,),
        world_size=cfg.world_size,
        steps=cfg.step + 2,
        show_persistence=False,
        sub_group_elements=0,
        hidden_size=64,
        num_hidden_layers=2,
        checkpoint=False,
        warm_up=False,
        device=cfg.device,
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
    )
    return Result(metrics=metrics, data={"traceback_tail": caught.traceback_tail[-600:] if caught else ""})


# -- fragmentation --------------------------------------------------------------------------------


def run_fragmentation(
    cfg: FragmentationConfig, ctx: ZeroContext | None = None, live: LiveFigure | None = None
) -> Result[FragmentationMetrics]:
    """Gap ratio per step vs checkpoint interval (CUDA); on CPU the figures are named unavailable."""
    import pandas as pd

    device = _ctx(ctx).device_for(cfg.device)
    if device.type != "cuda":
        out = cpu_accounting(cfg)
        metrics = FragmentationMetrics(
            needs_cuda=True,
            steps=cfg.steps,
            tensor_bytes_peak=out["tensor_bytes_peak"],
            unavailable=out["unavailable"],
        )
        return Result(metrics=metrics, figure=out["figure"], data=out)
    out = cuda_runs(cfg, device, live=live)
    keys = (
        "interval",
        "expandable_segments",
        "seed",
        "mean_gap_ratio",
        "max_inactive_split",
        "alloc_retries",
        "checkpoints",
    )
    summary = [{k: r[k] for k in keys} for r in out["runs"]]
    means: dict[
        str, list[float]
    ] = {}  # per "<interval>/<expandable>": each seed's mean gap ratio (the claim's unit)
    for r in out["runs"]:
        means.setdefault(f"{r['interval']}/{r['expandable_segments']}", []).append(r["mean_gap_ratio"])
    metrics = FragmentationMetrics(
        needs_cuda=False,
        steps=cfg.steps,
        seeds=cfg.seeds,
        runs=summary,
        model=out["model"],
        gap_ratio_means=means,
        gap_ratios={
            f"{r['interval']}/{r['expandable_segments']}": r["gap_ratios"]
            for r in out["runs"]
            if r["seed"] == cfg.seed
        },
    )
    return Result(metrics=metrics, table=pd.DataFrame(summary), figure=out["figure"], data=out)


def unavailable_summary(m: FragmentationMetrics) -> str:
    """The figures a CPU cannot measure, one per line with the reason."""
    lines = ["needs CUDA — not measurable here:"]
    lines += [f"  {name}: {why}" for name, why in (m.unavailable or {}).items()]
    return "\n".join(lines)


# -- speculative decoding -------------------------------------------------------------------------


def run_specdec(
    cfg: SpecDecConfig, ctx: ZeroContext | None = None, live: LiveFigure | None = None
) -> Result[SpecDecMetrics]:
    """Greedy generation with and without speculation on SmolLM2 or ``cfg.model_path``: acceptance,
    fallbacks, speedups, identity. A bad model path is a UsageError before anything is timed; the model
    is loaded once per context."""
    import torch

    ctx = _ctx(ctx)
    device = ctx.device_for(cfg.device)
    threads = torch.get_num_threads()
    if cfg.cpu_threads and device.type == "cpu":
        torch.set_num_threads(cfg.cpu_threads)
    try:
        model, tok = ctx.causal_lm(cfg.model_path, device)
        out = measure_specdec(cfg, device, model, tok, live=live)
    finally:
        torch.set_num_threads(threads)
    metrics = SpecDecMetrics(
        summary={k: MethodSummary(**s) for k, s in out["summary"].items()}, device=str(device)
    )
    return Result(metrics=metrics, table=out["table"], figure=out["figure"], data=out)


for _exp in (
    Experiment(
        "memory",
        "ZeRO memory model: paper formula vs DeepSpeed's estimator",
        MemoryConfig,
        MemoryMetrics,
        run_memory_model,
    ),
    Experiment("ds_config", "Your ds_config, key by key", DsConfigConfig, DsConfigMetrics, run_ds_config),
    Experiment(
        "ladder",
        "ZeRO ladder: real DeepSpeed ranks",
        LadderConfig,
        LadderMetrics,
        run_ladder,
        figure_title="ZeRO ladder: loss per step (streamed from rank 0)",
        xaxis="step",
        yaxis="loss",
    ),
    Experiment(
        "crossover",
        "Where ZeRO starts to pay: per-rank peak vs model size",
        CrossoverConfig,
        CrossoverMetrics,
        run_crossover,
    ),
    Experiment(
        "loss_scale",
        "fp16 loss scaling: a provoked overflow",
        LossScaleConfig,
        LossScaleMetrics,
        run_loss_scale_drill,
    ),
    Experiment(
        "failure_drill",
        "Failure drill: a rank dies mid-run",
        FailureDrillConfig,
        FailureDrillMetrics,
        run_failure_drill,
    ),
    Experiment(
        "fragmentation",
        "Fragmentation vs checkpoint interval",
        FragmentationConfig,
        FragmentationMetrics,
        run_fragmentation,
        figure_title="allocator gap ratio per step",
        xaxis="step",
        yaxis="(reserved − allocated) / reserved",
    ),
    Experiment(
        "specdec",
        "Speculative decoding on SmolLM2 (assisted generation)",
        SpecDecConfig,
        SpecDecMetrics,
        run_specdec,
        figure_title="speculative speedup per prompt",
        xaxis="prompt",
        yaxis="× tokens/s",
    ),
):
    REGISTRY.register(_exp)
