"""Speculative decoding, measured: transformers assisted generation on the local SmolLM2.

Two drafters: prompt-lookup decoding (n-gram matches from the prompt, no draft model) and a
layer-truncated copy of the target (its first ``draft_layers`` decoder layers + the shared
embeddings/head). For each prompt the target generates greedily with and without speculation;
the check is that the token ids are identical.

Acceptance is read from the target's own forward calls (a forward pre-hook sees each call's
``cache_position``): a call that starts at cache length c_i and verifies L_i − 1 candidates is
followed by a call starting at c_{i+1}, so it accepted c_{i+1} − c_i − 1 of them. From the
acceptance rate α and the mean number of candidates γ, Leviathan et al. (2023, eq. 1/Thm 3.8)
predict (1 − α^{γ+1}) / ((1 − α)(γc + 1)) as the speedup, with c the draft's cost per token relative
to the target's (≈ 0 for prompt lookup; timed for the truncated draft). The formula assumes that
verifying γ+1 tokens costs one target step — true for memory-bound GPU decoding, not for a CPU,
so the predicted vs measured ratio is itself a finding.
"""

from __future__ import annotations

import copy
import os
import statistics
import time
from typing import Any

from nbkit.errors import UsageError
from nbkit.zero.prompts import NEUTRAL_PROMPTS


