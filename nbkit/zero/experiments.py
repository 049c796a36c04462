"""The ZeRO theme's experiments: ``run_x(cfg, live=None) -> Result``, one per config in ``config.py``.

Each resolves its device here, once, and hands a ``torch.device`` (or, to rank processes, its type)
down to the domain modules: ``memory`` (formula and estimators), ``ladder``/``launch``/``worker``
(real DeepSpeed ranks), ``fragmentation`` (CUDA caching allocator), ``specdec`` (assisted generation).
"""

from __future__ import annotations

from typing import Any

from nbkit.errors import UsageError
from nbkit.result import Result
from nbkit.zero.config import (
    CrossoverConfig,
    FailureDrillConfig,
    FragmentationConfig,
    LadderConfig,
    MemoryConfig,
    SpecDecConfig,
)


def preset_size(name: str):
    """Ψ and the largest layer of a named architecture, counted on the meta device."""
    from nbkit.model_files import tiny_llama_config
    from nbkit.zero.memory import llama2_7b_config, model_size, smollm2_135m_config

    builders = {"Llama-2-7B": llama2_7b_config, "SmolLM2-135M": smollm2_135m_config, "tiny Llama (ladder)": tiny_llama_config}
    if name not in builders:
        raise UsageError(f"model: expected one of {sorted(builders)}, got {name!r}")
    return model_size(builders[name](), name)


