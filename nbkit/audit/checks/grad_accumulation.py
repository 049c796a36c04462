"""Gradient accumulation — normalisation by token count, and the field notes' √L rule.

(a) One large batch versus the same examples as G micro-batches. With variable-length targets the
mean loss of each micro-batch weights tokens unequally, so averaging G micro-batch means is *not*
the large-batch gradient; summing token losses and dividing by the batch's total token count
(transformers' ``num_items_in_batch``) is. Both are measured against the large batch.

(b) The field notes scale accumulation steps by √L when the sequence length L changes, claiming constant
gradient variance. We measure the gradient-noise variance of micro-batches of real text at several
L and fit var ∝ L^slope: constant variance needs G(L) = G0·(L/L0)^slope, so slope ≈ -0.5 supports
the √L rule and slope ≈ -1 the plain linear (token-count) rule. Each length contributes independent
variance estimates, one per disjoint pair of micro-batch gradients of every parameter; the slope's
interval is a t interval from their within-length spread (:func:`slope_interval`). The pairs come in
rounds, one at every length, so the claim can be judged after each round and the loop stop once it is
decided.
"""

from __future__ import annotations

import contextlib
import functools
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.audit.check import Check, CheckConfig, Checked, CheckMetrics
from nbkit.audit.sft import build_features, concurrent_workers, pad_batch, run_concurrently
from nbkit.experiment import Replicates, param
from nbkit.findings import Finding

if TYPE_CHECKING:
    from nbkit.audit.context import AuditContext

SLUG, TITLE = "grad-accumulation", "Gradient accumulation"


@dataclass
class GradAccumulationConfig(CheckConfig):
    micro_batch_size: int = param(4, min=1, max=16)
    grad_accumulation: int = param(4, min=2, max=16)
    loss_normalisation: str = param("token_count", choices=["token_count", "per_microbatch_mean"])
    noise_lengths: tuple = param(
        (16, 32, 64, 128), choices=[16, 32, 64, 128, 256], label="lengths of the noise fit"
    )
    # Disjoint pairs of gradient samples per length, each an independent variance estimate: the unit the
    # slope's interval rests on (at most this many; the loop stops once the √L claim is decided).
    noise_pairs: int = param(4, min=2, max=64, label="gradient pairs per length (most)")
    noise_params: str = param("all", choices=["last_layer", "all"], label="gradients of")

    @classmethod
    def smoke(cls):
        return cls(micro_batch_size=2, grad_accumulation=2, noise_lengths=(16, 32, 64), noise_pairs=3)

    @classmethod
    def audit_values(cls, audit):
        t = audit.train
        return {
            "micro_batch_size": t.micro_batch_size,
            "grad_accumulation": max(2, t.grad_accumulation),
            "loss_normalisation": t.loss_normalisation,
        }


@dataclass(frozen=True, kw_only=True)
class GradAccumulationMetrics(CheckMetrics):
    """Accumulation errors of both normalisations against the one-batch gradient, and the gradient-noise
    variance estimates per sequence length (one per disjoint pair of gradient samples) with the fitted
    exponent of variance vs length."""

    rel_err_per_microbatch_mean: float
    rel_err_token_count: float
    tokens_per_microbatch: tuple[int, ...]
    configured_normalisation: str
    noise_lengths: tuple[int, ...]
    noise_estimates: tuple[tuple[float, ...], ...]
    noise_variance_slope: float
    gradients_of: str

    @property
    def pairs_per_length(self) -> int:
        return min((len(e) for e in self.noise_estimates), default=0)


def _clear_grads(params) -> None:
    for p in params:
        p.grad = None


def _flat_grad(params) -> Any:
    import torch

    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])


@contextmanager
def only_grad_for(model, params):
    """Temporarily make ``params`` the only ones requiring grad (autograd then skips the rest)."""
    keep = {id(p) for p in params}
    saved = [(p, p.requires_grad) for p in model.parameters()]
    try:
        for p, _ in saved:
            p.requires_grad_(id(p) in keep)
        yield
    finally:
        for p, flag in saved:
            p.requires_grad_(flag)


