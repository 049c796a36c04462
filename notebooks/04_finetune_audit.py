# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Fine-tune audit — the coupling checks of a LoRA/SFT run
#
# Diagnoses the thirteen places where a LoRA/SFT run silently goes wrong — adapters, tokenizer ↔
# labels, attention kernels, gradient accumulation, dtypes, data schema, loss masks, sampling
# weights, ZeRO-3 layout, LR schedulers, allocator fragmentation, DDP evaluation — on the real
# **SmolLM2-135M-Instruct** (Llama, GQA 9/3 heads, tied embeddings, pad = eos = 2), before GPU hours
# are spent. Each section is a panel: change its controls and press Run; its default run executes
# headless too. Every check returns a finding (pass / warn / fail / needs GPU) with the numbers
# measured in this run. The same checks run from the shell: `nbkit audit CONFIG.yaml`.
#
# The claims come from a field note on DeepSeek fine-tuning ("KISS"); every number in it is treated
# as a claim and re-measured — the table at the end gives the verdicts.

# %% tags=["parameters"]
SMOKE = False
DEVICE = "auto"
SEED = 0
MODEL = "smollm2"  # "smollm2" (real model) or "tiny" (random GQA Llama, seconds)
CONFIG = "good_smollm2.yaml"  # under nbkit/audit/examples/, or a path
BROKEN_CONFIG = "broken.yaml"
KISS_MODEL = "smollm2"  # model of check 1's training (SMOKE trains the tiny model)
KISS_BUDGET_STEPS = 30  # training steps per LoRA variant in check 1 (SmolLM2: ~13 min for both on 2 loaded cores)
KISS_LR = 0.001
THREADS = 1  # torch intra-op threads; 1 is fastest on a shared CPU (7× here under load), 0 keeps torch's default

# %%
import dataclasses
from pathlib import Path

import pandas as pd
from IPython.display import HTML, display

import nbkit
from nbkit.audit.claims import claims_table
from nbkit.audit.config import load_config
from nbkit.audit.findings import findings_frame
from nbkit.audit.panels import check_panel
from nbkit.audit.runner import AuditContext, Sizes, run_audit
from nbkit.audit.sft import EXAMPLES_DIR
from nbkit.device import device_report, pick_device

import torch

if THREADS > 0:
    torch.set_num_threads(THREADS)
device = pick_device(DEVICE)
report = device_report()
nbkit.record("device", str(device))


def config_path(name):
    p = Path(name)
    return p if p.is_file() else EXAMPLES_DIR / name


config = load_config(config_path(CONFIG))
config.model.name = MODEL
config.model.seed = SEED
sizes = Sizes.smoke() if SMOKE else Sizes(noise_params="last_layer" if MODEL == "smollm2" else "all")
ctx = AuditContext(config, device, sizes, progress=True)
model, tokenizer = ctx.model_and_tokenizer()
nbkit.record("model", {"name": MODEL, "params": sum(p.numel() for p in model.parameters()), "heads": model.config.num_attention_heads,
                       "kv_heads": model.config.num_key_value_heads, "pad_id": tokenizer.pad_token_id, "eos_id": tokenizer.eos_token_id})
findings = {}
pd.DataFrame([{k: v for k, v in report.items() if k != "gpus"}])


# %%
def keep(f):
    """Keep a finding for the summary and the claims table."""
    findings[f.check_id] = f
    return f


# %% [markdown]
# ## 1 · KISS versus an over-parameterised LoRA
#
# The seed says q/v rank-8 adapters (0.12 % trainable) converge in 890 steps where q/v/o rank-64
# (0.87 %) needs 2140 and 42.3 GB instead of 28.1 GB. Both variants are trained here on the same
# small SFT task with the same budget; trainable share comes from PEFT's own counter, peak memory
# from the device (CUDA allocator peak, or tensor bytes of one optimiser step on CPU), steps from
# the validation loss reaching the target. The budget is `KISS_BUDGET_STEPS`.

# %%
kiss_ctx = ctx
kiss_model_name = "tiny" if SMOKE else KISS_MODEL
if kiss_model_name != MODEL:
    kiss_cfg = config.model_copy(deep=True)
    kiss_cfg.model.name = kiss_model_name
    kiss_ctx = AuditContext(kiss_cfg, device, sizes, progress=True)
kiss_defaults = dict(budget_steps=12, lr=0.01, target_ratio=0.9) if SMOKE else dict(budget_steps=KISS_BUDGET_STEPS, lr=KISS_LR)
panel = check_panel(kiss_ctx, 1, **kiss_defaults)
panel.display()
f1 = keep(panel.run())
print(f"check 1 trained the {kiss_model_name} model")

# %% [markdown]
# ## 2 · LoRA shape binding
#
# For every adapted module: A is (r, in), B is (out, r) against the base weight W0 (out, in) — the
# GQA k/v projections are 576 → 192 — the scaling PEFT applies, and the merge identity
# W_merged = W0 + s·B·A with random A and B. The seed's two shape asserts are applied literally.

# %%
panel = check_panel(ctx, 2)
panel.display()
keep(panel.run())

# %% [markdown]
# ## 3 · Tokenizer ↔ label space
#
# Character-span NER labels (English and Chinese) projected onto tokens through the tokenizer's
# offsets as BIO tags, then projected back: label coverage and exact boundary F1 per language.

# %%
panel = check_panel(ctx, 3)
panel.display()
keep(panel.run())

