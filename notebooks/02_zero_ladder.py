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
# # ZeRO ladder — measured per-rank memory, loss curves, silent failures, fragmentation, speculative decoding
#
# Diagnoses where training memory goes at ZeRO stages 0–3 (± offload). Real DeepSpeed ranks (gloo on
# CPU, nccl on CUDA) train a Llama-family model for a few steps at every stage; each rank reads its
# **measured** bytes out of DeepSpeed's own partition buffers, and the notebook holds them against
# the ZeRO paper's formula and DeepSpeed's own estimator. Then: the field notes' `ds_config` key by
# key, a memory monitor that replaces the `nvidia-smi` + mail loop, the "silent failure" checks
# (replica divergence, checkpoint round trip, a rank dying mid-run, CPU headroom before offload),
# allocator fragmentation (CUDA only — said plainly on CPU) and speculative decoding on SmolLM2.
#
# Your own cluster plan: `MODEL` is your model (a Hugging Face model directory, a bare `config.json`
# or a hub id; empty = Llama-2-7B), counted on the meta device for the memory model and run by the
# ladder at `HIDDEN_SIZE` × `NUM_LAYERS`; `DS_CONFIG` is your `ds_config.json` — its ZeRO stage,
# offload and precision drive the memory model, and it is explained key by key against
# `WORLD_SIZE` GPUs (`GPUS_PER_NODE` per node). Empty = the field notes' config and launch line.
# This machine runs at most 2 CPU ranks (or one per local GPU) of the ladder, whatever `WORLD_SIZE` says.
#
# Every number below is computed by this run; the claims table at the end compares them with the
# field notes' figures — a check that fails shows there as "refuted", it does not stop the notebook.
# Run top to bottom; `nbkit run 02 --smoke` executes it headless.

# %% tags=["parameters"]
SMOKE = False
DEVICE = "auto"
SEED = 0
WORLD_SIZE = 8
GPUS_PER_NODE = 8
PRECISION = "bf16"
LADDER_STEPS = 4
HIDDEN_SIZE = 256
NUM_LAYERS = 8
SPEC_PROMPTS = 3
SPEC_NEW_TOKENS = 32
SPEC_MODEL = ""  # speculative decoding's target: empty for SmolLM2, or a causal-LM dir (weights) or hub id
MONITOR_LIMIT_MIB = 450.0
MODEL = ""
DS_CONFIG = ""
CROSSOVER_SIZES = ""  # a size sweep, e.g. "256x8,512x8,1024x8" (minutes per size on CPU); empty skips it

# %%
import nbkit

nbkit.require("zero")  # this notebook needs pip install 'nbkit[zero]': one line here if anything is missing

import pandas as pd
from IPython.display import display

from nbkit.claims import claims_frame
from nbkit.zero import claims as zero_claims
from nbkit.zero import experiments, panels

# What the experiments share: the device (resolved once), your plan of WORLD_SIZE GPUs and the
# ranks this machine runs for it, the speculative-decoding model once loaded.
ctx = experiments.ZeroContext(DEVICE, world_size=WORLD_SIZE)
nbkit.record("device", str(ctx.torch_device))
ctx.device_report()

# %% [markdown]
# ## 1. The memory model: paper formula vs DeepSpeed's estimator
#
# Llama-2-7B's architecture is built locally from a `LlamaConfig` on the **meta device** (no
# weights, no download) to count Ψ exactly. The paper counts mixed-precision Adam as 2Ψ + 2Ψ + 12Ψ
# per device and partitions the terms stage by stage; DeepSpeed's estimators count 18Ψ/N on the
# GPU for stage 2/3, add the largest layer at stage 3, and multiply **CPU** memory by an
# `additional_buffer_factor` of 1.5 (their printouts label GiB figures "GB"). Change the model,
# N, precision or offload in the panel.

# %%
mem_panel = panels.panel(
    "memory",
    ctx,
    smoke=SMOKE,
    model_path=MODEL,
    ds_config=DS_CONFIG,
    world_size=WORLD_SIZE,
    gpus_per_node=GPUS_PER_NODE,
)
mem_panel.display()
mem = mem_panel.run()
nbkit.record("memory_model_params", mem.metrics.n_params)
nbkit.record("memory_model", mem.table.round(4))
nbkit.record("memory_plan", mem.metrics.plan)
if DS_CONFIG:
    print(experiments.plan_summary(mem.metrics))
mem.table.round(2)

# %% [markdown]
# ## 2. The field notes' `ds_config`, key by key
#
# Every key, what it does, and whether it acts at all in that config. Its launch line passes
# `--per_device_train_batch_size 2 --gradient_accumulation_steps 4` on 8 GPUs, so the batch
# identity `train_batch_size = micro × accum × world` is checked against those values.

