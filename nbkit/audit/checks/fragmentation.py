"""Checkpoint interval ↔ CUDA allocator fragmentation (CUDA only): the ZeRO theme's experiment, run on the
audit's checkpoint interval.

The measurement is :func:`nbkit.zero.fragmentation.cuda_runs` with its config
(:class:`nbkit.zero.config.FragmentationConfig`): one training run per checkpoint interval and seed,
the caching allocator read after every step. The audit takes the configured interval from its
``checkpoint`` section (first interval) and compares it with the reference interval (the last),
expandable segments off, each seed an independent run pair. The gap ratio is
``nbkit.device.gap_ratio`` = (reserved − allocated) / reserved, nbkit's one definition. The field notes'
claim about it is judged once, in notebook 02's ledger (``nbkit.zero.claims``); this check shows what the
configured interval does. On CPU there is no caching allocator: the check says so and reports no number.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, Checked, CheckMetrics, NotRunnable
from nbkit.claims import mean_interval
from nbkit.device import memory_probe
from nbkit.findings import Finding
from nbkit.zero.config import FragmentationConfig
from nbkit.zero.fragmentation import cuda_runs

if TYPE_CHECKING:
    from nbkit.audit.config import AuditConfig
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "fragmentation", "Checkpoint interval ↔ fragmentation"


def audit_values(audit: AuditConfig) -> dict[str, Any]:
    """The audit's configured interval against the reference one, expandable segments off, from the
    audit's seed (the ZeRO config's other fields keep their values). An interval the experiment does
    not run (outside its config's choices) leaves the check "not run", naming the intervals it takes."""
    values: dict[str, Any] = {"expandable_segments": (False,), "seed": audit.model.seed}
    if audit.checkpoint is not None:
        interval = audit.checkpoint.interval
        takes = next(f for f in dataclasses.fields(FragmentationConfig) if f.name == "intervals").metadata[
            "choices"
        ]
        if interval not in takes:
            raise NotRunnable(
                f"a checkpoint interval the fragmentation experiment runs ({', '.join(map(str, takes))}); "
                f"the config checkpoints every {interval} steps"
            )
        values["intervals"] = (interval, FragmentationConfig().intervals[-1])
    return values


@dataclass(frozen=True, kw_only=True)
class FragmentationMetrics(CheckMetrics):
    """Mean gap ratios of both checkpoint intervals and their per-repeat differences (CUDA only)."""

    device: str
    configured_interval: int
    reference_interval: int
    steps: int
    gap_ratio_configured: float
    gap_ratio_reference: float
    gap_ratio_diff_per_repeat: tuple[float, ...]


def compare_traces(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """Figures of repeated (configured, reference) run pairs: mean gap ratios and the Student-t interval,
    across repeats, of the per-repeat difference of mean gap ratios.

    Why across repeats: the per-step gap ratios of one run are one allocator's history, each step
    depending on the last, so an interval over steps decides nothing; the repeats (each its own seed
    and fresh model copy) are the independent unit. One repeat gives no interval (nan, nan).
    """

    diffs = [mine["mean_gap_ratio"] - ref["mean_gap_ratio"] for mine, ref in pairs]
    lo, hi = mean_interval(diffs)
    mine, ref = pairs[0]
    mean = lambda key, i: sum(p[i][key] for p in pairs) / len(pairs)  # noqa: E731
    return {
        "configured_interval": mine["interval"],
        "reference_interval": ref["interval"],
        "steps": len(mine["trace"]),
        "repeats": len(pairs),
        "checkpoints_configured": mine["checkpoints"],
        "checkpoints_reference": ref["checkpoints"],
        "gap_ratio_configured": mean("mean_gap_ratio", 0),
        "gap_ratio_reference": mean("mean_gap_ratio", 1),
        "gap_ratio_diff_per_repeat": diffs,
        "gap_ratio_diff_ci_low": lo,
        "gap_ratio_diff_ci_high": hi,
        "alloc_retries_configured": mine["alloc_retries"],
        "alloc_retries_reference": ref["alloc_retries"],
    }


def check_fragmentation(cfg: FragmentationConfig, device, live=None) -> Checked[FragmentationMetrics]:
    """Run the ZeRO theme's fragmentation experiment on ``device`` (CUDA) and judge the configured
    interval (``cfg.intervals[0]``) against the reference one (``cfg.intervals[-1]``)."""
    interval, reference_interval, steps = cfg.intervals[0], cfg.intervals[-1], cfg.steps
    if device.type != "cuda":
        why = memory_probe(device).snapshot().unavailable.get("fragmentation", "needs CUDA")
        return Checked(
            Finding(
                SLUG,
                TITLE,
                "needs_gpu",
                f"needs CUDA: {why}; not measured on {device.type} (no number is reported). On a GPU it "
                f"trains {steps} steps checkpointing every {interval} and every {reference_interval} steps "
                "and compares the gap ratios",
                {
                    "device": str(device),
                    "configured_interval": interval,
                    "reference_interval": reference_interval,
                    "steps": steps,
                },
            )
        )
    if interval == reference_interval:
        raise ValueError(f"intervals {cfg.intervals}: the configured and the reference interval must differ")
    import plotly.graph_objects as go

    cfg = dataclasses.replace(cfg, intervals=(interval, reference_interval), expandable_segments=(False,))
    out = cuda_runs(cfg, device, live=live)
    by = {(r["interval"], r["seed"]): r for r in out["runs"]}
    seeds = sorted({r["seed"] for r in out["runs"]})
    pairs = [tuple(_summary(by[(i, seed)]) for i in (interval, reference_interval)) for seed in seeds]
    runs = list(pairs[0])
    mine, ref = runs
    figures = compare_traces(pairs)
    status = (
        "warn" if mine["mean_gap_ratio"] > 0.35 or mine["alloc_retries"] > ref["alloc_retries"] else "pass"
    )
    summary = (
        f"reserved−allocated gap {mine['mean_gap_ratio']:.2f} of reserved checkpointing every {interval} "
        "steps vs "
        f"{ref['mean_gap_ratio']:.2f} every {reference_interval} ({steps} steps, {out['model']}; difference "
        f"over {len(pairs)} repeats "
        f"[{figures['gap_ratio_diff_ci_low']:.3f}, {figures['gap_ratio_diff_ci_high']:.3f}])"
    )
    fig = go.Figure()
    for r in runs:
        fig.add_scatter(y=r["trace"], name=f"checkpoint every {r['interval']}")
    fig.update_layout(
        title="(reserved − allocated) / reserved per step", xaxis_title="step", yaxis_title="gap ratio"
    )
    finding = Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        [{k: v for k, v in r.items() if k != "trace"} for r in runs],
        fix="save checkpoints from CPU copies / less often, or set "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        figure=fig,
    )
    metrics = FragmentationMetrics(
        device=str(device),
        configured_interval=interval,
        reference_interval=reference_interval,
        steps=steps,
        gap_ratio_configured=sum(p[0]["mean_gap_ratio"] for p in pairs) / len(pairs),
        gap_ratio_reference=sum(p[1]["mean_gap_ratio"] for p in pairs) / len(pairs),
        gap_ratio_diff_per_repeat=tuple(p[0]["mean_gap_ratio"] - p[1]["mean_gap_ratio"] for p in pairs),
    )
    return Checked(finding, metrics)


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    """One ``cuda_runs`` run as :func:`compare_traces` reads it."""
    return {
        "interval": run["interval"],
        "checkpoints": run["checkpoints"],
        "mean_gap_ratio": run["mean_gap_ratio"],
        "final_gap_ratio": run["gap_ratios"][-1],
        "inactive_split": run["max_inactive_split"],
        "alloc_retries": run["alloc_retries"],
        "trace": run["gap_ratios"],
    }


def measure(cfg: FragmentationConfig, ctx: AuditContext, live=None) -> Checked[FragmentationMetrics]:
    """The fragmentation experiment on the audit's device (the config's own ``device`` is not used)."""
    return check_fragmentation(cfg, ctx.torch_device, live)


CHECK = Check.of(
    SLUG, TITLE, FragmentationConfig, FragmentationMetrics, measure, number=12, values_from=audit_values
)
