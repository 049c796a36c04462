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
# weights, ZeRO-3 layout, LR schedulers, allocator fragmentation, DDP evaluation — and, on your own
# axolotl / TRL / PEFT config (`TRAINER_CONFIG`), five more that trainer configs get wrong — on the real
# **SmolLM2-135M-Instruct** (Llama, GQA 9/3 heads, tied embeddings, pad = eos = 2), before GPU hours
# are spent. Each section is a panel: change its controls and press Run; its default run executes
# headless too. Every check returns a finding (pass / warn / fail / needs GPU) with the numbers
# measured in this run. The same checks run from the shell: `nbkit audit CONFIG.yaml`.
#
# The claims come from a field note on DeepSeek fine-tuning ("KISS"); every number in it is treated
# as a claim and re-measured — the table at the end gives the verdicts, each with its kind (measured,
# arithmetic, library fact, demonstration), its two-sided rule, what it rests on, and how often the rule
# would confirm a true claim and refute a false one at this run's n. Every check is one module under
# `nbkit/audit/checks/`, keyed by its slug; `PROFILE = "full"` gives every claim the n it needs to decide
# (longer).

# %% tags=["parameters"]
SMOKE = False
PROFILE = "default"  # "full": every claim's n large enough to decide it (longer); choices: default, full
DEVICE = "auto"  # choices: auto, cpu, cuda, <cuda:N>
SEED = 0  # range: 0..
MODEL = "smollm2"  # "smollm2" (real model) or "tiny" (random GQA Llama, seconds); choices: smollm2, tiny
CONFIG = "good_smollm2.yaml"  # an audit config bundled in nbkit/audit/examples/, or yours; choices: good_smollm2.yaml, good.yaml, broken.yaml, invalid.yaml, <path>
BROKEN_CONFIG = "broken.yaml"  # the deliberately broken one; choices: broken.yaml, good_smollm2.yaml, good.yaml, invalid.yaml, <path>
TRAINER_CONFIG = "axolotl_smollm2.yml"  # axolotl YAML, SFTConfig/TrainingArguments JSON, PEFT or DeepSpeed JSON; choices: axolotl_smollm2.yml, <path>
TRAINER_MODEL = ""  # replaces its base model: a Hugging Face dir, a config.json, a Hub id, "smollm2", "tiny"
DIAGNOSE_CONFIG = "axolotl_fft.yaml"  # nbkit diagnose's setup: a bundled example, your axolotl YAML or TRL JSON; choices: axolotl_fft.yaml, axolotl_lora.yaml, <path>
DIAGNOSE_NODES = 1  # range: 1..4096
DIAGNOSE_GPUS_PER_NODE = 8  # range: 1..64
DIAGNOSE_GPU_MEMORY = 80.0  # GiB of one GPU
FINISHED_RUN = "finished_run"  # a finished run's folder, or the bundled example; choices: finished_run, <dir>
FINISHED_RUN_CONFIG = ""  # its trainer config; "": one beside the run, else what its Trainer recorded; choices: "", <path>
THREADS = 1  # torch intra-op threads (0 keeps torch's default); independent computations run side by side; range: 0..

# %%
import nbkit

nbkit.check_parameters(globals(), "04_finetune_audit")  # a value the cell above does not take: one line here, before any work
nbkit.require("audit")  # this notebook needs pip install 'nbkit-workbook[audit]': one line here if anything is missing

from nbkit.audit import claims, context, experiments

ctx = context.AuditContext(
    DEVICE, smoke=SMOKE, profile=PROFILE, config=CONFIG, model=MODEL, seed=SEED, threads=THREADS
)
ctx.describe()

# %% [markdown]
# ## 1 · KISS versus an over-parameterised LoRA (`kiss-lora`)
#
# The field notes say q/v rank-8 adapters (0.12 % trainable) converge in 890 steps where q/v/o
# rank-64 (0.87 %) needs 2140 and 42.3 GB instead of 28.1 GB. Both variants are trained here on the
# same small SFT task, each at its own learning rate (tuned on seeds never judged), until both reach the
# validation-loss target (half the untrained loss) or the step budget; the validation loss is evaluated
# after every step (with `eval_every` > 1 a crossing is located to the step by replaying the steps
# since the evaluation before). Each seed draws its own validation split, LoRA initialisation and
# batch order, and gives one steps ratio KISS / over-parameterised; the claim is decided on their
# geometric mean with an interval over seeds — the default run's seeds show the effect, the full
# profile runs seeds until the claim is decided (at most the seeds it needs). The trainable shares are
# counted by PEFT on the notes' own
# model (DeepSeek-LLM-7B's architecture, on the meta device) and on this one; peak memory is the
# device's (CUDA allocator peak, or tensor bytes of one optimiser step on CPU). The plot and table
# show the first seed.