# %%
# empty DS_CONFIG: the field notes' config with its own 8-GPU launch line
ds = experiments.run("ds_config", ctx, smoke=SMOKE, ds_config=DS_CONFIG, world_size=WORLD_SIZE)
nbkit.record("ds_config_findings", ds.metrics.findings)
for finding in ds.metrics.findings:
    print("•", finding)
with pd.option_context("display.max_colwidth", 120):
    display(ds.table)

# %% [markdown]
# ## 3. The ladder: real ranks, measured bytes
#
# One launch starts `WORLD_SIZE` rank processes; inside them every rung (stage 0, 1, 2, 3, and
# stage 3 again at DeepSpeed's default `stage3_param_persistence_threshold` of 1e5) builds a fresh
# tiny Llama and trains it on the same data. Each rank reports the bytes it holds — read from
# `bit16_groups_flat` / `ds_tensor` (params), the gradient partitions and `param.grad` just before
# the end-of-backward reduction (grads), `single_partition_of_fp32_groups` /
# `fp32_partitioned_groups_flat` + `optimizer.state` (optimizer states) — plus the loss of every
# step, a checkpoint save → load round trip, and a shared-batch eval loss and weight checksum.
# A rank that fails is named with its traceback; a hang is killed at the timeout.

# %%
# One GPU per rank (ctx.ranks); with fewer than two GPUs the ranks run on CPU (gloo).
# Under SMOKE the ladder keeps its smoke size (LADDER_STEPS, HIDDEN_SIZE, NUM_LAYERS apply to a full run).
lad_panel = panels.panel(
    "ladder",
    ctx,
    smoke=SMOKE,
    world_size=ctx.ranks,
    precision=PRECISION,
    seed=SEED,
    device=DEVICE,
    monitor_limit_mib=MONITOR_LIMIT_MIB,
    model_path=MODEL,
    **experiments.unless_smoke(
        SMOKE, steps=LADDER_STEPS, hidden_size=HIDDEN_SIZE, num_hidden_layers=NUM_LAYERS
    ),
)
lad_panel.display()
lad = lad_panel.run()
nbkit.record("ladder", lad.table.to_dict("records"))
nbkit.record("ladder_metrics", lad.metrics.for_record())
print(f"ladder: {len(lad.table)} rank-rungs on {lad.metrics.ranks_device} in {lad.metrics.wall_s:.1f} s")

# %%
lad.table[
    [
        "rung",
        "rank",
        "params_bytes",
        "grads_bytes",
        "optimizer_bytes",
        "buffers_bytes",
        "formula_bytes",
        "ratio",
        "optimizer_class",
        "peak_bytes",
        "step_s_median",
    ]
]

# %% [markdown]
# ### Where each rank's peak goes
#
# Per rank and stage: the runtime baseline before the model exists, parameters, gradients,
# optimizer states (DeepSpeed's buffers), communication buckets, the activations autograd saved, and
# what is left unexplained (temporaries, allocator slack) — beside a prediction from the model config
# and ds_config alone (`nbkit.zero.peak`: the larger of the end of backward and the optimizer step,
# whose fp32 gradient copies are the part DeepSpeed's estimator leaves out).
#
# **Why small models look as if ZeRO does nothing (or costs memory):** ZeRO divides only the model
# states (16 bytes per parameter), while every rank also carries a fixed runtime (the waterfall's
# runtime-baseline row: Python, torch, DeepSpeed, gloo) and, on GPUs, DeepSpeed's default 5e8-element
# buckets (1 GB) — so
# until the states outweigh those, every stage's peak looks the same. The default size is chosen so
# they do; the sweep below (`CROSSOVER_SIZES`) shows where each stage starts to pay. On 2 ranks
# ZeRO-3 can end above ZeRO-2 (the figure above says whether it did in this run): it saves only Ψ/N bytes
# more of 16-bit parameters but gathers every
# layer's full parameters for forward and backward (`stage3_max_live_parameters` 1e9 keeps all of a
# small model alive) — the "ZeRO-3 uses more memory than ZeRO-2" reports (DeepSpeed #4305).

# %%
lad.table[
    [
        "rung",
        "rank",
        "baseline_bytes",
        "init_peak_bytes",
        "peak_bytes",
        "predicted_peak_bytes",
        "peak_over_predicted",
        "activation_bytes",
        "deepspeed_estimate_bytes",
    ]
]

# %%
lad.data["waterfall_figure"]

