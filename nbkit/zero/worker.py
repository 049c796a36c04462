"""One data-parallel rank: train a Llama-family model under DeepSpeed ZeRO and report measured bytes.

Run by any launcher that sets the env:// rendezvous variables ``RANK``/``LOCAL_RANK``/``WORLD_SIZE``/
``MASTER_ADDR``/``MASTER_PORT``: nbkit's own spawner (``nbkit.zero.launch.launch``), ``torchrun``
(``torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:PORT -m
nbkit.zero.worker SPEC.json``) or DeepSpeed's launcher (``deepspeed --hostfile H --module
nbkit.zero.worker SPEC.json``, which adds a ``--local_rank`` argument the worker ignores). The spec
is written by ``nbkit.zero.ladder.write_spec``. All requested rungs (stage × offload) run in ONE process per
rank, one after another, so the import of torch/transformers/deepspeed (seconds) is paid once per
rank rather than once per rung.

For every rung the rank writes, to ``<out_dir>/rank<R>.json``:

* measured bytes of model states read from DeepSpeed's own buffers — parameters (``ds_tensor``
  partitions / flat bit16 groups / module parameters), gradients (``averaged_gradients``, the flat
  gradient partition buffer, ``param.grad``) and optimizer states (the fp32 master partitions
  ``single_partition_of_fp32_groups`` / ``fp32_partitioned_groups_flat`` plus ``optimizer.state``),
  each counted once per storage;
* the loss of every step (local micro-batch and the all-reduced mean), the loss of one shared
  evaluation batch (identical on every rank unless replicas diverged), step times, peak memory
  from ``nbkit.device.memory_probe``, and — when asked — a checkpoint save → load round trip.

Progress lines (one JSON per step) go to ``<out_dir>/rank<R>.progress.jsonl`` so the notebook can
plot loss curves live while ranks run.
"""

from __future__ import annotations

import gc
import io
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from nbkit.device import memory_probe, pick_device, watch_peak
from nbkit.model_files import load_smollm2, tiny_llama, tiny_llama_config
from nbkit.zero.dsconfig import build_config
from nbkit.zero.memory import model_config
from nbkit.zero.peak import SavedActivations


def _storage_key(t) -> tuple[int, int]:
    st = t.untyped_storage()
    return (st.data_ptr(), st.nbytes())


class _Bytes:
    """Sum tensor bytes by category, counting each storage once (views share storage)."""

    def __init__(self):
        self.seen: set[tuple[int, int]] = set()
        self.total: dict[str, int] = {}

    def add(self, category: str, t) -> None:
        import torch

        if t is None or not isinstance(t, torch.Tensor) or t.device.type == "meta":
            return
        if t.numel() == 0:
            return
        key = _storage_key(t)
        if key in self.seen or key[0] == 0:
            return
        self.seen.add(key)
        self.total[category] = self.total.get(category, 0) + key[1]


def _optimizer_state_tensors(opt):
    for state in getattr(opt, "state", {}).values():
        if isinstance(state, dict):
            yield from state.values()