def run_memory_model(cfg: MemoryConfig) -> Result:
    """Model-state bytes per device by the paper's formula beside DeepSpeed's estimators."""
    from nbkit.zero.memory import memory_figure, memory_table

    if cfg.model_path:
        from nbkit.zero.memory import config_from_path, model_size

        size = model_size(config_from_path(cfg.model_path, where="MemoryConfig.model_path"), cfg.model_path)
    else:
        size = preset_size(cfg.model)
    if cfg.world_size > cfg.gpus_per_node and cfg.world_size % cfg.gpus_per_node:
        raise UsageError(f"MemoryConfig.world_size: {cfg.world_size} GPUs is not a whole number of nodes of "
                         f"gpus_per_node={cfg.gpus_per_node}")
    plan = {"stage": None, "precision": cfg.precision, "offload_optimizer": cfg.offload_optimizer, "offload_param": cfg.offload_param}
    if cfg.ds_config:
        from nbkit.zero.dsconfig import memory_plan, validate_ds_config

        plan = memory_plan(validate_ds_config(cfg.ds_config))  # a config DeepSpeed would reject fails here, named
        plan["ds_config"] = cfg.ds_config
    table = memory_table(size, cfg.world_size, precision=plan["precision"], offload_optimizer=plan["offload_optimizer"],
                         offload_param=plan["offload_param"], gpus_per_node=cfg.gpus_per_node)
    gpus, n_nodes = (min(cfg.gpus_per_node, cfg.world_size), max(1, cfg.world_size // cfg.gpus_per_node))
    where = f"N = {cfg.world_size} ({n_nodes} node{'s' if n_nodes > 1 else ''} × {gpus} GPUs)"
    title = f"{size.name} (Ψ = {size.n_params / 1e9:.3f} B) on {where}: model states per device"
    if plan["stage"] is not None:
        row = table[table["stage"] == plan["stage"]].iloc[0]
        plan.update(formula_device_gib=float(row["formula_device_gib"]), formula_cpu_gib=float(row["formula_cpu_gib"]),
                    deepspeed_device_gib=None if row["deepspeed_device_gib"] != row["deepspeed_device_gib"] else float(row["deepspeed_device_gib"]))
        title += f" — your ds_config runs stage {plan['stage']}"
    fig = memory_figure(table, title)
    return Result(metrics={"n_params": size.n_params, "largest_layer_params": size.largest_layer_params, "plan": plan,
                           "world_size": cfg.world_size, "gpus_per_node": gpus, "nodes": n_nodes},
                  table=table, figure=fig, data={"size": size})


CPU_RANKS = 2  # rank processes a CPU ladder starts at most: each holds a full runtime (~0.6 GB) and a core


def local_ranks(world_size: int, device: str = "auto") -> int:
    """Ranks this machine runs for a plan of ``world_size`` GPUs: one per local GPU when there are at
    least two, else ``CPU_RANKS`` CPU ranks (never more than the plan); the memory model and the
    ds_config check keep the plan's full ``world_size``."""
    import torch

    from nbkit.device import pick_device

    gpus = torch.cuda.device_count() if pick_device(device).type == "cuda" else 0
    return max(1, min(world_size, gpus if gpus >= 2 else CPU_RANKS))


def ladder_device(cfg: LadderConfig) -> str:
    """The ranks' device type: one GPU per rank, else — only when the user said ``auto`` — CPU ranks."""
    import torch

    from nbkit.device import pick_device

    device = pick_device(cfg.device)
    if device.type == "cuda" and torch.cuda.device_count() < cfg.world_size:
        if cfg.device != "auto":
            raise UsageError(f"LadderConfig.world_size: {cfg.world_size} ranks need {cfg.world_size} GPUs (one per rank); "
                             f"this machine has {torch.cuda.device_count()}")
        return "cpu"
    return device.type


def run_ladder(cfg: LadderConfig, live=None, *, on_progress=None, on_start=None, fail: dict | None = None) -> Result:
    """Launch ``world_size`` DeepSpeed ranks once; every rung runs inside them; return rows, ratios, checks.

    ``fail`` (``{"rank", "step", "how"}``) makes one rank fail on purpose (the failure drill).
    """
    import tempfile

    import pandas as pd
    from tqdm.auto import tqdm

    from nbkit.zero.ladder import ladder_spec, summarize
    from nbkit.zero.launch import launch
    from nbkit.zero.monitor import MemoryMonitor, process_tree_rss

    device = ladder_device(cfg)
    if device == "cpu" and cfg.precision == "fp16":
        raise UsageError("LadderConfig.precision: DeepSpeed's CPU accelerator has no fp16; use bf16 or fp32, or CUDA ranks")
    spec = ladder_spec(cfg, device, fail=fail)  # every rung's ds_config is validated before a rank starts
    bar = tqdm(total=len(spec["rungs"]) * cfg.steps * cfg.world_size, desc="ZeRO ladder (rank-steps)", leave=False)

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
            res = launch(spec, world_size=cfg.world_size, device=device, timeout_s=cfg.timeout_s,
                         on_progress=progress, on_start=started, out_dir=out_dir)
    finally:
        bar.close()
    out = summarize(res.rows(), spec, wall_s=res.wall_s)
    checks = out["checks"]
    metrics = {
        "bytes_vs_formula": out["bytes_vs_formula"], "wall_s": res.wall_s, "ranks_device": device,
        "loss_max_rel_diff": checks["loss_max_rel_diff"], "loss_tolerance": checks.get("loss_tolerance"),
        "loss_agree": checks["loss_agree"], "replicas_in_sync": checks["replicas_in_sync"],
        "checkpoint_round_trip_ok": checks["checkpoint_round_trip_ok"],
        "rss_peak_bytes": {k: max(ys) for k, (_xs, ys) in monitor.series().items()},
        "monitor_samples": len(monitor.samples), "monitor_alerts": alerts,
        "world_size": cfg.world_size, "steps": cfg.steps, "precision": cfg.precision, "overflow_step": cfg.overflow_step,
        "loss_scale_history": next((t["loss_scale_history"] for t in out["ladder"] if t["rank"] == 0 and t["loss_scale_history"]), []),
        "sub_group": sub_group_comparison(out["ladder"]),
        "persistence": out["persistence"],
        "peak": out["peak"],
        "model_states": {rung: sum(r["measured_bytes"] for r in rows) / len(rows)
                         for rung in {r["rung"] for r in out["ladder"]}
                         for rows in [[r for r in out["ladder"] if r["rung"] == rung]]},
        "n_params": out["ladder"][0]["n_params"] if out["ladder"] else 0,
    }
    table = pd.DataFrame([{k: v for k, v in row.items() if k not in ("local_losses",)} for row in out["ladder"]])
    return Result(metrics=metrics, table=table, figure=out["figure"],
                  data={"ladder": out["ladder"], "checks": checks, "loss_figure": out["loss_figure"],
                        "time_figure": out["time_figure"], "waterfall_figure": out["waterfall_figure"],
                        "memory_timeline": monitor.figure("Rank RSS during the ladder (sampler thread)")})


def run_crossover(cfg: CrossoverConfig, live=None, *, on_size=None) -> Result:
    """One ladder launch (stages 0–3) per model size; per stage and size the measured and predicted per-rank
    peak, and the smallest size from which each ZeRO stage saves ≥ 2 % of stage 0's peak growth on every rank
    at that size and every larger one (``metrics["crossover"]``)."""
    import pandas as pd

    from nbkit.zero.peak import crossover_figure, crossover_rows, crossover_sizes

    rows: list[dict[str, Any]] = []
    device = None
    for hidden, layers in cfg.parsed_sizes():
        lad = run_ladder(LadderConfig(stages=(0, 1, 2, 3), world_size=cfg.world_size, steps=cfg.steps, precision=cfg.precision,
                                      show_persistence=False, sub_group_elements=0, checkpoint=False, hidden_size=hidden,
                                      num_hidden_layers=layers, bucket_elements=cfg.bucket_elements, model_path=cfg.model_path,
                                      device=cfg.device, timeout_s=3600))
        device = lad.metrics["ranks_device"]
        new = crossover_rows(f"{hidden}x{layers}", lad.data["ladder"], lad.metrics["peak"])
        for r in new:
            r["wall_s"] = lad.metrics["wall_s"]
        rows += new
        if on_size is not None:
            on_size(new)
    crossover = crossover_sizes(rows)
    table = pd.DataFrame(rows)
    return Result(metrics={"crossover": crossover, "ranks_device": device, "bucket_elements": cfg.bucket_elements,
                           "world_size": cfg.world_size, "sizes": cfg.sizes},
                  table=table, figure=crossover_figure(rows, crossover, cfg.bucket_elements), data={"rows": rows})


def sub_group_comparison(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per-rank shard bytes (params + optimizer states, mean over ranks) of the two stage-3 rungs that
    differ only in ``sub_group_size``; None when the second rung did not run."""
    def pick(name):
        return [r for r in rows if r["rung"] == name]

    base, small = pick("stage3"), pick("stage3_sub_group")
    if not base or not small:
        return None

    def shard(rs):
        return int(round(sum(r["params_bytes"] + r["optimizer_bytes"] for r in rs) / len(rs)))

    return {"shard_bytes_default": shard(base), "shard_bytes_small": shard(small),
            "n_sub_groups_default": base[0]["n_sub_groups"], "n_sub_groups_small": small[0]["n_sub_groups"],
            "sub_group_size_default": base[0]["sub_group_size"] or 1e9, "sub_group_size_small": small[0]["sub_group_size"]}


def run_loss_scale_drill(cfg: LadderConfig | None = None, live=None) -> Result:
    """fp16 dynamic loss scaling with a provoked overflow (default: stage 2, overflow at step 2).

    Loss scaling is each rank's own business, so one GPU is enough: the drill runs on
    min(``cfg.world_size``, local GPUs) ranks. DeepSpeed's CPU accelerator has no fp16, so without a
    GPU nothing is launched and the result says so (``not_measured``); on GPUs the per-step history
    (scale, overflow, skipped) is in the metrics.
    """
    import dataclasses

    import torch

    from nbkit.device import pick_device

    cfg = cfg or LadderConfig.fp16_drill()
    gpus = torch.cuda.device_count() if pick_device(cfg.device).type == "cuda" else 0
    if gpus == 0:
        return Result(metrics={"ranks_device": "cpu", "precision": cfg.precision, "loss_scale_history": [], "world_size": 0,
                               "not_measured": "needs one CUDA GPU: DeepSpeed's CPU accelerator has no fp16 "
                                               "(is_fp16_supported() is false) and this machine has no GPU"})
    return run_ladder(dataclasses.replace(cfg, world_size=max(1, min(cfg.world_size, gpus))), live=live)


def run_failure_drill(cfg: FailureDrillConfig) -> Result:
    """Kill/raise/hang one rank mid-run: the launcher must name it, within the timeout, and leave no process."""
    import time

    import psutil

    from nbkit.zero.launch import RankFailed, RankTimeout

    pids: dict[int, int] = {}
    lcfg = LadderConfig(stages=(2,), world_size=cfg.world_size, steps=cfg.step + 2, show_persistence=False,
                        sub_group_elements=0, hidden_size=64, num_hidden_layers=2, checkpoint=False, warm_up=False,
                        device=cfg.device, timeout_s=max(30.0, cfg.timeout_s))
    t = time.perf_counter()
    caught: RankFailed | None = None
    try:
        run_ladder(lcfg, on_start=pids.update, fail={"rank": cfg.rank, "step": cfg.step, "how": cfg.how})
    except RankFailed as exc:
        caught = exc
    elapsed = time.perf_counter() - t
    survivors = [pid for pid in pids.values() if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    metrics = {
        "detected": caught is not None,
        "reported_rank": getattr(caught, "rank", None),
        "expected_rank": cfg.rank,
        "how": cfg.how,
        "timed_out": isinstance(caught, RankTimeout),
        "message": str(caught) if caught else "no failure reported",
        "seconds_to_report": elapsed,
        "timeout_s": lcfg.timeout_s,
        "leftover_processes": survivors,
    }
    return Result(metrics=metrics, data={"traceback_tail": caught.traceback_tail[-600:] if caught else ""})


def run_fragmentation(cfg: FragmentationConfig, live=None) -> Result:
    """Gap ratio per step vs checkpoint interval (CUDA); on CPU the figures are named unavailable."""
    from nbkit.device import pick_device
    from nbkit.zero.fragmentation import cpu_accounting, cuda_runs

    device = pick_device(cfg.device)
    if device.type != "cuda":
        out = cpu_accounting(cfg)
        return Result(metrics={"needs_cuda": True, "steps": cfg.steps, "tensor_bytes_peak": out["tensor_bytes_peak"],
                               "unavailable": out["unavailable"]}, figure=out["figure"], data=out)
    out = cuda_runs(cfg, device, live=live)
    summary = [{k: r[k] for k in ("interval", "expandable_segments", "seed", "mean_gap_ratio", "max_inactive_split", "alloc_retries",
                                  "checkpoints")} for r in out["runs"]]
    import pandas as pd

    means: dict[str, list[float]] = {}  # per "<interval>/<expandable>": each seed's mean gap ratio (the claim's unit)
    for r in out["runs"]:
        means.setdefault(f"{r['interval']}/{r['expandable_segments']}", []).append(r["mean_gap_ratio"])
    return Result(metrics={"needs_cuda": False, "steps": cfg.steps, "seeds": cfg.seeds, "runs": summary, "model": out["model"],
                           "gap_ratio_means": means,
                           "gap_ratios": {f"{r['interval']}/{r['expandable_segments']}": r["gap_ratios"] for r in out["runs"] if r["seed"] == cfg.seed}},
                  table=pd.DataFrame(summary), figure=out["figure"], data=out)


def run_specdec(cfg: SpecDecConfig, live=None, model_and_tokenizer=None) -> Result:
    """Greedy generation with and without speculation on SmolLM2 or ``cfg.model_path``: acceptance,
    fallbacks, speedups, identity. A bad model path is a UsageError before anything is timed."""
    import torch

    from nbkit.device import pick_device
    from nbkit.zero.specdec import measure_specdec

    device = pick_device(cfg.device)
    threads = torch.get_num_threads()
    if cfg.cpu_threads and device.type == "cpu":
        torch.set_num_threads(cfg.cpu_threads)
    try:
        if model_and_tokenizer is None and cfg.model_path:
            from nbkit.model_files import load_model, load_tokenizer

            model_and_tokenizer = (load_model(cfg.model_path, device), load_tokenizer(cfg.model_path))
        elif model_and_tokenizer is None:
            from nbkit.model_files import load_smollm2

            model_and_tokenizer = load_smollm2(device)
        out = measure_specdec(cfg, device, *model_and_tokenizer, live=live)
    finally:
        torch.set_num_threads(threads)
    return Result(metrics={"summary": out["summary"], "device": str(device)}, table=out["table"], figure=out["figure"], data=out)
