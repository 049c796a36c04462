"""A CUDA caching-allocator snapshot, read without running it, and what it says about the GPU's memory.

``torch.cuda.memory._dump_snapshot()`` pickles the dictionary ``torch.cuda.memory._snapshot()`` returns
(the file pytorch.org/memory_viz draws). Unpickling runs whatever the file asks for, so the file is
loaded by :class:`SnapshotUnpickler`, which admits only the builtin containers and scalars a snapshot
is made of: a file that names any other callable (``os.system``, a class, a function of this
program) is refused before that callable is even imported, and nothing in it runs.

The layout read is the one ``_snapshot()``'s docstring documents (``Segment``, ``Block``,
``TraceEntry``): each segment is one ``cudaMalloc``; its blocks tile it exactly, each
``active_allocated`` (a tensor), ``active_pending_free`` (freed, waiting for another stream) or
``inactive`` (cached, free for reuse). :func:`analyse` turns one device's segments into the figures
a fragmentation question needs: reserved / allocated / free, the largest free block against the total
free, the free memory stranded in split segments (segments that also hold live blocks, which
``empty_cache()`` and the allocator's own retry cannot release), the allocation sites from the
blocks' frames, and — when the snapshot recorded history — the peak replayed from ``device_traces``.
"""

from __future__ import annotations

import builtins
import io
import pickle
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbkit.diagnose.setup import DiagnoseError

MIB = 2**20
GIB = 2**30

# What the unpickler may build besides the opcodes' own containers and scalars (dict, list, tuple, str,
# bytes, int, float, bool, None): the builtin collection types older pickle protocols rebuild by calling
# them. Nothing else is ever looked up.
ADMITTED = frozenset(
    (module, name) for module in ("builtins", "__builtin__") for name in ("set", "frozenset", "bytearray")
)
# The module a pickle names for os.system is the platform's implementation of os.
_PUBLIC_MODULE = {"posix": "os", "nt": "os", "__builtin__": "builtins"}

BLOCK_STATES = ("active_allocated", "active_pending_free", "active_awaiting_free", "inactive")
ACTIVE_STATES = ("active_allocated", "active_pending_free", "active_awaiting_free")
# Trace actions that move memory (the others — snapshot markers, user annotations — carry no size to count).
SIZED_ACTIONS = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "oom",
)


class NotASnapshot(DiagnoseError):
    """A file that is not a memory snapshot (exit 2)."""


class _Refused(Exception):
    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


