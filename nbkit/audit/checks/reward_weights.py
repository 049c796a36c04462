"""Sampling weights ↔ reward distribution, w_i = softmax(β·r_i + γ·log p_ref,i).

Rewards are the model's own per-token log-likelihood of each response (a real score from a real
model, standing in for a reward model's output); the prior p_ref is the model's sequence
probability of the response. For a grid of β and γ we measure how far weighted sampling moves the
reward distribution (KL of reward histograms, sampled ‖ uniform), the reward kurtosis under the
weights, and how much the 95 % CI of the mean reward shrinks — against the field notes' thresholds
(KL > 0.18, shrink > 42 %).

The responses are the unit that varies: the kurtosis rise from uniform to a concentrated sampler is
bootstrapped over them (its standard error, with the effective sample size of the weights), and so is
where the field notes' two shift thresholds fall on the β axis — the β at which KL crosses 0.18 against
the β at which the CI shrink crosses 42 % — so whether the two flag the same samplers has an interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics
from nbkit.experiment import Replicates, param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

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


@dataclass(frozen=True, kw_only=True)
class RewardWeightsMetrics(CheckMetrics):
    """KL, kurtosis and effective sample size of the configured and the concentrated sampler on the
    same scored responses; the kurtosis rise with its bootstrap standard error; the β at which KL crosses
    its threshold and the β at which the CI shrink crosses its own (NaN when one never does below β =
    64), and the bootstrap standard error of the log of their ratio (each standard error NaN where the
    resamples show no spread: :func:`bootstrap_se`)."""

    beta: float
    gamma: float
    concentrated_beta: float
    concentrated_gamma: float
    n_examples: int
    kl_sampled_vs_reward: float
    kl_concentrated: float
    ci_shrink_pct: float
    ess_configured: float
    ess_concentrated: float
    kurtosis_uniform: float
    kurtosis_concentrated: float
    kurtosis_rise_se: float
    kl_threshold: float
    shrink_threshold: float
    kl_crossing_beta: float
    shrink_crossing_beta: float
    crossing_log_ratio_se: float

    @property
    def kurtosis_rise(self) -> float:
        return self.kurtosis_concentrated - self.kurtosis_uniform

    @property
    def crossing_log_ratio(self) -> float:
        """log(β where KL crosses / β where the shrink crosses): 0 when the two rules flag the same β."""
        return math.log(self.kl_crossing_beta / self.shrink_crossing_beta)


BOOTSTRAP = 1000
# The β grid the crossings are read on: log-spaced from 1/32 to 64, interpolated between points.
BETA_GRID = tuple(2.0 ** (-5 + 11 * i / 110) for i in range(111))


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


def resampled_weights(rewards, log_prior, beta: float, gamma: float, idx):
    """The sampling weights of each bootstrap resample (rows of ``idx``), normalised within it."""
    import numpy as np

    r, lp = np.asarray(rewards, dtype=float)[idx], np.asarray(log_prior, dtype=float)[idx]
    z = beta * r + gamma * (lp - np.logaddexp.reduce(lp, axis=-1, keepdims=True))
    w = np.exp(z - z.max(axis=-1, keepdims=True))
    return r, w / w.sum(axis=-1, keepdims=True)


def weighted_kurtosis(r, w):
    """Pearson kurtosis of ``r`` under weights ``w`` along the last axis."""
    import numpy as np

    mu = (w * r).sum(-1, keepdims=True)
    var = (w * (r - mu) ** 2).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (w * (r - mu) ** 4).sum(-1) / var**2


def crossings(rewards, log_prior, gamma: float, edges, kl_threshold: float, shrink_threshold: float, idx):
    """For each resample of the responses (rows of ``idx``): the β at which the sampled reward
    histogram's KL from the uniform one first exceeds ``kl_threshold``, and the β at which the CI shrink
    (1 − weighted sd / uniform sd) first exceeds ``shrink_threshold`` — on :data:`BETA_GRID`,
    interpolated on log β; NaN where a rule never flags below β = 64."""
    import numpy as np

    k = len(edges) - 1
    r = np.asarray(rewards, dtype=float)[idx]
    onehot = np.eye(k)[np.clip(np.digitize(r, edges[1:-1]), 0, k - 1)]  # (B, n, bins)
    p_u = onehot.mean(1) + 1e-6
    p_u /= p_u.sum(-1, keepdims=True)
    sd_u = r.std(-1)
    kl, shrink = [], []
    for beta in BETA_GRID:
        _, w = resampled_weights(rewards, log_prior, beta, gamma, idx)
        p_s = np.einsum("bn,bnk->bk", w, onehot) + 1e-6
        p_s /= p_s.sum(-1, keepdims=True)
        kl.append((p_s * np.log(p_s / p_u)).sum(-1))
        mu = (w * r).sum(-1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            shrink.append(1.0 - np.sqrt((w * (r - mu) ** 2).sum(-1)) / sd_u)
    grid = np.log(np.asarray(BETA_GRID))
    return _first_crossing(np.stack(kl, 1), kl_threshold, grid), _first_crossing(
        np.stack(shrink, 1), shrink_threshold, grid
    )


def _first_crossing(values, threshold: float, log_grid):
    """Per row of ``values`` (one per β of the grid): exp of the log β where it first exceeds
    ``threshold``, linearly interpolated from the grid point before; NaN when it never does."""
    import numpy as np

    over = values > threshold
    first = np.where(over.any(1), over.argmax(1), -1)
    out = np.full(values.shape[0], np.nan)
    for row, j in enumerate(first):
        if j == 0:
            out[row] = np.exp(log_grid[0])
        elif j > 0:
            a, b = values[row, j - 1], values[row, j]
            t = (threshold - a) / (b - a) if b != a else 1.0
            out[row] = np.exp(log_grid[j - 1] + t * (log_grid[j] - log_grid[j - 1]))
    return out


def bootstrap_figures(rewards, log_prior, *, concentrated, gamma: float, edges, thresholds, seed: int = 0):
    """Over ``BOOTSTRAP`` resamples of the responses: the standard error of the kurtosis rise from
    uniform to the ``concentrated`` sampler, and of the log ratio of the two rules' β crossings (KL,
    CI shrink; :func:`crossings`). Resamples where a figure is undefined (every response the same, a
    rule that never flags) are left out of its standard error. A standard error of 0 (every resample
    gave the same figure: responses too few or too alike for the bootstrap to see any spread) is NaN,
    not 0: a zero-width interval would decide on nothing."""
    import numpy as np

    n = len(rewards)
    idx = np.random.default_rng(seed).integers(0, n, (BOOTSTRAP, n))
    r, w_hot = resampled_weights(rewards, log_prior, *concentrated, idx)
    rise = weighted_kurtosis(r, w_hot) - weighted_kurtosis(r, np.full_like(r, 1.0 / n))
    rise = rise[np.isfinite(rise)]
    kl_b, shrink_b = crossings(rewards, log_prior, gamma, edges, *thresholds, idx)
    ratio = np.log(kl_b / shrink_b)
    ratio = ratio[np.isfinite(ratio)]
    return bootstrap_se(rise), bootstrap_se(ratio)


def bootstrap_se(values) -> float:
    """The standard deviation of the bootstrap figures; NaN below two of them, or where they spread no
    more than float rounding of their size does (every resample gave the same figure)."""
    import numpy as np

    if values.size < 2:
        return float("nan")
    se = float(values.std(ddof=1))
    rounding = 64 * np.finfo(float).eps * float(np.abs(values).max())
    return se if se > rounding else float("nan")


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
    seed: int = 0,
) -> Checked[RewardWeightsMetrics]:
    """KL, kurtosis, CI shrink and ESS of the configured sampler (β, γ) and of a ``concentrated`` one
    (β, γ; broken.yaml's by default) on the same scored responses, plus the β grid: the claims compare
    the two samplers on one model rather than across models."""
    import numpy as np
    import plotly.graph_objects as go

    r = np.asarray(rewards, dtype=float)
    if len(r) < 8:
        return Checked(Finding(SLUG, TITLE, "skipped", f"need ≥ 8 scored examples, have {len(r)}"))
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
    kl_beta, shrink_beta = crossings(
        r, log_prior, gamma, bins, kl_threshold, shrink_threshold, np.arange(len(r))[None, :]
    )
    rise_se, ratio_se = bootstrap_figures(
        r,
        log_prior,
        concentrated=concentrated,
        gamma=gamma,
        edges=bins,
        thresholds=(kl_threshold, shrink_threshold),
        seed=seed,
    )
    metrics = RewardWeightsMetrics(
        beta=beta,
        gamma=gamma,
        concentrated_beta=concentrated[0],
        concentrated_gamma=concentrated[1],
        n_examples=len(r),
        kl_sampled_vs_reward=mine["kl"],
        kl_concentrated=hot["kl"],
        ci_shrink_pct=100 * mine["ci_shrink"],
        ess_configured=mine["ess"],
        ess_concentrated=hot["ess"],
        kurtosis_uniform=base["kurtosis"],
        kurtosis_concentrated=hot["kurtosis"],
        kurtosis_rise_se=rise_se,
        kl_threshold=kl_threshold,
        shrink_threshold=shrink_threshold,
        kl_crossing_beta=float(kl_beta[0]),
        shrink_crossing_beta=float(shrink_beta[0]),
        crossing_log_ratio_se=ratio_se,
    )
    figures: dict[str, Any] = {
        **metrics.figures(),
        "kurtosis_weighted": mine["kurtosis"],
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
    finding = Finding(
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
    return Checked(finding, metrics)


def measure(cfg: RewardWeightsConfig, ctx: AuditContext, live=None) -> Checked[RewardWeightsMetrics]:
    """The configured and the concentrated sampler on the model's own scored responses."""
    ex, note = ctx.examples(cfg.examples, SLUG)
    r, lp = response_scores(
        ctx.base_example_losses(
            ex[: cfg.examples], ctx.config.template.model_copy(update={"mask_pad_labels": False})
        )
    )
    checked = check_sampling(
        r,
        lp,
        beta=cfg.beta,
        gamma=cfg.gamma,
        kl_threshold=cfg.kl_threshold,
        shrink_threshold=cfg.shrink_threshold,
        concentrated=(cfg.concentrated_beta, cfg.concentrated_gamma),
        seed=ctx.config.model.seed,
    )
    checked.finding.summary += note
    return checked


# The scored response is the unit of the kurtosis and KL claims: ``examples`` at defaults,
# REWARD_FULL_RESPONSES in the full profile (what the claims need to decide: docs/claims.md). Every
# response enters one bootstrap over the whole set, so the scoring is never stopped early: the responses
# are not replicates judged one at a time.
REWARD_FULL_RESPONSES = 680
CHECK = Check.of(
    SLUG,
    TITLE,
    RewardWeightsConfig,
    RewardWeightsMetrics,
    measure,
    number=9,
    needs="sampling",
    replicates=Replicates(
        "scored response",
        "examples",
        full=REWARD_FULL_RESPONSES,
        cost_s=0.11,
        cost_source="scoring 480 responses took 52.2 CPU-s (bench/RESULTS.md, the audit's noisy rows)",
        sequential=False,
    ),
)
