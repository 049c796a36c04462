"""The learning rate a chain of torch schedulers actually applies, step by step.

Stages from the config become real ``torch.optim.lr_scheduler`` objects combined with
``SequentialLR`` or ``ChainedScheduler``. The applied LR trace is compared with the *intended*
one (each stage run alone from the base LR, concatenated): warmup lost, warmup repeated, stage
jumps. A resume at ``resume_at_step`` rebuilds optimizer and schedulers like a restarted job
(loading the scheduler state or not) and is compared with the uninterrupted trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics
from nbkit.audit.sections import SchedulerSection, StageSection
from nbkit.errors import UsageError
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "schedulers", "Chained LR schedulers"


SCHEDULER_PRESETS = {
    "warmup+cosine": (
        "sequential",
        ({"kind": "linear_warmup", "steps": 10, "start_factor": 0.01}, {"kind": "cosine", "steps": 90}),
    ),
    "onecycle+warmup+step": (
        "sequential",
        (
            {"kind": "onecycle", "steps": 100, "pct_start": 0.1},
            {"kind": "linear_warmup", "steps": 10, "start_factor": 0.01},
            {"kind": "step", "steps": 90, "step_size": 30},
        ),
    ),
    "chained warmup+cosine": (
        "chained",
        ({"kind": "linear_warmup", "steps": 10, "start_factor": 0.01}, {"kind": "cosine", "steps": 90}),
    ),
}


@dataclass
class SchedulersConfig(CheckConfig):
    """A preset, or (``preset='config'``) the stages of the YAML's scheduler section."""

    preset: str = param("warmup+cosine", choices=[*SCHEDULER_PRESETS, "config"])
    resume_at_step: int = param(40, min=1, max=199)
    resume_restores_scheduler: bool = True
    section: dict = param(default_factory=dict, hidden=True)

    def scheduler_section(self) -> SchedulerSection:
        if self.preset == "config":
            if not self.section:
                raise UsageError("scheduler preset 'config' needs the config's scheduler section")
            return SchedulerSection.model_validate(self.section, strict=False)
        combine, stages = SCHEDULER_PRESETS[self.preset]
        total = sum(s["steps"] for s in stages)
        return SchedulerSection.model_validate(
            {
                "combine": combine,
                "base_lr": 2e-4,
                "stages": list(stages),
                "warmup_steps": 10,
                "resume_at_step": min(self.resume_at_step, total - 1),
                "resume_restores_scheduler": self.resume_restores_scheduler,
            },
            strict=False,
        )

    @classmethod
    def audit_values(cls, audit):
        s = audit.scheduler
        return {
            "preset": "config",
            "section": s.model_dump(),
            "resume_at_step": s.resume_at_step or 40,
            "resume_restores_scheduler": s.resume_restores_scheduler,
        }


@dataclass(frozen=True, kw_only=True)
class SchedulersMetrics(CheckMetrics):
    """Warmups applied and intended, the largest departure from the stages run alone, resume mismatches,
    and the field notes' scenario (OneCycleLR then StepLR under SequentialLR): warmup ramps in its
    second stage and the factor the LR jumps by at the milestone."""

    total_steps: int
    warmups_applied: int
    warmups_intended: int
    max_deviation_from_intended: float
    # None when the config resumes nowhere (no resume_at_step, or one past the last step).
    resume_mismatched_steps: int | None
    field_note_scenario_warmup_ramps_in_stage2: int
    field_note_scenario_lr_jump_at_milestone: float


def _make_stage(opt, stage, base_lr: float):
    from torch.optim import lr_scheduler as sch

    k = stage.kind
    if k == "linear_warmup":
        return sch.LinearLR(opt, start_factor=stage.start_factor, end_factor=1.0, total_iters=stage.steps)
    if k == "constant":
        return sch.ConstantLR(opt, factor=1.0, total_iters=stage.steps)
    if k == "cosine":
        return sch.CosineAnnealingLR(opt, T_max=stage.steps, eta_min=stage.eta_min)
    if k == "linear_decay":
        return sch.LinearLR(opt, start_factor=1.0, end_factor=0.0, total_iters=stage.steps)
    if k == "step":
        return sch.StepLR(opt, step_size=stage.step_size, gamma=stage.gamma)
    if k == "onecycle":
        return sch.OneCycleLR(opt, max_lr=base_lr, total_steps=stage.steps, pct_start=stage.pct_start)
    if k == "exponential":
        return sch.ExponentialLR(opt, gamma=stage.gamma)
    raise ValueError(f"unknown scheduler stage kind {k!r}")


