"""Sampling weights ↔ reward distribution, w_i = softmax(β·r_i + γ·log p_ref,i).

Rewards are the model's own per-token log-likelihood of each response (a real score from a real
model, standing in for a reward model's output); the prior p_ref is the model's sequence
probability of the response. For a grid of β and γ we measure how far weighted sampling moves the
reward distribution (KL of reward histograms, sampled ‖ uniform), the reward kurtosis under the
weights, and how much the 95 % CI of the mean reward shrinks — against the field notes' thresholds
(KL > 0.18, shrink > 42 %).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, CheckMetrics
from nbkit.experiment import param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.experiments import AuditContext

SLUG, TITLE = "reward-weights", "Sampling weights ↔ reward"


@dataclass
class RewardWeightsConfig(CheckConfig):
    beta: float = param(1.0, min=0.0, max=20.0, step=0.25)
    gamma: float = param(0.5, min=0.0, max=2.0, step=0.1)
    kl_threshold: float = param(0.18, min=0.01, max=2.0)
    shrink_threshold: float = param(0.42, min=0.01, max=0.99)
    examples: int = param(48, min=8, max=1024, label="scored examples")
    # The sampler the claims compare with this one on the same responses: broken.yaml's β = 8, γ = 0.
    concentrated_beta: float = param(8.0, min=0.0, max=20.0, step=0.25, label="β of the concentrated sampler")
    concentrated_gamma: float = param(0.0, min=0.0, max=2.0, step=0.1, label="γ of the concentrated sampler")

    @classmethod
    def smoke(cls):
        return cls(examples=12)

    @classmethod
    def audit_values(cls, audit):
        s = audit.sampling
        return {
            "beta": s.beta,
            "gamma": s.gamma,
            "kl_threshold": s.kl_threshold,
            "shrink_threshold": s.shrink_threshold,
        }


@dataclass(frozen=True)
class RewardWeightsMetrics(CheckMetrics):
    """KL and kurtosis of the configured and the concentrated sampler on the same scored responses."""

    beta: float | None = None
    gamma: float | None = None
    concentrated_beta: float | None = None
    concentrated_gamma: float | None = None
    n_examples: int | None = None
    kl_sampled_vs_reward: float | None = None
    kl_concentrated: float | None = None
    kurtosis_uniform: float | None = None
    kurtosis_concentrated: float | None = None


def response_scores(losses: list[tuple[float, int]]):
    """(reward = mean log-prob per response token, log p_ref = summed log-prob) per example, from
    each example's (summed token loss, token count) (:func:`nbkit.audit.sft.example_losses`)."""
    return [-s / max(n, 1) for s, n in losses], [-s for s, _ in losses]


def weight_stats(rewards, log_prior, beta: float, gamma: float, bins) -> dict[str, float]:
    import numpy as np

    r = np.asarray(rewards, dtype=float)
    lp = np.asarray(log_prior, dtype=float)
    z = beta * r + gamma * (lp - np.logaddexp.reduce(lp))
    w = np.exp(z - z.max())
    w /= w.sum()
    eps = 1e-6
    p_s, _ = np.histogram(r, bins=bins, weights=w)
    p_u, _ = np.histogram(r, bins=bins)
    p_s = (p_s + eps) / (p_s + eps).sum()
    p_u = (p_u + eps) / (p_u + eps).sum()
    kl = float((p_s * np.log(p_s / p_u)).sum())
    mu = float((w * r).sum())
    var = float((w * (r - mu) ** 2).sum())
    kurt = float((w * (r - mu) ** 4).sum() / var**2) if var > 0 else float("nan")
    sd_u = float(r.std())
    shrink = 1.0 - (var**0.5) / sd_u if sd_u > 0 else 0.0
    ess = float(1.0 / (w**2).sum())
    return {"kl": kl, "kurtosis": kurt, "ci_shrink": shrink, "ess": ess, "mean_reward": mu}


