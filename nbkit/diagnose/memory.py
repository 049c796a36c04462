"""Rows on a CUDA memory snapshot: the totals, fragmentation (the one rule), split segments, allocation
sites, whether ``expandable_segments:True`` would help, and the recorded peak.

Fragmentation is judged on the large pool only: the small pool's 2 MiB segments serve allocations of at
most 1 MiB, so their free blocks never stand in a large request's way. What fragmentation costs is free
memory the allocator holds but cannot hand out: free blocks inside segments that still hold live
blocks (a wholly free segment is released and re-allocated by the allocator's own retry, or by
``empty_cache()``). It is a finding only where that memory is material and the largest free block is a
small share of the free memory; a few per cent free is ordinary slack.
"""

from __future__ import annotations

from typing import Any

from nbkit.diagnose.rows import CLEAR, FIGURE, FOUND, NOT_CHECKED, UNDECIDED, RunRow
from nbkit.diagnose.snapshot import Memory, size_text

STRANDED_MATERIAL = 0.10  # free memory in split segments, as a share of the large pool's reserved memory
LARGEST_SMALL = 0.25  # the largest free block at most this share of the free memory: fragmented
LARGEST_AMPLE = 0.50  # at least this share: the free memory is mostly one block, not fragmented
TOP_SITES = 5

FRAGMENTATION_RULE = (
    "large pool only (small-pool blocks serve ≤ 1 MiB requests); found when the free memory inside split "
    "segments (segments that also hold live blocks, which neither the allocator's retry nor empty_cache() "
    f"can release) is ≥ {STRANDED_MATERIAL:.0%} of the pool's reserved memory and the largest free block "
    f"is ≤ {LARGEST_SMALL:.0%} of the pool's free memory (a request larger than that block needs a new "
    "segment although the memory is free), or when a recorded OOM asked for no more than the allocator "
    f"then held free; clear when that free memory is < {STRANDED_MATERIAL:.0%} of reserved (ordinary "
    f"slack) or the largest free block is ≥ {LARGEST_AMPLE:.0%} of the free memory; undecided between"
)


def _dev(m: Memory, several: bool) -> str:
    """The device a row is about, as its title's qualifier (only when the snapshot holds several)."""
    return f" (cuda:{m.device})" if several else ""


def totals_row(m: Memory, source: str, several: bool = False) -> RunRow:
    text = (
        f"reserved {size_text(m.reserved)} in {m.segments} segment{'s' if m.segments != 1 else ''}; "
        f"allocated {size_text(m.allocated)} (tensors asked for {size_text(m.requested)})"
        + (f", {size_text(m.pending_free)} freed but awaiting another stream" if m.pending_free else "")
        + f"; free {size_text(m.free)} of {size_text(m.reserved)} reserved, in "
        f"{m.large.free_blocks + m.small.free_blocks} blocks; largest free block "
        f"{size_text(max(m.large.largest_free, m.small.largest_free))}"
    )
    return RunRow(
        f"memory-totals{':' + str(m.device) if several else ''}",
        f"memory: reserved / allocated / free{_dev(m, several)}",
        FIGURE,
        text,
        "sums over the snapshot's segments (reserved) and blocks by state (allocated: active_allocated; "
        "free: inactive), as torch.cuda.memory_reserved / memory_allocated count them",
        source,
        figures={
            "reserved": m.reserved,
            "allocated": m.allocated,
            "requested": m.requested,
            "pending_free": m.pending_free,
            "free": m.free,
            "segments": m.segments,
            "large": vars(m.large),
            "small": vars(m.small),
        },
    )


