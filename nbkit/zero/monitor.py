"""A memory monitor: a sampler thread with threshold callbacks and a live timeline.

It replaces the field notes' ``nvidia-smi`` + ``mail`` shell loop: sampling happens in-process on a
daemon thread (no 30 s blind spots, no parsing of tool output), every sample is kept for the plot,
and a threshold fires its callback once per crossing (re-armed when the value drops back).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nbkit.zero.memory import ModelSize, deepspeed_estimate


@dataclass
class Threshold:
    series: str
    limit_bytes: float
    callback: Callable[[dict[str, Any]], None]
    armed: bool = True
    fired: int = 0


def process_tree_rss(pids: Callable[[], list[int]] | list[int]) -> Callable[[], dict[str, int]]:
    """A sampler of RSS bytes per process (e.g. the ranks of a launch), keyed ``pid<N>``."""
    import psutil

    def sample() -> dict[str, int]:
        out = {}
        for pid in pids() if callable(pids) else pids:
            try:
                out[f"pid{pid}"] = int(psutil.Process(pid).memory_info().rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return out

    return sample


@dataclass
class MemoryMonitor:
    """``with MemoryMonitor(sampler, interval_s=0.2) as mon: ...``; ``mon.samples`` → [(t, {name: bytes})]."""

    sampler: Callable[[], dict[str, int]]
    interval_s: float = 0.2
    live: Any = None
    samples: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    thresholds: list[Threshold] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self):
        if self.interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {self.interval_s}")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._lock = threading.Lock()

    def on_threshold(
        self, series: str, limit_bytes: float, callback: Callable[[dict[str, Any]], None]
    ) -> MemoryMonitor:
        """Call ``callback({"series", "value", "limit", "t"})`` when ``series`` (or "total") exceeds the
        limit."""
        self.thresholds.append(Threshold(series, float(limit_bytes), callback))
        return self

    def sample_once(self) -> dict[str, int]:
        t = time.perf_counter() - self._t0
        try:
            values = self.sampler()
        except Exception as exc:  # noqa: BLE001 - a failed sample is recorded, the monitor keeps going
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return {}
        values = dict(values)
        values["total"] = sum(v for k, v in values.items() if k != "total")
        with self._lock:
            self.samples.append((t, values))
        for th in self.thresholds:
            v = values.get(th.series)
            if v is None:
                continue
            if v > th.limit_bytes and th.armed:
                th.armed = False
                th.fired += 1
                th.callback({"series": th.series, "value": v, "limit": th.limit_bytes, "t": t})
            elif v <= th.limit_bytes:
                th.armed = True
        return values

    def _loop(self):
        while not self._stop.is_set():
            self.sample_once()
            self._stop.wait(self.interval_s)

    def start(self) -> MemoryMonitor:
        self._t0 = time.perf_counter()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="nbkit-memory-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> MemoryMonitor:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.sample_once()
        if self.live is not None:
            self.plot_into(self.live)
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def series(self) -> dict[str, tuple[list[float], list[int]]]:
        out: dict[str, tuple[list[float], list[int]]] = {}
        with self._lock:
            for t, values in self.samples:
                for k, v in values.items():
                    xs, ys = out.setdefault(k, ([], []))
                    xs.append(t)
                    ys.append(v)
        return out

    def plot_into(self, live) -> None:
        for name, (xs, ys) in self.series().items():
            live.extend(name, xs, [y / 2**20 for y in ys])
        live.flush()

    def figure(self, title: str = "memory timeline"):
        import plotly.graph_objects as go

        fig = go.Figure()
        for name, (xs, ys) in self.series().items():
            fig.add_scatter(x=xs, y=[y / 2**20 for y in ys], mode="lines", name=name)
        # One line per distinct limit, naming every series it bounds: ranks sharing a limit would otherwise
        # write their labels over each other; neighbouring limits put theirs at alternate ends.
        limits: dict[float, list[str]] = {}
        for th in self.thresholds:
            limits.setdefault(th.limit_bytes, []).append(th.series)
        for i, (limit, names) in enumerate(sorted(limits.items())):
            fig.add_hline(
                y=limit / 2**20,
                line_dash="dot",
                annotation_text=f"limit of {', '.join(names)}",
                annotation_position="top right" if i % 2 == 0 else "top left",
            )
        fig.update_layout(title=title, xaxis_title="seconds", yaxis_title="MiB")
        return fig


def offload_headroom(
    n_params: int,
    world_size: int,
    stage: int,
    *,
    offload_optimizer: bool,
    offload_param: bool,
    ranks_per_node: int | None = None,
) -> dict[str, Any]:
    """CPU memory check before offloading: DeepSpeed's CPU estimate vs what this machine has free."""
    import psutil

    size = ModelSize("model", int(n_params), int(n_params))
    est = deepspeed_estimate(
        size,
        world_size,
        max(stage, 2),
        offload_optimizer=offload_optimizer,
        offload_param=offload_param,
        gpus_per_node=ranks_per_node,
    )  # its CPU figure is per node
    need = est["cpu"] or 0.0
    avail = float(psutil.virtual_memory().available)
    return {
        "cpu_needed_bytes": need,
        "cpu_available_bytes": avail,
        "headroom_bytes": avail - need,
        "ok": need <= avail,
        "source": est["note"],
    }