def build(cfg):
    """(optimizer, scheduler) for a SchedulerSection, on a one-parameter model."""
    import torch
    from torch.optim import lr_scheduler as sch

    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=cfg.base_lr)
    stages = [_make_stage(opt, s, cfg.base_lr) for s in cfg.stages]
    if len(stages) == 1:
        return opt, stages[0]
    if cfg.combine == "sequential":
        milestones, acc = [], 0
        for s in cfg.stages[:-1]:
            acc += s.steps
            milestones.append(acc)
        return opt, sch.SequentialLR(opt, stages, milestones=milestones)
    return opt, sch.ChainedScheduler(stages, optimizer=opt)


def lr_trace(opt, sched, steps: int, start: int = 0) -> list[float]:
    import warnings

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "scheduler.step() before optimizer.step()" noise: we never train
        for _ in range(start, steps):
            out.append(float(opt.param_groups[0]["lr"]))
            opt.step()
            sched.step()
    return out


def intended_trace(cfg) -> list[float]:
    """Each stage alone from the base LR, concatenated (what a reader of the config expects)."""
    out = []
    for s in cfg.stages:
        sub = cfg.model_copy(update={"stages": [s]})
        opt, sched = build(sub)
        out += lr_trace(opt, sched, s.steps)
    return out


def resumed_trace(cfg, total: int, at: int, restore_scheduler: bool) -> list[float]:
    """Run to ``at``, save states, rebuild everything, load (or not) the scheduler state, go on."""
    import warnings

    opt, sched = build(cfg)
    first = lr_trace(opt, sched, at)
    opt_state, sched_state = opt.state_dict(), sched.state_dict()
    opt2, sched2 = build(cfg)
    opt2.load_state_dict(opt_state)
    if restore_scheduler:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched2.load_state_dict(sched_state)
    return first + lr_trace(opt2, sched2, total, start=at)


def rising_runs(trace: list[float], min_len: int = 3) -> list[tuple[int, int]]:
    """(start, end) of stretches where the LR rises for ≥ min_len consecutive steps (warmups)."""
    runs, start = [], None
    for i in range(1, len(trace)):
        if trace[i] > trace[i - 1] * (1 + 1e-9):
            start = i - 1 if start is None else start
        else:
            if start is not None and i - 1 - start >= min_len:
                runs.append((start, i - 1))
            start = None
    if start is not None and len(trace) - 1 - start >= min_len:
        runs.append((start, len(trace) - 1))
    return runs