def check_sampling(
    rewards,
    log_prior,
    *,
    beta: float,
    gamma: float,
    kl_threshold: float = 0.18,
    shrink_threshold: float = 0.42,
    betas=None,
    gammas=(0.0, 0.5, 1.0),
    concentrated: tuple[float, float] = (8.0, 0.0),
) -> Finding:
    """KL, kurtosis, CI shrink and ESS of the configured sampler (β, γ) and of a ``concentrated`` one
    (β, γ; broken.yaml's by default) on the same scored responses, plus the β grid: the claims compare
    the two samplers on one model rather than across models."""
    import numpy as np
    import plotly.graph_objects as go

    r = np.asarray(rewards, dtype=float)
    if len(r) < 8:
        return Finding(SLUG, TITLE, "skipped", f"need ≥ 8 scored examples, have {len(r)}")
    bins = np.histogram_bin_edges(r, bins=min(12, max(4, len(r) // 4)))
    betas = list(betas) if betas is not None else [float(b) for b in np.linspace(0, max(8.0, 2 * beta), 17)]
    grid = {(b, g): weight_stats(r, log_prior, b, g, bins) for g in gammas for b in betas}
    mine = weight_stats(r, log_prior, beta, gamma, bins)
    base = weight_stats(r, log_prior, 0.0, 0.0, bins)
    hot = weight_stats(r, log_prior, concentrated[0], concentrated[1], bins)
    rows = [
        {
            "beta": b,
            "gamma": g,
            **v,
            "over_kl": v["kl"] > kl_threshold,
            "over_shrink": v["ci_shrink"] > shrink_threshold,
        }
        for (b, g), v in grid.items()
    ]
    crossing = {}
    for g in gammas:
        over = [b for b in betas if grid[(b, g)]["kl"] > kl_threshold]
        crossing[g] = min(over) if over else None
    figures: dict[str, Any] = {
        "n_examples": len(r),
        "beta": beta,
        "gamma": gamma,
        "kl_sampled_vs_reward": mine["kl"],
        "ci_shrink_pct": 100 * mine["ci_shrink"],
        "kurtosis_uniform": base["kurtosis"],
        "kurtosis_weighted": mine["kurtosis"],
        "effective_sample_size": mine["ess"],
        "concentrated_beta": concentrated[0],
        "concentrated_gamma": concentrated[1],
        "kl_concentrated": hot["kl"],
        "kurtosis_concentrated": hot["kurtosis"],
        "beta_where_kl_crosses_threshold": {str(g): c for g, c in crossing.items()},
    }
    over_kl, over_shrink = mine["kl"] > kl_threshold, mine["ci_shrink"] > shrink_threshold
    if over_kl or over_shrink:
        status = "fail"
        summary = (
            f"β={beta}, γ={gamma}: KL {mine['kl']:.3f} (threshold {kl_threshold}), CI shrink "
            f"{100 * mine['ci_shrink']:.1f}% (threshold {100 * shrink_threshold:.0f}%), "
            f"ESS {mine['ess']:.1f} of {len(r)}: sampling concentrates on a few high-reward examples"
        )
    else:
        status = "pass"
        summary = (
            f"β={beta}, γ={gamma}: KL {mine['kl']:.3f} ≤ {kl_threshold}, CI shrink "
            f"{100 * mine['ci_shrink']:.1f}% ≤ {100 * shrink_threshold:.0f}%, ESS {mine['ess']:.1f} of "
            f"{len(r)}"
        )
    fig = go.Figure()
    for g in gammas:
        fig.add_scatter(
            x=betas, y=[grid[(b, g)]["kl"] for b in betas], mode="lines+markers", name=f"KL, γ={g}"
        )
        fig.add_scatter(
            x=betas,
            y=[grid[(b, g)]["ci_shrink"] for b in betas],
            mode="lines",
            line_dash="dot",
            name=f"CI shrink, γ={g}",
        )
    fig.add_hline(y=kl_threshold, line_dash="dash", annotation_text=f"KL {kl_threshold}")
    fig.add_hline(y=shrink_threshold, line_dash="dashdot", annotation_text=f"shrink {shrink_threshold:.0%}")
    fig.add_scatter(
        x=[beta], y=[mine["kl"]], mode="markers", marker_size=14, marker_symbol="x", name="this config (KL)"
    )
    fig.update_layout(
        title="reward-distribution shift of weighted sampling vs β",
        xaxis_title="β",
        yaxis_title="KL / shrink",
    )
    return Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        rows,
        fix=f"keep β below the KL crossing ({crossing.get(gamma)}) or temper with γ / clip weights; watch "
        "ESS",
        figure=fig,
    )


def finding(cfg: RewardWeightsConfig, ctx: AuditContext, live=None) -> Finding:
    ex, note = ctx.examples(8, SLUG)
    r, lp = response_scores(
        ctx.base_example_losses(
            ex[: cfg.examples], ctx.config.template.model_copy(update={"mask_pad_labels": False})
        )
    )
    f = check_sampling(
        r,
        lp,
        beta=cfg.beta,
        gamma=cfg.gamma,
        kl_threshold=cfg.kl_threshold,
        shrink_threshold=cfg.shrink_threshold,
        concentrated=(cfg.concentrated_beta, cfg.concentrated_gamma),
    )
    f.figures["model"] = ctx.config.model.name
    f.summary += note
    return f


CHECK = Check.of(SLUG, TITLE, RewardWeightsConfig, RewardWeightsMetrics, finding, number=9, needs="sampling")
