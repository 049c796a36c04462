"""Evaluation between training steps under DDP — all-reduce counts, polluted weights, reducer errors.

Two gloo ranks on 127.0.0.1 run as subprocesses (``nbkit.audit.ddp_worker``) with a hard timeout,
so a desynchronised collective can never hang the caller: a timeout is reported as a finding.
Each eval scenario trains with the common loop (backward, step, zero_grad) from the same weights on
the same batches as a ``no_grad``-eval control, so what an evaluation leaves in the gradients shows as
weights that differ from the control's. The tiny model is used whatever the config's model: the
behaviour measured is DDP's reducer and the optimiser's use of ``.grad``, which do not depend on model
size.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics
from nbkit.audit.ddp_worker import CONTROL, LR, SCENARIOS
from nbkit.experiment import param
from nbkit.findings import Finding
from nbkit.procs import Ranks, exit_reason, free_port

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "ddp-eval", "Eval ↔ DDP synchronisation"


@dataclass
class DdpEvalConfig(CheckConfig):
    no_grad: bool = True
    backward: bool = False
    no_sync: bool = False
    find_unused_parameters: bool = False
    value_head: bool = True
    interval: int = param(2, min=1, max=10, label="evaluate every")
    steps: int = param(6, min=2, max=50)

    @classmethod
    def smoke(cls):
        return cls(steps=4)

    @classmethod
    def audit_values(cls, audit):
        e = audit.eval
        return {
            "no_grad": e.no_grad,
            "backward": e.backward,
            "no_sync": e.no_sync,
            "find_unused_parameters": e.find_unused_parameters,
            "value_head": e.value_head,
            "interval": e.interval,
        }


@dataclass(frozen=True)
class EvalScenario:
    """One eval scenario on two ranks: training steps done, all-reduces beyond what training alone needs
    (those an evaluation triggers), the largest weight difference from its control's weights after the
    last step (``max_abs_dw``: NaN for a run an error stopped, or without its control), the largest
    difference of one weight between the ranks, and the reducer error it raised ("" when none)."""

    name: str
    value_head: bool
    train_steps_done: int
    extra_allreduces: float
    max_abs_dw: float
    replicas_max_abs_diff: float
    error: str


@dataclass(frozen=True)
class UnusedHeadError:
    """The reducer error of its own: an eval backward through the LM loss while a value head trained with
    it gets no gradient. ``error`` is what DDP raises then ("" when none), ``error_with_find_unused``
    the same with ``find_unused_parameters=True``, ``error_every_parameter_used`` the eval backward of
    the LM alone (every parameter gets a gradient)."""

    error: str
    error_with_find_unused: str
    error_every_parameter_used: str


@dataclass(frozen=True, kw_only=True)
class DdpEvalMetrics(CheckMetrics):
    """The configured eval scenario and every scenario's extra all-reduces, weights against the
    ``no_grad`` control's and reducer error, on two ranks whose results agree (or not); how far training
    itself moved the control's weights (``control_update``: the largest change of one weight, the scale
    a polluted weight is read against); the unused value head's reducer error apart."""

    scenario: str
    train_steps: int
    eval_interval: int
    learning_rate: float
    allreduce_per_train_step: float
    control_update: float
    ranks_agree: bool
    scenarios: tuple[EvalScenario, ...]
    unused_head: UnusedHeadError | None

    def of(self, name: str) -> EvalScenario:
        """The scenario ``name`` (every launch runs them all)."""
        return next(s for s in self.scenarios if s.name == name)


