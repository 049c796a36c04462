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
# Diagnoses the places where a LoRA/SFT run silently goes wrong (adapters, tokenizer, masking, accumulation, dtypes, schedulers, DDP) before GPU hours are spent.
#
# Run it top to bottom; every panel's default run also executes headless (`nbkit run 04 --smoke`).

# %% tags=["parameters"]
SMOKE = False
DEVICE = "auto"
SEED = 0

# %%
import nbkit
from nbkit.device import device_report, pick_device
from nbkit.live import LiveFigure

device = pick_device(DEVICE)
report = device_report()
nbkit.record("device", str(device))
report

# %% [markdown]
# ## This machine
#
# A first real measurement: matrix-multiply throughput on the chosen device, streamed live.

# %%
import time

import torch

torch.manual_seed(SEED)
live = LiveFigure("matmul throughput", xaxis="matrix size n", yaxis="GFLOP/s").show()
sizes = [64, 128, 256] if SMOKE else [64, 128, 256, 512, 1024]
gflops = {}
for n in sizes:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    reps = 5
    start = time.perf_counter()
    for _ in range(reps):
        (a @ b).sum().item()
    elapsed = time.perf_counter() - start
    gflops[n] = 2 * n**3 * reps / elapsed / 1e9
    live.add(str(device), n, gflops[n])
live.flush()
nbkit.record("matmul_gflops", gflops)