# %% [markdown]
# ### Where ZeRO starts to pay
#
# Set `CROSSOVER_SIZES` (or use the panel) to run stages 0–3 at several model sizes: each stage's
# measured per-rank peak growth against Ψ, the prediction beside it, and the size from which ZeRO-1,
# 2 and 3 save memory named on the plot. `bucket_elements` moves the crossover: a bucket is a fixed
# cost per rank at stages 1–2, so DeepSpeed's default 5e8 elements (1 GB in bf16 on a GPU) hides
# every saving of a model smaller than about a billion parameters. `bench/zero_peak.py` runs the same
# sweep from the shell and adds the 7B-on-8-GPUs prediction.

# %%
cross_panel = panels.panel(
    "crossover",
    ctx,
    smoke=SMOKE,
    precision=PRECISION,
    device=DEVICE,
    model_path=MODEL,
    world_size=ctx.drill_ranks,
)
cross_panel.display()
crossover = cross_panel.run(sizes=CROSSOVER_SIZES)  # empty CROSSOVER_SIZES: nothing runs
if CROSSOVER_SIZES:
    nbkit.record("crossover", crossover.metrics.for_record())
    display(crossover.figure)

# %% [markdown]
#
# Measured ÷ formula per stage, for the stage's rank farthest from 1.00 (1.00 = the paper's count
# exactly; every rank's figure is the table's `ratio` column above). An excess at stage 2 on one rank
# can come from DeepSpeed's `grads_in_partition`, which holds the *whole* gradient of a parameter
# straddling the partition boundary; the communication
# bucket (`reduce_bucket_size`) is a buffer, shown apart.
# Tick *offload* in the panel to see DeepSpeed keep an extra fp32 gradient partition for the CPU
# optimizer step (column `ratio_accounted` adds it: 4Ψ/N, 2Ψ/N at stage 2 — on a CPU the
# "device" and the offload target are the same RAM, so offload moves nothing here).

# %%
lad.metrics.bytes_vs_formula

# %% [markdown]
# ZeRO does not change the math: the mean loss of every rung follows the same curve (bf16
# rounding differs slightly between DeepSpeed's stage-0 and ZeRO optimizer wrappers, hence a
# precision-dependent tolerance).

# %%
print(
    f"max relative loss difference across rungs: {lad.metrics.loss_max_rel_diff:.3g} (tolerance "
    f"{lad.metrics.loss_tolerance})"
)
lad.data["loss_figure"]

# %%
lad.data["time_figure"]

# %% [markdown]
# ### `stage3_param_persistence_threshold`
#
# Parameters with at most this many elements are *not* partitioned: each rank keeps the full
# parameter beside its shard. How much of a model DeepSpeed's default (1e5) keeps whole depends on its
# tensor sizes; the cell prints what it kept in this run — the bytes each rank holds beyond the
# threshold-0 rung, against what the rule predicts from the model's shapes (the claims table's
# `persistence` row).

# %%
print(zero_claims.verdict_persistence(lad.metrics).why)
lad.table[lad.table["stage"] == 3][
    [
        "rung",
        "rank",
        "persistence_threshold",
        "sub_group_size",
        "n_sub_groups",
        "params_bytes",
        "optimizer_bytes",
        "formula_params",
    ]
]

# %% [markdown]
# ### `sub_group_size`
#
# The field notes read `sub_group_size: 1e9` as "each of 8 cards holds a ~1.75 GB shard". The rung
# `stage3_sub_group` reruns stage 3 with a much smaller `sub_group_size`: if the knob set the shard,
# each rank's parameter + optimizer bytes would change; it only splits the optimizer step into more
# sub-groups (`n_sub_groups`). The claims table judges it from the two measured shards.

# %%
lad.metrics.sub_group

# %% [markdown]
# ## 4. Monitoring: a sampler thread instead of `nvidia-smi` + `mail`
#
# The ladder ran under `MemoryMonitor`: a daemon thread sampled every rank's resident memory
# every 0.25 s and called a threshold callback (here: collect the alert) the moment a rank
# crossed `MONITOR_LIMIT_MIB`. (On CUDA ranks it still samples their host RSS; each rank's own
# allocator peak is the ladder's `peak_bytes` column.)

# %%
print(
    f"{lad.metrics.monitor_samples} samples; {len(lad.metrics.monitor_alerts)} threshold alert(s):",
    lad.metrics.monitor_alerts,
)
lad.data["memory_timeline"]