def run_ranks(
    *,
    steps: int = 6,
    eval_interval: int = 2,
    scenarios=SCENARIOS,
    seed: int = 0,
    timeout: float = 120.0,
    world_size: int = 2,
) -> dict[str, Any]:
    """Spawn the ranks (``nbkit.procs.Ranks``: own sessions, dying with this process); returns per-rank
    results or a timeout/crash description."""
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    deadline = time.monotonic() + timeout
    outs = []
    timed_out = False
    with Ranks() as group:  # leaving it kills and reaps every rank's group
        for r in range(world_size):
            group.start(
                r,
                [
                    sys.executable,
                    "-m",
                    "nbkit.audit.ddp_worker",
                    "--rank",
                    str(r),
                    "--world-size",
                    str(world_size),
                    "--port",
                    str(port),
                    "--steps",
                    str(steps),
                    "--eval-interval",
                    str(eval_interval),
                    "--scenarios",
                    ",".join(scenarios),
                    "--seed",
                    str(seed),
                    "--timeout",
                    str(max(10.0, timeout / 3)),
                ],
                env,
                capture=True,
            )
        procs = [group.procs[r] for r in range(world_size)]
        for p in procs:
            left = max(0.1, deadline - time.monotonic())
            try:
                outs.append(p.communicate(timeout=left))
            except subprocess.TimeoutExpired:
                timed_out = True
                break
    if timed_out:
        return {"timeout": timeout}
    ranks = {}
    for r, (p, (out, err)) in enumerate(zip(procs, outs, strict=False)):
        line = next((ln for ln in out.splitlines() if ln.startswith("NBKIT_DDP_RESULT ")), None)
        if line is None:
            tail = (err or out).strip().splitlines()[-1:] or ["no output"]
            return {"crash": f"rank {r} {exit_reason(p.returncode)}: {tail[0][:200]}"}
        payload = json.loads(line.split(" ", 1)[1])
        ranks[payload["rank"]] = payload["results"]
    return {"ranks": ranks}


def configured_scenario(eval_cfg) -> str:
    """The scenario a config's eval section describes (a value head matters only where an eval backward
    leaves it without a gradient)."""
    if eval_cfg.no_grad:
        return "value_head_no_grad" if eval_cfg.value_head else "no_grad"
    if not eval_cfg.backward:
        return "grad_no_backward"
    if eval_cfg.no_sync:
        return "backward_no_sync"
    if not eval_cfg.value_head:
        return "backward"
    return "value_head_find_unused" if eval_cfg.find_unused_parameters else "value_head_backward"


def _nan(x) -> float:
    return float(x) if x is not None else float("nan")


