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
import time
from typing import Any

from nbkit.errors import UsageError

DEFAULT_PROMPTS = (
    "Rewrite this Python function with type hints, keeping every line otherwise identical:\n"
    "def moving_average(values, window):\n    result = []\n    for i in range(len(values) - window + 1):\n"
    "        chunk = values[i:i + window]\n        result.append(sum(chunk) / window)\n    return result\n",
    "Repeat the following list exactly, then add one more item in the same style:\n"
    "- The cat sat on the mat.\n- The dog sat on the log.\n- The frog sat on the bog.\n- The goat sat on "
    "the boat.\n",
    "Explain in two sentences what gradient checkpointing trades off during training.",
)


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


def measure_specdec(cfg, device, model, tok, live=None) -> dict[str, Any]:
    """For each prompt: greedy baseline, then each speculative method; acceptance from the target's calls.

    Per row: ``target_calls_speculative`` (forward passes of the target) against ``new_tokens``,
    ``rounds`` (verification calls with candidates) and ``fallback_rounds`` (rounds whose first
    candidate was rejected, so the target's own token was used) — the counts behind the rates.
    """
    import torch
    from tqdm.auto import tqdm

    torch.manual_seed(cfg.seed)
    model.generation_config.pad_token_id = (
        tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    )
    prompts = list(cfg.prompts) or list(DEFAULT_PROMPTS[: cfg.n_prompts])
    draft = truncated_draft(model, cfg.draft_layers) if "truncated_draft" in cfg.methods else None
    if draft is not None:
        draft.generation_config.num_assistant_tokens = cfg.num_assistant_tokens
        draft.generation_config.num_assistant_tokens_schedule = "constant"
        draft.generation_config.assistant_confidence_threshold = 0.0
    rows = []
    common = {"max_new_tokens": cfg.max_new_tokens, "min_new_tokens": cfg.max_new_tokens}
    # Warm up once so the first timed call does not pay one-off allocation costs.
    _generate(model, tok("warm up", return_tensors="pt").to(device), max_new_tokens=4)
    for i, prompt in enumerate(tqdm(prompts, desc="speculative decoding", leave=False)):
        text = (
            tok.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
            if getattr(tok, "chat_template", None)
            else prompt
        )
        inputs = tok(text, return_tensors="pt").to(device)
        n_prompt = inputs["input_ids"].shape[1]
        log = _CallLog(model)
        try:
            base, base_s = _generate(model, inputs, **common)
        finally:
            log.close()
        target_step_s = sorted(log.times[1:])[len(log.times[1:]) // 2] if len(log.times) > 1 else None
        new_base = base.shape[1] - n_prompt
        for method in cfg.methods:
            kw = dict(common)
            if method == "prompt_lookup":
                kw["prompt_lookup_num_tokens"] = cfg.prompt_lookup_num_tokens
            else:
                kw["assistant_model"] = draft
            log = _CallLog(model)
            dlog = _CallLog(draft) if method == "truncated_draft" else None
            try:
                spec, spec_s = _generate(model, inputs, **kw)
            finally:
                log.close()
                if dlog:
                    dlog.close()
            calls = log.calls
            proposed = accepted = fallback = rounds = 0
            for j, (start, length) in enumerate(calls):
                cands = length - (n_prompt - start) if j == 0 else length - 1
                cands = max(cands, 0)
                if j + 1 < len(calls):
                    acc = max(0, min(cands, calls[j + 1][0] - (start + length - cands)))
                else:
                    acc = max(0, min(cands, spec.shape[1] - (start + length - cands) - 1))
                if cands:
                    rounds += 1
                    proposed += cands
                    accepted += acc
                    fallback += acc == 0
            alpha = accepted / proposed if proposed else 0.0
            gamma = proposed / rounds if rounds else 0.0
            if method == "truncated_draft" and dlog and dlog.times and target_step_s:
                c = (sorted(dlog.times)[len(dlog.times) // 2]) / target_step_s
            else:
                c = 0.0
            predicted = leviathan_speedup(alpha, gamma, c) if rounds else 1.0
            new_spec = spec.shape[1] - n_prompt
            row = {
                "prompt": i,
                "method": method,
                "new_tokens": int(new_spec),
                "tok_s_baseline": new_base / base_s,
                "tok_s_speculative": new_spec / spec_s,
                "speedup_measured": (new_spec / spec_s) / (new_base / base_s),
                "acceptance_rate": alpha,
                "mean_candidates": gamma,
                "draft_cost_ratio": c,
                "speedup_predicted": predicted,
                "fallback_rate": fallback / rounds if rounds else None,
                "rounds": rounds,
                "fallback_rounds": fallback,
                "proposed": proposed,
                "accepted": accepted,
                "target_calls_baseline": new_base,
                "target_calls_speculative": len(calls),
                "identical": bool(spec.shape == base.shape and torch.equal(spec, base)),
            }
            rows.append(row)
            if live is not None:
                live.add(f"{method}: measured", i, row["speedup_measured"])
                live.add(f"{method}: predicted", i, row["speedup_predicted"])
                live.flush()
    import pandas as pd

    table = pd.DataFrame(rows)
    summary = {}
    for method, g in table.groupby("method"):
        summary[method] = {
            "tok_s_baseline": float(g["tok_s_baseline"].mean()),
            "tok_s_speculative": float(g["tok_s_speculative"].mean()),
            "speedup_measured": float(g["speedup_measured"].mean()),
            "speedup_predicted": float(g["speedup_predicted"].mean()),
            # pooled over prompts: accepted ÷ proposed candidates
            "acceptance_rate": float(g["accepted"].sum() / g["proposed"].sum())
            if g["proposed"].sum()
            else 0.0,
            "fallback_rate": float(g["fallback_rounds"].sum() / g["rounds"].sum())
            if g["rounds"].sum()
            else None,
            "rounds": int(g["rounds"].sum()),
            "fallback_rounds": int(g["fallback_rounds"].sum()),
            "proposed": int(g["proposed"].sum()),
            "accepted": int(g["accepted"].sum()),
            "new_tokens": int(g["new_tokens"].sum()),
            "target_calls_speculative": int(g["target_calls_speculative"].sum()),
            "all_identical": bool(g["identical"].all()),
            "n_prompts": int(len(g)),
            "speedups": [float(x) for x in g["speedup_measured"]],
            # per prompt (the independent unit: one prompt's rounds share its text), prompts with rounds only
            "fallback_rates": [
                float(f / r) for f, r in zip(g["fallback_rounds"], g["rounds"], strict=True) if r
            ],
        }
    import plotly.graph_objects as go

    fig = go.Figure()
    for method, s in summary.items():
        fig.add_bar(
            x=["measured", "Leviathan prediction"],
            y=[s["speedup_measured"], s["speedup_predicted"]],
            name=method,
        )
    fig.add_hline(y=1.0, line_dash="dot")
    fig.update_layout(
        title=f"Speculative decoding speedup on {device.type} (SmolLM2-135M target)",
        yaxis_title="× tokens/s vs greedy",
        barmode="group",
    )
    return {"table": table, "summary": summary, "figure": fig, "device": str(device)}