def measure_model_states(engine, *, include_grads: bool) -> dict[str, int]:
    """Bytes this rank holds for params / grads / optimizer states, from DeepSpeed's buffers."""
    stage = engine.zero_optimization_stage()
    opt = engine.optimizer
    acc = _Bytes()
    master = []
    if stage == 3:
        # Partitioned parameters: each param's ds_tensor (this rank's shard); persistent
        # (small, unpartitioned) params keep their full data.
        for flat in getattr(opt, "fp16_partitioned_groups_flat", []) or []:
            acc.add("params", flat)
        for p in engine.module.parameters():
            if hasattr(p, "ds_tensor"):
                acc.add("params", p.ds_tensor)
                if getattr(p, "ds_persist", False):
                    acc.add("params", p.data)
        master = list(getattr(opt, "fp32_partitioned_groups_flat", []) or [])
        if include_grads:
            acc.add("grads", getattr(opt, "grad_partitions_flat_buffer", None))
            for g in (getattr(opt, "averaged_gradients", {}) or {}).values():
                for t in g if isinstance(g, list) else [g]:
                    acc.add("grads", t)
            for f in master:
                acc.add("grads", f.grad)
    elif stage in (1, 2):
        # The contiguous-gradient bucket (reduce_bucket_size elements) is a communication buffer;
        # p.grad tensors are views into it, so count it first, as "buffers".
        for bucket in (getattr(opt, "ipg_buckets", None) or {}).values():
            for buf in getattr(bucket, "buffer", []) or []:
                acc.add("buffers", buf)
        for flat in getattr(opt, "bit16_groups_flat", []) or []:
            acc.add("params", flat)
        master = list(getattr(opt, "single_partition_of_fp32_groups", []) or [])
        if include_grads:
            # Stage 2 copies each reduced gradient into this rank's contiguous partition buffer.
            acc.add("grads", getattr(opt, "grads_in_partition", None))
            for g in (getattr(opt, "averaged_gradients", {}) or {}).values():
                for t in g if isinstance(g, list) else [g]:
                    acc.add("grads", t)
            for p in engine.module.parameters():
                acc.add("grads", p.grad)
            for f in master:
                acc.add("grads", f.grad)
    else:
        # Stage 0: plain data parallelism; a bf16/fp16 wrapper may keep fp32 master copies.
        for p in engine.module.parameters():
            acc.add("params", p.data)
        for attr in ("fp32_groups_flat_partition", "fp32_groups_flat", "fp32_groups"):
            if hasattr(opt, attr):
                groups = getattr(opt, attr) or []
                # FP16_UnfusedOptimizer keeps a list of per-parameter fp32 copies per group.
                master = [t for g in groups for t in (g if isinstance(g, (list, tuple)) else [g])]
                break
        if include_grads:
            for p in engine.module.parameters():
                acc.add("grads", p.grad)
            for attr in ("fp32_groups_gradients_flat", "fp32_groups_gradient_flat_partition"):
                for t in getattr(opt, attr, []) or []:
                    acc.add("grads", t)
    for f in master:
        acc.add("optimizer", f)
    base = getattr(opt, "optimizer", opt)  # the wrapped torch optimizer when DeepSpeed wraps it
    for t in _optimizer_state_tensors(base):
        acc.add("optimizer", t)
    return {k: acc.total.get(k, 0) for k in ("params", "grads", "optimizer", "buffers")}


def _batch(step: int, rank: int, world: int, micro_batch: int, seq_len: int, vocab: int, seed: int):
    """A learnable synthetic batch: arithmetic token progressions, sharded across ranks by index."""
    import torch

    g = torch.Generator().manual_seed(seed * 1_000_003 + step * world + rank)
    start = torch.randint(0, vocab, (micro_batch, 1), generator=g)
    stride = torch.randint(1, 5, (micro_batch, 1), generator=g)
    pos = torch.arange(seq_len).unsqueeze(0)
    return (start + stride * pos) % vocab


def _eval_batch(micro_batch: int, seq_len: int, vocab: int, seed: int):
    return _batch(10**6, 0, 1, micro_batch, seq_len, vocab, seed + 7)


def _snapshot_partition(engine) -> list:
    """Copies of this rank's partition (params, master weights, optimizer state) for equality checks."""
    import torch

    opt = engine.optimizer
    tensors = []
    stage = engine.zero_optimization_stage()
    if stage == 3:
        tensors += [p.ds_tensor for p in engine.module.parameters() if hasattr(p, "ds_tensor")]
        tensors += list(getattr(opt, "fp32_partitioned_groups_flat", []) or [])
    elif stage in (1, 2):
        tensors += list(getattr(opt, "bit16_groups_flat", []) or [])
        tensors += list(getattr(opt, "single_partition_of_fp32_groups", []) or [])
    else:
        tensors += [p.data for p in engine.module.parameters()]
    base = getattr(opt, "optimizer", opt)
    tensors += [t for t in _optimizer_state_tensors(base) if isinstance(t, torch.Tensor)]
    return [t.detach().clone().float().cpu() for t in tensors]


def _param_checksum(engine) -> float:
    """Sum of |w| over the full model (gathered under ZeRO-3): equal on every in-sync replica."""
    import deepspeed

    params = list(engine.module.parameters())
    if engine.zero_optimization_stage() == 3:
        with deepspeed.zero.GatheredParameters(params, modifier_rank=None):
            return float(sum(p.detach().double().abs().sum() for p in params))
    return float(sum(p.detach().double().abs().sum() for p in params))