# %%
kiss = experiments.show("kiss-lora", ctx)

# %% [markdown]
# ## 2 · LoRA shape binding (`lora-binding`)
#
# For every adapted module: A is (r, in), B is (out, r) against the base weight W0 (out, in) — the
# GQA k/v projections are 576 → 192 — the scaling PEFT applies, and the merge identity
# W_merged = W0 + s·B·A with random A and B. The field notes' two shape asserts are applied
# literally. A rank above a layer's width fails from the shapes alone, before anything is built.

# %%
binding = experiments.show("lora-binding", ctx)

# %% [markdown]
# ## 3 · Tokenizer ↔ label space (`label-alignment`)
#
# Character-span NER labels (English and Chinese) projected onto tokens through the tokenizer's
# offsets as BIO tags, then projected back: label coverage and exact boundary F1 per language.

# %%
labels = experiments.show("label-alignment", ctx)

# %% [markdown]
# ## 4 · Attention backend and context (`attention`)
#
# Which SDPA kernel the model's forward actually dispatches to (read from the profiler), and causal
# attention throughput versus length per backend with the model's head layout on this device (on
# CUDA in bf16, which the flash kernel needs). The backends are timed interleaved — twenty repetitions
# each on CUDA, five elsewhere — with the machine's load average beside them. The field notes' tile
# sizes and 92.4 % utilisation are kernel internals SDPA cannot show; their 3.8× speed-up is measured
# on a GPU.

# %%
attention = experiments.show("attention", ctx)

# %% [markdown]
# ## 5 · Gradient accumulation (`grad-accumulation`)
#
# G micro-batches against one large batch: equal gradients only when the token losses are summed
# and divided by the whole batch's token count (transformers' `num_items_in_batch`). Then the
# field notes' rule "scale accumulation by √L": the gradient-noise variance of every parameter on real
# text is measured at several sequence lengths, one independent estimate per pair of micro-batch
# gradients, a pair at every length at a time, and the fitted exponent, with its t interval, decides
# between √L (−0.5) and anything else (the full profile adds pairs until it has decided).

# %%
grad = experiments.show("grad-accumulation", ctx)

# %% [markdown]
# ## 6 · dtype transitions under bf16 autocast (`dtypes`)
#
# Forward hooks record every module's input/output dtype and the KV-cache dtypes; the field notes'
# op claims (`baddbmm`, `index_add_`, `index_copy_`) run on this torch build.

# %%
dtypes = experiments.show("dtypes", ctx)

# %% [markdown]
# ## 7 · JSONL ↔ Pydantic schema (`data-schema`)
#
# The data file streamed line by line against the schema, lax and strict; every line is either
# valid or an issue with its line number, and the schema module is linted by pscheck. Try
# `sft_broken.jsonl` or the schema module that does not import.

# %%
schema = experiments.show("data-schema", ctx)

# %% [markdown]
# ## 8 · Prompt template ↔ loss mask (`loss-mask`)
#
# `len(input_ids) == len(labels)`, the positions with a label other than -100 are exactly the target
# tokens' positions, and the end-of-turn token is trained although pad == eos. Tick `mask_pad_labels` to see the common
# collator line `labels[labels == pad] = -100` silently mask it. The field notes' two asserts are also
# run on leaking variants of every example — end-of-turn masked, target truncated, prompt trained, mask
# boundary off by one, labels shifted one position — and the claims table counts, per kind, what they
# catch; a BPE merge across the prompt/target boundary and a training template other than the one
# inference renders leave the example consistent in itself, so they are counted apart.

# %%
mask = experiments.show("loss-mask", ctx)

# %% [markdown]
# ## 9 · Sampling weights ↔ reward distribution (`reward-weights`)
#
# w ∝ exp(β·r + γ·log p_ref) with the model's own response log-likelihood as reward: KL between the
# weighted and uniform reward distributions, kurtosis, CI shrink and effective sample size, over β and
# γ, against the field notes' thresholds (KL > 0.18, shrink > 42 %). The responses are bootstrapped: the
# kurtosis rise has an interval, and so has the ratio of the β where each threshold starts to flag.