def check_ddp_eval(
    eval_cfg, *, steps: int = 6, seed: int = 0, timeout: float = 120.0, results: dict[str, Any] | None = None
) -> Checked[DdpEvalMetrics]:
    """The finding of the configured eval scenario; ``results``: :func:`run_ranks`' output when already
    measured (every scenario runs in each launch, so configs differing only in their eval settings
    read the same measurement)."""
    import plotly.graph_objects as go

    res = (
        results
        if results is not None
        else run_ranks(steps=steps, eval_interval=eval_cfg.interval, seed=seed, timeout=timeout)
    )
    mine = configured_scenario(eval_cfg)
    if "timeout" in res:
        return Checked(
            Finding(
                SLUG,
                TITLE,
                "fail",
                f"the two ranks did not finish within {timeout:.0f} s (a collective desynchronised); "
                "processes killed",
                {"scenario": mine, "timeout_s": timeout},
                fix="run evaluation identically on every rank, under torch.no_grad()",
            )
        )
    if "crash" in res:
        return Checked(Finding(SLUG, TITLE, "error", res["crash"], {"scenario": mine}))
    r0 = res["ranks"][0]
    by = {r["scenario"]: r for r in r0}
    # all-reduces per training step, from each model's control (its evaluation adds none)
    per_step = {
        name: by[ref]["allreduce_train"] / max(by[ref]["train_steps_done"], 1)
        for name, ref in CONTROL.items()
        if ref in by
    }
    rows = []
    for r in r0:
        step = per_step.get(r["scenario"])
        expected = step * r["train_steps_done"] if step is not None else None
        rows.append(
            {
                **r,
                "expected_train_allreduce": expected,
                "extra_allreduce": (r["allreduce_train"] + r["allreduce_eval"] - expected)
                if expected is not None
                else None,
            }
        )
    m = next(r for r in rows if r["scenario"] == mine)
    figures: dict[str, Any] = {
        "scenario": mine,
        "allreduce_per_train_step": per_step.get(mine),
        "train_steps": steps,
        "eval_interval": eval_cfg.interval,
        "allreduce_eval": m["allreduce_eval"],
        "extra_allreduce": m["extra_allreduce"],
        "max_abs_dw_vs_no_grad": m["max_abs_dw"],
    }
    for r in rows:
        figures[f"{r['scenario']}: extra all-reduces"] = r["extra_allreduce"]
        figures[f"{r['scenario']}: max |Δw| vs no_grad"] = r["max_abs_dw"]
        if r["error"]:
            figures[f"{r['scenario']}: error"] = r["error"][:90]
    figures["error"] = (m["error"] or "")[:200] or None
    agree = all(a == b for a, b in zip(res["ranks"][0], res["ranks"][1], strict=False))
    figures["ranks_agree"] = agree
    control = by.get("no_grad")
    errors = {name: (by[name]["error"] or "") if name in by else None for name in SCENARIOS}
    metrics = DdpEvalMetrics(
        scenario=mine,
        train_steps=steps,
        eval_interval=eval_cfg.interval,
        learning_rate=LR,
        allreduce_per_train_step=_nan(per_step.get("no_grad")),
        control_update=_nan(control["update"] if control else None),
        ranks_agree=agree,
        scenarios=tuple(
            EvalScenario(
                r["scenario"],
                bool(r["value_head"]),
                r["train_steps_done"],
                _nan(r["extra_allreduce"]),
                _nan(r["max_abs_dw"]),
                _nan(r["replicas_max_abs_diff"]),
                r["error"] or "",
            )
            for r in rows
        ),
        unused_head=UnusedHeadError(
            errors["value_head_backward"],
            errors["value_head_find_unused"],
            errors["backward"],
        )
        if None not in (errors["value_head_backward"], errors["value_head_find_unused"], errors["backward"])
        else None,
    )
    dw = m["max_abs_dw"]
    if m["error"]:
        status, summary = "fail", f"scenario '{mine}': {m['error'][:160]}"
    elif dw:
        status, summary = (
            "fail",
            f"scenario '{mine}': evaluation's gradients reach the next training step — weights differ from "
            f"a no_grad evaluation's by up to {dw:.3g} after {steps} steps ("
            + (
                f"{m['extra_allreduce']:.0f} extra all-reduce(s))"
                if m["extra_allreduce"]
                else "no extra all-reduce: no_sync keeps them local until the next step reduces them)"
            ),
        )
    elif m["extra_allreduce"]:
        status, summary = (
            "warn",
            f"scenario '{mine}': evaluation triggers {m['extra_allreduce']:.0f} extra all-reduce(s) over "
            f"{steps} steps (gradients of eval batches are averaged across ranks)",
        )
    else:
        status, summary = (
            "pass",
            f"scenario '{mine}': evaluation adds no all-reduce, leaves the weights as a no_grad evaluation "
            f"does and raises no reducer error ({per_step.get(mine, 0):.0f} all-reduce bucket(s) per "
            "training step)",
        )
    fig = go.Figure()
    fig.add_bar(
        x=[r["scenario"] for r in rows],
        y=[r["allreduce_train"] for r in rows],
        name="all-reduces in training",
    )
    fig.add_bar(
        x=[r["scenario"] for r in rows], y=[r["allreduce_eval"] for r in rows], name="all-reduces in eval"
    )
    for r in rows:
        if r["error"]:
            fig.add_annotation(
                x=r["scenario"],
                y=r["allreduce_train"] + r["allreduce_eval"],
                text="reducer error",
                showarrow=True,
            )
    fig.update_layout(
        title="all-reduce calls by eval style (2 gloo ranks)", barmode="stack", yaxis_title="comm-hook calls"
    )
    finding = Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        rows,
        fix="evaluate under torch.no_grad(); a diagnostic backward needs its gradients zeroed before the "
        "next training step (no_sync only keeps them local), and find_unused_parameters=True where it leaves "
        "parameters without a gradient",
        figure=fig,
    )
    return Checked(finding, metrics)


def measure(cfg: DdpEvalConfig, ctx: AuditContext, live=None) -> Checked[DdpEvalMetrics]:
    """The eval scenarios on two ranks, launched once per (steps, interval, seed) in the context's shared
    cache."""
    seed, key = ctx.config.model.seed, ("ddp-ranks", cfg.steps, cfg.interval, ctx.config.model.seed)
    res = ctx.shared.cached(key, lambda: run_ranks(steps=cfg.steps, eval_interval=cfg.interval, seed=seed))
    if "ranks" not in res:  # a timeout or a crash is reported, never reused
        ctx.shared.forget(key)
    return check_ddp_eval(cfg, steps=cfg.steps, seed=seed, results=res)


CHECK = Check.of(SLUG, TITLE, DdpEvalConfig, DdpEvalMetrics, measure, number=13, needs="eval")
