import json

import numpy as np
import pytest

import nbkit
from nbkit.errors import UsageError
from nbkit.record import METRIC_MIME, read_jsonl, read_notebook, recorded, to_jsonable


def test_record_converts_numpy_and_keeps_value():
    out = nbkit.record("scores", {"a": np.float32(0.5), "b": np.arange(3)})
    assert out == {"a": 0.5, "b": [0, 1, 2]}
    assert recorded()["scores"] == out


def test_record_rejects_unserialisable_naming_the_metric():
    with pytest.raises(UsageError, match=r"record\('bad'\): cannot record value\['x'\]: object"):
        nbkit.record("bad", {"x": object()})
    assert "bad" not in recorded()


def test_nan_is_kept_visible_not_dropped():
    assert to_jsonable(float("nan")) == "nan"


def test_record_appends_to_sink(tmp_path, monkeypatch):
    sink = tmp_path / "m.jsonl"
    monkeypatch.setenv("NBKIT_RECORD_FILE", str(sink))
    nbkit.record("x", 1)
    nbkit.record("x", 2)
    assert read_jsonl(sink) == {"x": 2}


def test_read_jsonl_names_bad_line(tmp_path):
    sink = tmp_path / "m.jsonl"
    sink.write_text('{"name": "a", "value": 1}\nnot json\n')
    with pytest.raises(UsageError, match=r"m.jsonl:2"):
        read_jsonl(sink)


def test_read_notebook_reads_metric_outputs(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data", data={METRIC_MIME: {"name": "auc", "value": 0.7}, "text/plain": "auc"}
        ),
        nbformat.v4.new_output(
            "display_data", data={METRIC_MIME: {"name": "auc", "value": 0.8}, "text/plain": "auc"}
        ),
    ]
    nb.cells.append(cell)
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    assert read_notebook(path) == {"auc": 0.8}
    json.dumps(read_notebook(path))