class SnapshotUnpickler(pickle.Unpickler):
    """Unpickles builtin containers and scalars only; any other global is refused without importing it."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ADMITTED:
            return getattr(builtins, name)
        raise _Refused(f"{_PUBLIC_MODULE.get(module, module)}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("a persistent object")


def load_snapshot(path: Path) -> Any:
    """The unpickled contents of ``path``, or :class:`NotASnapshot` naming the file and what it would do."""

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise NotASnapshot(
            f"{path}: cannot read it ({exc.strerror or exc}); expected a memory snapshot"
        ) from None
    try:
        return SnapshotUnpickler(io.BytesIO(raw)).load()
    except _Refused as exc:
        raise NotASnapshot(f"{path}: not a memory snapshot: it would import {exc.what}") from None
    except RecursionError:
        raise NotASnapshot(f"{path}: not a memory snapshot: nested too deeply to read") from None
    except Exception as exc:  # the unpickler's own errors: truncated, not a pickle, a bad opcode
        cut = isinstance(exc, EOFError) or "truncated" in str(exc)
        reason = "truncated (the file ends inside the pickle)" if cut else f"not a pickle ({exc})"
        raise NotASnapshot(f"{path}: not a memory snapshot: {reason}") from None


# -- the documented layout, checked -----------------------------------------------------------------


def _int(path: Path, where: str, d: dict, key: str, minimum: int = 0) -> int:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise NotASnapshot(
            f"{path}: not a memory snapshot: {where}.{key}: expected a whole number ≥ {minimum}, got {v!r}"
        )
    return v


def check_layout(path: Path, data: Any) -> dict[str, Any]:
    """``data`` as a snapshot dict (a bare list of segments, the older form, is wrapped); anything else is
    :class:`NotASnapshot` naming the first key that is not as ``torch.cuda.memory._snapshot()`` writes
    it."""

    if isinstance(data, list):
        data = {"segments": data, "device_traces": []}
    if not isinstance(data, dict) or "segments" not in data:
        what = type(data).__name__ if not isinstance(data, dict) else f"a dict with keys {sorted(data)[:6]}"
        raise NotASnapshot(
            f"{path}: not a memory snapshot: expected torch.cuda.memory._snapshot()'s dict with "
            f"'segments', got {what}"
        )
    segments = data["segments"]
    if not isinstance(segments, list):
        raise NotASnapshot(f"{path}: not a memory snapshot: segments: expected a list")
    for i, seg in enumerate(segments):
        where = f"segments[{i}]"
        if not isinstance(seg, dict):
            raise NotASnapshot(f"{path}: not a memory snapshot: {where}: expected a dict")
        total = _int(path, where, seg, "total_size")
        blocks = seg.get("blocks")
        if not isinstance(blocks, list):
            raise NotASnapshot(f"{path}: not a memory snapshot: {where}.blocks: expected a list")
        covered = 0
        for j, b in enumerate(blocks):
            bw = f"{where}.blocks[{j}]"
            if not isinstance(b, dict):
                raise NotASnapshot(f"{path}: not a memory snapshot: {bw}: expected a dict")
            covered += _int(path, bw, b, "size")
            if b.get("state") not in BLOCK_STATES:
                raise NotASnapshot(
                    f"{path}: not a memory snapshot: {bw}.state: expected one of {', '.join(BLOCK_STATES)}, "
                    f"got {b.get('state')!r}"
                )
            frames = b.get("frames", [])
            if not isinstance(frames, list) or not all(isinstance(f, dict) for f in frames):
                raise NotASnapshot(f"{path}: not a memory snapshot: {bw}.frames: expected a list of frames")
        if covered != total:
            raise NotASnapshot(
                f"{path}: not a memory snapshot: {where}: its blocks cover {covered} bytes of total_size "
                f"{total}"
            )
    traces = data.get("device_traces", [])
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise NotASnapshot(f"{path}: not a memory snapshot: device_traces: expected a list per device")
    for d, entries in enumerate(traces):
        for k, e in enumerate(entries):
            where = f"device_traces[{d}][{k}]"
            if not isinstance(e, dict) or not isinstance(e.get("action"), str):
                raise NotASnapshot(f"{path}: not a memory snapshot: {where}: expected an entry with 'action'")
            if e["action"] in SIZED_ACTIONS:
                _int(path, where, e, "size")
    return data


def read_snapshot(path: Path) -> dict[str, Any]:
    """Load (restricted) and check one snapshot file."""
    return check_layout(path, load_snapshot(path))


# -- figures ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pool:
    """One pool's (large or small segments') memory."""

    segments: int = 0
    reserved: int = 0
    free: int = 0
    free_blocks: int = 0
    largest_free: int = 0
    stranded: int = 0  # inactive bytes in segments that also hold active blocks (split segments)
    split_segments: int = 0


@dataclass(frozen=True)
class SplitSegment:
    index: int
    address: int
    total: int
    inactive_blocks: int
    inactive_bytes: int
    active_blocks: int
    largest_free: int


@dataclass(frozen=True)
class Site:
    where: str
    bytes: int
    blocks: int


@dataclass(frozen=True)
class Trace:
    """The peak replayed from a device's recorded history (the allocator's ring buffer)."""

    entries: int
    peak_active: int
    peak_at: int  # index of the entry at the peak
    peak_time_us: int | None
    start_active: int  # active bytes before the first recorded entry (end state minus the recorded net)
    peak_reserved: int
    ooms: tuple[dict[str, int], ...]  # size requested, device_free, and what the allocator held then


@dataclass(frozen=True)
class Memory:
    """One device's memory as its snapshot shows it."""

    device: int
    segments: int
    reserved: int
    allocated: int  # active_allocated blocks (block sizes, what torch.cuda.memory_allocated counts)
    requested: int  # what the tensors asked for (before the allocator's rounding)
    pending_free: int
    free: int  # inactive blocks
    large: Pool
    small: Pool
    split: tuple[SplitSegment, ...]
    sites: tuple[Site, ...]
    frames_recorded: bool
    expandable: bool  # any segment is an expandable one (expandable_segments:True was on)
    settings_expandable: bool | None  # allocator_settings' expandable_segments, when the snapshot has them
    trace: Trace | None

    @property
    def active(self) -> int:
        return self.allocated + self.pending_free