def run_rung(rung: dict, spec: dict, rank: int, world: int, progress_fh, device) -> dict[str, Any]:
    import deepspeed
    import torch

    cfg = build_config(rung, spec, world)
    # The waterfall's baseline: what this rank holds before the model exists (freed memory of
    # earlier rungs handed back to the OS first, so it is not counted against this one).
    gc.collect()
    _trim_heap()
    probe = memory_probe(device)
    baseline_bytes = _live_bytes(probe)
    peak_cm = watch_peak(probe, interval=0.02)
    peak = peak_cm.__enter__()  # left at the end of the training steps (eval and checkpoint excluded)
    model_cfg = dict(spec.get("model", {}))
    model_kind = model_cfg.pop("kind", "tiny_llama")
    if model_kind == "tiny_llama":
        model = tiny_llama(seed=spec["seed"], device="cpu", **model_cfg)
        vocab = tiny_llama_config(**model_cfg).vocab_size
    elif model_kind == "config":  # the user's architecture, scaled (nbkit.zero.ladder.scaled_config)
        from transformers import AutoModelForCausalLM

        torch.manual_seed(spec["seed"])
        mc = model_config(dict(model_cfg, kind="config"))
        model = AutoModelForCausalLM.from_config(mc)
        model.train()
        vocab = mc.vocab_size
    elif model_kind == "smollm2":
        model, _tok = load_smollm2("cpu")
        model.train()
        vocab = model.config.vocab_size
    else:
        raise ValueError(f"model.kind must be 'tiny_llama', 'config' or 'smollm2', got {model_kind!r}")
    n_params = sum(p.numel() for p in model.parameters())
    # A client torch AdamW: runs on every accelerator without DeepSpeed's JIT-built C++ Adam ops
    # (zero_force_ds_cpu_optimizer=false in the config lets offload accept it). Fused, like
    # DeepSpeed's own FusedAdam/CPUAdam: one kernel updates in place, whereas the single-tensor and
    # foreach paths allocate sqrt/division temporaries as large as the (flat) fp32 partition —
    # 8Ψ/N bytes at the step's peak, which no deployment with DeepSpeed's optimizers pays.
    # A rung's lr_scale changes its update on purpose (the loss comparison's positive control).
    lr = spec.get("lr", 3e-3) * float(rung.get("lr_scale", 1.0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, fused=True)
    t0 = time.perf_counter()
    engine, _opt, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=cfg)
    init_s = time.perf_counter() - t0
    # The peak up to here belongs to building the model and deepspeed.initialize (the client's fp32
    # weights still exist beside DeepSpeed's 16-bit copy); the steps' peak is the rest of the window.
    init_peak_bytes = int(probe.peak_bytes())
    # Where in a step the peak sits: the probe's peak is read and reset at each phase boundary
    # (forward + backward, optimizer step), and the window's peak is the largest of them.
    phases: dict[str, int] = {"init": init_peak_bytes}

    def phase_peak(name, probe):
        phases[name] = max(phases.get(name, 0), int(probe.peak_bytes()))
        probe.reset_peak()

    probe.reset_peak()
    pre_reduce_grads: list[int] = []
    grad_samples: list[dict[str, int]] = []
    original_allreduce = engine.allreduce_gradients

    def allreduce_measured(*args, _engine=engine, **kwargs):
        # Gradients peak just before the end-of-backward reduction (full copies at stages 0-1).
        sample = measure_model_states(_engine, include_grads=True)
        grad_samples.append(sample)
        pre_reduce_grads.append(sample["grads"])
        return original_allreduce(*args, **kwargs)

    engine.allreduce_gradients = allreduce_measured
    fail = spec.get("fail") or {}
    sabotage = spec.get("sabotage") or {}
    sabotaged = sabotage.get("rank") == rank
    overflow_step = int(spec.get("overflow_step", -1)) if spec.get("precision") == "fp16" else -1
    steps = spec["steps"]
    losses, mean_losses, step_times, grads_bytes = [], [], [], []
    scale_history = []
    mb, seq = spec["micro_batch"], spec["seq_len"]
    dev = engine.device
    for step in range(steps):
        if (
            fail
            and fail.get("rank") == rank
            and fail.get("step") == step
            and fail.get("stage", rung["stage"]) == rung["stage"]
        ):
            _inject_failure(fail.get("how", "raise"))
        t = time.perf_counter()
        phase_peak("between_steps", probe)
        ids = _batch(step, rank, world, mb, seq, vocab, spec["seed"]).to(dev)
        if step == 0:
            with SavedActivations(engine.module) as acts:
                out = engine(input_ids=ids, labels=ids)
            activation_bytes = acts.bytes
        else:
            out = engine(input_ids=ids, labels=ids)
        # A provoked fp16 overflow: an infinite loss gives infinite gradients, which dynamic loss
        # scaling must catch (skip the step, halve the scale) — the history below shows whether it did.
        engine.backward(out.loss * float("inf") if step == overflow_step else out.loss)
        sample = measure_model_states(engine, include_grads=True)
        grad_samples.append(sample)
        grads_bytes.append(sample["grads"])
        skipped_before = int(getattr(engine, "skipped_steps", 0))
        phase_peak("forward_backward", probe)
        engine.step()
        phase_peak("optimizer_step", probe)
        step_times.append(time.perf_counter() - t)
        loss = float(out.loss.detach().float())
        mean = torch.tensor([loss], dtype=torch.float64)
        torch.distributed.all_reduce(mean)
        mean_loss = float(mean) / world
        losses.append(loss)
        mean_losses.append(mean_loss)
        if spec.get("precision") == "fp16":
            scale_history.append(
                {
                    "step": step,
                    "scale": _loss_scale(engine.optimizer),
                    "provoked": step == overflow_step,
                    "overflow": bool(getattr(engine.optimizer, "overflow", False)),
                    "skipped": int(getattr(engine, "skipped_steps", 0)) > skipped_before,
                }
            )
        progress_fh.write(
            json.dumps(
                {
                    "rung": rung["name"],
                    "stage": rung["stage"],
                    "step": step,
                    "loss": loss,
                    "mean_loss": mean_loss,
                    "step_s": step_times[-1],
                }
            )
            + "\n"
        )
        progress_fh.flush()
    peak_cm.__exit__(None, None, None)
    window_peak = max(int(peak.peak), *phases.values())
    states = measure_model_states(engine, include_grads=False)
    states["buffers"] = (
        max(states.get("buffers", 0), *(b["buffers"] for b in grad_samples))
        if grad_samples
        else states.get("buffers", 0)
    )
    states["grads"] = max(grads_bytes + pre_reduce_grads) if grads_bytes else 0
    states["grads_after_reduce"] = max(grads_bytes) if grads_bytes else 0
    if sabotaged and sabotage.get("how") == "diverge":
        _diverge(engine)
    engine.eval()
    with torch.no_grad():
        ev = _eval_batch(mb, seq, vocab, spec["seed"]).to(dev)
        eval_loss = float(engine(input_ids=ev, labels=ev).loss.float())
    engine.train()
    checksum = _param_checksum(engine)
    result: dict[str, Any] = {
        "rung": rung["name"],
        "stage": rung["stage"],
        "offload_optimizer": bool(rung.get("offload_optimizer", False)),
        "offload_param": bool(rung.get("offload_param", False)),
        "param_persistence_threshold": cfg["zero_optimization"].get("stage3_param_persistence_threshold"),
        "rank": rank,
        "world_size": world,
        "n_params": n_params,
        "precision": spec.get("precision", "fp32"),
        "optimizer_class": type(engine.optimizer).__name__,
        "bytes": states,
        "peak_bytes": window_peak,
        "phase_peak_bytes": phases,
        "peak_kind": peak.how,
        "baseline_bytes": int(baseline_bytes),
        "init_peak_bytes": init_peak_bytes,
        "activation_bytes": int(activation_bytes),
        "init_s": init_s,
        "losses": losses,
        "mean_losses": mean_losses,
        "eval_loss": eval_loss,
        "param_checksum": checksum,
        "step_s": step_times,
        "loss_scale_history": scale_history,
        "sub_group_size": cfg["zero_optimization"].get("sub_group_size"),
        "n_sub_groups": len(getattr(engine.optimizer, "fp16_partitioned_groups_flat", []) or [])
        if rung["stage"] == 3
        else None,
    }
    if spec.get("checkpoint"):
        result["checkpoint"] = _checkpoint_round_trip(
            engine,
            Path(spec["out_dir"]) / f"ckpt_{rung['name']}",
            spec,
            rank,
            world,
            vocab,
            corrupt=sabotaged and sabotage.get("how") == "corrupt_checkpoint",
        )
    engine.destroy()
    del engine, model, optimizer
    return result


