"""Figures people can read: the check every stored figure of a run passes.

A line drawn beside one whose values are a thousand times larger is a flat line at the bottom of the
axis: a train loss up to 12,000 and a validation MRR between 0 and 1 must not share one y axis. The rule
read here, on the figure as stored (plotly's JSON, what an executed notebook keeps): for each scatter
trace that is drawn, its own y-span divided by the span of every drawn scatter trace on the same y axis is
at least :data:`MIN_SHARE` — on a log axis, the spans of the log10 values. A trace whose values do not
vary (a reference line, one point) has nothing to squash and is not judged.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MIN_SHARE = 0.02

# plotly stores numeric arrays as {"dtype": "f8", "bdata": base64} (little-endian): their struct codes.
_DTYPES = {
    "f8": "d",
    "f4": "f",
    "i1": "b",
    "u1": "B",
    "i2": "h",
    "u2": "H",
    "i4": "i",
    "u4": "I",
    "i8": "q",
    "u8": "Q",
}


@dataclass(frozen=True)
class Squashed:
    """A trace drawn at under :data:`MIN_SHARE` of its axis: the figure's title, the trace, its axis."""

    figure: str
    trace: str
    axis: str
    share: float
    span: float
    axis_span: float

    def __str__(self) -> str:
        return (
            f"{self.figure!r}: trace {self.trace!r} spans {self.span:.3g} of the {self.axis_span:.3g} its "
            f"{self.axis} axis spans ({self.share:.2%} < {MIN_SHARE:.0%})"
        )


def values(array: Any) -> list[float]:
    """The numbers of a stored trace array (a list, or plotly's typed array); non-numbers left out."""
    if isinstance(array, Mapping) and "bdata" in array:
        code = _DTYPES.get(str(array.get("dtype")))
        if code is None:
            return []
        raw = base64.b64decode(array["bdata"])
        size = struct.calcsize(code)
        numbers: Iterable[Any] = struct.unpack(
            f"<{len(raw) // size}{code}", raw[: len(raw) - len(raw) % size]
        )
    elif isinstance(array, (list, tuple)):
        numbers = _flat(array)
    else:
        return []
    return [
        float(v)
        for v in numbers
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    ]


def _flat(items: Iterable[Any]) -> Iterable[Any]:
    for item in items:
        if isinstance(item, (list, tuple)):
            yield from _flat(item)
        else:
            yield item


def _title(layout: Mapping[str, Any]) -> str:
    title = layout.get("title")
    if isinstance(title, Mapping):
        title = title.get("text")
    return str(title or "(untitled)")


def squashed_traces(figure: Mapping[str, Any]) -> list[Squashed]:
    """Every drawn scatter trace of ``figure`` (plotly's JSON) squashed under :data:`MIN_SHARE` of its
    y axis (see the module docstring)."""
    layout = figure.get("layout") or {}
    by_axis: dict[str, list[tuple[str, list[float]]]] = {}
    for i, trace in enumerate(figure.get("data") or []):
        if not isinstance(trace, Mapping) or trace.get("type", "scatter") != "scatter":
            continue
        if trace.get("visible", True) in (False, "legendonly"):
            continue
        axis = str(trace.get("yaxis") or "y")
        ys = values(trace.get("y"))
        if (layout.get(f"yaxis{axis[1:]}") or {}).get("type") == "log":
            ys = [math.log10(v) for v in ys if v > 0]
        if ys:
            by_axis.setdefault(axis, []).append((str(trace.get("name") or f"trace {i}"), ys))
    out = []
    for axis, traces in by_axis.items():
        every = [v for _, ys in traces for v in ys]
        axis_span = max(every) - min(every)
        if axis_span <= 0:
            continue
        for name, ys in traces:
            span = max(ys) - min(ys)
            if 0 < span < MIN_SHARE * axis_span:
                out.append(Squashed(_title(layout), name, axis, span / axis_span, span, axis_span))
    return out
