"""The ZeRO ladder's domain: the rungs a config asks for, the spec the ranks read, and the
summary of what they measured (bytes against the formula, loss agreement, replica and checkpoint
checks, figures). ``nbkit.zero.experiments.run_ladder`` launches the ranks; ``write_spec`` writes the
same spec for ``torchrun`` or DeepSpeed's launcher on a cluster.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nbkit.zero.dsconfig import build_config
from nbkit.zero.memory import (
    bytes_per_param,
    config_from_path,
    deepspeed_estimate,
    formula_bytes,
    model_config,
    model_size,
)
from nbkit.zero.peak import measured_waterfall, predict_activation_bytes, predict_peak, waterfall_figure

# Stage-3 parameters smaller than this stay whole on every rank; it is DeepSpeed's default (1e5).
DS_DEFAULT_PERSISTENCE = 100_000
LOSS_TOLERANCE = {"fp32": 1e-4, "bf16": 0.02, "fp16": 0.02}
CONTROL_RUNG, CONTROL_LR_SCALE = "stage0_control", 0.5


def stage_rungs(cfg) -> list[dict[str, Any]]:
    """Stages 0–3 alone (each at persistence threshold 0): what a replicate launch reruns."""
    return [r for r in ladder_rungs(cfg) if r["name"] == f"stage{r['stage']}"]


def ladder_rungs(cfg) -> list[dict[str, Any]]:
    """One rung per requested stage (stage 3 at persistence threshold 0, so it shards everything),
    plus stage 3 at DeepSpeed's default threshold and at a second ``sub_group_size`` when asked."""
    rungs = []
    for s in sorted(set(int(x) for x in cfg.stages)):
        rungs.append(
            {
                "name": f"stage{s}",
                "stage": s,
                "offload_optimizer": bool(cfg.offload_optimizer and s >= 1),
                "offload_param": bool(cfg.offload_param and s == 3),
                "param_persistence_threshold": 0,
            }
        )
    if 0 in cfg.stages and cfg.control:
        # The loss comparison's positive control: stage 0 with its update changed on purpose (half the
        # learning rate), as a wrong-gradient bug would change it; the comparison must tell it apart.
        rungs.append(
            {
                "name": CONTROL_RUNG,
                "stage": 0,
                "offload_optimizer": False,
                "offload_param": False,
                "param_persistence_threshold": 0,
                "lr_scale": CONTROL_LR_SCALE,
            }
        )
    if 3 in cfg.stages and cfg.show_persistence:
        rungs.append(
            {
                "name": "stage3_default_persistence",
                "stage": 3,
                "offload_optimizer": bool(cfg.offload_optimizer),
                "offload_param": bool(cfg.offload_param),
                "param_persistence_threshold": DS_DEFAULT_PERSISTENCE,
            }
        )
    if 3 in cfg.stages and cfg.sub_group_elements:
        rungs.append(
            {
                "name": "stage3_sub_group",
                "stage": 3,
                "offload_optimizer": bool(cfg.offload_optimizer),
                "offload_param": bool(cfg.offload_param),
                "param_persistence_threshold": 0,
                "sub_group_size": int(cfg.sub_group_elements),
            }
        )
    return rungs


