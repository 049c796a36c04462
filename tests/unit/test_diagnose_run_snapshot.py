"""CUDA memory snapshots: loaded by the restricted unpickler (nothing in a file runs), checked against the
layout torch documents, and the reader's totals checked against torch's own ``_memory_viz`` summary of the
same file (an outside check).

Snapshots are built here in ``torch.cuda.memory._snapshot()``'s documented layout: recording one needs a
GPU. The ``gpu`` test records a real one from a fragmenting loop where CUDA is present.
"""

from __future__ import annotations

import os
import pickle
import re
from collections import OrderedDict
from pathlib import Path

import pytest
from script_module import load_script

from nbkit.diagnose.memory import memory_rows, sites_row
from nbkit.diagnose.rows import FOUND, NOT_CHECKED
from nbkit.diagnose.snapshot import MIB, NotASnapshot, allocation_site, analyse, check_layout, read_snapshot

ROOT = Path(__file__).resolve().parents[2]
CALLS: list[str] = []


def _script():
    return load_script(ROOT / "scripts" / "make_finished_run_example.py", "make_finished_run_example")


def record_call(what: str) -> str:
    CALLS.append(what)
    return what


class CallsAFunction:
    def __reduce__(self):
        return (record_call, ("unpickled",))


class RunsAShellCommand:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _write(path: Path, obj, protocol=pickle.HIGHEST_PROTOCOL) -> Path:
    path.write_bytes(pickle.dumps(obj, protocol=protocol))
    return path


def test_a_pickle_whose_reduce_calls_a_function_is_refused_without_calling_it(tmp_path):
    p = _write(tmp_path / "evil.pickle", {"segments": [], "payload": CallsAFunction()})
    with pytest.raises(NotASnapshot, match=r"not a memory snapshot: it would import \S*record_call") as e:
        read_snapshot(p)
    assert CALLS == [] and str(p) in str(e.value)


def test_os_system_is_named_and_never_run(tmp_path):
    marker = tmp_path / "ran"
    p = _write(tmp_path / "shell.pkl", RunsAShellCommand(marker))
    with pytest.raises(NotASnapshot, match="not a memory snapshot: it would import os.system"):
        read_snapshot(p)
    assert not marker.exists()
    # protocol 0 names the callable by text; the same refusal
    p0 = _write(tmp_path / "shell0.pkl", RunsAShellCommand(marker), protocol=0)
    with pytest.raises(NotASnapshot, match="it would import os.system"):
        read_snapshot(p0)
    assert not marker.exists()


@pytest.mark.parametrize(
    "obj,named",
    [
        (OrderedDict(segments=[]), "collections.OrderedDict"),
        ({"segments": [], "x": Path("/tmp")}, "pathlib."),
        ({"segments": [], "f": print}, "builtins.print"),
    ],
    ids=["a class", "a path object", "a builtin function"],
)
def test_any_global_but_the_builtin_collections_is_refused(tmp_path, obj, named):
    with pytest.raises(NotASnapshot, match=re.escape(named)):
        read_snapshot(_write(tmp_path / "x.pickle", obj))


def test_builtin_containers_and_scalars_of_every_protocol_load(tmp_path):
    snap = {"segments": [], "device_traces": [[]], "extra": {1, 2}, "t": (1, 2.5, None, True, "s", 2**70)}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert read_snapshot(_write(tmp_path / f"p{protocol}.pickle", snap, protocol))["extra"] == {1, 2}
    # bytes have their own opcode from protocol 3 on (earlier protocols call _codecs.encode: refused)
    assert read_snapshot(_write(tmp_path / "b.pickle", {"segments": [], "b": b"x"}, 3))["b"] == b"x"
    with pytest.raises(NotASnapshot, match="it would import _codecs.encode"):
        read_snapshot(_write(tmp_path / "b2.pickle", {"segments": [], "b": b"x"}, 2))


BAD_LAYOUTS = [
    ({"traces": []}, "expected torch.cuda.memory._snapshot()'s dict with 'segments'"),
    ([1, 2], "segments[0]: expected a dict"),
    (
        {"segments": [{"total_size": 10, "blocks": [{"size": 4, "state": "inactive"}]}]},
        "blocks cover 4 bytes of total_size 10",
    ),
    (
        {"segments": [{"total_size": 4, "blocks": [{"size": 4, "state": "free"}]}]},
        "segments[0].blocks[0].state: expected one of",
    ),
    ({"segments": [{"total_size": -1, "blocks": []}]}, "segments[0].total_size: expected a whole number ≥ 0"),
    ({"segments": [], "device_traces": [[{"action": "alloc", "size": "big"}]]}, "device_traces[0][0].size"),
    ("a string", "got str"),
]