def accumulation_errors(model, batches, device, params=None, twin=None) -> dict[str, float]:
    """Relative L2 error of accumulated gradients vs the one-batch gradient, both normalisations.

    ``batches``: list of (input_ids, labels, attention_mask) micro-batches; ``params`` the tensors
    whose gradients are compared (default: all trainable ones). ``twin``: (a copy of the model, its
    tensors matching ``params``): the one-batch pass runs on ``model`` and the micro-batch passes on
    the copy at the same time, in two threads (each gives the gradients it gives alone).
    """
    import torch

    params = params or [p for p in model.parameters() if p.requires_grad]
    twin_model, twin_params = twin if twin is not None else (model, params)
    # Dropout off: the comparison is about normalisation, not noise.
    model.eval()
    twin_model.eval()

    ids = torch.cat([b[0] for b in batches]) if len({b[0].shape[1] for b in batches}) == 1 else None
    if ids is None:
        raise ValueError("micro-batches must share one padded width")
    labels = torch.cat([b[1] for b in batches])
    mask = torch.cat([b[2] for b in batches])
    n_items = int((labels[:, 1:] != -100).sum())

    def one_batch():
        _clear_grads(params)
        model(
            input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)
        ).loss.backward()
        g = _flat_grad(params)
        _clear_grads(params)
        return g

    def micro_batches():
        # The accumulation as transformers runs it: each micro-batch's token-loss sum over the whole
        # batch's token count (num_items_in_batch). Each micro-batch's own contribution c_i = ∇sum_i / N
        # is read off between the passes, so the mean of micro-batch means, Σ ∇(sum_i / n_i) / G =
        # Σ c_i · N / (n_i · G), comes from the same passes (one set of micro-batch passes instead of two).
        _clear_grads(twin_params)
        contributions, before = [], None
        for b in batches:
            twin_model(
                input_ids=b[0].to(device),
                attention_mask=b[2].to(device),
                labels=b[1].to(device),
                num_items_in_batch=torch.tensor(n_items, device=device),
            ).loss.backward()
            after = _flat_grad(twin_params)
            contributions.append(after if before is None else after - before)
            before = after
        _clear_grads(twin_params)
        return contributions, before

    if twin is None:
        g_full, (contributions, g_tok) = one_batch(), micro_batches()
    else:
        g_full, (contributions, g_tok) = run_concurrently([one_batch, micro_batches], 2)
    tokens = [int((b[1][:, 1:] != -100).sum()) for b in batches]
    g_mean = sum(
        c * (n_items / (max(n, 1) * len(batches))) for c, n in zip(contributions, tokens, strict=True)
    )
    norm = float(g_full.norm())
    return {
        "rel_err_per_microbatch_mean": float((g_mean - g_full).norm()) / norm,
        "rel_err_token_count": float((g_tok - g_full).norm()) / norm,
        "tokens_per_microbatch": tokens,
    }


def noise_variance_by_length(
    model,
    token_stream,
    lengths,
    *,
    micro_batch: int,
    pairs: int,
    device,
    seed: int = 0,
    params=None,
    progress=True,
    twin=None,
    stop=None,
):
    """Per sequence length, one independent estimate of the gradient-noise variance per *pair* of
    micro-batch gradients: ½‖g_a − g_b‖² over disjoint pairs (its expectation is the trace of the
    gradient covariance). Why pairs: squared deviations from the shared sample mean are dependent
    (they sum to a fixed total), so resampling them overstates what 4 samples know; disjoint pairs
    are independent draws, and the slope's interval rests on their spread.

    At most ``pairs`` per length, drawn in rounds of one pair at every length, each length from its own
    generator (seeded by ``seed`` and the length): pair j at a length is the same whatever the budget,
    and ``stop(estimates so far)`` (length → list), asked after each round, ends the loop once the claim
    it feeds is decided. ``twin``: (a copy of the model, its tensors matching ``params``): two rounds at
    a time, one on each in threads, the stop then asked after both (the figures are one model's).
    """
    import torch
    from tqdm.auto import tqdm

    params = params or [p for p in model.parameters() if p.requires_grad]
    models = [(model, params)] + ([twin] if twin is not None else [])
    for m, _ in models:
        m.eval()
    for L in lengths:
        if len(token_stream) < L + 1:
            raise ValueError(f"need at least {L + 1} tokens of text for L={L}, have {len(token_stream)}")
    gens = {L: torch.Generator().manual_seed(seed * 100_003 + L) for L in lengths}

    def draw(L):
        starts = torch.randint(0, len(token_stream) - L, (micro_batch,), generator=gens[L])
        return torch.stack([token_stream[s : s + L] for s in starts.tolist()])

    def pair_estimates(m, ps, pair_batches):
        # One pair at a time, and only one gradient copy held: the first sample's gradients are kept per
        # parameter and the second's subtracted from them in place (a length's samples all at once, or
        # flattened copies of every parameter's gradient, would not fit in memory on a 135M model).
        out = []
        for a, b in pair_batches:
            _clear_grads(ps)
            m(input_ids=a.to(device), labels=a.to(device)).loss.backward()
            first = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in ps]
            _clear_grads(ps)
            m(input_ids=b.to(device), labels=b.to(device)).loss.backward()
            total = 0.0
            for p, g in zip(ps, first, strict=True):
                if p.grad is not None:
                    g.sub_(p.grad)
                total += float(g.pow_(2).sum())
            out.append(total / 2)
            del first
        _clear_grads(ps)
        return out

    out: dict[int, list[float]] = {L: [] for L in lengths}
    bar = tqdm(total=pairs, desc="gradient noise vs L (pairs)", disable=not progress, leave=False)
    done = 0
    while done < pairs:
        group = min(len(models), pairs - done)
        rounds = [[(draw(L), draw(L)) for L in lengths] for _ in range(group)]
        parts = run_concurrently(
            [functools.partial(pair_estimates, m, ps, rounds[k]) for k, (m, ps) in enumerate(models[:group])],
            group,
        )
        for estimates in parts:
            for L, e in zip(lengths, estimates, strict=True):
                out[L].append(e)
        done += group
        bar.update(group)
        if stop is not None and stop(out):
            break
    bar.close()
    return out