def _pool(segments: list[tuple[int, dict]]) -> tuple[Pool, list[SplitSegment]]:
    reserved = free = nfree = largest = stranded = nsplit = 0
    split = []
    for i, seg in segments:
        reserved += seg["total_size"]
        inactive = [b["size"] for b in seg["blocks"] if b["state"] == "inactive"]
        active = [b for b in seg["blocks"] if b["state"] in ACTIVE_STATES]
        free += sum(inactive)
        nfree += len(inactive)
        largest = max([largest, *inactive])
        if inactive and active:
            nsplit += 1
            stranded += sum(inactive)
            split.append(
                SplitSegment(
                    i,
                    int(seg.get("address", 0)),
                    seg["total_size"],
                    len(inactive),
                    sum(inactive),
                    len(active),
                    max(inactive),
                )
            )
    return Pool(len(segments), reserved, free, nfree, largest, stranded, nsplit), split


def _is_torch_internal(filename: str) -> bool:
    f = filename.replace("\\", "/")
    return "/torch/" in f or f.startswith("torch/")


# Frames of torch's own stack capture and of the caching allocator: every allocation passes through them, so
# they name no site.
_UNWINDER = (
    "torch::unwind::",
    "torch::CapturedTraceback::",
    "torch::cuda::(anonymous namespace)::gather",
    "c10::cuda::CUDACachingAllocator::",
    "c10::CachingDeviceAllocator::",
)
OUTSIDE_PYTHON = "allocated outside Python (backward, C++)"


def _cpython_frame(filename: str, name: str) -> bool:
    """The interpreter's own C frames (``Objects/call.c`` ``_PyObject_MakeTPCall``): never the site."""
    return filename.endswith(".c") or name.startswith(("_Py", "Py", "pyrun", "pymain", "slot_tp_"))


# A block with no stack: allocated before torch.cuda.memory._record_memory_history started recording (its
# stacks are kept from then on), or recorded with stacks off.
NO_STACK = "no stack recorded (allocated before the history was recorded)"


def allocation_site(frames: list[dict]) -> str:
    """Where the program asked for the memory: the innermost Python frame outside torch itself, else the
    first Python frame; a stack without one (``context="all"`` records C++ frames too; the autograd
    engine's thread has no Python) is named by its first frame outside torch's unwinder and the caching
    allocator (``at::native::empty_cuda (C++)``), else :data:`OUTSIDE_PYTHON`; a block with no frames at all,
    :data:`NO_STACK`.

    A snapshot lists frames innermost first (``_memory_viz`` reverses them for its flame graphs); the
    first Python frames are torch's own (``nn/modules/linear.py``, ``optim/adamw.py``), the one that names
    the model or the training loop comes next."""

    if not frames:
        return NO_STACK
    py = [f for f in frames if str(f.get("filename", "")).endswith(".py")]
    chosen = next((f for f in py if not _is_torch_internal(str(f["filename"]))), py[0] if py else None)
    if chosen is not None:
        name = str(chosen.get("filename", "?")).replace("\\", "/")
        short = "/".join(name.split("/")[-2:])
        return f"{short}:{chosen.get('line', '?')} ({chosen.get('name', '?')})"
    for f in frames:
        fname, func = str(f.get("filename", "")), str(f.get("name", ""))
        if not func or func == "??" or func.startswith(_UNWINDER) or _cpython_frame(fname, func):
            continue
        # A C++ frame's name carries its whole signature: the qualified name is enough to recognise it.
        backward = any("torch::autograd::Engine" in str(g.get("name", "")) for g in frames)
        return f"{func.split('(')[0] or func} (C++{', in backward' if backward else ''}: no Python frame)"
    return OUTSIDE_PYTHON


