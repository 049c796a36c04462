"""Evaluation between training steps under DDP — all-reduce counts and reducer errors.

Two gloo ranks on 127.0.0.1 run as subprocesses (``nbkit.audit.ddp_worker``) with a hard timeout,
so a desynchronised collective can never hang the caller: a timeout is reported as a finding.
The tiny model is used whatever the config's model: the behaviour measured is DDP's reducer, which
does not depend on model size.
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
from nbkit.audit.ddp_worker import SCENARIOS
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
    """One eval scenario on two ranks: training steps done, gradient all-reduces beyond what training
    alone needs, and the reducer error it raised ("" when none)."""

    name: str
    train_steps_done: int
    extra_allreduces: float
    error: str


@dataclass(frozen=True, kw_only=True)
class DdpEvalMetrics(CheckMetrics):
    """The configured eval scenario and every scenario's extra all-reduces and reducer error, on two
    ranks whose results agree (or not)."""

    scenario: str
    train_steps: int
    eval_interval: int
    allreduce_per_train_step: float
    ranks_agree: bool
    scenarios: tuple[EvalScenario, ...]

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
    if eval_cfg.no_grad:
        return "no_grad"
    if not eval_cfg.backward:
        return "grad_no_backward"
    if eval_cfg.no_sync:
        return "backward_no_sync"
    if eval_cfg.find_unused_parameters:
        return "backward_find_unused"
    return "backward" if eval_cfg.value_head else "backward_no_head"


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
    ref = by.get("no_grad")
    per_step = ref["allreduce_train"] / max(ref["train_steps_done"], 1) if ref else None
    rows = []
    for r in r0:
        expected = per_step * r["train_steps_done"] if per_step is not None else None
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
        "allreduce_per_train_step": per_step,
        "train_steps": steps,
        "eval_interval": eval_cfg.interval,
        "allreduce_eval": m["allreduce_eval"],
        "extra_allreduce": m["extra_allreduce"],
        "error": m["error"],
    }
    for r in rows:
        figures[f"{r['scenario']}: extra all-reduces"] = r["extra_allreduce"]
        if r["error"]:
            figures[f"{r['scenario']}: error"] = r["error"][:90]
    figures["error"] = (m["error"] or "")[:200] or None
    agree = all(a == b for a, b in zip(res["ranks"][0], res["ranks"][1], strict=False))
    figures["ranks_agree"] = agree
    metrics = DdpEvalMetrics(
        scenario=mine,
        train_steps=steps,
        eval_interval=eval_cfg.interval,
        allreduce_per_train_step=float(per_step) if per_step is not None else float("nan"),
        ranks_agree=agree,
        scenarios=tuple(
            EvalScenario(
                r["scenario"],
                r["train_steps_done"],
                float(r["extra_allreduce"]) if r["extra_allreduce"] is not None else float("nan"),
                r["error"] or "",
            )
            for r in rows
        ),
    )
    if m["error"]:
        status, summary = "fail", f"scenario '{mine}': {m['error'][:160]}"
    elif m["extra_allreduce"]:
        status, summary = (
            "warn",
            f"scenario '{mine}': evaluation triggers {m['extra_allreduce']:.0f} extra all-reduce(s) over "
            f"{steps} steps (gradients of eval batches are averaged across ranks)",
        )
    else:
        status, summary = (
            "pass",
            f"scenario '{mine}': evaluation adds no all-reduce and no reducer error ({per_step:.0f} "
            "all-reduce bucket(s) per training step)",
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
        fix="evaluate under torch.no_grad(); a diagnostic backward belongs inside ddp.no_sync(), or set "
        "find_unused_parameters=True",
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