def slope_interval(lengths, estimates, level: float = 0.95) -> tuple[float, float, float]:
    """(slope, low, high) of log variance on log L: the least-squares slope through each length's log
    mean estimate, and a t interval from the estimates' spread within each length.

    Each length's log mean has the delta-method variance s²/(n·m²) (m, s: the mean and standard
    deviation of its n independent estimates); the slope is a fixed linear combination of the log
    means, so its variance is the matching sum, and the t quantile takes Welch–Satterthwaite's degrees
    of freedom. Fewer than 3 lengths or 2 estimates per length, or no spread at all: (slope, nan, nan).
    """
    import numpy as np
    from scipy import stats

    x = np.log(np.asarray(lengths, dtype=float))
    est = [np.asarray(e, dtype=float) for e in estimates]
    means = np.array([e.mean() for e in est])
    xc = x - x.mean()
    c = xc / (xc @ xc)
    slope = float(c @ np.log(means))
    if len(est) < 3 or min(e.size for e in est) < 2:
        return slope, float("nan"), float("nan")
    parts = np.array([ci**2 * e.var(ddof=1) / (e.size * e.mean() ** 2) for ci, e in zip(c, est, strict=True)])
    if not parts.sum() > 0:
        return slope, float("nan"), float("nan")
    df = parts.sum() ** 2 / sum(p**2 / (e.size - 1) for p, e in zip(parts, est, strict=True))
    half = float(stats.t.ppf((1 + level) / 2, df)) * float(np.sqrt(parts.sum()))
    return slope, slope - half, slope + half


def text_token_stream(tokenizer, max_tokens: int = 20000):
    """Real English prose (the stdlib's pydoc topics, always present offline) as one token tensor."""
    from pydoc_data.topics import topics

    import torch

    text = "\n\n".join(topics[k] for k in sorted(topics))
    ids = tokenizer(text[: max_tokens * 6], add_special_tokens=False)["input_ids"][:max_tokens]
    return torch.tensor(ids, dtype=torch.long)