def verdict_fragmentation(m: Memory, source: str = "", several: bool = False) -> RunRow:
    """Fragmentation of the large pool (:data:`FRAGMENTATION_RULE`)."""

    key = f"fragmentation{':' + str(m.device) if several else ''}"
    title = f"fragmentation{_dev(m, several)}"
    pool = m.large
    oom = None
    if m.trace is not None:
        oom = next((o for o in m.trace.ooms if o["requested"] <= o["reserved"] - o["active"]), None)
    if pool.segments == 0 and oom is None:
        return RunRow(
            key, title, NOT_CHECKED, "no large-pool segment in the snapshot", FRAGMENTATION_RULE, source
        )
    stranded_share = pool.stranded / pool.reserved if pool.reserved else 0.0
    largest_share = pool.largest_free / pool.free if pool.free else 1.0
    text = (
        f"large pool: free {size_text(pool.free)} of {size_text(pool.reserved)} reserved, in "
        f"{pool.free_blocks} blocks; largest free block {size_text(pool.largest_free)} "
        f"({largest_share:.0%} of the free); {size_text(pool.stranded)} ({stranded_share:.0%} of reserved) "
        f"is free inside {pool.split_segments} split segments"
    )
    figures: dict[str, Any] = {
        "stranded": pool.stranded,
        "stranded_share": stranded_share,
        "largest_free": pool.largest_free,
        "largest_share": largest_share,
        "free": pool.free,
        "reserved": pool.reserved,
    }
    fix = (
        "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (see the expandable_segments row); "
        "allocate the largest, longest-lived tensors first; keep varying shapes (sequence lengths) to a few "
        "buckets"
    )
    if oom is not None:
        held = oom["reserved"] - oom["active"]
        figures["oom"] = oom
        return RunRow(
            key,
            title,
            FOUND,
            f"an OOM was recorded asking for {size_text(oom['requested'])} while the allocator held "
            f"{size_text(held)} free in its segments (the device had {size_text(oom['device_free'])} more); "
            + text,
            FRAGMENTATION_RULE,
            source,
            figures=figures,
            fix=fix,
        )
    if stranded_share >= STRANDED_MATERIAL and largest_share <= LARGEST_SMALL:
        return RunRow(
            key,
            title,
            FOUND,
            text + f": a request over {size_text(pool.largest_free)} needs a new segment although "
            f"{size_text(pool.free)} is free",
            FRAGMENTATION_RULE,
            source,
            figures=figures,
            fix=fix,
        )
    if stranded_share < STRANDED_MATERIAL or largest_share >= LARGEST_AMPLE:
        return RunRow(key, title, CLEAR, text, FRAGMENTATION_RULE, source, figures=figures)
    return RunRow(key, title, UNDECIDED, text, FRAGMENTATION_RULE, source, figures=figures)


def split_row(m: Memory, source: str, several: bool = False) -> RunRow:
    pool = m.large
    if not m.split:
        text = f"no large-pool segment holds both free and live blocks ({pool.segments} large segments)"
    else:
        worst = "; ".join(
            f"segment {s.index} ({size_text(s.total)}): {s.inactive_blocks} free block"
            f"{'s' if s.inactive_blocks != 1 else ''} ({size_text(s.inactive_bytes)}, largest "
            f"{size_text(s.largest_free)}) between {s.active_blocks} live"
            for s in m.split[:5]
        )
        blocks = sum(s.inactive_blocks for s in m.split)
        text = (
            f"{len(m.split)} of {pool.segments} large segments are split: {blocks} inactive blocks holding "
            f"{size_text(pool.stranded)}; most: {worst}"
        )
    return RunRow(
        f"split-blocks{':' + str(m.device) if several else ''}",
        f"inactive split blocks per segment{_dev(m, several)}",
        FIGURE,
        text,
        "per large segment, its inactive blocks when it also holds active ones",
        source,
        figures={
            "split_segments": [
                {
                    "segment": s.index,
                    "address": s.address,
                    "total": s.total,
                    "inactive_blocks": s.inactive_blocks,
                    "inactive_bytes": s.inactive_bytes,
                    "active_blocks": s.active_blocks,
                }
                for s in m.split
            ]
        },
    )