def _live_bytes(probe) -> int:
    """Bytes this rank holds now: CUDA's allocated bytes, or the process RSS on CPU."""
    figures = probe.snapshot().figures
    return int(figures.get("allocated", figures.get("rss", 0)))


def _trim_heap() -> None:
    """Hand freed heap back to the OS (glibc ``malloc_trim``) so RSS reflects live memory; no-op elsewhere."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _loss_scale(opt) -> float | None:
    """The dynamic loss scale of DeepSpeed's fp16 wrapper (stage 0: ``cur_scale``; ZeRO: ``loss_scale``)."""
    for attr in ("cur_scale", "loss_scale"):
        value = getattr(opt, attr, None)
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _diverge(engine) -> None:
    """Sabotage for the replica-divergence check: nudge this rank's first parameter (shard)."""
    import torch

    with torch.no_grad():
        for p in engine.module.parameters():
            t = p.ds_tensor if hasattr(p, "ds_tensor") else p.data
            if t.numel():
                t.add_(1e-2)
                return


def _first_float_tensor(obj):
    import torch

    if isinstance(obj, torch.Tensor) and obj.is_floating_point() and obj.numel():
        return obj
    children = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    for child in children:
        found = _first_float_tensor(child)
        if found is not None:
            return found
    return None


def _corrupt_checkpoint(tag_dir: Path, rank: int) -> list[str]:
    """Sabotage for the round-trip check: change one number in each file this rank saved."""
    import torch

    mine = sorted(tag_dir.glob(f"*zero_pp_rank_{rank}_*.pt")) or sorted(
        tag_dir.glob("mp_rank_00_model_states.pt")
    )
    for path in mine:
        state = torch.load(path, map_location="cpu", weights_only=False)
        t = _first_float_tensor(state)
        if t is not None:
            t.add_(1.0)
        torch.save(state, path)
    return [p.name for p in mine]


