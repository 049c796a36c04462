import pytest
import torch

from nbkit.device import device_report, memory_probe, pick_device, track_tensors


def test_pick_device_auto_and_cpu():
    assert pick_device("cpu").type == "cpu"
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_pick_device_cuda_without_cuda_says_so():
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        pick_device("cuda")


def test_pick_device_rejects_unknown():
    with pytest.raises(ValueError, match="DEVICE must be one of"):
        pick_device("tpu")


def test_device_report_has_the_basics():
    rep = device_report()
    for key in ("torch", "cuda_available", "cpu_cores_usable", "ram_total_gib", "gpus"):
        assert key in rep
    assert rep["cpu_cores_usable"] >= 1


def test_cpu_probe_sees_an_allocation_and_names_cuda_only_figures():
    # In a fresh process: inside a long test session the allocator may hand back pages that are
    # already resident, so RSS need not move for a new tensor there.
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from nbkit.device import memory_probe, CUDA_ONLY_FIGURES\n"
        "probe = memory_probe('cpu'); probe.reset_peak(); before = probe.snapshot().figures['rss']\n"
        "big = torch.ones(64 * 2**20 // 4); big += 1\n"
        "grew = probe.peak_bytes() - before\n"
        "snap = probe.snapshot()\n"
        "assert grew > 32 * 2**20, grew\n"
        "assert set(CUDA_ONLY_FIGURES) <= set(snap.unavailable)\n"
        "assert 'fragmentation' not in snap.figures\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.gpu
def test_cuda_probe_reports_fragmentation_figures():
    probe = memory_probe("cuda")
    x = torch.empty(2**20, device="cuda")
    snap = probe.snapshot()
    assert snap.figures["allocated"] >= x.numel() * 4
    assert snap.figures["reserved"] >= snap.figures["allocated"]
    assert not snap.unavailable


def test_track_tensors_categorises_params_grads_and_optimizer_state():
    model = torch.nn.Linear(256, 256)
    opt = torch.optim.Adam(model.parameters())
    with track_tensors(model, opt) as mem:
        loss = model(torch.randn(8, 256)).sum()
        loss.backward()
        opt.step()
    param_bytes = sum(p.numel() * 4 for p in model.parameters())
    assert mem.peak["Parameter"] == param_bytes
    assert mem.peak["Gradient"] == param_bytes
    assert mem.peak["Optstate"] >= 2 * param_bytes  # Adam: exp_avg + exp_avg_sq


def test_track_tensors_handles_frozen_parameters_like_lora():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 64))
    model[0].requires_grad_(False)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])
    with track_tensors(model, opt) as mem:
        model(torch.randn(4, 64)).sum().backward()
        opt.step()
    trainable = sum(p.numel() * 4 for p in model[1].parameters())
    assert mem.peak["Gradient"] == trainable
    assert mem.peak["Parameter"] == 2 * trainable


def test_watch_peak_sees_a_transient_cpu_allocation():
    import time

    import torch

    from nbkit.device import CpuMemoryProbe, watch_peak

    with watch_peak(CpuMemoryProbe(), interval=0.01) as w:
        x = torch.ones(50_000_000)  # 200 MB, touched
        time.sleep(0.1)
        del x
    assert w.growth > 150 * 2**20, w
    assert "RSS" in w.how