def sites_row(m: Memory, source: str, several: bool = False) -> RunRow:
    key = f"allocation-sites{':' + str(m.device) if several else ''}"
    title = f"allocation sites holding the most memory{_dev(m, several)}"
    rule = (
        "live blocks grouped by their innermost Python frame outside torch (the model or training-loop line "
        "that asked), else their first Python frame, else their first frame outside torch's stack unwinder "
        "and the caching allocator (a C++-only stack), else 'allocated outside Python (backward, C++)'; by "
        "bytes held"
    )
    if not m.frames_recorded:
        return RunRow(
            key,
            title,
            NOT_CHECKED,
            "the snapshot holds no stack frames: record them with "
            "torch.cuda.memory._record_memory_history() before the allocations",
            rule,
            source,
        )
    top = m.sites[:TOP_SITES]
    text = "; ".join(
        f"{s.where}: {size_text(s.bytes)} in {s.blocks} block{'s' if s.blocks != 1 else ''}"
        f" ({s.bytes / m.allocated:.0%})"
        for s in top
    )
    return RunRow(
        key,
        title,
        FIGURE,
        text,
        rule,
        source,
        figures={"sites": [{"where": s.where, "bytes": s.bytes, "blocks": s.blocks} for s in m.sites[:20]]},
    )


def expandable_row(m: Memory, fragmentation: RunRow, source: str, several: bool = False) -> RunRow:
    """The ``expandable_segments:True`` advice, given only where the snapshot shows fragmentation."""

    key = f"expandable-segments{':' + str(m.device) if several else ''}"
    title = f"expandable_segments{_dev(m, several)}"
    on = m.expandable or m.settings_expandable is True
    rule = "advised only when the fragmentation row is found and the snapshot's segments are not expandable"
    if fragmentation.status != FOUND:
        text = (
            "no advice: the snapshot shows no fragmentation to address"
            if fragmentation.status == CLEAR
            else f"no advice: fragmentation is {fragmentation.status} on this snapshot"
        )
        if on:
            text += " (expandable segments are on)"
        return RunRow(key, title, FIGURE, text, rule, source)
    if on:
        return RunRow(
            key,
            title,
            FIGURE,
            "already on (the snapshot's segments are expandable): what remains is free memory between live "
            "blocks of one segment; allocate long-lived tensors before short-lived ones, or bucket "
            "varying shapes",
            rule,
            source,
        )
    return RunRow(
        key,
        title,
        FIGURE,
        "would address it: with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True each stream's memory is "
        "one segment that grows by mapping pages, so a request larger than the "
        f"{size_text(m.large.largest_free)} block extends it instead of stranding the free blocks of "
        "fixed-size segments",
        rule,
        source,
    )


def trace_row(m: Memory, source: str, several: bool = False) -> RunRow:
    key = f"trace-peak{':' + str(m.device) if several else ''}"
    title = f"peak over the recorded history{_dev(m, several)}"
    rule = (
        "device_traces replayed: active bytes = the snapshot's end state minus the recorded net, then "
        "+ alloc, − free_completed; reserved likewise from segment_alloc/free (map/unmap)"
    )
    t = m.trace
    if t is None:
        return RunRow(
            key,
            title,
            NOT_CHECKED,
            "the snapshot recorded no history (device_traces empty): call "
            "torch.cuda.memory._record_memory_history(max_entries=100000) before the loop",
            rule,
            source,
        )
    when = f" (time_us {t.peak_time_us})" if t.peak_time_us is not None else ""
    at = (
        "before the first recorded entry"
        if t.peak_at < 0
        else f"at trace entry {t.peak_at} of {t.entries}{when}"
    )
    text = (
        f"peak active {size_text(t.peak_active)} {at}; peak reserved {size_text(t.peak_reserved)}; "
        f"{size_text(t.start_active)} was already active when the recorded history begins"
    )
    if t.ooms:
        text += f"; {len(t.ooms)} OOM{'s' if len(t.ooms) > 1 else ''} recorded"
    return RunRow(
        key,
        title,
        FIGURE,
        text,
        rule,
        source,
        figures={
            "peak_active": t.peak_active,
            "peak_at": t.peak_at,
            "entries": t.entries,
            "peak_reserved": t.peak_reserved,
            "start_active": t.start_active,
            "ooms": list(t.ooms),
        },
    )


def memory_rows(memories: list[Memory], source: str) -> list[RunRow]:
    """Every memory row of one snapshot (per device when it holds several)."""
    several = len(memories) > 1
    rows = []
    for m in memories:
        frag = verdict_fragmentation(m, source, several)
        rows += [
            totals_row(m, source, several),
            frag,
            split_row(m, source, several),
            sites_row(m, source, several),
            expandable_row(m, frag, source, several),
            trace_row(m, source, several),
        ]
    return rows