def _checkpoint_round_trip(
    engine, ckpt_dir: Path, spec, rank, world, vocab, corrupt: bool = False
) -> dict[str, Any]:
    """save → one more step (state changes) → load → this rank's partition equals the saved one."""
    import torch

    before = _snapshot_partition(engine)
    engine.save_checkpoint(str(ckpt_dir), tag="rt")
    torch.distributed.barrier()  # every rank's files are written before anyone touches them
    corrupted = _corrupt_checkpoint(ckpt_dir / "rt", rank) if corrupt else []
    torch.distributed.barrier()
    ids = _batch(999, rank, world, spec["micro_batch"], spec["seq_len"], vocab, spec["seed"]).to(
        engine.device
    )
    out = engine(input_ids=ids, labels=ids)
    engine.backward(out.loss)
    engine.step()
    changed = _snapshot_partition(engine)
    moved = any(not a.equal(b) for a, b in zip(before, changed, strict=False))
    engine.load_checkpoint(str(ckpt_dir), tag="rt", load_optimizer_states=True)
    after = _snapshot_partition(engine)
    max_diff = (
        max((float((a - b).abs().max()) if a.numel() else 0.0) for a, b in zip(before, after, strict=False))
        if before
        else 0.0
    )
    return {
        "tensors": len(before),
        "state_changed_after_save": bool(moved),
        "restored_equal": bool(
            len(before) == len(after) and all(a.equal(b) for a, b in zip(before, after, strict=False))
        ),
        "max_abs_diff": max_diff,
        "corrupted_files": corrupted,
    }


def _inject_failure(how: str) -> None:
    """Deliberate failures for the silent-failure checks (a rank dying or hanging mid-run)."""
    import signal

    if how == "raise":
        raise RuntimeError("injected failure: this rank raised mid-run (nbkit failure drill)")
    if how == "exit":
        os._exit(3)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "hang":
        time.sleep(3600)
    raise ValueError(f"unknown failure mode {how!r}")


def _skip_autotuner_mlflow() -> None:
    """Keep DeepSpeed's import from importing mlflow in this rank process.

    ``deepspeed.autotuning.autotuner`` imports mlflow at module level when it is installed (every
    ``import deepspeed`` does), to log autotuning experiments; a ZeRO rank never autotunes, and that
    import cost each rank of every launch about three times the CPU time of the rest of DeepSpeed's
    import (bench/RESULTS.md). A ``None`` entry makes ``import mlflow`` fail at once, which DeepSpeed reads
    as "not installed". Only in rank processes, which nbkit owns: a notebook kernel's imports are left
    alone.
    """
    if "mlflow" not in sys.modules:
        sys.modules["mlflow"] = None  # type: ignore[assignment]