# %% [markdown]
# ## 4 · Attention backend and context
#
# Which SDPA kernel the model's forward actually dispatches to (read from the profiler), and causal
# attention throughput versus length per backend with the model's head layout on this device.
# The seed's FlashAttention-2 tile sizes and 92.4 % utilisation are GPU claims.

# %%
panel = check_panel(ctx, 4, max_length=256 if SMOKE else 2048)
panel.display()
keep(panel.run())

# %% [markdown]
# ## 5 · Gradient accumulation
#
# G micro-batches against one large batch: equal gradients only when the token losses are summed
# and divided by the whole batch's token count (transformers' `num_items_in_batch`). Then the
# seed's rule "scale accumulation by √L": the gradient-noise variance of real text is measured at
# several sequence lengths and its power law decides between √L and linear.

# %%
panel = check_panel(ctx, 5, micro_batch_size=2 if SMOKE else 4, grad_accumulation=2 if SMOKE else 4)
panel.display()
keep(panel.run())

# %% [markdown]
# ## 6 · dtype transitions under bf16 autocast
#
# Forward hooks record every module's input/output dtype and the KV-cache dtypes; the seed's op
# claims (`baddbmm`, `index_add_`, `index_copy_`) run on this torch build.

# %%
panel = check_panel(ctx, 6)
panel.display()
keep(panel.run())

# %% [markdown]
# ## 7 · JSONL ↔ Pydantic schema
#
# The data file streamed line by line against the schema, lax and strict; every line is either
# valid or an issue with its line number. Try `sft_broken.jsonl` or the schema module that does not import.

# %%
panel = check_panel(ctx, 7)
panel.display()
keep(panel.run())

# %% [markdown]
# ## 8 · Prompt template ↔ loss mask
#
# `len(input_ids) == len(labels)`, the unmasked labels decode exactly to the target text, and the
# end-of-turn token is trained although pad == eos. Tick `mask_pad_labels` to see the common
# collator line `labels[labels == pad] = -100` silently mask it.

# %%
panel = check_panel(ctx, 8)
panel.display()
keep(panel.run())

# %% [markdown]
# ## 9 · Sampling weights ↔ reward distribution
#
# w ∝ exp(β·r + γ·log p_ref) with the model's own response log-likelihood as reward: KL between the
# weighted and uniform reward distributions, kurtosis, CI shrink, over β and γ, against the seed's
# thresholds (KL > 0.18, shrink > 42 %).

# %%
panel = check_panel(ctx, 9)
panel.display()
keep(panel.run())

# %% [markdown]
# ## 10 · ZeRO-3 ↔ GQA layout
#
# DeepSpeed's persistence and partition rules applied to the real parameter shapes: what stays
# whole on every rank, what each rank holds, and whether slices cut through KV head groups.

# %%
panel = check_panel(ctx, 10, world_size=8)
panel.display()
keep(panel.run())

# %% [markdown]
# ## 11 · Chained LR schedulers
#
# The learning rate actually applied per step by real torch schedulers, against each stage run
# alone; warmup lost or repeated; resume from a checkpoint with and without the scheduler state.

# %%
panel = check_panel(ctx, 11)
panel.display()
keep(panel.run())

# %% [markdown]
# ## 12 · Checkpoint interval ↔ fragmentation
#
# Needs CUDA's caching allocator (reserved vs allocated, inactive splits, retries). On CPU the
# finding says so and reports no number.

# %%
panel = check_panel(ctx, 12)
panel.display()
keep(panel.run())

# %% [markdown]
# ## 13 · Evaluation ↔ DDP synchronisation
#
# Two gloo ranks on 127.0.0.1 (subprocesses with a timeout) train a tiny Llama with a value head and
# evaluate between steps in five ways; a communication hook counts all-reduces and reducer errors
# are caught. The model size does not change DDP's reducer logic.

# %%
panel = check_panel(ctx, 13)
panel.display()
keep(panel.run())

# %% [markdown]
# ## The audit of this configuration, and of a deliberately broken one
#
# `broken.yaml` hides one fault per section (unmatched LoRA target and a rank above the k/v width,
# a JSONL file with broken lines and a non-UTF-8 byte, a truncating template that masks pad = eos,
# per-micro-batch loss means, stacked warmups and a resume without scheduler state, a 1e9
# persistence threshold, β = 8, a diagnostic eval backward outside `no_sync`). It runs on the tiny
# model: the faults are in the configuration, not in the model size.

# %%
good = [findings[i] for i in sorted(findings)]
display(findings_frame(good))
broken_cfg = load_config(config_path(BROKEN_CONFIG))
broken_cfg.model.seed = SEED
broken_checks = [2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13]
broken = run_audit(broken_cfg, broken_checks, device=device, sizes=Sizes.smoke() if SMOKE else Sizes(), progress=True)
display(HTML("".join(f.card_html() for f in broken)))
nbkit.record("findings", [f.to_dict(with_table=False) for f in good])
nbkit.record("findings_broken", [f.to_dict(with_table=False) for f in broken])
nbkit.record("status_counts", {"good": {s: sum(f.status == s for f in good) for s in ("pass", "warn", "fail", "error", "needs_gpu", "skipped")},
                               "broken": {s: sum(f.status == s for f in broken) for s in ("pass", "warn", "fail", "error", "needs_gpu", "skipped")}})

# %% [markdown]
# ## Claims table
#
# Each seed claim, the value measured in this run, and a verdict computed from it.

# %%
claims = claims_table(good, broken, on_cuda=device.type == "cuda")
nbkit.record("claims", claims)
claims