def _replay(entries: list[dict], end_active: int, end_reserved: int) -> Trace:
    """Active and reserved bytes through the recorded history; the start is what the end state minus the
    recorded net implies (the ring buffer may have dropped older entries)."""

    active = reserved = 0
    net_active = net_reserved = 0
    for e in entries:
        a = e["action"]
        if a == "alloc":
            net_active += e["size"]
        elif a == "free_completed":
            net_active -= e["size"]
        elif a in ("segment_alloc", "segment_map"):
            net_reserved += e["size"]
        elif a in ("segment_free", "segment_unmap"):
            net_reserved -= e["size"]
    start_active = end_active - net_active
    start_reserved = end_reserved - net_reserved
    active, reserved = start_active, start_reserved
    peak, peak_at, peak_reserved = active, -1, reserved
    ooms = []
    for k, e in enumerate(entries):
        a = e["action"]
        if a == "alloc":
            active += e["size"]
        elif a == "free_completed":
            active -= e["size"]
        elif a in ("segment_alloc", "segment_map"):
            reserved += e["size"]
        elif a in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
        elif a == "oom":
            ooms.append(
                {
                    "entry": k,
                    "requested": e["size"],
                    "device_free": int(e.get("device_free", 0) or 0),
                    "reserved": reserved,
                    "active": active,
                }
            )
        if active > peak:
            peak, peak_at = active, k
        peak_reserved = max(peak_reserved, reserved)
    t = entries[peak_at].get("time_us") if 0 <= peak_at < len(entries) else None
    return Trace(
        entries=len(entries),
        peak_active=peak,
        peak_at=peak_at,
        peak_time_us=int(t) if isinstance(t, int) and not isinstance(t, bool) else None,
        start_active=start_active,
        peak_reserved=peak_reserved,
        ooms=tuple(ooms),
    )


def analyse(data: dict[str, Any]) -> list[Memory]:
    """One :class:`Memory` per device the snapshot holds segments or history for."""

    by_device: dict[int, list[tuple[int, dict]]] = defaultdict(list)
    for i, seg in enumerate(data["segments"]):
        by_device[int(seg.get("device", 0) or 0)].append((i, seg))
    traces = data.get("device_traces") or []
    devices = sorted(set(by_device) | {d for d, t in enumerate(traces) if t})
    settings = data.get("allocator_settings")
    settings_expandable = (
        bool(settings["expandable_segments"])
        if isinstance(settings, dict) and "expandable_segments" in settings
        else None
    )
    out = []
    for dev in devices:
        segs = by_device.get(dev, [])
        large = [(i, s) for i, s in segs if s.get("segment_type", "large") == "large"]
        small = [(i, s) for i, s in segs if s.get("segment_type", "large") == "small"]
        large_pool, large_split = _pool(large)
        small_pool, _ = _pool(small)
        blocks = [b for _, s in segs for b in s["blocks"]]
        allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
        requested = sum(
            int(b.get("requested_size", b["size"])) for b in blocks if b["state"] == "active_allocated"
        )
        pending = sum(
            b["size"] for b in blocks if b["state"] in ("active_pending_free", "active_awaiting_free")
        )
        free = sum(b["size"] for b in blocks if b["state"] == "inactive")
        reserved = sum(s["total_size"] for _, s in segs)
        per_site: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        frames_recorded = False
        for b in blocks:
            if b["state"] != "active_allocated":
                continue
            frames = b.get("frames") or []
            frames_recorded = frames_recorded or bool(frames)
            site = per_site[allocation_site(frames)]
            site[0] += b["size"]
            site[1] += 1
        sites = tuple(
            sorted((Site(w, v[0], v[1]) for w, v in per_site.items()), key=lambda s: (-s.bytes, s.where))
        )
        entries = traces[dev] if dev < len(traces) else []
        trace = _replay(entries, allocated + pending, reserved) if entries else None
        out.append(
            Memory(
                device=dev,
                segments=len(segs),
                reserved=reserved,
                allocated=allocated,
                requested=requested,
                pending_free=pending,
                free=free,
                large=large_pool,
                small=small_pool,
                split=tuple(sorted(large_split, key=lambda s: (-s.inactive_bytes, s.index))),
                sites=sites,
                frames_recorded=frames_recorded,
                expandable=any(bool(s.get("is_expandable")) for _, s in segs),
                settings_expandable=settings_expandable,
                trace=trace,
            )
        )
    return out


def size_text(n: float) -> str:
    """A size for a reader: GiB with two decimals from 1 GiB up, whole MiB below (``<1 MiB`` for a few
    bytes, so a non-zero size never reads as 0)."""

    if abs(n) >= GIB:
        return f"{n / GIB:.2f} GiB"
    if n and abs(n) < MIB / 2:
        return "<1 MiB"
    return f"{round(n / MIB)} MiB"
