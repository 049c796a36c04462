"""`nbkit run` / `nbkit list` on small generated notebooks: success, and each kind of bad input."""

import json

import nbformat
import pytest

from nbkit.catalog import resolve_notebook
from nbkit.cli import main
from nbkit.errors import RunError
from nbkit.params import check_given, parse_value


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


def test_a_parameter_whose_comment_holds_an_equals_sign_is_still_a_parameter(tmp_path):
    # papermill's parser drops any line with two "=" (only a logged warning): `-p MODEL ...` said "unknown".
    from nbkit.params import notebook_parameters

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell(
        'SEED = 0\nMODEL = ""  # "" = the built-in model; range: x\nSIZES = (1, 2)  # a = b\n'
    )
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params]
    nbformat.write(nb, tmp_path / "01_x.ipynb")
    got = notebook_parameters(tmp_path / "01_x.ipynb")
    assert got["MODEL"] == {"type": "str", "default": "", "help": '"" = the built-in model; range: x'}
    assert got["SIZES"]["default"] == (1, 2) and got["SEED"]["default"] == 0


def test_every_assignment_of_each_shipped_notebooks_parameters_cell_is_a_parameter():
    import ast

    from nbkit.catalog import available_notebooks
    from nbkit.params import notebook_parameters

    for path in available_notebooks(required=True):
        cell = next(
            c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", [])
        )
        names = {n.targets[0].id for n in ast.parse(cell.source).body if isinstance(n, ast.Assign)}
        assert names <= set(notebook_parameters(path)), path.name


def test_parameter_checks(nb_dir):
    path = nb_dir / "01_alpha.ipynb"
    assert check_given(path, {"N": 5, "RATE": 1}) == {"N": 5, "RATE": 1}
    with pytest.raises(RunError, match="unknown parameter 'EPOCHS'"):
        check_given(path, {"EPOCHS": 3})
    with pytest.raises(RunError, match="parameter N expects int .*got 'abc'"):
        check_given(path, {"N": "abc"})
    with pytest.raises(RunError, match="SMOKE expects bool"):
        check_given(path, {"SMOKE": 1})


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