@pytest.mark.parametrize("data,named", BAD_LAYOUTS, ids=[n for _, n in BAD_LAYOUTS])
def test_layouts_other_than_torchs_are_not_snapshots(data, named):
    with pytest.raises(NotASnapshot, match=re.escape(named)):
        check_layout(Path("s.pickle"), data)


def test_truncated_and_non_pickle_files(tmp_path):
    good = pickle.dumps(_script().fragmented_snapshot())
    (tmp_path / "cut.pickle").write_bytes(good[: len(good) // 2])
    with pytest.raises(NotASnapshot, match="not a memory snapshot: truncated"):
        read_snapshot(tmp_path / "cut.pickle")
    (tmp_path / "text.pkl").write_text("segments: []\n")
    with pytest.raises(NotASnapshot, match="not a memory snapshot: not a pickle"):
        read_snapshot(tmp_path / "text.pkl")


# -- the outside check: torch's own summary of the same file -------------------------------------------------


def _memory_viz_totals(snap, monkeypatch):
    """torch's ``_memory_viz.segsum`` on the snapshot, its sizes printed as exact byte counts."""
    from torch.cuda import _memory_viz

    monkeypatch.setattr(_memory_viz, "_format_size", lambda n: str(int(n)))
    text = _memory_viz.segsum(snap)
    get = {
        k: int(v)
        for k, v in re.findall(r"^(total_reserved|total_allocated|total_free|segments): (\d+)", text, re.M)
    }
    return get, sum(_memory_viz.calc_active(s) for s in snap["segments"])


@pytest.mark.parametrize("which", ["fragmented", "pending-free", "legacy list"])
def test_the_readers_totals_agree_with_torchs_memory_viz(tmp_path, monkeypatch, which):
    mk = _script()
    if which == "fragmented":
        snap = mk.fragmented_snapshot()
    else:
        snap = mk.snapshot(
            [
                [
                    ("a", 600 * MIB, "activations"),
                    ("p", 100 * MIB, "logits"),
                    ("f", 300 * MIB, None),
                    ("a", 24 * MIB, None),
                ],
                [("a", 2000 * MIB, "weights"), ("f", 48 * MIB, None)],
            ],
            small=[[("a", 512 * 1024, "logits"), ("f", 1536 * 1024, None)]],
        )
    on_disk = snap["segments"] if which == "legacy list" else snap
    read = read_snapshot(_write(tmp_path / "s.pickle", on_disk))
    (m,) = analyse(read)
    viz, active = _memory_viz_totals(read, monkeypatch)
    assert viz["segments"] == m.segments
    assert viz["total_reserved"] == m.reserved
    assert viz["total_allocated"] == m.requested  # segsum counts what the tensors asked for
    assert active == m.allocated  # calc_active: the allocated blocks' sizes
    # segsum's free: rounding inside allocated blocks + every block not active_allocated
    assert viz["total_free"] == (m.allocated - m.requested) + m.free + m.pending_free


def test_the_recorded_peak_is_replayed_from_the_history_even_when_the_ring_buffer_dropped_its_start():
    snap = _script().fragmented_snapshot()
    (m,) = analyse(snap)
    t = m.trace
    assert t.start_active == 0 and t.peak_active == m.reserved and len(t.ooms) == 1
    assert t.ooms[0]["requested"] == 256 * MIB and t.ooms[0]["reserved"] - t.ooms[0]["active"] == m.free
    entries = snap["device_traces"][0]
    dropped = entries[:12]
    snap["device_traces"] = [entries[12:]]
    (m2,) = analyse(snap)
    before = sum(e["size"] for e in dropped if e["action"] == "alloc")
    assert m2.trace.start_active == before and m2.trace.peak_active == m.trace.peak_active


def test_allocation_sites_skip_torchs_own_frames():
    assert allocation_site(
        [
            {"filename": "/x/site-packages/torch/nn/modules/linear.py", "line": 1, "name": "forward"},
            {"filename": "/home/me/proj/model.py", "line": 42, "name": "forward"},
        ]
    ) == ("proj/model.py:42 (forward)")
    assert allocation_site([]) == "no stack recorded (allocated before the history was recorded)"


# A stack recorded with context="all": torch's unwinder, the caching allocator, then the op (the layout
# torch.cuda.memory._record_memory_history(stacks="all") writes; frames innermost first).
UNWINDER = [
    {"filename": "??", "line": 0, "name": "torch::unwind::unwind()"},
    {"filename": "??", "line": 0, "name": "torch::CapturedTraceback::gather(bool, bool, bool)"},
    {
        "filename": "memory_snapshot.cpp",
        "line": 0,
        "name": "torch::cuda::(anonymous namespace)::gather_with_cpp()",
    },
    {
        "filename": "",
        "line": 0,
        "name": "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, "
        "signed char, unsigned long, CUstream_st*)",
    },
]
OP = {"filename": "??", "line": 0, "name": "at::native::mm_out_cuda(at::Tensor const&, at::Tensor const&)"}
ENGINE = {"filename": "??", "line": 0, "name": "torch::autograd::Engine::evaluate_function(...)"}
CPYTHON = {
    "filename": "/usr/local/src/conda/python-3.11/Objects/call.c",
    "line": 0,
    "name": "_PyObject_MakeTPCall",
}


def test_a_site_is_its_first_python_frame_else_the_first_frame_past_the_unwinder_else_outside_python():
    train = {"filename": "/home/me/proj/train.py", "line": 88, "name": "train_step"}
    assert allocation_site([*UNWINDER, OP, CPYTHON, train]) == "proj/train.py:88 (train_step)"
    assert allocation_site([*UNWINDER, OP, CPYTHON]) == "at::native::mm_out_cuda (C++: no Python frame)"
    assert (
        allocation_site([*UNWINDER, OP, ENGINE])
        == "at::native::mm_out_cuda (C++, in backward: no Python frame)"
    )
    assert allocation_site(UNWINDER) == "allocated outside Python (backward, C++)"
    assert allocation_site([*UNWINDER, CPYTHON, {"filename": "??", "line": 0, "name": "??"}]) == (
        "allocated outside Python (backward, C++)"
    )
    assert "torch::unwind" not in allocation_site([*UNWINDER, OP])
    mk = _script()
    bare = mk.snapshot([[("a", 100 * MIB, None), ("f", 10 * MIB, None)]])
    (m,) = analyse(bare)
    assert sites_row(m, "s").status == NOT_CHECKED


def test_every_memory_row_of_the_bundled_example(tmp_path):
    rows = {r.key: r for r in memory_rows(analyse(_script().fragmented_snapshot()), "s.pickle")}
    assert set(rows) == {
        "memory-totals",
        "fragmentation",
        "split-blocks",
        "allocation-sites",
        "expandable-segments",
        "trace-peak",
    }
    assert rows["fragmentation"].status == FOUND
    assert rows["memory-totals"].measured.startswith("reserved 8.01 GiB in 10 segments")
    assert "largest free block 96 MiB" in rows["memory-totals"].measured
    assert rows["allocation-sites"].measured.startswith("proj/model.py:42 (forward): 2.46 GiB")


@pytest.mark.gpu
def test_a_real_snapshot_of_a_fragmenting_loop(tmp_path):
    """Recorded on the GPU: tensors of varying size allocated and every other one freed leave free holes
    between live blocks; the reader's totals equal the allocator's own counters at the snapshot."""
    import torch

    torch.cuda.memory._record_memory_history(max_entries=100_000)
    try:
        keep = []
        for i in range(200):
            t = torch.empty(int((20 + (i * 37) % 90) * MIB), dtype=torch.uint8, device="cuda")
            if i % 2 == 0:
                keep.append(t)
            del t
        torch.cuda.synchronize()
        path = tmp_path / "real.pickle"
        torch.cuda.memory._dump_snapshot(str(path))
        reserved, allocated = torch.cuda.memory_reserved(), torch.cuda.memory_allocated()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    memories = analyse(read_snapshot(path))
    m = next(x for x in memories if x.device == torch.cuda.current_device())
    assert m.reserved == reserved and m.allocated == allocated
    assert m.trace is not None and m.trace.peak_active >= allocated
    rows = {r.key.split(":")[0]: r for r in memory_rows([m], "real.pickle")}
    assert rows["allocation-sites"].status != NOT_CHECKED
    assert "test_diagnose_run_snapshot.py" in rows["allocation-sites"].measured
