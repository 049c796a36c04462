import json

import numpy as np
import pytest

import nbkit
from nbkit.errors import UsageError
from nbkit.record import METRIC_MIME, read_notebook, recorded, to_jsonable


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


def test_record_is_quiet_in_a_notebook_and_the_payload_stays_there(tmp_path):
    """An executed notebook keeps each recorded value as a metric output whose text is empty (no
    `recorded …` line per call), its HTML page leaves those outputs out, and the judging line names
    what was recorded once."""
    import nbformat

    from nbkit.execute import execute
    from nbkit.record import summary_line

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import nbkit\nnbkit.record('auc', 3 / 4 + 0.0031)\nnbkit.record('seeds', [0, 1])\npass"
        ),
        nbformat.v4.new_code_cell("print(nbkit.record.summary_line())"),
    ]
    src = tmp_path / "src" / "q.ipynb"
    src.parent.mkdir()
    nbformat.write(nb, src)
    out = tmp_path / "out"
    out.mkdir()
    result = execute(src, out, {}, progress=False)
    assert result.ok, result.error
    assert result.metrics == {"auc": 0.7531, "seeds": [0, 1]}
    cells = nbformat.read(result.output, as_version=4).cells
    outputs = cells[0].outputs
    assert [o["data"][METRIC_MIME]["name"] for o in outputs] == ["auc", "seeds"]
    assert all(o["data"]["text/plain"] == "" for o in outputs)
    assert [o.get("text") for o in cells[1].outputs] == ["recorded 2 metric(s): auc, seeds\n"]
    page = result.html.read_text()
    assert "0.7531" not in page and METRIC_MIME not in page
    nbkit.record("x", 1)
    assert summary_line() == "recorded 1 metric(s): x"


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
