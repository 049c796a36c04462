"""The seed's claims next to this run's measurements, with verdicts computed from the numbers.

Verdicts: "holds", "refuted", "needs GPU" (only measurable on CUDA), "not measured" (the check did
not run or did not produce the figure in this run), "inconclusive" (measured, but the run could not
decide, e.g. no variant reached the target within the budget).
"""

from __future__ import annotations

from typing import Any

from nbkit.audit.findings import Finding


def _fig(findings: list[Finding] | None, check_id: int, key: str):
    for f in findings or []:
        if f.check_id == check_id and key in f.figures:
            return f.figures[key]
    return None


def _close(measured, claimed, rel: float = 0.25) -> bool:
    return abs(measured - claimed) <= rel * abs(claimed)


def claims_table(good: list[Finding], broken: list[Finding] | None = None, *, on_cuda: bool = False):
    """A pandas DataFrame: claim, seed value, measured value, verdict."""
    import pandas as pd

    rows: list[dict[str, Any]] = []

    def add(check, claim, seed, measured, verdict):
        if measured is None and verdict not in ("needs GPU",):
            verdict = "not measured"
        rows.append({"check": check, "seed claim": claim, "seed value": seed, "measured": measured if measured is not None else "—", "verdict": verdict})

    g = lambda c, k: _fig(good, c, k)  # noqa: E731
    b = lambda c, k: _fig(broken, c, k)  # noqa: E731

    ks, os_ = g(1, "kiss_trainable_share_pct"), g(1, "over_trainable_share_pct")
    add(1, "KISS q/v rank-8 LoRA trains 0.12 % of the parameters", "0.12 %", None if ks is None else f"{ks:.3f} %", None if ks is None else ("holds" if _close(ks, 0.12) else "refuted"))
    add(1, "q/v/o rank-64 LoRA trains 0.87 % of the parameters", "0.87 %", None if os_ is None else f"{os_:.3f} %", None if os_ is None else ("holds" if _close(os_, 0.87) else "refuted"))
    ratio = g(1, "param_ratio_over_vs_kiss")
    add(1, "q/v/o rank-64 has 3.2× the trainable parameters (r8 ≈ 5 % of it)", "3.2× (5 %)", None if ratio is None else f"{ratio:.1f}× ({100 / ratio:.1f} %)",
        None if ratio is None else ("holds" if _close(ratio, 3.2) else "refuted"))
    sk, so = g(1, "kiss_steps_to_target"), g(1, "over_steps_to_target")
    if ks is None:
        add(1, "KISS reaches the validation-loss target in fewer steps (890 vs 2140)", "890 vs 2140", None, None)
    elif sk is None or so is None:
        add(1, "KISS reaches the validation-loss target in fewer steps (890 vs 2140)", "890 vs 2140", f"{sk} vs {so} (None = not within budget)",
            "holds" if (sk is not None and so is None) else ("refuted" if (so is not None and sk is None) else "inconclusive"))
    else:
        add(1, "KISS reaches the validation-loss target in fewer steps (890 vs 2140)", "890 vs 2140", f"{sk} vs {so}", "holds" if sk < so else "refuted")
    pr = g(1, "peak_ratio_kiss_vs_over")
    add(1, "KISS peak memory is 28.1/42.3 = 0.66 of the over-parameterised run", "0.66 (A100 GB)", None if pr is None else f"{pr:.3f} ({g(1, 'peak_measured_as')})",
        None if pr is None else ("holds" if abs(pr - 0.66) <= 0.1 else "refuted"))

    sa = g(2, "seed_asserts_hold_on")
    add(2, "assert A.shape[1]==B.shape[0] and W0.shape==(A.shape[0], B.shape[1]) validates LoRA binding", "asserts pass", sa,
        None if sa is None else ("holds" if sa.split("/")[0] == sa.split("/")[1].split()[0] else "refuted"))
    sc = g(2, "scaling_applied")
    add(2, "the update is W0 + α·ΔW (scaling α)", "scale = α", None if sc is None else f"scale = {sc:g} = α/r", None if sc is None else ("holds" if _close(sc, g(2, "alpha"), 1e-9) else "refuted"))

    zf = g(3, "zh_boundary_f1_pct")
    add(3, "Chinese tokenisation breaks span labels (coverage 63.7 %, boundary F1 71.3 %)", "63.7 % / 71.3 %",
        None if zf is None else f"{g(3, 'zh_label_coverage_pct'):.1f} % / {zf:.1f} %", None if zf is None else ("holds" if zf < 90 else "refuted"))
    ef = g(3, "en_untrimmed_offsets_f1_pct")
    if ef is not None:
        add(3, "(measured here) byte-level offsets carry the leading space: untrimmed English boundary F1", "—", f"{ef:.1f} % (trimmed: {g(3, 'en_boundary_f1_pct'):.1f} %)",
            "holds" if ef < g(3, "en_boundary_f1_pct") else "refuted")

    fm = g(4, "flash_over_math_at_L1024_cuda") or g(4, "flash_over_math_at_L256_cuda")
    add(4, "FlashAttention-2 tile sizes give 92.4 % GPU utilisation at 32K context", "92.4 %", None, "needs GPU")
    add(4, "FlashAttention-2 gives 3.8× the throughput of naive attention", "3.8×", f"{fm:.1f}× (CUDA)" if fm else None,
        ("holds" if fm and _close(fm, 3.8) else "refuted") if fm else "needs GPU")

    slope = g(5, "noise_variance_slope")
    add(5, "accumulation steps must scale with √L (G ∝ L^-0.5) to keep gradient variance constant", "exponent -0.5",
        None if slope is None else f"variance ∝ L^{slope:.2f} → G ∝ L^{slope:.2f}", None if slope is None else ("holds" if abs(slope + 0.5) < abs(slope + 1.0) else "refuted"))
    em, et = g(5, "rel_err_per_microbatch_mean"), g(5, "rel_err_token_count")
    add(5, "(issue) accumulated micro-batch means equal the large batch only with token-count normalisation", "—",
        None if em is None else f"mean-of-means err {em:.2%}, token-count err {et:.1e}", None if em is None else ("holds" if em > 1e-3 and et < 1e-4 else "refuted"))

    for key, claim, seed_value, expect in (
        ("baddbmm [float32 inputs under torch.bfloat16 autocast]", "torch.baddbmm executes in float32 (default) under bf16", "float32", "torch.float32"),
        ("index_add_ [torch.bfloat16 cache, torch.bfloat16 source]", "index_add_ keeps bf16", "bf16", "torch.bfloat16"),
    ):
        v = g(6, key)
        add(6, claim, seed_value, v, None if v is None else ("holds" if v == expect else "refuted"))
    v = g(6, "index_copy_ [torch.bfloat16 cache, float32 source]")
    add(6, "index_copy_ silently recasts a non-matching source (hence the explicit .to())", "silent recast", None if v is None else v[:70],
        None if v is None else ("refuted" if "Error" in v else "holds"))
    kd = g(6, "kv_cache_keys_dtype")
    add(6, "bf16/float32 boundary in the KV cache is crossed without a declaration", "implicit upcast", None if kd is None else f"keys {kd}, values {g(6, 'kv_cache_values_dtype')}",
        None if kd is None else ("holds" if kd != g(6, "kv_cache_values_dtype") or "float32" in kd else "refuted"))

    co = (b(7, "issue_counts") or {}).get("coerced (strict rejects)") if broken else None
    add(7, "lax parsing silently coerces '42' for an int field (strict mode rejects)", "coercion happens", None if co is None else f"{co} coerced value(s) in the broken file",
        None if co is None else ("holds" if co > 0 else "refuted"))
    mfs = b(7, "missing_field_share_of_errors_pct") if broken else None
    add(7, "missing-field share of errors is a useful headline", "—", None if mfs is None else f"{mfs:.0f} % of validation errors", "holds" if mfs is not None else None)

    eot = b(8, "eot_masked") if broken else None
    add(8, "len(input_ids)==len(labels) and unmasked labels == target tokens catch template/mask leaks", "check catches leaks",
        None if eot is None else f"broken config: {eot} end-of-turn masked, {b(8, 'truncated')} truncated, {b(8, 'decode_mismatch')} decode mismatches", None if eot is None else ("holds" if eot > 0 else "refuted"))

    ku, kw = (b(9, "kurtosis_uniform"), b(9, "kurtosis_weighted")) if broken else (None, None)
    add(9, "reward kurtosis rises from 2.1 (cold start) to 5.7 when sampling concentrates", "2.1 → 5.7", None if ku is None else f"{ku:.2f} → {kw:.2f} (β={b(9, 'beta')})",
        None if ku is None else ("holds" if kw > ku else "refuted"))
    klb = b(9, "kl_sampled_vs_reward") if broken else None
    add(9, "KL > 0.18 flags a significant shift", "0.18", None if klb is None else f"KL {klb:.3f} at β={b(9, 'beta')} (good config: {g(9, 'kl_sampled_vs_reward'):.3f})" if g(9, "kl_sampled_vs_reward") is not None else f"KL {klb:.3f}",
        None if klb is None else ("holds" if klb > 0.18 else "inconclusive"))

    ps = b(10, "persisted_share_pct") if broken else None
    add(10, "stage3_param_persistence_threshold=1e9 replicates small tensors on every rank", "small tensors replicated",
        None if ps is None else f"{ps:.0f} % of bytes persisted (all tensors)", None if ps is None else ("holds" if ps > 50 else "refuted"))
    cut = g(10, "kv_tensors_with_groups_cut")
    add(10, "ZeRO-3 slices by flat shape, ignoring KV head groups", "groups ignored", None if cut is None else f"{cut} k/v tensors cut inside a head group",
        None if cut is None else ("holds" if cut > 0 else "inconclusive"))

    w2 = g(11, "seed_scenario_warmup_ramps_in_stage2")
    add(11, "under SequentialLR(OneCycleLR, StepLR) the warmup applies to the first stage only", "stage 2 gets 0 warmup steps",
        None if w2 is None else f"{w2} warmup ramps in stage 2", None if w2 is None else ("holds" if w2 == 0 else "refuted"))

    add(12, "checkpoint every 50 steps → fragmentation 0.42, OOM 37 %; every 200 → 0.18, 4 %", "0.42 / 0.18",
        g(12, "gap_ratio_configured"), ("holds" if (g(12, "gap_ratio_configured") or 0) > (g(12, "gap_ratio_reference") or 0) else "refuted") if g(12, "gap_ratio_configured") is not None else "needs GPU")

    extra = g(13, "grad_no_backward: extra all-reduces")
    add(13, "evaluating with gradients enabled makes DDP trigger all-reduce", "all-reduce triggered", None if extra is None else f"{extra:.0f} extra all-reduces (forward only)",
        None if extra is None else ("holds" if extra > 0 else "refuted"))
    err = g(13, "backward: error")
    add(13, "eval backward without no_sync corrupts the reducer state", "reducer error",
        None if g(13, "scenario") is None else (err or "no error"), None if g(13, "scenario") is None else ("holds" if err else "refuted"))
    return pd.DataFrame(rows)