def check_grad_accumulation(
    model,
    tokenizer,
    examples,
    template,
    *,
    micro_batch_size: int = 4,
    grad_accumulation: int = 4,
    normalisation: str = "token_count",
    lengths=(16, 32, 64, 128),
    noise_pairs: int = 4,
    noise_micro_batch: int = 2,
    base_length: int | None = None,
    device,
    seed: int = 0,
    noise_params: str = "all",
    progress: bool = True,
    workers: int | None = None,
    stop=None,
) -> Checked[GradAccumulationMetrics]:
    """``workers``: 2 runs half the passes on a copy of the model in a second thread (default: on CPU when
    :func:`nbkit.audit.sft.concurrent_workers` allows it; the figures are those of one model doing all).
    ``stop(metrics so far)``, asked after each round of noise pairs, ends them once the √L claim is
    decided (:func:`noise_variance_by_length`)."""
    from plotly.subplots import make_subplots

    n = micro_batch_size * grad_accumulation
    if len(examples) < n:
        raise ValueError(
            f"need {n} examples for {grad_accumulation} micro-batches of {micro_batch_size}, have "
            f"{len(examples)}"
        )
    feats = [build_features(tokenizer, e, template) for e in examples[:n]]
    ids, labels, mask = pad_batch(feats, tokenizer.pad_token_id)
    batches = [
        (ids[i : i + micro_batch_size], labels[i : i + micro_batch_size], mask[i : i + micro_batch_size])
        for i in range(0, n, micro_batch_size)
    ]
    # The accumulation identity holds for every parameter's gradient: the last decoder layer's shows it
    # without holding G copies of every gradient. The noise fit reads ``noise_params`` (every parameter
    # by default: the claim is about the gradient, not one layer's).
    last = list(model.model.layers[-1].parameters())
    params = [p for p in model.parameters() if p.requires_grad] if noise_params == "all" else last
    stream = text_token_stream(tokenizer, max_tokens=max(4000, 40 * max(lengths)))
    twin_model = None
    if (concurrent_workers(2, device) if workers is None else workers) >= 2:
        # A copy of the model (same weights; gradients land on its own tensors) computes half the
        # passes in a second thread; the figures are those of one model doing all of them.
        import copy

        twin_model = copy.deepcopy(model)
        names = {id(p): n for n, p in model.named_parameters()}
        twin_by_name = dict(twin_model.named_parameters())

    def twin_of(ps):
        return None if twin_model is None else (twin_model, [twin_by_name[names[id(p)]] for p in ps])

    def metrics_of(devs: dict[int, list[float]]) -> GradAccumulationMetrics:
        ls = sorted(devs)
        return GradAccumulationMetrics(
            rel_err_per_microbatch_mean=errs["rel_err_per_microbatch_mean"],
            rel_err_token_count=errs["rel_err_token_count"],
            tokens_per_microbatch=tuple(errs["tokens_per_microbatch"]),
            configured_normalisation=normalisation,
            noise_lengths=tuple(ls),
            noise_estimates=tuple(tuple(devs[L]) for L in ls),
            noise_variance_slope=slope_interval(ls, [devs[L] for L in ls])[0],
            gradients_of="last decoder layer" if noise_params == "last_layer" else "all parameters",
        )

    for ps in (last, params):
        twin = twin_of(ps)
        with only_grad_for(model, ps), only_grad_for(*twin) if twin else contextlib.nullcontext():
            if ps is last:
                errs = accumulation_errors(model, batches, device, ps, twin=twin)
            if ps is params:
                devs = noise_variance_by_length(
                    model,
                    stream,
                    list(lengths),
                    micro_batch=noise_micro_batch,
                    pairs=noise_pairs,
                    device=device,
                    seed=seed,
                    params=ps,
                    progress=progress,
                    twin=twin,
                    stop=None if stop is None else lambda devs: stop(metrics_of(devs)),
                )
    twin_model = None  # the copy and its gradients go before the figures are built
    var = {L: sum(d) / len(d) for L, d in devs.items()}
    ls = sorted(var)
    slope, slope_lo, slope_hi = slope_interval(ls, [devs[L] for L in ls])
    metrics = metrics_of(devs)
    L0 = base_length or ls[0]
    g0 = grad_accumulation
    rows = []
    for L in ls:
        measured = g0 * (L / L0) ** slope  # accumulation that keeps variance at its L0 level
        rows.append(
            {
                "L": L,
                "grad noise variance": var[L],
                "G (constant variance, measured)": measured,
                "G field-note √L rule": g0 * (L0 / L) ** 0.5,
                "G linear rule": g0 * (L0 / L),
            }
        )
    figures: dict[str, Any] = {
        "rel_err_per_microbatch_mean": errs["rel_err_per_microbatch_mean"],
        "rel_err_token_count": errs["rel_err_token_count"],
        "tokens_per_microbatch": errs["tokens_per_microbatch"],
        "noise_variance_slope": slope,
        "noise_variance_slope_ci_low": slope_lo,
        "noise_variance_slope_ci_high": slope_hi,
        "noise_lengths": len(ls),
        "noise_pairs_per_length": metrics.pairs_per_length,
        "gradients_of": metrics.gradients_of,
    }
    used = (
        errs["rel_err_token_count"] if normalisation == "token_count" else errs["rel_err_per_microbatch_mean"]
    )
    figures["configured_normalisation"] = normalisation
    figures["configured_rel_err"] = used
    tol = 1e-3
    if used > tol:
        status = "fail"
        summary = (
            f"'{normalisation}' accumulation misses the one-batch gradient by {used:.2%} (token counts "
            f"{errs['tokens_per_microbatch']}); "
            f"token-count normalisation gets {errs['rel_err_token_count']:.1e}"
        )
    else:
        status = "pass"
        summary = (
            f"'{normalisation}' accumulation equals the one-batch gradient (rel. err {used:.1e}; "
            f"per-micro-batch mean would be {errs['rel_err_per_microbatch_mean']:.2%})"
        )
    summary += (
        f"; gradient variance ∝ L^{slope:.2f} (95% interval [{slope_lo:.2f}, {slope_hi:.2f}], "
        f"{len(ls)} lengths × {metrics.pairs_per_length} independent pairs of gradient samples)"
    )
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("accumulated vs one-batch gradient", "gradient noise vs sequence length"),
    )
    fig.add_bar(
        x=["mean of micro-batch means", "sum / token count"],
        y=[errs["rel_err_per_microbatch_mean"], errs["rel_err_token_count"]],
        row=1,
        col=1,
        name="relative error",
    )
    fig.add_scatter(
        x=ls, y=[var[L] for L in ls], mode="lines+markers", row=1, col=2, name=f"measured (slope {slope:.2f})"
    )
    fig.add_scatter(
        x=ls,
        y=[var[ls[0]] * (L / ls[0]) ** -0.5 for L in ls],
        mode="lines",
        line_dash="dot",
        row=1,
        col=2,
        name="∝ L^-0.5 (field notes' √L)",
    )
    fig.add_scatter(
        x=ls,
        y=[var[ls[0]] * (L / ls[0]) ** -1 for L in ls],
        mode="lines",
        line_dash="dash",
        row=1,
        col=2,
        name="∝ L^-1 (linear)",
    )
    fig.update_xaxes(type="log", row=1, col=2)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_layout(title="gradient accumulation")
    finding = Finding(
        SLUG,
        TITLE,
        status,
        summary,
        figures,
        rows,
        fix="sum token losses and divide by the accumulated token count (num_items_in_batch); scale G by the "
        "measured variance law, not √L by default",
        figure=fig,
    )
    return Checked(finding, metrics)


