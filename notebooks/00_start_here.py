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
# Four notebooks, each a set of widget panels that run **real** experiments on this machine (CPU
# scale; the same code runs on a GPU with bigger parameters). Open one, run it top to bottom, then
# change a panel's controls and press **Run**.
#
# | notebook | what it diagnoses | CPU, `SMOKE=True` | CPU, full | GPU |
# |---|---|---|---|---|
# | [01_kg_gnn](01_kg_gnn.ipynb) | a typed biomedical knowledge graph (UMLS) in PyTorch Geometric: reverse relations, RGCN, relation-specific negatives, leakage, honest filtered MRR/Hits@k | 118 s | not measured | not measured |
# | [02_zero_ladder](02_zero_ladder.ipynb) | DeepSpeed ZeRO stages 0–3 (+ offload): measured per-rank memory vs the paper's formula, loss curves, fragmentation, speculative decoding | 84 s | not measured | not measured |
# | [03_dspy_signatures](03_dspy_signatures.ipynb) | DSPy signatures as testable contracts on a real local LM (SmolLM2-135M): modules behind one signature, compiling, distribution shift | 146 s | not measured | not measured |
# | [04_finetune_audit](04_finetune_audit.ipynb) | the coupling checks of a LoRA/SFT run (adapters, tokenizer, masking, accumulation, dtypes, schedulers, DDP) and `pscheck`, a Pydantic v2 schema linter | 53 s | not measured | not measured |
#
# The `SMOKE=True` times are wall-clock seconds measured by `nbkit run --all --smoke` on the 2-core
# development machine (no GPU, cores shared with other jobs; the whole check took 7 min). "not
# measured" means nobody has timed it yet. The table further down shows the times measured **on
# this machine** by its own last `nbkit run`s.
#
# **Before class** (instructor): `nbkit doctor` says what is missing and how to get it;
# `nbkit run --all --smoke --jobs 2` runs every notebook quickly, two at a time, and writes
# `runs/<timestamp>/index.html`: each notebook's status, time and parameters, its headline numbers,
# and the **claims ledger** of the whole run (every verdict, filterable). **In class**: after
# `pip install 'nbkit[all]'`, `nbkit init DIR` copies the notebooks into DIR and `nbkit lab DIR` opens
# JupyterLab there with that environment's kernel (in a clone of the repository: `make lab`). A
# theme notebook whose extra is missing says so in its first cell (`pip install 'nbkit[kg]'`, …).
#
# **Comparing settings**: `nbkit sweep 02 --smoke --grid WORLD_SIZE=1,2 --output runs/ws` runs a
# notebook once per combination of the grid and writes `comparison.csv` and `comparison.html`
# (`--jobs N` for a local pool, `--scheduler tcp://host:8786` for a Dask cluster).

# %% tags=["parameters"]
SMOKE = False
DEVICE = "auto"
SEED = 0  # range: 0..

# %%
from pathlib import Path

import nbformat
import pandas as pd

import nbkit
from nbkit.cli import doctor_report
from nbkit.device import device_name
from nbkit.record import read_notebook
from nbkit.runner import available_notebooks, reference_seconds
from nbkit.workspace import run_folders

device = device_name(DEVICE)  # also without torch: nbkit's core alone runs this notebook
nbkit.record("device", str(device))

# %% [markdown]
# ## Is this machine ready?
#
# Every package, model file, binary and kernel the notebooks need; anything missing comes with its fix.

# %%
report = doctor_report()
rows = [
    {"what": f"{theme}: {name}", "ok": info["ok"], "detail": info.get("version") or info.get("fix") or ""}
    for theme, pkgs in report["packages"].items()
    for name, info in pkgs.items()
] + [
    {"what": f"{section}: {name}", "ok": info["ok"],
     "detail": (info.get("path") or info.get("how") or "") if info["ok"] else f"{info.get('why', 'missing')}; fix: {info.get('fix')}"}
    for section in ("models", "binaries", "kernel")
    for name, info in report[section].items()
]
readiness = pd.DataFrame(rows)
missing = readiness.loc[~readiness["ok"], "what"].tolist()
nbkit.record("missing", missing)
dev = report["device"]
print(f"device {device}; torch {dev['torch'] or 'not installed'}; CUDA available: {dev['cuda_available']}; "
      f"{dev['cpu_cores_usable']} cores, {dev['ram_total_gib']} GiB RAM")
print("everything present" if not missing else f"MISSING: {', '.join(missing)}")
readiness if missing else readiness.tail(6)

# %% [markdown]
# ## The notebooks, and how long they took here
#
# Read from the executed notebooks under `runs/` (papermill stores each run's duration and
# parameters); "not measured" until `nbkit run` has been used on this machine. The reference columns
# are one measured run on a 2-core CPU (`notebooks/reference_seconds.json`, full at `--jobs 2` with a
# cold LM cache), so you know what to expect before the first run.

# %%
def title_and_purpose(path: Path) -> tuple[str, str]:
    """A notebook's title line and its 'Diagnoses …' sentence, from its first markdown cell."""
    cell = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    lines = [ln.strip() for ln in cell.source.splitlines() if ln.strip()]
    purpose = next((ln for ln in lines[1:] if not ln.startswith("#")), "")
    return lines[0].lstrip("# "), purpose


def measured_runs(runs_dirs: list[Path]) -> pd.DataFrame:
    """One row per executed notebook found under <runs dir>/<stamp>/: seconds, SMOKE, device."""
    rows = []
    for executed in sorted(p for runs_dir in runs_dirs for p in runs_dir.glob("*/[0-9][0-9]_*.ipynb")):
        meta = nbformat.read(executed, as_version=4).metadata.get("papermill", {})
        if meta.get("duration") is None:
            continue
        metrics = read_notebook(executed)
        rows.append({
            "notebook": executed.stem,
            "run": executed.parent.name,
            "mode": "smoke" if meta.get("parameters", {}).get("SMOKE") else "full",
            "device": str(metrics.get("device", "?")).split(":")[0],
            "seconds": round(float(meta["duration"]), 1),
        })
    return pd.DataFrame(rows, columns=["notebook", "run", "mode", "device", "seconds"])


runs = measured_runs(run_folders())
latest = runs.sort_values("run").groupby(["notebook", "mode", "device"]).last()["seconds"] if len(runs) else pd.Series(dtype=float)
reference = {mode: reference_seconds(available_notebooks(), smoke=mode == "smoke") for mode in ("smoke", "full")}
table = []
for path in available_notebooks():
    if path.stem.startswith("00_"):
        continue
    title, purpose = title_and_purpose(path)
    row = {"notebook": path.stem, "title": title, "diagnoses": purpose}
    for mode in ("smoke", "full"):
        for dev_kind in ("cpu", "cuda"):
            value = latest.get((path.stem, mode, dev_kind))
            row[f"{dev_kind} {mode} (s)"] = value if value is not None else "not measured"
    for mode in ("smoke", "full"):
        row[f"reference {mode} (s, 2-core CPU)"] = reference[mode].get(path.stem, "not measured")
    table.append(row)
workbook = pd.DataFrame(table)
nbkit.record("notebooks", workbook["notebook"].tolist())
nbkit.record("runs_found", int(len(runs)))
workbook
