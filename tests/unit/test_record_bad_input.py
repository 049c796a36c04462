"""``nbkit.record`` on values it cannot record faithfully: one table of bad values.

Each row must raise ``UsageError`` naming the metric and what is wrong, quickly, and leave nothing
behind: not in ``recorded()``, not displayed into the notebook.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import nbkit
from nbkit.errors import UsageError
from nbkit.record import MAX_BYTES, MAX_DEPTH, read_notebook, recorded


def _self_referential():
    d = {"a": 1}
    d["loop"] = [d]
    return d


def _deep(levels):
    v = 0
    for _ in range(levels):
        v = [v]
    return v


def _big_list():
    return [123456.789] * (MAX_BYTES // 8)  # ~10 bytes of JSON each: well over the limit


# (id, value factory, pattern the message must match)
CASES = [
    (
        "int-and-str-key-collide",
        lambda: {1: "a", "1": "b"},
        r"record\('m'\): cannot record value: keys 1 and '1' both become the JSON key '1'",
    ),
    (
        "nested-key-collision",
        lambda: {"outer": {2.5: 0, "2.5": 1}},
        r"value\['outer'\]: keys 2.5 and '2.5' both become",
    ),
    (
        "integer-too-long",
        lambda: {"n": 10**5000},
        r"record\('m'\): cannot record value\['n'\]: an integer of \d+ bits",
    ),
    (
        "self-referential",
        _self_referential,
        r"record\('m'\): cannot record value\['loop'\]\[0\]: it contains itself",
    ),
    ("5000-deep", lambda: _deep(5000), rf"nested more than {MAX_DEPTH} levels deep"),
    ("tensor-4M-elements", lambda: torch.zeros(4_000_000), r"4,000,000 elements cannot fit the 2 MiB limit"),
    ("ndarray-4M-elements", lambda: {"w": np.zeros((2000, 2000))}, r"value\['w'\]: 4,000,000 elements"),
    ("list-over-size-limit", _big_list, r"MiB as JSON, over the 2 MiB limit on one metric"),
    (
        "unserialisable-object",
        lambda: {"x": [object()]},
        r"value\['x'\]\[0\]: object is not JSON-serialisable",
    ),
]


@pytest.mark.parametrize(("make", "pattern"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_value_records_nothing(monkeypatch, make, pattern):
    import sys

    record_module = sys.modules["nbkit.record"]  # the package's `nbkit.record` is the function
    shown = []
    monkeypatch.setattr(record_module, "_display_metric", lambda name, data: shown.append((name, data)))
    nbkit.record("m", 1)  # an earlier good value of the same name must survive the bad one
    value = make()
    start = time.process_time()
    with pytest.raises(UsageError, match=pattern):
        nbkit.record("m", value)
    assert time.process_time() - start < 5
    assert recorded()["m"] == 1
    assert shown == [("m", 1)]  # nothing of the bad value reached the notebook


@pytest.mark.parametrize("name", ["", None, 3])
def test_bad_metric_name(name):
    with pytest.raises(UsageError, match="metric name must be a non-empty string"):
        nbkit.record(name, 1)


def test_shared_but_acyclic_references_are_fine():
    leaf = [1, 2]
    assert nbkit.record("shared", {"a": leaf, "b": leaf, "c": _deep(MAX_DEPTH - 1)})["b"] == [1, 2]


def test_readme_spelling_of_the_readers(tmp_path, monkeypatch):
    """README: ``nbkit.record.read_notebook(path)``; ``nbkit.record`` is the function itself."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data", data={"application/vnd.nbkit.metric+json": {"name": "auc", "value": 0.9}}
        )
    ]
    nb.cells.append(cell)
    nbformat.write(nb, tmp_path / "n.ipynb")
    assert nbkit.record.read_notebook(tmp_path / "n.ipynb") == {"auc": 0.9}
    nbkit.record("r", 5)
    assert nbkit.record.recorded()["r"] == 5 and nbkit.record.read_notebook is read_notebook


def test_bad_notebook_files(tmp_path):
    with pytest.raises(UsageError, match=r"cannot read notebook .*missing\.ipynb"):
        read_notebook(tmp_path / "missing.ipynb")
    (tmp_path / "junk.ipynb").write_text("not a notebook")
    with pytest.raises(UsageError, match=r"junk\.ipynb is not a readable notebook"):
        read_notebook(tmp_path / "junk.ipynb")