def test_failing_cell_is_named_and_the_failed_notebook_is_kept(nb_dir, tmp_path, capsys):
    out = tmp_path / "runs" / "r2"
    rc = main(["run", "--all", "--output", str(out), "-q"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "ValueError: boom in beta" in err and "cell" in err
    assert f"the run is in {out.resolve()}/" in err and "--resume" in err
    # the finished notebook, and the failing one executed up to its failing cell (papermill marks it)
    assert (out / "01_alpha.ipynb").is_file() and (out / "01_alpha.html").is_file()
    failed_nb = nbformat.read(out / "02_beta.ipynb", as_version=4)
    assert any(
        o.get("ename") == "ValueError"
        for c in failed_nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )
    status = {e["name"]: e for e in json.loads((out / "index.json").read_text())["notebooks"]}
    assert status["01_alpha"]["status"] == "ok" and status["02_beta"]["status"] == "failed"
    assert "cell 2" in status["02_beta"]["error"] and "boom in beta" in status["02_beta"]["error"]
    assert "failed</span>: 02_beta: cell 2" in (out / "index.html").read_text()
    # nothing half-written: no staging folder beside the run, no partial file in it
    assert [p.name for p in out.parent.iterdir()] == ["r2"]
    assert not [p for p in out.rglob("*") if p.name.startswith(".")]


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
    assert listed["01_alpha"]["N"] == {"type": "int", "default": 3, "help": "", "takes": ""}


# -- index page, --jobs, interruption ----------------------------------------------------------------

OLD_SHAPE_CLAIMS = (
    "import nbkit\nnbkit.record('claims', [{'claim': 'x', 'verdict': 'holds'}])\n"
    "nbkit.record('headline', {'a': 1})\n"
)


def test_parallel_run_and_its_index_page(tmp_path, monkeypatch, capsys):
    import html as html_lib
    import re

    from runner_notebooks import make_notebook

    from nbkit.runner import run_notebooks

    d = tmp_path / "notebooks"
    d.mkdir()
    make_notebook(d / "01_alpha.ipynb")
    make_notebook(d / "02_old.ipynb", body=OLD_SHAPE_CLAIMS)
    make_notebook(
        d / "03_none.ipynb", body="import os, nbkit\nnbkit.record('run_dir', os.environ['NBKIT_RUN_DIR'])\n"
    )
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(d))
    out = tmp_path / "runs" / "20260101-run"
    lines = []
    final, results = run_notebooks([], {"N": 5}, output=out, progress=False, jobs=2, log=lines.append)
    assert final == out.resolve() and [r.ok for r in results] == [True, True, True]
    assert results[2].metrics["run_dir"] == str(final)  # the kernel knows the run it is published into
    assert any("2 at a time" in ln for ln in lines)
    page = (out / "index.html").read_text()
    title = re.search(r"<title>(.*)</title>", page).group(1)
    assert title.startswith("nbkit run 20260101-run (") and ".tmp" not in page
    ledger = re.search(r"<tbody class='nb' data-notebook='01_alpha'>(.*?)</tbody>", page, re.S).group(1)
    rows = re.findall(r"<tr data-verdict='([^']*)'", ledger)
    assert rows == ["holds", "holds"]  # 01's two claims (N=5: 25 ≥ 4; RATE 0.5)
    assert "N squared is at least 4" in html_lib.unescape(ledger)
    # an older shape's row is shown with what it has; a notebook without claims says so
    assert "<tbody class='nb' data-notebook='02_old'>" in page and "03_none: recorded no claims" in page
    assert "<th>n squared</th><td class='value'>25</td>" in page  # 01's headline
    assert "N=5" in page and "01_alpha.html" in page and "01_alpha.ipynb" in page


def test_index_shows_each_theme_notebooks_summary_figure_and_headline_at_a_glance(tmp_path, monkeypatch):
    """Above the ledger: one card per theme notebook that ran, its summary figure (the one its registry
    marked, drawn from the executed notebook) and its headline numbers; a notebook with neither headline
    nor claims gets no card; the figures stay in the notebooks' own pages."""
    import re

    from runner_notebooks import THEME, make_notebook

    from nbkit.runner import run_notebooks

    d = tmp_path / "notebooks"
    d.mkdir()
    make_notebook(d / "00_intro.ipynb", body="import nbkit\nnbkit.record('x', 1)\n")
    make_notebook(d / "01_toy.ipynb", body=THEME)
    make_notebook(d / "02_toy.ipynb", body=THEME)
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(d))
    out = tmp_path / "runs" / "glance"
    final, results = run_notebooks([], {"N": 5}, output=out, progress=False)
    assert all(r.ok for r in results), [r.error for r in results]
    page = (final / "index.html").read_text()
    glance = page.index("<div id='glance'>")
    assert glance < page.index("<table id='ledger'")
    cards = re.findall(r"<section class='nb' data-notebook='([^']+)'>", page)
    assert cards == ["01_toy", "02_toy"]
    draws = re.findall(r"Plotly.newPlot\('(glance-\d+)', (\[.*?\]), ", page)
    assert [d[0] for d in draws] == ["glance-1", "glance-2"]
    assert all('"b curve"' in d[1] and '"a curve"' not in d[1] for d in draws)  # the summary, not a's
    assert "<th>total of b</th><td class='value'>7.5</td>" in page  # 0.5 * (1 + 2 + 3 + 4 + 5)
    assert page.index("<script src='plotly.min.js'>") < page.index("<title>")
    assert (final / "plotly.min.js").is_file()
    assert len(page.encode()) < 200_000  # mailed: the figures' data and layout, no library
    assert "b curve" in (final / "01_toy.html").read_text()  # still in the notebook's own page


