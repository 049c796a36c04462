"""Device choice, a device report, and one memory-probe interface for CUDA and CPU.

Every experiment calls ``pick_device(DEVICE)`` with the notebook's ``DEVICE`` parameter, so the same
code runs on a laptop CPU and on a GPU box; nothing else in nbkit names a device.

Memory probes answer the same questions on both back ends and say plainly which figures they
cannot provide (``MemorySnapshot.unavailable``): CUDA's caching allocator reports reserved vs
allocated bytes, inactive split blocks and allocation retries — the fragmentation figures — while a
CPU process has no such allocator, so the CPU probe reports process RSS and, inside
``track_tensors``, tensor bytes by category (parameters, gradients, optimizer state, activations).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from nbkit.extras import install_line

DEVICE_CHOICES = ("auto", "cpu", "cuda")


def pick_device(choice: str = "auto"):
    """Return a ``torch.device`` for ``"auto" | "cpu" | "cuda" | "cuda:N"``.

    ``auto`` takes CUDA when it is available, else CPU. Asking for CUDA on a machine without it is
    an error that says so, rather than a silent fallback that would mislabel every measurement.
    """
    import torch

    if not isinstance(choice, str):
        raise TypeError(f"DEVICE must be a string ('auto', 'cpu' or 'cuda'), got {type(choice).__name__}")
    wanted = choice.strip().lower()
    if wanted == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if wanted == "cpu":
        return torch.device("cpu")
    if wanted == "cuda" or wanted.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"DEVICE={choice!r} but CUDA is not available here (torch {torch.__version__}); "
                "use DEVICE='auto' or 'cpu', or install a CUDA build of torch (docs/gpu.md)"
            )
        dev = torch.device(wanted)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise RuntimeError(f"DEVICE={choice!r} but only {torch.cuda.device_count()} CUDA device(s) exist")
        return dev
    raise ValueError(f"DEVICE must be one of {DEVICE_CHOICES} or 'cuda:N', got {choice!r}")


def device_name(choice: str = "auto") -> str:
    """``pick_device(choice)`` as text, also where torch is not installed (nbkit's core alone, which
    runs notebook 00): then ``auto`` and ``cpu`` mean the CPU and asking for CUDA is an error."""
    try:
        import torch  # noqa: F401
    except ImportError:
        wanted = choice.strip().lower() if isinstance(choice, str) else choice
        if wanted in ("auto", "cpu"):
            return "cpu"
        raise RuntimeError(
            f"DEVICE={choice!r} but torch is not installed here; a theme's extra brings it "
            f"({install_line('kg')}, …) or install your own CUDA build of torch"
        ) from None
    return str(pick_device(choice))


def device_report() -> dict[str, Any]:
    """What this machine offers: torch build, CUDA, GPU name and memory, cores, RAM (torch figures are
    None where torch is not installed)."""
    import psutil

    try:
        import torch
    except ImportError:
        torch = None
    cuda = bool(torch is not None and torch.cuda.is_available())
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__ if torch is not None else None,
        "torch_cuda_build": torch.version.cuda if torch is not None else None,
        "cuda_available": cuda,
        "cpu_cores_logical": os.cpu_count(),
        "cpu_cores_usable": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "ram_total_gib": round(psutil.virtual_memory().total / 2**30, 2),
        "ram_available_gib": round(psutil.virtual_memory().available / 2**30, 2),
        "gpus": [],
    }
    if cuda:
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            report["gpus"].append(
                {
                    "index": i,
                    "name": props.name,
                    "memory_gib": round(props.total_memory / 2**30, 2),
                    "capability": f"{props.major}.{props.minor}",
                    "multiprocessors": props.multi_processor_count,
                }
            )
    return report


@dataclass
class MemorySnapshot:
    """Figures in bytes from one probe reading, and the figures this back end cannot give."""

    device: str
    figures: dict[str, int]
    unavailable: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> int | None:
        return self.figures.get(name)


class MemoryProbe:
    """Common interface: ``snapshot()``, ``peak_bytes()``, ``reset_peak()``."""

    device: str = "?"

    def snapshot(self) -> MemorySnapshot:  # pragma: no cover - interface
        raise NotImplementedError

    def peak_bytes(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def reset_peak(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


# Figures only CUDA's caching allocator can give; the CPU probe names them as unavailable.
CUDA_ONLY_FIGURES = {
    "reserved": "reserved bytes are a CUDA caching-allocator figure",
    "inactive_split": "inactive split blocks (fragmentation) need CUDA's caching allocator",
    "num_alloc_retries": "allocation retries need CUDA's caching allocator",
    "fragmentation": "fragmentation (reserved - allocated) needs CUDA",
}


def gap_ratio(figures: dict[str, Any]) -> float:
    """The allocator's fragmentation gap, the one definition nbkit uses: (reserved − allocated) / reserved.

    ``figures`` is a CUDA snapshot's figures (``CudaMemoryProbe.snapshot().figures``). Bytes the
    caching allocator holds from the driver but no live tensor uses are the memory that
    fragmentation wastes; 0 when nothing is reserved.
    """
    reserved = int(figures.get("reserved", 0))
    return (reserved - int(figures.get("allocated", 0))) / reserved if reserved else 0.0


class CudaMemoryProbe(MemoryProbe):
    def __init__(self, device=None):
        import torch

        self._torch = torch
        self._dev = torch.device(device) if device is not None else torch.device("cuda")
        self.device = str(self._dev)

    def snapshot(self) -> MemorySnapshot:
        stats = self._torch.cuda.memory_stats(self._dev)
        allocated = int(stats.get("allocated_bytes.all.current", 0))
        reserved = int(stats.get("reserved_bytes.all.current", 0))
        figures = {
            "allocated": allocated,
            "reserved": reserved,
            "active": int(stats.get("active_bytes.all.current", 0)),
            "inactive_split": int(stats.get("inactive_split_bytes.all.current", 0)),
            "num_alloc_retries": int(stats.get("num_alloc_retries", 0)),
            "num_ooms": int(stats.get("num_ooms", 0)),
            "peak_allocated": int(stats.get("allocated_bytes.all.peak", 0)),
            "peak_reserved": int(stats.get("reserved_bytes.all.peak", 0)),
            "fragmentation": reserved - allocated,
        }
        return MemorySnapshot(self.device, figures)

    def peak_bytes(self) -> int:
        return int(self._torch.cuda.max_memory_allocated(self._dev))

    def reset_peak(self) -> None:
        self._torch.cuda.reset_peak_memory_stats(self._dev)


class CpuMemoryProbe(MemoryProbe):
    """Process RSS from psutil; the peak is the highest RSS this probe has sampled since reset.

    The OS's own lifetime high-water mark (``ru_maxrss``) cannot be reset, so it is reported as a
    separate figure, and ``peak_bytes`` is the probe's own sampled maximum.
    """

    device = "cpu"

    def __init__(self):
        import psutil

        self._proc = psutil.Process()
        self._peak = self._proc.memory_info().rss

    def _rss(self) -> int:
        rss = int(self._proc.memory_info().rss)
        self._peak = max(self._peak, rss)
        return rss

    def snapshot(self) -> MemorySnapshot:
        import resource

        rss = self._rss()
        figures = {
            "rss": rss,
            "peak_rss_sampled": self._peak,
            # ru_maxrss is KiB on Linux.
            "peak_rss_lifetime": int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024,
        }
        return MemorySnapshot("cpu", figures, dict(CUDA_ONLY_FIGURES))

    def peak_bytes(self) -> int:
        self._rss()
        return self._peak

    def reset_peak(self) -> None:
        self._peak = self._rss()


def memory_probe(device=None) -> MemoryProbe:
    """The probe for ``device`` (a ``torch.device``, a string, or None for auto)."""
    import torch

    dev = (
        pick_device("auto") if device is None else torch.device(device) if isinstance(device, str) else device
    )
    if dev.type == "cuda":
        return CudaMemoryProbe(dev)
    return CpuMemoryProbe()


@dataclass
class PeakWatch:
    """What ``watch_peak`` measured: bytes at entry and the peak seen inside the block."""

    device: str
    baseline: int = 0
    peak: int = 0
    how: str = ""

    @property
    def growth(self) -> int:
        return max(0, self.peak - self.baseline)


@contextmanager
def watch_peak(probe: MemoryProbe, interval: float = 0.05) -> Iterator[PeakWatch]:
    """Peak memory of a block: CUDA's allocator high-water mark (exact), or on CPU process RSS polled
    every ``interval`` s by a background thread (RSS also counts memory the allocator keeps after
    freeing, so a second block in the same process can reuse it and read lower)."""
    import threading

    probe.reset_peak()
    watch = PeakWatch(probe.device, baseline=probe.peak_bytes())
    stop = threading.Event()
    poller = None
    if isinstance(probe, CpuMemoryProbe):
        watch.how = f"process RSS sampled every {interval * 1000:.0f} ms"

        def poll():
            while not stop.wait(interval):
                probe.peak_bytes()

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
    else:
        watch.how = "CUDA allocator peak (torch.cuda.max_memory_allocated)"
    try:
        yield watch
    finally:
        stop.set()
        if poller is not None:
            poller.join()
        watch.peak = probe.peak_bytes()


@dataclass
class TensorMemory:
    """Tensor bytes by category from ``track_tensors`` (current at exit, and peak)."""

    current: dict[str, int] = field(default_factory=dict)
    peak: dict[str, int] = field(default_factory=dict)

    @property
    def total_peak(self) -> int:
        return int(sum(self.peak.values()))


def _frozen_aware_tracker():
    """A ``MemTracker`` that works on models with frozen parameters (every LoRA model).

    Upstream installs gradient hooks on *every* parameter, and ``register_hook`` refuses tensors
    that do not require grad; frozen parameters never get gradients, so they need no hook.
    """
    from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType

    class FrozenAwareMemTracker(MemTracker):
        def _track_module_params_and_buffers(self, module, install_grad_hooks=True):
            memory = super()._track_module_params_and_buffers(module, install_grad_hooks=False)
            if install_grad_hooks:
                for param in module.parameters():
                    if not param.requires_grad or self._param_to_grad_hook_handles.get(param) is not None:
                        continue

                    def on_grad(grad, _self=self):
                        if grad is not None:
                            _self._update_and_maybe_create_winfos(grad, _MemRefType.GRAD)

                    self._param_to_grad_hook_handles[param] = (
                        param.register_hook(on_grad),
                        param.register_post_accumulate_grad_hook(lambda p, _hook=on_grad: _hook(p.grad)),
                    )
            return memory

    return FrozenAwareMemTracker()


@contextmanager
def track_tensors(*modules_and_optimizers) -> Iterator[TensorMemory]:
    """Account tensor bytes by category (params, grads, optimizer state, activations, temps).

    Uses PyTorch's own ``MemTracker`` (torch.distributed._tools), which works on any device, so the
    CPU path reports the same categories as the GPU path. Figures fill in when the block exits.
    """
    tracker = _frozen_aware_tracker()
    if modules_and_optimizers:
        tracker.track_external(*modules_and_optimizers)
    result = TensorMemory()
    with tracker:
        yield result
    for kind, target in (("current", result.current), ("peak", result.peak)):
        snap = tracker.get_tracker_snapshot(kind)
        for _dev, by_type in snap.items():
            for ref_type, nbytes in by_type.items():
                name = getattr(ref_type, "value", str(ref_type))
                target[name] = target.get(name, 0) + int(nbytes)