# %%
reward = experiments.show("reward-weights", ctx)

# %% [markdown]
# ## 10 · ZeRO-3 ↔ GQA layout (`zero3-layout`)
#
# DeepSpeed's persistence and partition rules applied to the real parameter shapes: what stays
# whole on every rank, what each rank holds, and whether slices cut through KV head groups.

# %%
layout = experiments.show("zero3-layout", ctx)

# %% [markdown]
# ## 11 · Chained LR schedulers (`schedulers`)
#
# The learning rate actually applied per step by real torch schedulers, against each stage run
# alone; warmup lost or repeated; resume from a checkpoint with and without the scheduler state.

# %%
schedulers = experiments.show("schedulers", ctx)

# %% [markdown]
# ## 12 · Checkpoint interval ↔ fragmentation (`fragmentation`)
#
# Needs CUDA's caching allocator. This is notebook 02's fragmentation experiment with the interval of
# this config's `checkpoint` section: on a GPU a Llama with Llama-2-7B's layer shapes trains 400 steps
# checkpointing every 50 and every 200 steps, once per seed, and the gap ratio (reserved − allocated) /
# reserved of the two intervals is compared. The field notes' claim about it is judged in notebook 02's
# ledger; here the finding shows what this config's interval does. On CPU the finding says so and
# reports no number.

# %%
fragmentation = experiments.show("fragmentation", ctx)

# %% [markdown]
# ## 13 · Evaluation ↔ DDP synchronisation (`ddp-eval`)
#
# Two gloo ranks on 127.0.0.1 (subprocesses with a timeout) train a tiny Llama with a value head and
# evaluate between steps in five ways — and the diagnostic backward once more without the value head,
# so a reducer error the eval backward causes is told from one the head's unused parameters cause; a
# communication hook counts all-reduces. The model size does not change DDP's reducer logic.

# %%
ddp = experiments.show("ddp-eval", ctx)

# %% [markdown]
# The findings of this configuration's checks, one row each.

# %%
nbkit.record("findings", ctx.finding_dicts())
ctx.findings_frame()

# %% [markdown]
# ## 14–18 · Your own trainer config: axolotl, TRL, PEFT (`trainer-config`)
#
# `TRAINER_CONFIG` is the config you are about to train with — an axolotl YAML, a TRL `SFTConfig` /
# transformers `TrainingArguments` JSON (as `to_json_string()` writes it), a PEFT `adapter_config.json`
# or a DeepSpeed `ds_config.json` — or the bundled `axolotl_smollm2.yml`, written like axolotl's own
# examples with four common mistakes. Its keys are mapped onto the audit: the table lists each key as
# audited, defaulted (with the default) or not covered. Its base model is loaded by path (a local
# Hugging Face directory, a config.json for the architecture alone, a Hub id online); `TRAINER_MODEL`
# replaces it. Five checks then read what axolotl and TRL runs get wrong: `train_on_inputs` on a chat
# dataset (`train-on-inputs`), an end-of-turn token the loss mask never trains (`chat-template-eot`,
# rendered with the tokenizer's own template), `modules_to_save` on tied embeddings
# (`tied-embeddings-lora`, PEFT applied on the meta device), packing without a varlen attention kernel
# (`packing-attention`, the contamination measured on the model) and an eval batch size other than the
# micro batch size under accumulation (`eval-batch`). A check that lacks an input says "not run: needs …".

# %%
trainer = experiments.show("trainer-config", ctx, config=TRAINER_CONFIG, model=TRAINER_MODEL)

# %% [markdown]
# ## The whole setup before the GPUs: `nbkit diagnose` (`diagnose`)
#
# A trainer config names its DeepSpeed JSON and its base model, and the cluster is known; the run only
# finds out at start (or never) that the files disagree. `nbkit diagnose CONFIG --gpus-per-node 8
# --gpu-memory 80` reads all of them at once: every setting both files state is compared by the rule
# transformers' DeepSpeed integration or DeepSpeed itself applies (an error stops the job at start, a
# warning trains differently from what the trainer config says), each rank's peak is predicted with
# notebook 02's memory model against the GPU — with the changes that make it fit when it does not —
# and the audit's checks run on the same config (left out here: sections 14–18 ran them). The bundled
# `axolotl_fft.yaml` is a full fine-tune of a Llama-3-8B-shaped model with ZeRO-2 and three cross-file
# mistakes. The ledger below is the command's `--format html` table.