def test_core_shares_split_the_cores():
    from nbkit.pool import core_shares

    assert core_shares(2, [0, 1]) == [[0], [1]]
    assert core_shares(2, [0, 1, 2, 3, 4]) == [[0, 1, 2], [3, 4]]
    assert core_shares(3, [0, 1]) == [[0], [1], [0]]


def test_pool_workers_share_threads_not_cores(tmp_path, monkeypatch):
    from runner_notebooks import make_notebook

    from nbkit.procs import usable_cores
    from nbkit.runner import run_notebooks

    d = tmp_path / "notebooks"
    d.mkdir()
    body = (
        "import os, nbkit\nnbkit.record('affinity', sorted(os.sched_getaffinity(0)))\n"
        "nbkit.record('omp', os.environ.get('OMP_NUM_THREADS'))\n"
        "from nbkit.procs import core_share\nnbkit.record('share', core_share())\n"
    )
    make_notebook(d / "01_a.ipynb", body=body)
    make_notebook(d / "02_b.ipynb", body=body)
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(d))
    final, results = run_notebooks([], output=tmp_path / "out", progress=False, jobs=2, log=lambda _m: None)
    cores = usable_cores()
    for r in results:
        # Every core stays usable (an idle one can take a notebook's extra processes); threads are the share.
        assert r.metrics["affinity"] == cores
        assert r.metrics["omp"] == str(max(1, len(cores) // 2))
        assert r.metrics["share"] == max(1, len(cores) // 2)  # what its replicate loops take as cores
    timings = json.loads((final / "timings.json").read_text())
    assert timings["smoke"] is False and set(timings["seconds"]) == {"01_a", "02_b"}


def test_timings_count_the_kernels_children_and_the_log_says_the_utilisation(tmp_path, monkeypatch):
    """A notebook whose kernel starts a process that burns 3 CPU-s against one that does not: the run's CPU
    seconds differ by that much (a grandchild of this process, reaped by the kernel, is counted), and the
    utilisation is CPU-s ÷ (wall × cores). The busy run goes first: the imports a first run pays in this
    process add to its figure, so they cannot make up for a child that was not counted."""
    from runner_notebooks import make_notebook

    from nbkit.procs import usable_cores
    from nbkit.runner import run_notebooks

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 3.0: pass"
    figures = {}
    for name, body in (
        ("busy", f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {burn!r}])\n"),
        ("idle", "pass\n"),
    ):
        d = tmp_path / name
        d.mkdir()
        make_notebook(d / "01_a.ipynb", body=body)
        monkeypatch.setenv("NBKIT_NOTEBOOKS", str(d))
        lines: list[str] = []
        final, results = run_notebooks([], output=tmp_path / f"out-{name}", progress=False, log=lines.append)
        assert results[0].ok, results[0].error
        t = figures[name] = json.loads((final / "timings.json").read_text())
        assert t["cores"] == len(usable_cores()) and t["wall_s"] > 0
        # the figures are stored rounded to 0.1 s, the utilisation from the unrounded ones: it lies
        # between the ratios at the ends of the rounding intervals (a short run's are wide)
        lo = max(t["cpu_s"] - 0.05, 0) / ((t["wall_s"] + 0.05) * t["cores"])
        hi = (t["cpu_s"] + 0.05) / (max(t["wall_s"] - 0.05, 1e-9) * t["cores"])
        assert lo - 5e-4 <= t["core_utilisation"] <= hi + 5e-4, (t, lo, hi)
        assert f"core utilisation {t['core_utilisation']:.2f}" in lines[-1] and "CPU-s" in lines[-1]
    assert figures["busy"]["cpu_s"] - figures["idle"]["cpu_s"] >= 2.5


def test_longest_first_orders_by_the_newest_matching_history(tmp_path):
    import os

    from nbkit.execute import Job
    from nbkit.timings import longest_first, previous_seconds

    runs = tmp_path / "runs"
    for name, smoke, secs, mtime in (("old", False, {"01_a": 1, "02_b": 500}, 100),
                                     ("new", False, {"01_a": 90, "02_b": 10}, 200),
                                     ("smoke", True, {"01_a": 1, "02_b": 99}, 300)):  # fmt: skip
        (runs / name).mkdir(parents=True)
        (runs / name / "timings.json").write_text(json.dumps({"smoke": smoke, "seconds": secs}))
        os.utime(runs / name / "timings.json", (mtime, mtime))
    (runs / "broken").mkdir()
    (runs / "broken" / "timings.json").write_text("{not json")
    final = runs / "next"
    assert previous_seconds(final, smoke=False) == {"01_a": 90.0, "02_b": 10.0}
    assert previous_seconds(final, smoke=True) == {"01_a": 1.0, "02_b": 99.0}
    assert previous_seconds(tmp_path / "elsewhere" / "x", smoke=False) == {}
    jobs = [Job(tmp_path / f"{n}.ipynb", tmp_path, {}) for n in ("00_c", "01_a", "02_b")]
    order = lambda secs: [j.path.stem for j in longest_first(jobs, secs)]  # noqa: E731
    assert order({"01_a": 90.0, "02_b": 10.0}) == ["01_a", "02_b", "00_c"]
    assert order({"01_a": 1.0, "02_b": 99.0}) == ["02_b", "01_a", "00_c"]
    assert order({}) == ["00_c", "01_a", "02_b"]


def test_a_first_run_orders_by_the_reference_seconds_beside_the_notebooks(tmp_path):
    from nbkit.execute import Job
    from nbkit.timings import REFERENCE_SECONDS, longest_first, reference_seconds

    nbs = tmp_path / "nbs"
    nbs.mkdir()
    paths = [nbs / f"{n}.ipynb" for n in ("00_c", "01_a", "02_b")]
    assert reference_seconds(paths, smoke=False) == {}  # no file: file order
    (nbs / REFERENCE_SECONDS).write_text(
        json.dumps({"full": {"01_a": 5, "02_b": 50}, "smoke": {"01_a": 9, "02_b": 1}})
    )
    order = lambda secs: [j.path.stem for j in longest_first([Job(p, tmp_path, {}) for p in paths], secs)]  # noqa: E731
    assert order(reference_seconds(paths, smoke=False)) == ["02_b", "01_a", "00_c"]
    assert order(reference_seconds(paths, smoke=True)) == ["01_a", "02_b", "00_c"]
    (nbs / REFERENCE_SECONDS).write_text("[1, 2")  # unreadable: only the hint is lost
    assert reference_seconds(paths, smoke=False) == {}


def test_the_shipped_reference_seconds_name_every_notebook_in_both_modes():
    from nbkit.catalog import available_notebooks, notebooks_dir
    from nbkit.timings import REFERENCE_SECONDS, reference_seconds

    paths = available_notebooks(required=True)
    assert (notebooks_dir() / REFERENCE_SECONDS).is_file()
    for smoke in (False, True):
        assert set(reference_seconds(paths, smoke)) == {p.stem for p in paths}


@pytest.mark.parametrize(
    ("jobs", "how"), [(1, "SIGTERM"), (2, "SIGTERM"), (1, "Ctrl-C"), (2, "Ctrl-C")], ids=lambda v: str(v)
)
def test_sigterm_or_ctrl_c_keeps_the_run_folder_ends_the_kernels_and_leaves_no_temp_file(tmp_path, jobs, how):
    """SIGTERM to nbkit, or Ctrl-C (SIGINT to the terminal's foreground process group): the run folder
    stays, each running notebook is kept as far as it got, no kernel survives, and the temp folder holds
    nothing of the run (kernel sockets, connection files)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil
    from runner_notebooks import make_notebook

    d = tmp_path / "notebooks"
    d.mkdir()
    body = "import os, pathlib, time\npathlib.Path(f'kernel-{os.getpid()}.pid').touch()\ntime.sleep(120)\n"
    make_notebook(d / "01_slow.ipynb", body=body)
    make_notebook(d / "02_slow.ipynb", body=body)
    out = tmp_path / "runs" / "r"
    own_tmp = tmp_path / "tmp"  # this run's temp folder, apart from other jobs'
    own_tmp.mkdir()
    env = {**os.environ, "NBKIT_NOTEBOOKS": str(d), "TMPDIR": str(own_tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbkit.cli", "run", "--all", "--jobs", str(jobs), "-q", "--output", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a command started from a terminal has
    )
    try:
        # Every kernel busy in its cell (one at a time, or both with --jobs 2); one still starting
        # up would print its own traceback when interrupted.
        deadline = time.monotonic() + 120
        while len(list(d.glob("kernel-*.pid"))) < jobs and time.monotonic() < deadline:
            time.sleep(0.3)
        kernels = [int(p.stem.split("-")[1]) for p in d.glob("kernel-*.pid")]
        assert len(kernels) == jobs, "the notebooks never started"
        assert any(p.name.startswith(".r.tmp-") for p in out.parent.iterdir())
        assert json.loads((out / "index.json").read_text())["notebooks"][0]["status"] == "not started"
        assert list(own_tmp.glob("nbkit-kernel-*")), "the kernels' sockets are not in the run's temp folder"
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if how == "SIGTERM":
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert "terminated" in err and "Traceback" not in err
    else:
        assert proc.returncode == 130, err
        assert "nbkit: interrupted" in err and "Traceback" not in err, err
    # The run folder stays, the staging folder goes; each notebook that was running is kept as far as it got.
    assert [p.name for p in out.parent.iterdir()] == ["r"]
    status = {e["name"]: e["status"] for e in json.loads((out / "index.json").read_text())["notebooks"]}
    running = {"01_slow", "02_slow"} if jobs == 2 else {"01_slow"}
    assert {k for k, v in status.items() if v == "interrupted"} == running, status
    assert all((out / f"{name}.ipynb").is_file() for name in running)

    def alive(pid):
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + 20
    while any(alive(k) for k in kernels) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert not any(alive(k) for k in kernels), "a kernel survived"
    assert sorted(p.name for p in own_tmp.iterdir()) == [], "the run left files in the temp folder"


def test_a_partial_earlier_run_keeps_the_reference_order_for_the_notebooks_it_did_not_time(tmp_path):
    """An earlier run that timed only 02 (this machine: twice the reference) must not push the notebooks
    it did not time to file order: they keep their reference seconds, scaled the same way."""
    from nbkit.execute import Job
    from nbkit.timings import REFERENCE_SECONDS, expected_seconds, longest_first

    nbs = tmp_path / "nbs"
    nbs.mkdir()
    paths = [nbs / f"{n}.ipynb" for n in ("00_c", "01_a", "02_b", "03_d")]
    (nbs / REFERENCE_SECONDS).write_text(
        json.dumps({"smoke": {"00_c": 10, "01_a": 80, "02_b": 50, "03_d": 30}, "full": {}})
    )
    runs = tmp_path / "runs"
    (runs / "partial").mkdir(parents=True)
    (runs / "partial" / "timings.json").write_text(json.dumps({"smoke": True, "seconds": {"02_b": 100.0}}))
    seconds = expected_seconds(runs / "next", paths, smoke=True)
    assert seconds == {"00_c": 20.0, "01_a": 160.0, "02_b": 100.0, "03_d": 60.0}
    order = [j.path.stem for j in longest_first([Job(p, tmp_path, {}) for p in paths], seconds)]
    assert order == ["01_a", "02_b", "03_d", "00_c"]
    # no earlier run: the reference alone; no reference either: file order
    assert expected_seconds(tmp_path / "elsewhere" / "x", paths, smoke=True)["01_a"] == 80.0
    assert expected_seconds(tmp_path / "elsewhere" / "x", paths, smoke=False) == {}


def test_running_cell_names_the_cell_and_its_section(tmp_path):
    from nbkit.pool import running_cell

    def cell(kind, source, status=None):
        meta = {"papermill": {"status": status}} if status else {}
        return {"cell_type": kind, "source": source, "metadata": meta}

    nb = tmp_path / "01_x.ipynb"
    cells = [
        cell("markdown", "# Title\n\nintro"),
        cell("code", "SEED = 0", "completed"),
        cell("markdown", ["## 2. The ladder: ", "real ranks\n", "text"]),
        cell("code", "run()", "running"),
        cell("code", "more()", "pending"),
    ]
    assert running_cell(nb) == ""  # not saved yet
    nb.write_text(json.dumps({"cells": cells}))
    assert running_cell(nb) == "cell 2 of 3 (2. The ladder: real ranks)"
    cells[3]["metadata"]["papermill"]["status"] = "completed"
    cells[4]["metadata"] = {"papermill": {"status": "completed"}}
    nb.write_text(json.dumps({"cells": cells}))
    assert running_cell(nb) == "all 3 cells done, writing its page"
    nb.write_text('{"cells": [')  # caught half-written
    assert running_cell(nb) == ""


def test_a_pool_says_where_each_running_notebook_is(tmp_path):
    """With several notebooks at once there is no progress bar: every interval, one line per running
    notebook names it, its cell and section, and the time since it started."""
    import re

    from runner_notebooks import make_notebook

    from nbkit.execute import Job
    from nbkit.pool import execute_jobs

    d = tmp_path / "notebooks"
    d.mkdir()
    jobs = []
    for name in ("01_a", "02_b"):
        make_notebook(d / f"{name}.ipynb", body="import time\ntime.sleep(8)\n")
        jobs.append(Job(d / f"{name}.ipynb", tmp_path / "out" / name, {}))
    lines: list[str] = []
    results = execute_jobs(jobs, n_jobs=2, progress=True, log=lines.append, progress_every=1.0)
    assert all(r.ok for r in results), [r.error for r in results]
    for name in ("01_a", "02_b"):
        mine = [ln for ln in lines if ln.startswith(f"  … {name} ")]
        assert all(re.fullmatch(rf"  … {name} \d+:\d\d: .+", ln) for ln in mine), mine
        assert sum("cell 2 of 2 (Section one)" in ln for ln in mine) >= 2, lines
    quiet: list[str] = []
    execute_jobs(jobs, n_jobs=2, progress=False, log=quiet.append, progress_every=1.0)
    assert not [ln for ln in quiet if ln.startswith("  … ")]


def test_a_run_from_a_folder_without_notebooks_names_the_ones_it_used(tmp_path, monkeypatch):
    from runner_notebooks import make_notebook

    import nbkit.catalog
    import nbkit.runner
    from nbkit.runner import run_notebooks

    packaged = tmp_path / "site-packages" / "nbkit" / "notebooks"
    packaged.mkdir(parents=True)
    make_notebook(packaged / "01_alpha.ipynb", body="pass\n")
    for module in (nbkit.catalog, nbkit.runner):
        monkeypatch.setattr(module, "packaged_notebooks_dir", lambda: packaged)
    monkeypatch.delenv("NBKIT_NOTEBOOKS", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    lines: list[str] = []
    final, results = run_notebooks(["01"], output=work / "runs" / "r", progress=False, log=lines.append)
    assert results[0].ok, results[0].error
    assert f"notebooks: the ones nbkit came with, in {packaged.resolve()} (none in this folder" in lines[0]
    monkeypatch.chdir(packaged)  # there, or with a notebooks folder here: nothing to say
    assert nbkit.runner.packaged_fallback([packaged / "01_alpha.ipynb"]) is None