def measure(
    cfg: GradAccumulationConfig, ctx: AuditContext, live=None, stop=None
) -> Checked[GradAccumulationMetrics]:
    """Accumulated micro-batch gradients against one large batch; gradient noise variance vs length, at
    most ``cfg.noise_pairs`` pairs per length (``stop``: see :func:`check_grad_accumulation`)."""
    model, tok = ctx.model_and_tokenizer()
    ex, note = ctx.examples(cfg.micro_batch_size * cfg.grad_accumulation, SLUG)
    # The accumulation identity is about the loss normalisation, so pad labels stay unmasked here.
    template = ctx.config.template.model_copy(update={"mask_pad_labels": False})
    checked = check_grad_accumulation(
        model,
        tok,
        ex,
        template,
        micro_batch_size=cfg.micro_batch_size,
        grad_accumulation=cfg.grad_accumulation,
        normalisation=cfg.loss_normalisation,
        lengths=tuple(sorted(cfg.noise_lengths)),
        noise_pairs=cfg.noise_pairs,
        device=ctx.torch_device,
        seed=ctx.config.model.seed,
        noise_params=cfg.noise_params,
        progress=ctx.progress,
        stop=stop,
    )
    checked.finding.summary += note
    return checked


# One pair of gradient samples at every length is the unit of the √L claim: at most noise_pairs at
# defaults, NOISE_FULL_PAIRS in the full profile (what the claim needs to decide: docs/claims.md).
NOISE_FULL_PAIRS = 12
CHECK = Check.of(
    SLUG,
    TITLE,
    GradAccumulationConfig,
    GradAccumulationMetrics,
    measure,
    number=5,
    replicates=Replicates(
        "gradient pair",
        "noise_pairs",
        full=NOISE_FULL_PAIRS,
        cost_s=19.4,
        cost_source="2.42 CPU-s per gradient sample of every parameter, two at each of four lengths "
        "(bench/RESULTS.md, the audit's noisy rows)",
        least=3,
    ),
)
