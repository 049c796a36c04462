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
# Run top to bottom; `nbkit run 02 --smoke` executes it headless, `--profile full` with the budget each
# claim needs to decide (its replicates stop as soon as it is decided).

# %% tags=["parameters"]
SMOKE = False
PROFILE = "default"  # "full": the budget each claim needs to decide (longer); choices: default, full
DEVICE = "auto"  # choices: auto, cpu, cuda, <cuda:N>
SEED = 0  # range: 0..
WORLD_SIZE = 8  # GPUs in your plan; range: 1..65536
GPUS_PER_NODE = 8  # range: 1..64
PRECISION = "bf16"  # choices: bf16, fp16, fp32
LADDER_STEPS = None  # None: the ladder's own (4; SMOKE 3); type: int; range: 1..200
HIDDEN_SIZE = None  # None: the ladder's own (256; SMOKE 64); type: int; range: 32..8192
NUM_LAYERS = None  # None: the ladder's own (8; SMOKE 2); type: int; range: 1..128
SPEC_PROMPTS = None  # None: speculative decoding's own request count (3; SMOKE 1; full profile 90); type: int; range: 1..150
SPEC_NEW_TOKENS = None  # None: its own (32; SMOKE 16); type: int; range: 8..512
SPEC_MODEL = ""  # speculative decoding's target: empty for SmolLM2, or a causal-LM dir (weights) or hub id
MONITOR_LIMIT_MIB = 450.0  # range: 10..100000
MODEL = ""  # your model: a Hugging Face model directory, a config.json or a hub id; empty: Llama-2-7B
DS_CONFIG = ""  # your ds_config.json (a file; empty: the field notes' config); choices: "", <path>
CROSSOVER_SIZES = ""  # a size sweep, e.g. "256x8,512x8,1024x8" (minutes per size on CPU); empty skips it; choices: "", <sizes>

# %%
import nbkit

nbkit.check_parameters(globals(), "02_zero_ladder")  # a value the cell above does not take: one line here, before any work
nbkit.require("zero")  # this notebook needs pip install 'nbkit-workbook[zero]': one line here if anything is missing

from nbkit.zero import claims, context, experiments

# What the experiments share: the device (resolved once), your plan of WORLD_SIZE GPUs and the
# ranks this machine runs for it, the speculative-decoding model once loaded.
ctx = context.ZeroContext(DEVICE, smoke=SMOKE, profile=PROFILE, world_size=WORLD_SIZE)
ctx.describe()

# %% [markdown]
# ## 1. The memory model: paper formula vs DeepSpeed's estimator
#
# Llama-2-7B's architecture is built locally from a `LlamaConfig` on the **meta device** (no
# weights, no download) to count Ψ exactly. The paper counts mixed-precision Adam as 2Ψ + 2Ψ + 12Ψ
# per device and partitions the terms stage by stage; DeepSpeed's estimators count 18Ψ/N on the
# GPU for stage 2/3, add the largest layer at stage 3, and multiply **CPU** memory by an
# `additional_buffer_factor` of 1.5 (their printouts label GiB figures "GB"). Change the model,
# N, precision or offload in the panel. Below the table: what your `DS_CONFIG` costs per GPU, and
# whether a full ZeRO-3 offload of one node of your plan fits this machine's free CPU memory.

# %%
mem = experiments.show(
    "memory",
    ctx,
    model_path=MODEL,
    ds_config=DS_CONFIG,
    world_size=WORLD_SIZE,
    gpus_per_node=GPUS_PER_NODE,
)

# %% [markdown]
# ## 2. The field notes' `ds_config`, key by key
#
# Every key, what it does, and whether it acts at all in that config (empty `DS_CONFIG`: the field
# notes' config with its own 8-GPU launch line). Its launch line passes
# `--per_device_train_batch_size 2 --gradient_accumulation_steps 4` on 8 GPUs, so the batch
# identity `train_batch_size = micro × accum × world` is checked against those values.

# %%
ds = experiments.show("ds_config", ctx, ds_config=DS_CONFIG, world_size=WORLD_SIZE)