def check_schedulers(cfg) -> Checked[SchedulersMetrics]:
    import plotly.graph_objects as go

    total = sum(s.steps for s in cfg.stages)
    opt, sched = build(cfg)
    applied = lr_trace(opt, sched, total)
    intended = intended_trace(cfg)
    base = cfg.base_lr
    dev = [abs(a - b) / base for a, b in zip(applied, intended, strict=False)]
    max_dev = max(dev)
    first_dev = next((i for i, d in enumerate(dev) if d > 1e-6), None)
    warm_applied = rising_runs(applied)
    warm_intended = rising_runs(intended)
    problems = []
    want = cfg.warmup_steps
    if want:
        if not warm_applied or warm_applied[0][0] > 0:
            problems.append(
                f"warmup lost: the applied LR starts at {applied[0] / base:.3g}× base and does not ramp in "
                f"the first {want} steps"
            )
        if len(warm_applied) > 1:
            problems.append(
                f"warmup repeated: {len(warm_applied)} LR ramps at steps {[r[0] for r in warm_applied]}"
            )
    if max_dev > 1e-6 and first_dev is not None:
        problems.append(
            f"applied LR departs from the stages run alone from step {first_dev} (max deviation "
            f"{max_dev:.3g}× base)"
        )
    resume = None
    if cfg.resume_at_step and cfg.resume_at_step < total:
        resumed = resumed_trace(cfg, total, cfg.resume_at_step, cfg.resume_restores_scheduler)
        rdev = [abs(a - b) / base for a, b in zip(resumed, applied, strict=False)]
        mism = sum(d > 1e-9 for d in rdev)
        resume = {"at": cfg.resume_at_step, "mismatched_steps": mism, "max_dev": max(rdev), "trace": resumed}
        if mism:
            problems.append(
                f"resume at step {cfg.resume_at_step} "
                f"{'with' if cfg.resume_restores_scheduler else 'without'} the scheduler state: "
                f"{mism} later steps get a different LR (max {max(rdev):.3g}× base)"
            )
    # The field notes' 4.2 scenario, always measured: OneCycleLR(pct_start=0.1) then StepLR under
    # SequentialLR.
    note_cfg = SchedulerSection(
        combine="sequential",
        base_lr=1.0,
        stages=[
            StageSection(kind="onecycle", steps=100, pct_start=0.1),
            StageSection(kind="step", steps=200, step_size=50),
        ],
    )
    so, ss = build(note_cfg)
    note_trace = lr_trace(so, ss, 300)
    note_warm = rising_runs(note_trace)
    stage2_warm = sum(1 for r in note_warm if r[0] >= 100)
    metrics = SchedulersMetrics(
        total_steps=total,
        warmups_applied=len(warm_applied),
        warmups_intended=len(warm_intended),
        max_deviation_from_intended=max_dev,
        resume_mismatched_steps=resume["mismatched_steps"] if resume else None,
        field_note_scenario_warmup_ramps_in_stage2=stage2_warm,
        # The milestone hands over from OneCycleLR's final tiny LR to StepLR's base LR in one step: a jump,
        # not a ramp, so the ramp count cannot see it.
        field_note_scenario_lr_jump_at_milestone=note_trace[100] / note_trace[99],
    )
    figures: dict[str, Any] = {
        "combine": cfg.combine,
        "stages": [s.kind for s in cfg.stages],
        "total_steps": total,
        "lr_at_step0_over_base": applied[0] / base,
        "max_lr_over_base": max(applied) / base,
        "warmups_applied": len(warm_applied),
        "warmups_intended": len(warm_intended),
        "max_deviation_from_intended": max_dev,
        "first_deviating_step": first_dev,
        "resume_mismatched_steps": resume["mismatched_steps"] if resume else None,
        "field_note_scenario_warmup_steps_stage1": (note_warm[0][1] - note_warm[0][0]) if note_warm else 0,
        "field_note_scenario_warmup_ramps_in_stage2": stage2_warm,
        "field_note_scenario_lr_jump_at_milestone": metrics.field_note_scenario_lr_jump_at_milestone,
    }
    status = "fail" if problems else "pass"
    summary = (
        "; ".join(problems)
        if problems
        else f"{len(cfg.stages)} stage(s) apply the intended LR at every step; resume reproduces the trace"
    )
    steps = list(range(total))
    fig = go.Figure()
    fig.add_scatter(x=steps, y=intended, name="intended (stages alone)", line_dash="dot")
    fig.add_scatter(x=steps, y=applied, name=f"applied ({cfg.combine})")
    if resume:
        fig.add_scatter(x=steps, y=resume["trace"], name=f"resumed at {resume['at']}", line_dash="dash")
    fig.update_layout(title="learning rate actually applied per step", xaxis_title="step", yaxis_title="lr")
    table = [
        {
            "step": i,
            "intended": intended[i],
            "applied": applied[i],
            **({"resumed": resume["trace"][i]} if resume else {}),
        }
        for i in steps
    ]
    finding = Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        table,
        fix="one SequentialLR with milestones equal to the stage lengths; warmup only in the first stage; "
        "save and load scheduler.state_dict() with the optimizer",
        figure=fig,
    )
    return Checked(finding, metrics)


def measure(cfg: SchedulersConfig, ctx: AuditContext, live=None) -> Checked[SchedulersMetrics]:
    """The LR a chain of real torch schedulers applies per step, against the stages run alone."""
    return check_schedulers(cfg.scheduler_section())


CHECK = Check.of(SLUG, TITLE, SchedulersConfig, SchedulersMetrics, measure, number=11, needs="scheduler")