def scaled_config(config, hidden_size: int, num_hidden_layers: int) -> dict[str, Any]:
    """A transformers config (dict) of the same architecture at ``hidden_size`` × ``num_hidden_layers``:
    the MLP keeps its ratio to the hidden size, attention keeps about its head size and its query/key-value
    head ratio where the hidden size allows it, vocabulary and everything else unchanged."""
    d = config.to_dict()
    old_h = int(d["hidden_size"])
    heads = int(d.get("num_attention_heads") or 1)
    kv = int(d.get("num_key_value_heads") or heads)
    head_dim = int(d.get("head_dim") or old_h // heads)
    group = max(1, heads // kv)
    # Head counts that divide the hidden size and keep the grouping (transformers checks both);
    # when none does (e.g. groups of 3 at hidden 128) the grouping is dropped, not the size.
    cands = [h for h in range(group, hidden_size + 1, group) if hidden_size % h == 0]
    if not cands:
        group, cands = 1, [h for h in range(1, hidden_size + 1) if hidden_size % h == 0]
    new_heads = min(cands, key=lambda h: abs(hidden_size / h - head_dim))
    d.update(
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=new_heads,
        num_key_value_heads=new_heads // group,
    )
    if d.get("head_dim"):
        d["head_dim"] = hidden_size // new_heads
    if d.get("intermediate_size"):
        d["intermediate_size"] = max(1, round(int(d["intermediate_size"]) * hidden_size / old_h))
    for key in (
        "layer_types",
        "torch_dtype",
        "dtype",
        "_name_or_path",
        "architectures",
        "transformers_version",
    ):
        d.pop(key, None)
    return d


def ladder_model(cfg) -> dict[str, Any]:
    """The spec's ``model``: the tiny Llama at the config's size, or the user's architecture
    (``cfg.model_path``: HF directory or config.json) scaled to ``hidden_size`` × ``num_hidden_layers``."""
    if not cfg.model_path:
        return {
            "hidden_size": cfg.hidden_size,
            "intermediate_size": 2 * cfg.hidden_size,
            "num_hidden_layers": cfg.num_hidden_layers,
        }
    user = config_from_path(cfg.model_path, where="LadderConfig.model_path")
    return {
        "kind": "config",
        "name": str(cfg.model_path),
        "config": scaled_config(user, cfg.hidden_size, cfg.num_hidden_layers),
    }


def ladder_spec(cfg, device: str, *, fail: dict | None = None) -> dict[str, Any]:
    """What every rank reads: rungs, model, batch, precision, checks and deliberate failures.

    Every rung's ds_config is built (and validated) here, so a config DeepSpeed would reject fails
    before a rank starts.
    """
    model_cfg = ladder_model(cfg)
    spec = {
        "rungs": ladder_rungs(cfg),
        "steps": cfg.steps,
        "micro_batch": cfg.micro_batch,
        "seq_len": cfg.seq_len,
        "seed": cfg.seed,
        "precision": cfg.precision,
        "model": model_cfg,
        "checkpoint": cfg.checkpoint,
        "overflow_step": cfg.overflow_step,
        "fail": fail,
        "device": device,
        "bucket_elements": cfg.bucket_elements,
        "warm_up": cfg.warm_up,
        "sabotage": {"rank": cfg.world_size - 1, "how": cfg.sabotage} if cfg.sabotage != "none" else None,
    }
    for rung in spec["rungs"]:
        build_config(rung, spec, cfg.world_size)
    return spec


def write_spec(cfg, path: str | Path, *, out_dir: str | Path | None = None, device: str = "auto") -> Path:
    """Write the ranks' spec JSON for an external launcher (torchrun, ``deepspeed``).

    ``out_dir`` (default: the spec's folder) is where each rank writes ``rank<R>.json``; on a cluster
    put it on a shared file system. ``device``: the ranks' device (``auto`` resolves per rank).
    """
    path = Path(path)
    spec = ladder_spec(cfg, device)
    spec["out_dir"] = str(Path(out_dir) if out_dir is not None else path.parent.resolve())
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return path


def persisted_params(config, threshold: float) -> dict[str, int]:
    """DeepSpeed's persistence rule applied to a model's parameter tensors (counted on the meta device,
    tied weights once): tensors with at most ``threshold`` elements stay whole on every rank. The
    prediction the ladder's two stage-3 rungs are measured against."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    sizes = list({id(p): p.numel() for p in model.parameters()}.values())
    kept = [n for n in sizes if n <= threshold]
    return {
        "tensors": len(sizes),
        "tensors_kept_whole": len(kept),
        "elements_kept_whole": int(sum(kept)),
        "largest_tensor": int(max(sizes)),
    }


def persistence_summary(table: list[dict[str, Any]], spec: dict[str, Any]) -> dict[str, Any] | None:
    """Per rank, the parameter bytes the stage-3 rung at DeepSpeed's default threshold holds beyond the
    same rung at threshold 0 (measured), beside the rule's prediction (the kept tensors' full size);
    None when the two rungs did not both run."""
    pers = sorted((t for t in table if t["rung"] == "stage3_default_persistence"), key=lambda t: t["rank"])
    base = {t["rank"]: t for t in table if t["rung"] == "stage3"}
    if not pers or not all(t["rank"] in base for t in pers):
        return None
    threshold = pers[0]["persistence_threshold"]
    rule = persisted_params(model_config(spec["model"]), threshold)
    return {
        "threshold": threshold,
        **rule,
        "predicted_extra_bytes": rule["elements_kept_whole"] * bytes_per_param(spec["precision"], 3)[0],
        "measured_extra_bytes": [t["params_bytes"] - base[t["rank"]]["params_bytes"] for t in pers],
    }


def summarize(
    rows: list[dict[str, Any]], spec: dict[str, Any], wall_s: float | None = None
) -> dict[str, Any]:
    """The ranks' rows as one table (measured beside formula and prediction), the checks, and the figures."""
    precision = spec["precision"]
    size = model_size(model_config(spec["model"]), spec["model"].get("name", "ladder Llama"))
    activations = predict_activation_bytes(spec["model"], spec["micro_batch"], spec["seq_len"], precision)
    zero_cfg = (
        {r["name"]: build_config(r, spec, rows[0]["world_size"])["zero_optimization"] for r in spec["rungs"]}
        if rows
        else {}
    )

    table = []
    for r in rows:
        f = formula_bytes(
            r["n_params"],
            r["world_size"],
            r["stage"],
            precision=r["precision"],
            offload_optimizer=r["offload_optimizer"],
            offload_param=r["offload_param"],
        )
        b = r["bytes"]
        offload_grad = (
            (2.0 if r["stage"] == 2 else 4.0) * r["n_params"] / r["world_size"]
            if r["offload_optimizer"]
            else 0.0
        )
        measured = b["params"] + b["grads"] + b["optimizer"]
        formula_all = f["params"] + f["grads"] + f["optimizer"] + f["cpu"]
        table.append(
            {
                "rung": r["rung"],
                "stage": r["stage"],
                "rank": r["rank"],
                "world_size": r["world_size"],
                "persistence_threshold": r["param_persistence_threshold"],
                "params_bytes": b["params"],
                "grads_bytes": b["grads"],
                "optimizer_bytes": b["optimizer"],
                "buffers_bytes": b.get("buffers", 0),
                "measured_bytes": measured,
                "formula_params": f["params"] + (f["cpu"] if r["offload_param"] else 0),
                "formula_grads": f["grads"],
                "formula_optimizer": f["optimizer"]
                + (f["cpu"] - (f["cpu"] if r["offload_param"] else 0) if r["offload_optimizer"] else 0),
                "formula_bytes": formula_all,
                "ratio": measured / formula_all,
                # DeepSpeed's offload path keeps an fp32 gradient partition (4Ψ/N) for the CPU optimizer
                # step —
                # the "4_grads_32bit" term of its own estimator, absent from the paper's count. At stage 2
                # it replaces the 16-bit gradient partition (reduced grads are copied straight into it),
                # so only 2Ψ/N is extra there (DeepSpeed 0.19's offload path).
                "offload_fp32_grad_bytes": offload_grad,
                "ratio_accounted": measured / (formula_all + offload_grad),
                "peak_bytes": r["peak_bytes"],
                "peak_kind": r["peak_kind"],
                "phase_peak_bytes": r.get("phase_peak_bytes", {}),
                "step_s_median": sorted(r["step_s"])[len(r["step_s"]) // 2],
                "init_s": r["init_s"],
                "final_loss": r["mean_losses"][-1],
                "eval_loss": r["eval_loss"],
                "param_checksum": r["param_checksum"],
                "optimizer_class": r["optimizer_class"],
                "n_params": r["n_params"],
                "precision": r["precision"],
                "losses": r["mean_losses"],
                "local_losses": r["losses"],
                "checkpoint": r.get("checkpoint"),
                "loss_scale_history": r.get("loss_scale_history", []),
                "sub_group_size": r.get("sub_group_size"),
                "n_sub_groups": r.get("n_sub_groups"),
                "baseline_bytes": r["baseline_bytes"],
                "activation_bytes": r["activation_bytes"],
                "init_peak_bytes": r["init_peak_bytes"],
                "waterfall": measured_waterfall(r),
                "predicted": predict_peak(
                    n_params=r["n_params"],
                    largest_layer_params=size.largest_layer_params,
                    stage=r["stage"],
                    world_size=r["world_size"],
                    precision=r["precision"],
                    ds_zero=zero_cfg[r["rung"]],
                    activation_bytes=activations,
                    baseline_bytes=r["baseline_bytes"],
                    offload_optimizer=r["offload_optimizer"],
                    offload_param=r["offload_param"],
                    device=spec.get("device", "cpu"),
                ),
                "deepspeed_estimate_bytes": deepspeed_estimate(
                    size,
                    r["world_size"],
                    r["stage"],
                    offload_optimizer=r["offload_optimizer"],
                    offload_param=r["offload_param"],
                )["device"],
            }
        )
        table[-1]["predicted_peak_bytes"] = table[-1]["predicted"]["total"]
        table[-1]["peak_over_predicted"] = r["peak_bytes"] / table[-1]["predicted_peak_bytes"]
    by_stage: dict[int, list[float]] = {}
    for t in table:
        if t["rung"] == f"stage{t['stage']}":
            by_stage.setdefault(t["stage"], []).append(t["ratio"])
    # the rule is "every rank within ±5 %": each stage reports its worst rank, not a mean that averages an
    # outlier away
    bytes_vs_formula = {f"stage{s}": max(v, key=lambda r: abs(r - 1)) for s, v in sorted(by_stage.items())}
    checks = loss_agreement(table, precision)
    checks.update(replica_agreement(table))
    checks.update(checkpoint_agreement(table))
    return {
        "ladder": table,
        "bytes_vs_formula": bytes_vs_formula,
        "checks": checks,
        "wall_s": wall_s,
        "peak": peak_summary(table),
        "persistence": persistence_summary(table, spec),
        "figure": bytes_figure(table),
        "loss_figure": loss_figure(table),
        "time_figure": time_figure(table),
        "waterfall_figure": waterfall_figure(table),
    }


def peak_summary(table: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per rung: each rank's measured peak, its growth above the baseline, the prediction, DeepSpeed's
    estimate."""
    out: dict[str, dict[str, Any]] = {}
    for t in table:
        d = out.setdefault(
            t["rung"],
            {
                "stage": t["stage"],
                "measured": [],
                "growth": [],
                "predicted": [],
                "deepspeed_estimate": t["deepspeed_estimate_bytes"],
            },
        )
        d["measured"].append(t["peak_bytes"])
        d["growth"].append(t["peak_bytes"] - t["baseline_bytes"])
        d["predicted"].append(t["predicted_peak_bytes"])
        d.setdefault("states", []).append(t["measured_bytes"])
    for d in out.values():
        states = d.pop("states")
        d["model_states"] = sum(states) / len(states)
    return out


def _max_rel_diff(ref: list[float], curve: list[float]) -> float:
    return max((abs(a - b) / max(abs(a), 1e-12) for a, b in zip(ref, curve, strict=False)), default=0.0)


def loss_agreement(table: list[dict[str, Any]], precision: str) -> dict[str, Any]:
    """ZeRO does not change the math: every rung's mean-loss curve matches the first rung's; the
    positive control (stage 0 at half the learning rate) is compared with the same reference apart."""
    curves = {}
    for t in table:
        if t["rank"] == 0:
            curves[t["rung"]] = t["losses"]
    control = curves.pop(CONTROL_RUNG, None)
    if not curves:
        return {"loss_max_rel_diff": None, "loss_agree": None, "loss_rungs": 0, "control_rel_diff": None}
    ref_name, ref = next(iter(curves.items()))
    worst = max(_max_rel_diff(ref, c) for c in curves.values())
    tol = LOSS_TOLERANCE.get(precision, 0.02)
    return {
        "loss_reference": ref_name,
        "loss_max_rel_diff": worst,
        "loss_tolerance": tol,
        "loss_agree": worst <= tol,
        "loss_rungs": len(curves),
        "control_rel_diff": None if control is None else _max_rel_diff(ref, control),
    }


def replica_agreement(table: list[dict[str, Any]]) -> dict[str, Any]:
    """Silent-failure check: per rung, every rank's shared-batch eval loss and weight checksum match."""
    out = {"replicas_in_sync": True, "replica_detail": {}}
    rungs: dict[str, list] = {}
    for t in table:
        rungs.setdefault(t["rung"], []).append(t)
    for name, ts in rungs.items():
        evals = [t["eval_loss"] for t in ts]
        sums = [t["param_checksum"] for t in ts]
        spread = max(evals) - min(evals)
        csum_rel = (max(sums) - min(sums)) / max(abs(sums[0]), 1e-12)
        ok = spread <= 1e-5 * max(1.0, abs(evals[0])) and csum_rel <= 1e-6
        out["replica_detail"][name] = {
            "eval_loss_spread": spread,
            "checksum_rel_spread": csum_rel,
            "in_sync": ok,
        }
        out["replicas_in_sync"] &= ok
    return out


def checkpoint_agreement(table: list[dict[str, Any]]) -> dict[str, Any]:
    """Silent-failure check: on every rank-rung, the state changed after the save and the load restored it
    exactly. ``None`` when no rung ran the round trip."""
    trips = {f"{t['rung']}/rank{t['rank']}": t["checkpoint"] for t in table if t.get("checkpoint")}
    if not trips:
        return {"checkpoint_round_trip_ok": None, "checkpoint_detail": {}}
    ok = all(c["restored_equal"] and c["state_changed_after_save"] for c in trips.values())
    return {"checkpoint_round_trip_ok": ok, "checkpoint_detail": trips}


def bytes_figure(table):
    """Per-rank measured bytes (stacked params/grads/optimizer) beside the formula's, per rung."""
    import plotly.graph_objects as go

    x = [f"{t['rung']}<br>rank {t['rank']}" for t in table]
    fig = go.Figure()
    for key, name in (
        ("params_bytes", "params"),
        ("grads_bytes", "grads"),
        ("optimizer_bytes", "optimizer states"),
    ):
        fig.add_bar(x=x, y=[t[key] / 2**10 for t in table], name=f"measured: {name}", offsetgroup="m")
    fig.add_bar(
        x=x,
        y=[t["buffers_bytes"] / 2**10 for t in table],
        name="measured: comm buffers (not model states)",
        offsetgroup="b",
        opacity=0.4,
    )
    fig.add_scatter(
        x=x,
        y=[t["formula_bytes"] / 2**10 for t in table],
        mode="markers",
        marker={"symbol": "line-ew-open", "size": 30, "line": {"width": 3}, "color": "black"},
        name="formula (paper)",
    )
    fig.update_layout(
        barmode="stack",
        title="Model-state bytes per rank: measured from DeepSpeed buffers vs formula",
        yaxis_title="KiB per rank",
    )
    return fig


def loss_figure(table):
    import plotly.graph_objects as go

    fig = go.Figure()
    for t in table:
        if t["rank"] == 0:
            fig.add_scatter(
                x=list(range(len(t["losses"]))), y=t["losses"], mode="lines+markers", name=t["rung"]
            )
    fig.update_layout(
        title="Loss (mean over ranks) — ZeRO stages must agree", xaxis_title="step", yaxis_title="loss"
    )
    return fig


def time_figure(table):
    import plotly.graph_objects as go

    fig = go.Figure()
    ranks = sorted({t["rank"] for t in table})
    for r in ranks:
        ts = [t for t in table if t["rank"] == r]
        fig.add_bar(x=[t["rung"] for t in ts], y=[t["step_s_median"] * 1e3 for t in ts], name=f"rank {r}")
    fig.update_layout(title="Median step time by rung", yaxis_title="ms / step", barmode="group")
    return fig