def _quiet_deepspeed() -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    for name in ("DeepSpeed", "deepspeed", "torch.distributed"):
        logging.getLogger(name).setLevel(logging.ERROR)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m nbkit.zero.worker", description="one ZeRO ladder rank (env:// rendezvous)"
    )
    ap.add_argument("spec", help="spec JSON written by nbkit.zero.ladder.write_spec")
    # DeepSpeed's launcher appends --local_rank=N; LOCAL_RANK in the environment says the same.
    ap.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    args, _unknown = ap.parse_known_args(sys.argv[1:] if argv is None else argv)
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        sys.stderr.write(
            f"nbkit.zero.worker: error: {', '.join(missing)} not set; start it under torchrun, "
            "DeepSpeed's launcher or nbkit.zero.launch\n"
        )
        return 2
    spec_path = Path(args.spec)
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    if args.local_rank is not None:
        os.environ.setdefault("LOCAL_RANK", str(args.local_rank))
    out_dir = Path(spec.get("out_dir") or spec_path.parent)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec["out_dir"] = str(out_dir)
    result_path = out_dir / f"rank{rank}.json"
    results: list[dict[str, Any]] = []
    try:
        _quiet_deepspeed()
        import torch

        device = pick_device(spec.get("device", "auto"))
        if device.type == "cpu":  # DeepSpeed picks its accelerator at import: say CPU before importing it
            os.environ.setdefault("DS_ACCELERATOR", "cpu")

        torch.manual_seed(spec["seed"])
        torch.set_num_threads(max(1, int(spec.get("threads_per_rank", 1))))
        import faulthandler
        import signal

        # The launcher sends SIGUSR1 on a timeout: every rank dumps its Python stack to its log,
        # which names the rank that is stuck outside a collective.
        faulthandler.register(signal.SIGUSR1, all_threads=False)
        _skip_autotuner_mlflow()
        import deepspeed

        ds_torch_comm = sys.modules[
            "deepspeed.comm.torch"
        ]  # (deepspeed.comm.torch as an attribute is torch itself)

        # DeepSpeed JIT-compiles a shared-memory all-reduce C++ op for CPU ranks at init; it serves
        # only inference_all_reduce (tensor-parallel inference), not ZeRO training, and the first
        # build takes minutes and needs a compiler — skip it.
        ds_torch_comm.build_shm_op = lambda: None
        if device.type == "cuda":
            local_rank = int(os.environ.get("LOCAL_RANK", rank))
            torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
        from datetime import timedelta

        deepspeed.init_distributed(
            dist_backend="nccl" if device.type == "cuda" else "gloo",
            timeout=timedelta(seconds=float(spec.get("collective_timeout_s", 120))),
        )
        with open(out_dir / f"rank{rank}.progress.jsonl", "a", encoding="utf-8") as progress_fh:
            # Imports and the process group are up: the launcher's run timeout counts from the moment
            # every rank has said so, so a slow start-up on a loaded machine is not read as a hang.
            progress_fh.write(json.dumps({"ready": True}) + "\n")
            progress_fh.flush()
            if spec.get("warm_up", True):
                # The first DeepSpeed engine of a process grows the runtime once (communication
                # buffers, kernels, lazily imported modules); pay that before any measured rung, so
                # it is not charged to whichever stage happens to run first.
                # Each optimizer family (stage 0, ZeRO-1/2, ZeRO-3) has its own one-time growth.
                for stage in sorted(
                    {min(r["stage"], 2) if r["stage"] else 0 for r in spec["rungs"]}
                    | ({3} & {r["stage"] for r in spec["rungs"]})
                ):
                    warm = {"name": f"warm_up{stage}", "stage": stage, "param_persistence_threshold": 0}
                    run_rung(
                        warm,
                        dict(spec, steps=1, checkpoint=False, fail=None, sabotage=None, overflow_step=-1),
                        rank,
                        world,
                        io.StringIO(),
                        device,
                    )
            for rung in spec["rungs"]:
                results.append(run_rung(rung, spec, rank, world, progress_fh, device))
                result_path.write_text(json.dumps({"ok": True, "done": False, "results": results}))
        result_path.write_text(json.dumps({"ok": True, "done": True, "results": results}))
        try:
            torch.distributed.destroy_process_group()
        except Exception:  # noqa: BLE001 - teardown must not turn a finished run into a failure
            pass
        return 0
    except BaseException as exc:  # report any failure with its traceback tail, then exit non-zero
        tb = traceback.format_exc()
        result_path.write_text(
            json.dumps(
                {
                    "ok": False,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": tb[-4000:],
                    "results": results,
                }
            )
        )
        sys.stderr.write(tb)
        sys.stderr.flush()
        return 1


if __name__ == "__main__":
    sys.exit(main())