# %% [markdown]
# ## 5. Silent failures
#
# * **Replica divergence** — every rank evaluates the same batch and checksums the full weights
#   (gathered under ZeRO-3); in-sync replicas agree to rounding.
# * **Checkpoint round trip** — save, train one more step (the state changes), load, and compare
#   this rank's partition (params, fp32 master, optimizer state) with what was saved.
# * **CPU headroom before offload** — DeepSpeed's CPU estimate vs free memory, before any rank starts.
# * **fp16 loss-scale overflows** — a stage-2 fp16 run with an overflow provoked at step 2 (an
#   infinite loss): dynamic loss scaling must skip that step and lower the scale. DeepSpeed's CPU
#   accelerator has no fp16, so without a GPU this is **not measured** (said in the claims table);
#   one GPU is enough (the drill then runs one rank).
# * **A rank killed mid-run** — the drill below kills one rank with SIGKILL (what the OOM killer
#   sends); the launcher must name it, in seconds, and leave no process behind.

# %%
print(
    "replicas in sync:",
    lad.metrics.replicas_in_sync,
    "| checkpoint save→load restores state:",
    lad.metrics.checkpoint_round_trip_ok,
)
# the memory model computed the CPU headroom of a full ZeRO-3 offload of one node of your plan
nbkit.record("offload_headroom", mem.metrics.offload_headroom)
print(experiments.headroom_summary(mem.metrics))
lad.data["checkpoint_table"]

# %%
scale_panel = panels.panel("loss_scale", ctx, smoke=SMOKE, device=DEVICE)
scale_panel.display()
loss_scale = scale_panel.run()
nbkit.record("loss_scale", loss_scale.metrics)
print("fp16 loss-scale history:", loss_scale.metrics.loss_scale_history or loss_scale.metrics.not_measured)

# %%
fail_panel = panels.panel(
    "failure_drill", ctx, smoke=SMOKE, device=DEVICE, world_size=ctx.drill_ranks, rank=ctx.drill_rank
)
fail_panel.display()
drill = fail_panel.run()
nbkit.record("failure_drill", drill.metrics)
print(drill.metrics.message)
print(
    f"reported in {drill.metrics.seconds_to_report:.1f} s; leftover processes: "
    f"{drill.metrics.leftover_processes}"
)

# %% [markdown]
# ## 6. Fragmentation vs checkpoint interval (KISS audit §4.3)
#
# Reserved − allocated, `inactive_split_bytes` and `num_alloc_retries` are figures of CUDA's
# caching allocator. On a GPU the default run trains Llama-2-7B's layer shapes (2 layers, bf16,
# AdamW) for 400 steps with a checkpoint every 50 and every 200 steps — the field notes' two
# intervals — with and without `expandable_segments`. **On CPU these figures do not exist**: the
# panel says so and shows what a CPU can account — tensor bytes by category (PyTorch's `MemTracker`).

# %%
frag_panel = panels.panel("fragmentation", ctx, smoke=SMOKE, device=DEVICE)
frag_panel.display()
frag = frag_panel.run()
nbkit.record("fragmentation", frag.metrics.for_record())
if frag.metrics.needs_cuda:
    print(experiments.unavailable_summary(frag.metrics))
else:
    display(frag.table)

# %% [markdown]
# ## 7. Speculative decoding on SmolLM2 (or `SPEC_MODEL`)
#
# transformers' assisted generation, greedy, with and without speculation: prompt-lookup
# decoding (n-grams copied from the prompt) and a layer-truncated copy of the target as draft.
# The acceptance rate and the fallback rate (rounds whose first draft token the target rejects)
# come from the target's own forward calls — counted on any device; Leviathan et al.'s formula
# turns the acceptance into a predicted speedup, beside the measured one.

# %%
spec_panel = panels.panel(
    "specdec",
    ctx,
    smoke=SMOKE,
    device=DEVICE,
    seed=SEED,
    model_path=SPEC_MODEL,
    **experiments.unless_smoke(SMOKE, n_prompts=SPEC_PROMPTS, max_new_tokens=SPEC_NEW_TOKENS),
)
spec_panel.display()
spec = spec_panel.run()
nbkit.record("speculative", spec.metrics.summary)
spec.table.round(3)

# %% [markdown]
# ## 8. Claims table
#
# Each field-note claim, what this run measured, and a verdict from a named two-sided rule
# (`nbkit.zero.claims`): holds, refuted, inconclusive, or needs GPU where only CUDA can measure it.

# %%
rows = zero_claims.claims(
    mem.metrics,
    ds.metrics,
    lad.metrics,
    loss_scale.metrics,
    drill.metrics,
    frag.metrics,
    spec.metrics,
    crossover.metrics,
)
nbkit.record("claims", rows)
nbkit.record("headline", zero_claims.headline(mem.metrics, lad.metrics, spec.metrics))
with pd.option_context("display.max_colwidth", 160):
    display(claims_frame(rows))