# %% [markdown]
# ## 3. The ladder: real ranks, measured bytes
#
# One launch starts one rank process per GPU (with fewer than two GPUs, two CPU ranks on gloo);
# inside them every rung (stage 0, 1, 2, 3, stage 3 again at DeepSpeed's default
# `stage3_param_persistence_threshold` of 1e5 and at a smaller `sub_group_size`, and stage 0 again
# at half the learning rate as a positive control) builds a fresh tiny Llama and trains it on the
# same data. Each rank reports the bytes it holds — read from `bit16_groups_flat` / `ds_tensor`
# (params), the gradient partitions and `param.grad` just before the end-of-backward reduction
# (grads), `single_partition_of_fp32_groups` / `fp32_partitioned_groups_flat` + `optimizer.state`
# (optimizer states) — plus the loss of every step, a checkpoint save → load round trip, and a
# shared-batch eval loss and weight checksum. A rank that fails is named with its traceback; a hang
# is killed at the timeout. Further launches rerun stages 0–3 with fresh seeds until the memory-saving
# and estimator rows are decided (at most `LadderConfig.launches` in all): the launch is their unit.

# %%
lad = experiments.show(
    "ladder",
    ctx,
    world_size=ctx.ranks,
    precision=PRECISION,
    seed=SEED,
    monitor_limit_mib=MONITOR_LIMIT_MIB,
    model_path=MODEL,
    steps=LADDER_STEPS,
    hidden_size=HIDDEN_SIZE,
    num_hidden_layers=NUM_LAYERS,
)

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
# buckets (1 GB) — so until the states outweigh those, every stage's peak looks the same. The ladder's
# bucket is 2e5 elements (DeepSpeed's 5e8 would be about 100 times this model's parameters); the
# sweep below (`CROSSOVER_SIZES`) shows where each stage starts to pay. On 2 ranks ZeRO-3 can end
# above ZeRO-2: it saves only Ψ/N bytes more of 16-bit parameters but gathers every layer's full
# parameters for forward and backward (`stage3_max_live_parameters` 1e9 keeps all of a small model
# alive) — the "ZeRO-3 uses more memory than ZeRO-2" reports (DeepSpeed #4305).

# %%
lad.data["peak_table"]

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
crossover = experiments.show(
    "crossover",
    ctx,
    sizes=CROSSOVER_SIZES,
    precision=PRECISION,
    model_path=MODEL,
    world_size=ctx.drill_ranks,
)

# %% [markdown]
# Measured ÷ formula per stage, for the stage's rank farthest from 1.00 (1.00 = the paper's count
# exactly; every rank's figure is the `ratio` column of the ladder's table above). An excess at
# stage 2 on one rank can come from DeepSpeed's `grads_in_partition`, which holds the *whole*
# gradient of a parameter straddling the partition boundary; the communication bucket
# (`reduce_bucket_size`) is a buffer, shown apart. Tick *offload* in the panel to see DeepSpeed keep
# an extra fp32 gradient partition for the CPU optimizer step (column `ratio_accounted` adds it:
# 4Ψ/N, 2Ψ/N at stage 2 — on a CPU the "device" and the offload target are the same RAM, so offload
# moves nothing here).

# %%
lad.metrics.formula_ratios

# %% [markdown]
# ZeRO does not change the math: the mean loss of every rung follows the same curve (bf16
# rounding differs slightly between DeepSpeed's stage-0 and ZeRO optimizer wrappers, hence a
# precision-dependent tolerance) — while the control rung, stage 0 at half the learning rate, must
# leave it, or the comparison could not have seen a changed update.

# %%
lad.data["loss_figure"]

# %%
lad.data["time_figure"]

# %% [markdown]
# ### `stage3_param_persistence_threshold` and `sub_group_size`
#
# Parameters with at most the persistence threshold's elements are *not* partitioned: each rank keeps
# the full parameter beside its shard. The stage-3 rungs below show what DeepSpeed's default (1e5)
# kept in this run — the bytes each rank holds beyond the threshold-0 rung, against what the rule
# predicts from the model's shapes (the claims table's `persistence` row). The field notes read
# `sub_group_size: 1e9` as "each of 8 cards holds a ~1.75 GB shard": the rung `stage3_sub_group`
# reruns stage 3 with a much smaller `sub_group_size`; if the knob set the shard, each rank's
# parameter + optimizer bytes would change; it only splits the optimizer step into more sub-groups
# (`n_sub_groups`).

# %%
lad.data["stage3_table"]

