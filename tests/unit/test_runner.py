"""`nbkit run` / `nbkit list` on small generated notebooks: success, and each kind of bad input."""

import json

import nbformat
import pytest

from nbkit.cli import main
from nbkit.runner import RunError, check_parameters, parse_value, resolve_notebook


def _notebook(path, body="import nbkit\nnbkit.record('n_squared', N * N)\n"):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell("SMOKE = False\nDEVICE = 'auto'\nSEED = 0\nN = 3\nRATE = 0.5\n")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), params, nbformat.v4.new_code_cell(body)]
    nbformat.write(nb, path)
    return path


@pytest.fixture
def nb_dir(tmp_path, monkeypatch):
    d = tmp_path / "notebooks"
    d.mkdir()
    _notebook(d / "01_alpha.ipynb")
    _notebook(d / "02_beta.ipynb", body="raise ValueError('boom in beta')\n")
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(d))
    return d


def test_resolve_by_number_stem_and_theme(nb_dir):
    assert resolve_notebook("01").name == "01_alpha.ipynb"
    assert resolve_notebook("1").name == "01_alpha.ipynb"
    assert resolve_notebook("beta").name == "02_beta.ipynb"
    with pytest.raises(RunError, match="unknown notebook 'gamma'; known notebooks: 01_alpha, 02_beta"):
        resolve_notebook("gamma")


def test_parameter_checks(nb_dir):
    path = nb_dir / "01_alpha.ipynb"
    assert check_parameters(path, {"N": 5, "RATE": 1}) == {"N": 5, "RATE": 1}
    with pytest.raises(RunError, match="unknown parameter 'EPOCHS'"):
        check_parameters(path, {"EPOCHS": 3})
    with pytest.raises(RunError, match="parameter N expects int .*got 'abc'"):
        check_parameters(path, {"N": "abc"})
    with pytest.raises(RunError, match="SMOKE expects bool"):
        check_parameters(path, {"SMOKE": 1})


def test_parse_value():
    assert parse_value("3") == 3 and parse_value("0.5") == 0.5
    assert parse_value("True") is True and parse_value("true") is True
    assert parse_value("umls") == "umls" and parse_value("[1, 2]") == [1, 2]


def test_run_writes_executed_notebook_html_index_and_metrics(nb_dir, tmp_path, capsys):
    out = tmp_path / "runs" / "r1"
    rc = main(["run", "01", "-p", "N", "4", "--output", str(out), "-q"])
    assert rc == 0, capsys.readouterr()
    assert (out / "01_alpha.ipynb").is_file() and (out / "01_alpha.html").is_file()
    assert json.loads((out / "metrics.json").read_text()) == {"01_alpha": {"n_squared": 16}}
    assert "01_alpha" in (out / "index.html").read_text()


def test_default_relative_output_works_from_any_cwd(nb_dir, tmp_path, monkeypatch, capsys):
    # The kernel's cwd is the notebook's folder; a relative runs/ path must still reach the sink.
    work = tmp_path / "elsewhere"
    work.mkdir()
    monkeypatch.chdir(work)
    rc = main(["run", "01", "-q"])
    assert rc == 0, capsys.readouterr()
    (run_dir,) = (work / "runs").iterdir()
    assert json.loads((run_dir / "metrics.json").read_text()) == {"01_alpha": {"n_squared": 9}}


def test_failing_cell_is_named_and_nothing_is_half_written(nb_dir, tmp_path, capsys):
    out = tmp_path / "runs" / "r2"
    rc = main(["run", "02", "--output", str(out), "-q"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "ValueError: boom in beta" in err and "cell" in err
    assert not out.exists()
    assert not any(p.name.startswith(".r2.tmp") for p in out.parent.iterdir())


def test_bad_requests_exit_2_with_one_message(nb_dir, tmp_path, capsys):
    assert main(["run", "nope", "-q"]) == 2
    assert "unknown notebook 'nope'" in capsys.readouterr().err
    assert main(["run", "01", "-p", "N", "x", "-q"]) == 2
    assert "expects int" in capsys.readouterr().err
    assert main(["run", "01", "--kernel", "no-such-kernel", "-q"]) == 2
    assert "kernel 'no-such-kernel' is not installed" in capsys.readouterr().err


def test_list_shows_parameters(nb_dir, capsys):
    assert main(["list", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["01_alpha"]["N"] == {"type": "int", "default": 3, "help": ""}