class _CallLog:
    """Forward pre-hook recording (cache start, input length, time) of every target call."""

    def __init__(self, module):
        self.calls: list[tuple[int, int]] = []
        self.times: list[float] = []
        self._t = None
        self.h1 = module.register_forward_pre_hook(self._pre, with_kwargs=True)
        self.h2 = module.register_forward_hook(self._post)

    def _pre(self, _m, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        # transformers 5 passes position_ids (and a ``cache``); the first position is the cache length.
        pos = kwargs.get("position_ids")
        if pos is not None and pos.numel():
            start = int(pos.reshape(-1)[0])
        else:
            cache = kwargs.get("cache", kwargs.get("past_key_values"))
            start = int(cache.get_seq_length()) if cache is not None else 0
        self.calls.append((start, int(ids.shape[1]) if ids is not None else 0))
        self._t = time.perf_counter()

    def _post(self, _m, _a, _o):
        if self._t is not None:
            self.times.append(time.perf_counter() - self._t)

    def close(self):
        self.h1.remove()
        self.h2.remove()


def _decoder_layers(model) -> tuple[Any, str]:
    """(parent module, attribute) of the target's stack of decoder layers: the one ModuleList as long
    as ``num_hidden_layers`` (``model.layers`` in Llama/Qwen/Mistral, ``transformer.h`` in GPT-2)."""
    import torch

    total = model.config.num_hidden_layers
    for module in model.modules():
        for attr, child in module.named_children():
            if isinstance(child, torch.nn.ModuleList) and len(child) == total:
                return module, attr
    raise UsageError(
        f"speculative decoding: {type(model).__name__} has no list of {total} decoder layers to truncate "
        "into a draft; use methods=('prompt_lookup',)"
    )


def truncated_draft(model, n_layers: int):
    """A draft model: the target's first ``n_layers`` decoder layers, embeddings and head (copied)."""
    total = model.config.num_hidden_layers
    if not 1 <= n_layers < total:
        raise UsageError(
            f"SpecDecConfig.draft_layers: expected 1..{total - 1} for a {total}-layer target, got {n_layers}"
        )
    draft = copy.deepcopy(model)
    parent, attr = _decoder_layers(draft)
    setattr(parent, attr, getattr(parent, attr)[:n_layers])
    draft.config.num_hidden_layers = n_layers
    if getattr(draft.config, "layer_types", None):
        draft.config.layer_types = draft.config.layer_types[:n_layers]
    return draft.eval()


def leviathan_speedup(alpha: float, gamma: float, c: float) -> float:
    """Expected walltime improvement factor (Leviathan et al. 2023): (1 − α^{γ+1}) / ((1 − α)(γc + 1))."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"acceptance rate must be in [0, 1], got {alpha}")
    expected_tokens = gamma + 1 if alpha >= 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)
    return expected_tokens / (gamma * c + 1)


def _generate(model, inputs, **kw):
    import torch

    with torch.no_grad():
        t = time.perf_counter()
        out = model.generate(**inputs, do_sample=False, **kw)
        return out, time.perf_counter() - t


def _counts(calls: list[tuple[int, int]], n_prompt: int, total_len: int) -> dict[str, int]:
    """Verification rounds, proposed and accepted candidates, and fallback rounds (first candidate
    rejected: the target's own token is used) from the target's calls (cache start, input length)."""
    proposed = accepted = fallback = rounds = 0
    for j, (start, length) in enumerate(calls):
        cands = max(length - (n_prompt - start) if j == 0 else length - 1, 0)
        nxt = calls[j + 1][0] if j + 1 < len(calls) else total_len - 1
        acc = max(0, min(cands, nxt - (start + length - cands)))
        if cands:
            rounds += 1
            proposed += cands
            accepted += acc
            fallback += acc == 0
    return {"rounds": rounds, "proposed": proposed, "accepted": accepted, "fallback_rounds": fallback}


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def _prompt_text(tok, prompt: str) -> str:
    if getattr(tok, "chat_template", None):
        return tok.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
    return prompt


def _request(model, draft, cfg, inputs, n_prompt: int) -> dict[str, Any]:
    """One request: greedy, then each method, ``cfg.timings`` times in turn (interleaved, so a load
    change hits every arm alike); token counts from the first turn (greedy decoding repeats itself)."""
    import torch

    common = {"max_new_tokens": cfg.max_new_tokens, "min_new_tokens": cfg.max_new_tokens}
    seconds: dict[str, list[float]] = {"greedy": [], **{m: [] for m in cfg.methods}}
    first: dict[str, Any] = {}
    for turn in range(cfg.timings):
        for arm in seconds:
            kw = dict(common)
            if arm == "prompt_lookup":
                kw["prompt_lookup_num_tokens"] = cfg.prompt_lookup_num_tokens
            elif arm == "truncated_draft":
                kw["assistant_model"] = draft
            log = _CallLog(model)
            dlog = _CallLog(draft) if arm == "truncated_draft" else None
            try:
                out, secs = _generate(model, inputs, **kw)
            finally:
                log.close()
                if dlog:
                    dlog.close()
            seconds[arm].append(secs)
            if turn == 0:
                first[arm] = (out, log, dlog)
    base, base_log, _ = first["greedy"]
    times = base_log.times[1:]
    target_step_s = sorted(times)[len(times) // 2] if times else None
    rows = {}
    for method in cfg.methods:
        spec, log, dlog = first[method]
        counts = _counts(log.calls, n_prompt, spec.shape[1])
        alpha = counts["accepted"] / counts["proposed"] if counts["proposed"] else 0.0
        gamma = counts["proposed"] / counts["rounds"] if counts["rounds"] else 0.0
        c = 0.0
        if dlog and dlog.times and target_step_s:
            c = sorted(dlog.times)[len(dlog.times) // 2] / target_step_s
        new_spec, new_base = spec.shape[1] - n_prompt, base.shape[1] - n_prompt
        # per turn: the speculative run's tokens/s over the greedy run's of the same turn
        ratios = [
            (new_spec / s) / (new_base / b) for s, b in zip(seconds[method], seconds["greedy"], strict=True)
        ]
        rows[method] = {
            "new_tokens": int(new_spec),
            "tok_s_baseline": new_base / _median(seconds["greedy"]),
            "tok_s_speculative": new_spec / _median(seconds[method]),
            "speedup_measured": _median(ratios),
            "speedup_turns": ratios,
            "acceptance_rate": alpha,
            "mean_candidates": gamma,
            "draft_cost_ratio": c,
            "speedup_predicted": leviathan_speedup(alpha, gamma, c) if counts["rounds"] else 1.0,
            "fallback_rate": counts["fallback_rounds"] / counts["rounds"] if counts["rounds"] else None,
            **counts,
            "target_calls_baseline": new_base,
            "target_calls_speculative": len(log.calls),
            "identical": bool(spec.shape == base.shape and torch.equal(spec, base)),
        }
    return rows


def _summary(g) -> dict[str, Any]:
    """One method over its requests: throughputs (means of the per-request medians), pooled acceptance
    and fallback, and the per-request figures each claim takes as its unit."""
    proposed, rounds = int(g["proposed"].sum()), int(g["rounds"].sum())
    return {
        "tok_s_baseline": float(g["tok_s_baseline"].mean()),
        "tok_s_speculative": float(g["tok_s_speculative"].mean()),
        "speedup_measured": float(g["speedup_measured"].mean()),
        "speedup_predicted": float(g["speedup_predicted"].mean()),
        "acceptance_rate": float(g["accepted"].sum() / proposed) if proposed else 0.0,
        "fallback_rate": float(g["fallback_rounds"].sum() / rounds) if rounds else None,
        "rounds": rounds,
        "fallback_rounds": int(g["fallback_rounds"].sum()),
        "proposed": proposed,
        "accepted": int(g["accepted"].sum()),
        "new_tokens": int(g["new_tokens"].sum()),
        "target_calls_speculative": int(g["target_calls_speculative"].sum()),
        "all_identical": bool(g["identical"].all()),
        "n_prompts": int(len(g)),
        "speedups": [float(x) for x in g["speedup_measured"]],
        "rounds_per_prompt": [int(x) for x in g["rounds"]],
        "fallback_rounds_per_prompt": [int(x) for x in g["fallback_rounds"]],
    }


def _so_far(rows: list[dict[str, Any]], device, model, cfg, load_start: float) -> dict[str, Any]:
    import pandas as pd

    return {
        "summary": {method: _summary(g) for method, g in pd.DataFrame(rows).groupby("method")},
        "device": str(device),
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
        "loadavg": (load_start, os.getloadavg()[0]),
        "timings": cfg.timings,
    }


def measure_specdec(cfg, device, model, tok, live=None, stop=None) -> dict[str, Any]:
    """For each request (prompt): greedy and each speculative method, timed ``cfg.timings`` times in
    turn; acceptance, rounds and fallbacks from the target's own calls; the load average at the start
    and the end (timings on a loaded machine are loaded figures). After each request ``stop(so_far)``
    (the same keys as the result, for the requests done) may end the loop.

    Per row: ``target_calls_speculative`` (forward passes of the target) against ``new_tokens``,
    ``rounds`` (verification calls with candidates) and ``fallback_rounds`` (rounds whose first
    candidate was rejected, so the target's own token was used) — the counts behind the rates.
    """
    import pandas as pd
    import plotly.graph_objects as go
    import torch
    from tqdm.auto import tqdm

    torch.manual_seed(cfg.seed)
    model.generation_config.pad_token_id = (
        tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    )
    prompts = list(cfg.prompts) or list(NEUTRAL_PROMPTS[: cfg.n_prompts])
    draft = truncated_draft(model, cfg.draft_layers) if "truncated_draft" in cfg.methods else None
    if draft is not None:
        draft.generation_config.num_assistant_tokens = cfg.num_assistant_tokens
        draft.generation_config.num_assistant_tokens_schedule = "constant"
        draft.generation_config.assistant_confidence_threshold = 0.0
    # Warm up once so the first timed call does not pay one-off allocation costs.
    _generate(model, tok("warm up", return_tensors="pt").to(device), max_new_tokens=4)
    load_start = os.getloadavg()[0]
    rows = []
    for i, prompt in enumerate(tqdm(prompts, desc="speculative decoding (requests)", leave=False)):
        inputs = tok(_prompt_text(tok, prompt), return_tensors="pt").to(device)
        for method, row in _request(model, draft, cfg, inputs, inputs["input_ids"].shape[1]).items():
            rows.append({"prompt": i, "method": method, **row})
            if live is not None:
                live.add(f"{method}: measured", i, row["speedup_measured"])
                live.add(f"{method}: predicted", i, row["speedup_predicted"])
                live.flush()
        if stop is not None and stop(_so_far(rows, device, model, cfg, load_start)):
            break
    table = pd.DataFrame(rows)
    summary = {method: _summary(g) for method, g in table.groupby("method")}
    fig = go.Figure()
    for method, s in summary.items():
        fig.add_bar(
            x=["measured", "Leviathan prediction"],
            y=[s["speedup_measured"], s["speedup_predicted"]],
            name=method,
        )
    fig.add_hline(y=1.0, line_dash="dot")
    fig.update_layout(
        title=f"Speculative decoding speedup on {device.type} ({type(model).__name__} target)",
        yaxis_title="× tokens/s vs greedy",
        barmode="group",
    )
    return {
        "table": table.drop(columns=["speedup_turns"]),
        "figure": fig,
        **_so_far(rows, device, model, cfg, load_start),
    }