# %% [markdown]
# ## 4. Monitoring: a sampler thread instead of `nvidia-smi` + `mail`
#
# The ladder ran under `MemoryMonitor`: a daemon thread sampled every rank's resident memory
# every 0.25 s and called a threshold callback (here: collect the alert) the moment a rank
# crossed `MONITOR_LIMIT_MIB` (the ladder's `monitor_alerts`). On CUDA ranks it still samples their
# host RSS; each rank's own allocator peak is the ladder's `peak_bytes` column.

# %%
lad.data["memory_timeline"]

# %% [markdown]
# ## 5. Silent failures
#
# * **Replica divergence** — every rank evaluates the same batch and checksums the full weights
#   (gathered under ZeRO-3); in-sync replicas agree to rounding (the claims table's `replicas` row).
# * **Checkpoint round trip** — save, train one more step (the state changes), load, and compare
#   this rank's partition (params, fp32 master, optimizer state) with what was saved (table below).
# * **CPU headroom before offload** — DeepSpeed's CPU estimate vs free memory, before any rank
#   starts (the memory model's last line, section 1).
# * **fp16 loss-scale overflows** — a stage-2 fp16 run with an overflow provoked at step 2 (an
#   infinite loss): dynamic loss scaling must skip that step and lower the scale. DeepSpeed's CPU
#   accelerator has no fp16, so without a GPU this is **not measured** (said in the claims table);
#   one GPU is enough (the drill then runs one rank).
# * **A rank killed mid-run** — the drill below kills one rank with SIGKILL (what the OOM killer
#   sends); the launcher must name it, within a timeout counted from the moment every rank reported
#   ready, and leave no process behind.

# %%
lad.data["checkpoint_table"]

# %%
loss_scale = experiments.show("loss_scale", ctx)

# %%
drill = experiments.show("failure_drill", ctx, world_size=ctx.drill_ranks, rank=ctx.drill_rank)

# %% [markdown]
# ## 6. Fragmentation vs checkpoint interval (KISS audit §4.3)
#
# Reserved − allocated, `inactive_split_bytes` and `num_alloc_retries` are figures of CUDA's
# caching allocator. On a GPU the default run trains Llama-2-7B's layer shapes (2 layers, bf16,
# AdamW) for 400 steps with a checkpoint every 50 and every 200 steps — the field notes' two
# intervals — with and without `expandable_segments`, each seed's runs in a shuffled order. A
# checkpoint first copies the model and optimizer state into fresh GPU buffers, as a ZeRO stack
# gathers its state before saving, so it goes through the caching allocator. The notes' OOM rates
# (37 % vs 4 %) are not measured. **On CPU these figures do not exist**: the panel says so and shows
# what a CPU can account — tensor bytes by category (PyTorch's `MemTracker`).

# %%
frag = experiments.show("fragmentation", ctx)

# %% [markdown]
# ## 7. Speculative decoding on SmolLM2 (or `SPEC_MODEL`)
#
# transformers' assisted generation, greedy, with and without speculation, one request per prompt
# of a neutral prompt set (questions that do not ask to copy their own text): prompt-lookup decoding
# (n-grams copied from the prompt) and SmolLM2 truncated to its first layers as the draft — not the
# trained Medusa heads of the field notes. The acceptance rate and the fallback rate (rounds whose
# first draft token the target rejects, clustered by request) come from the target's own forward
# calls — counted on any device; Leviathan et al.'s formula turns the acceptance into a predicted
# speedup, beside the measured one (on CUDA each request is timed 5 times, interleaved with greedy;
# the load average is recorded with it).

# %%
spec = experiments.show(
    "specdec",
    ctx,
    seed=SEED,
    model_path=SPEC_MODEL,
    n_prompts=SPEC_PROMPTS,
    max_new_tokens=SPEC_NEW_TOKENS,
)

# %% [markdown]
# ## 8. Claims table
#
# Each field-note claim (and nbkit's own, marked so), what this run measured, and the verdict of its
# two-sided rule (`nbkit.zero.claims`): holds, refuted, inconclusive, or needs GPU where only CUDA can
# measure it. `kind` says whether a row is measured here or is arithmetic on the notes' own numbers; an
# exact row (a count, a flag, one drill) shows "exact"; a noisy row is judged on an interval across its
# units (launches, seeds, requests) after each one, and one that this profile's budget cannot decide says
# so (`PROFILE = "full"` gives it the budget it needs). The noisy rows are judged as one family (Holm).

# %%
claims.headline(ctx)
claims.judge(ctx)