# %%
diagnosis = experiments.show(
    "diagnose",
    ctx,
    config=DIAGNOSE_CONFIG,
    nodes=DIAGNOSE_NODES,
    gpus_per_node=DIAGNOSE_GPUS_PER_NODE,
    gpu_memory_gib=DIAGNOSE_GPU_MEMORY,
)

# %% [markdown]
# ## Your finished run: `nbkit diagnose RUN_DIR` (`finished-run`)
#
# After the run, its own records say what went wrong: `FINISHED_RUN` is a run's folder — the Hugging
# Face Trainer's `trainer_state.json` (in its checkpoints too), TensorBoard event files, Lightning's
# `metrics.csv` or any CSV/JSONL history with a step column (a W&B export), an MLflow `mlruns/` store,
# CUDA memory snapshots (`torch.cuda.memory._dump_snapshot`, read with a restricted unpickler) — or the
# bundled example, a 150-step run whose learning rate departs from its cosine schedule and whose
# snapshot recorded an out-of-memory with the memory free in split segments. Series are recognised by
# what their names say (`loss`, `eval_<set>_loss`, `val_loss_epoch`, `train/nll_loss`, `lr-AdamW` …;
# `--series KIND=NAME` names one explicitly) and the report says which column it read as what. Each row
# says what it read and the rule it applied: loss spikes against the local noise, non-finite values,
# grad-norm explosions and clipping, the onset of overfitting on each eval set, the learning rate
# actually logged against the schedule the config asks for (with its `lr_scheduler_kwargs`), a
# plateau, progress over the run, and the snapshot's fragmentation and allocation sites. These rows
# diagnose your run; they are not claims of the field notes and stay out of the ledger. The same report
# from the shell: `nbkit diagnose RUN_DIR`.

# %%
finished = experiments.show("finished-run", ctx, run_dir=FINISHED_RUN, config=FINISHED_RUN_CONFIG)

# %% [markdown]
# ### While it trains: `nbkit.callbacks` (`watched-run`)
#
# The same rules need not wait for the run to end. `DiagnoseCallback` (in `nbkit.callbacks`; for
# Lightning, `LightningDiagnoseCallback`) applies them — the same function, reading the logged names the
# same way — to the curves logged so far as each log arrives,
# prints one line per new finding, draws the loss and eval loss (and, outside a panel, the learning rate
# against the configured schedule, the grad norm, and CUDA memory on a GPU) live, and with
# `stop_on_nonfinite=True` stops training at the first step whose loss is NaN or infinite — read from the
# model's own output, since the Trainer's `logging_nan_inf_filter` keeps such a step out of the logged
# loss. Add it to your own run with `Trainer(..., callbacks=[DiagnoseCallback(stop_on_nonfinite=True)])`.
# Here a randomly initialised tiny Llama learns the bundled SFT task from 16 examples on the CPU: it
# memorises them, and the callback names the step where the eval loss turned up while the training loss
# kept falling. Raise `learning_rate` far above 1e-2 to watch spikes and grad-norm explosions named as
# they come. The table is the callback's last judgement, the figure the run's curves with its findings
# marked.

# %%
watched = experiments.show("watched-run", ctx)

# %% [markdown]
# ## A deliberately broken configuration (`audit`)
#
# `broken.yaml` hides one fault per section (unmatched LoRA target and a rank above the k/v width,
# a JSONL file with broken lines and a non-UTF-8 byte, a truncating template that masks pad = eos,
# per-micro-batch loss means, stacked warmups and a resume without scheduler state, a 1e9
# persistence threshold, β = 8, a diagnostic eval backward outside `no_sync`). Its audit runs every
# check it allows on the tiny model — the faults are in the configuration, not in the model size — in
# a context of its own; its data-schema check is the claims table's example of lax coercion.

# %%
broken = experiments.show("audit", ctx, config=BROKEN_CONFIG)

# %% [markdown]
# ## Claims table
#
# Each field-note claim (and each of the notebook's own, marked so), the value measured in this run, its
# kind, the two-sided rule that decides it, what the measurement rests on, and the verdict. A noisy row
# also shows how often its rule confirms a true claim and refutes a false one at this profile's budget
# and after how many units on average (a sequential row is judged after each seed or pair and stops once
# decided); the noisy rows are judged as one family (Holm), and a row this profile cannot decide says
# what the full profile runs. At SMOKE size nothing is judged.

# %%
claims.headline(ctx)
claims.judge(ctx)
