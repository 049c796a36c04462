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
# # Start here — the nbkit diagnostic workbook
#
# Four themed notebooks beside this one, each a set of widget panels that run **real** experiments on this
# machine (CPU scale; the same code runs on a GPU with bigger parameters). Open one, run it top to bottom,
# then change a panel's controls and press **Run**. Each ends in a **claims ledger**: the field notes' claims
# (what they are: `docs/field-notes.md`, whose path `nbkit doctor` prints), each re-measured here and judged
# holds, refuted or inconclusive.
#
# | notebook | what it diagnoses |
# |---|---|
# | [01_kg_gnn](01_kg_gnn.ipynb) | a typed biomedical knowledge graph (UMLS) in PyTorch Geometric: reverse relations, RGCN, relation-specific negatives, leakage, honest filtered MRR/Hits@k |
# | [02_zero_ladder](02_zero_ladder.ipynb) | DeepSpeed ZeRO stages 0–3 (+ offload): measured per-rank memory vs the paper's formula, loss curves, fragmentation, speculative decoding |
# | [03_dspy_signatures](03_dspy_signatures.ipynb) | DSPy signatures as testable contracts on a real local LM (SmolLM2-135M): modules behind one signature, compiling, distribution shift |
# | [04_finetune_audit](04_finetune_audit.ipynb) | the coupling checks of a LoRA/SFT run (adapters, tokenizer, masking, accumulation, dtypes, schedulers, DDP), your finished or running training run, and `pscheck`, a Pydantic v2 schema linter |
#
# How long each takes — measured on a 2-core machine, and on this machine by its own last `nbkit run`s — is in
# the table further down.
#
# **Before class** (instructor): `nbkit doctor` says what is missing and how to get it;
# `nbkit run --all --smoke --jobs 2` runs every notebook quickly, two at a time, and writes
# `runs/<timestamp>/index.html`: each notebook's status, time and parameters, its headline numbers,
# and the **claims ledger** of the whole run (every verdict, filterable). **In class**: after
# `pip install 'nbkit-workbook[all]'`, `nbkit init DIR` copies the notebooks into DIR and `nbkit lab DIR` opens
# JupyterLab there with that environment's kernel (in a clone of the repository: `make lab`). A
# theme notebook whose extra is missing says so in its first cell (`pip install 'nbkit-workbook[kg]'`, …).
#
# **Comparing settings**: `nbkit sweep 02 --smoke --grid WORLD_SIZE=1,2 --output runs/ws` runs a
# notebook once per combination of the grid and writes `comparison.csv` and `comparison.html`
# (`--jobs N` for a local pool, `--scheduler tcp://host:8786` for a Dask cluster).

# %% tags=["parameters"]
SMOKE = False
DEVICE = "auto"  # choices: auto, cpu, cuda, <cuda:N>
SEED = 0  # range: 0..

# %%
import nbkit

nbkit.check_parameters(globals(), "00_start_here")  # a value the cell above does not take: one line here, before any work
device = nbkit.start.device_name(DEVICE)  # also without torch: nbkit's core alone runs this notebook
nbkit.record("device", {"device": str(device)})  # the key the theme notebooks record it under

# %% [markdown]
# ## Is this machine ready?
#
# Every package, model file, binary and kernel the notebooks need; anything missing comes with its fix.

# %%
report = nbkit.start.doctor_report()
readiness = nbkit.start.readiness(report)
missing = nbkit.start.missing(readiness)
nbkit.record("missing", missing)
print(nbkit.start.machine_line(device, report))
print(nbkit.start.readiness_line(missing))
nbkit.start.readiness_view(readiness)

# %% [markdown]
# ## The notebooks, and how long they took here
#
# Read from the executed notebooks under `runs/` (papermill stores each run's duration and
# parameters); "not measured" until `nbkit run` has been used on this machine. The reference columns
# are one measured run on a 2-core CPU (`notebooks/reference_seconds.json`, full at `--jobs 2` with a
# cold LM cache), so you know what to expect before the first run.

# %%
runs = nbkit.start.measured_runs(nbkit.start.run_folders())
workbook = nbkit.start.workbook_table(runs)
nbkit.record("notebooks", workbook["notebook"].tolist())
nbkit.record("runs_found", int(len(runs)))
workbook
