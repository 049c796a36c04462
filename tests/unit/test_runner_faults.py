"""Faults a run meets — a kernel or worker killed, the disk full, a changed notebook on resume — each
injected on small generated notebooks: what the user sees, how fast, and that nothing finished is lost."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest
from runner_notebooks import make_notebook

from nbkit.cli import main

# Writes its kernel's pid where the test can find it, then works for a minute (long enough to be killed).
SLOW = "import os, pathlib, time\npathlib.Path(f'kernel-{os.getpid()}.pid').touch()\ntime.sleep(60)\n"
# Counts its executions in its notebook's folder; fails while the flag file is there.
FLAKY = (
    "import pathlib, nbkit\nwith open('count-{name}.txt', 'a') as fh:\n    fh.write('x')\n"
    "nbkit.record('n_squared', N * N)\n"
    "if pathlib.Path('fail-{name}').exists():\n    raise RuntimeError('{name} is told to fail')\n"
)


def _status(out: Path) -> dict[str, dict]:
    return {e["name"]: e for e in json.loads((out / "index.json").read_text())["notebooks"]}


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_for(pattern: str, folder: Path, n: int = 1, timeout: float = 120.0) -> list[Path]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(folder.glob(pattern))
        if len(found) >= n:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{pattern} never appeared in {folder}")


def _nbkit(args: list[str], nb_dir: Path, **extra_env: str) -> subprocess.Popen:
    env = {**os.environ, "NBKIT_NOTEBOOKS": str(nb_dir), **extra_env}
    return subprocess.Popen(
        [sys.executable, "-m", "nbkit.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def flaky_dir(tmp_path, monkeypatch):
    d = tmp_path / "notebooks"
    d.mkdir()
    for name in ("01_alpha", "02_beta"):
        make_notebook(d / f"{name}.ipynb", body=FLAKY.format(name=name))
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(d))
    return d


# -- resume -------------------------------------------------------------------------------------------


def test_resume_reruns_only_the_notebooks_not_ok_with_the_recorded_parameters(flaky_dir, tmp_path, capsys):
    out = tmp_path / "runs" / "r"
    (flaky_dir / "fail-02_beta").touch()
    assert main(["run", "--all", "-p", "N", "4", "--output", str(out), "-q"]) == 1
    assert {k: v["status"] for k, v in _status(out).items()} == {"01_alpha": "ok", "02_beta": "failed"}
    record = json.loads((out / "run.json").read_text())
    assert record["parameters"]["02_beta"] == {"N": "4"} and len(record["notebooks"][1]["sha256"]) == 64
    capsys.readouterr()

    (flaky_dir / "fail-02_beta").unlink()
    assert main(["run", "--resume", str(out), "-q"]) == 0, capsys.readouterr()
    assert {k: v["status"] for k, v in _status(out).items()} == {"01_alpha": "ok", "02_beta": "ok"}
    assert (flaky_dir / "count-01_alpha.txt").read_text() == "x"  # alpha was not run again
    assert (flaky_dir / "count-02_beta.txt").read_text() == "xx"
    assert json.loads((out / "metrics.json").read_text()) == {
        "01_alpha": {"n_squared": 16},
        "02_beta": {"n_squared": 16},
    }
    assert "2 of 2 notebooks ok" in (out / "index.html").read_text()
    assert set(json.loads((out / "timings.json").read_text())["seconds"]) == {"01_alpha", "02_beta"}
    assert [p.name for p in out.parent.iterdir()] == ["r"]
    # Nothing left to do is a success that runs nothing.
    assert main(["run", "--resume", str(out), "-q"]) == 0
    assert (flaky_dir / "count-02_beta.txt").read_text() == "xx"


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory):
    """One run of 01 (ok) and 02 (failed), made once; each case below gets its own copy."""
    root = tmp_path_factory.mktemp("failed-run")
    d = root / "notebooks"
    d.mkdir()
    for name in ("01_alpha", "02_beta"):
        make_notebook(d / f"{name}.ipynb", body=FLAKY.format(name=name))
    (d / "fail-02_beta").touch()
    proc = _nbkit(["run", "--all", "--output", str(root / "runs" / "r"), "-q"], d)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    return root


@pytest.mark.parametrize(
    ("change", "args", "message"),
    [
        ("notebook", [], "notebook 02_beta .* changed since the run"),
        ("record", [], "parameters were edited since the run"),
        ("gone", [], "notebook 02_beta .* no longer exists"),
        (None, ["-p", "N", "5"], "do not also name notebooks or give -p"),
        (None, ["01"], "do not also name notebooks"),
        (None, ["--all"], "do not also pass --all"),
        ("not-a-run", [], "no run.json in it"),
        ("missing", [], "not a folder"),
        ("garbled", [], "run.json: unreadable"),
    ],
)
def test_resume_refuses_what_it_cannot_resume(
    failed_run, tmp_path, monkeypatch, capsys, change, args, message
):
    import re
    import shutil

    shutil.copytree(failed_run, tmp_path, dirs_exist_ok=True)
    flaky_dir, out = tmp_path / "notebooks", tmp_path / "runs" / "r"
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(flaky_dir))
    record = json.loads((out / "run.json").read_text())
    for entry in record["notebooks"]:  # the copy's notebooks (paths are not part of the recorded hashes)
        entry["path"] = str(flaky_dir / Path(entry["path"]).name)
    (out / "run.json").write_text(json.dumps(record))
    target = out
    if change == "notebook":
        make_notebook(flaky_dir / "02_beta.ipynb", body="print('edited')\n")
    elif change == "record":
        record["parameters"]["01_alpha"]["N"] = "7"
        (out / "run.json").write_text(json.dumps(record))
    elif change == "gone":
        (flaky_dir / "02_beta.ipynb").unlink()
    elif change == "not-a-run":
        target = tmp_path
    elif change == "missing":
        target = tmp_path / "nowhere"
    elif change == "garbled":
        (out / "run.json").write_text("{")
    before = sorted(p.name for p in out.iterdir())
    assert main(["run", "--resume", str(target), *args, "-q"]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and err.count("\n") == 1 and "Traceback" not in err, err
    assert sorted(p.name for p in out.iterdir()) == before  # nothing run, nothing written
    assert (flaky_dir / "count-01_alpha.txt").read_text() == "x"


# -- a killed kernel, a killed worker -----------------------------------------------------------------


def test_a_kernel_killed_mid_run_fails_its_notebook_within_seconds_and_the_other_finishes(tmp_path):
    d = tmp_path / "notebooks"
    d.mkdir()
    make_notebook(d / "01_victim.ipynb", body=SLOW)
    make_notebook(
        d / "02_other.ipynb",
        body="import os, pathlib, time\npathlib.Path(f'other-{os.getpid()}.pid').touch()\n"
        "while not list(pathlib.Path('.').glob('killed')):\n    time.sleep(0.2)\nimport "
        "nbkit\nnbkit.record('done', 1)\n",
    )
    out = tmp_path / "runs" / "r"
    proc = _nbkit(["run", "--all", "--jobs", "2", "-q", "--output", str(out)], d)
    try:
        (victim,) = _wait_for("kernel-*.pid", d)
        _wait_for("other-*.pid", d)
        pid = int(victim.stem.split("-")[1])
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        (d / "killed").touch()  # the other notebook finishes only after the kill
        while "01_victim" not in {k for k, v in _status(out).items() if v["status"] == "failed"}:
            assert time.monotonic() - killed_at < 30, "the dead kernel was not noticed"
            time.sleep(0.1)
        detected_s = time.monotonic() - killed_at
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "01_victim: kernel died (signal 9, SIGKILL) in cell 2" in err and "Traceback" not in err, err
    status = _status(out)
    assert status["02_other"]["status"] == "ok" and status["01_victim"]["status"] == "failed"
    assert "kernel died (signal 9, SIGKILL)" in status["01_victim"]["error"]
    assert (out / "02_other.ipynb").is_file() and (out / "01_victim.ipynb").is_file()
    assert json.loads((out / "metrics.json").read_text())["02_other"] == {"done": 1}
    print(f"FIGURE kernel SIGKILL: failed in the index {detected_s:.1f} s after the kill")
    assert detected_s < 15, detected_s


def test_a_worker_killed_mid_run_fails_only_its_notebook_and_ends_its_kernel(tmp_path):
    d = tmp_path / "notebooks"
    d.mkdir()
    # Works in a temporary folder with a child process, as the ZeRO ladder does: both must go with the worker.
    make_notebook(
        d / "01_victim.ipynb",
        body="import os, pathlib, subprocess, sys, tempfile, time\n"
        "with tempfile.TemporaryDirectory(prefix='nbkit-work-'):\n"
        "    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "    try:\n"
        "        pathlib.Path(f'kernel-{os.getpid()}.pid').touch()\n        time.sleep(60)\n"
        "    finally:\n        child.kill()\n",
    )
    make_notebook(d / "02_other.ipynb", body="import nbkit\nnbkit.record('x', 2)\n")
    make_notebook(d / "03_third.ipynb", body="import nbkit\nnbkit.record('x', 3)\n")
    out = tmp_path / "runs" / "r"
    own_tmp = tmp_path / "tmp"  # the kernels' sockets and connection files go here, apart from other jobs'
    own_tmp.mkdir()
    proc = _nbkit(["run", "--all", "--jobs", "2", "-q", "--output", str(out)], d, TMPDIR=str(own_tmp))
    try:
        (victim,) = _wait_for("kernel-*.pid", d)
        kernel = psutil.Process(int(victim.stem.split("-")[1]))
        nbkit_proc = psutil.Process(proc.pid)
        worker = next(
            p for p in nbkit_proc.children() if kernel.pid in {c.pid for c in p.children(recursive=True)}
        )
        worker.kill()
        killed_at = time.monotonic()
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "01_victim: worker died (killed by SIGKILL (signal 9)); its kernel was ended" in err, err
    status = _status(out)
    assert [status[n]["status"] for n in ("01_victim", "02_other", "03_third")] == ["failed", "ok", "ok"]
    deadline = killed_at + 10
    while _alive(kernel.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(kernel.pid), "the dead worker's kernel survived"
    assert list(own_tmp.iterdir()) == [], "the dead worker's kernel left its files or its temporary folder"
    print(
        f"FIGURE worker SIGKILL: run ended {time.monotonic() - killed_at:.1f} s after the kill (two more "
        "notebooks ran)"
    )


# -- the output folder stops taking files ---------------------------------------------------------------


def test_a_full_disk_mid_run_is_one_clear_error_and_the_finished_notebooks_stay_intact(
    tmp_path, monkeypatch, capsys
):
    import papermill.engines
    import papermill.execute

    d = tmp_path / "notebooks"
    d.mkdir()
    for name in ("01_a", "02_b", "03_c"):
        make_notebook(d / f"{name}.ipynb", body=f"import nbkit\nnbkit.record('name', {name!r})\n")
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(d))
    real = papermill.engines.write_ipynb

    def full_after_the_first(nb, path, *a, **kw):  # the disk fills while 02 is being written
        if "02_b" in str(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(nb, path, *a, **kw)

    monkeypatch.setattr(papermill.engines, "write_ipynb", full_after_the_first)
    monkeypatch.setattr(papermill.execute, "write_ipynb", full_after_the_first)
    out = tmp_path / "runs" / "r"
    assert main(["run", "--all", "--output", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert (
        err.count("nbkit: error:") == 1 and "No space left on device (errno 28)" in err and "02_b" in err
    ), err
    assert "Traceback" not in err
    assert nbformat.read(out / "01_a.ipynb", as_version=4).cells  # intact, readable
    assert (out / "01_a.html").is_file()
    status = _status(out)
    assert status["01_a"]["status"] == "ok" and status["03_c"]["status"] == "not started"
    assert not (out / "03_c.ipynb").exists()
    assert [p.name for p in out.parent.iterdir()] == ["r"] and not [
        p for p in out.iterdir() if p.name.startswith(".")
    ]


def test_a_refused_index_write_keeps_the_previous_index(tmp_path, monkeypatch):
    from nbkit import runfolder

    target = tmp_path / "index.json"
    runfolder.write_json(target, {"v": 1})
    real_replace = os.replace

    def read_only(src, dst):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dst))

    monkeypatch.setattr(runfolder.os, "replace", read_only)
    with pytest.raises(
        runfolder.OutputError, match=r"cannot write .*index.json: Read-only file system \(errno 30\)"
    ):
        runfolder.write_json(target, {"v": 2})
    monkeypatch.setattr(runfolder.os, "replace", real_replace)
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["index.json"]  # no partial file left beside it


# -- sweeps: resume, a Dask worker killed ---------------------------------------------------------------

# Counts its runs per N; fails for N in the flag file's list; with a pid file while it works.
SWEEP_BODY = (
    "import os, pathlib, time, nbkit\npathlib.Path(f'kernel-{N}-{os.getpid()}.pid').touch()\n"
    "with open(f'count-{N}.txt', 'a') as fh:\n    fh.write('x')\n"
    "flag = pathlib.Path('fail-n')\n"
    "if flag.exists() and str(N) in flag.read_text().split(','):\n    raise RuntimeError(f'N={N} told to "
    "fail')\n"
    "time.sleep(float(os.environ.get('SWEEP_SLEEP', '0')))\nnbkit.record('n_squared', N * N)\n"
)


def _rows(out: Path) -> list[dict]:
    import csv

    with open(out / "comparison.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture
def sweep_dir(tmp_path, monkeypatch):
    d = tmp_path / "notebooks"
    d.mkdir()
    make_notebook(d / "01_sweep.ipynb", body=SWEEP_BODY)
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(d))
    return d


def test_sweep_resume_runs_only_the_combinations_not_ok(sweep_dir, tmp_path, capsys):
    out = tmp_path / "sweep"
    (sweep_dir / "fail-n").write_text("3")
    assert main(["sweep", "01", "--grid", "N=2,3,4", "-p", "RATE", "0.25", "--output", str(out), "-q"]) == 1
    assert [(r["N"], r["status"]) for r in _rows(out)] == [("2", "ok"), ("3", "failed"), ("4", "ok")]
    assert (out / "runs" / "001" / "01_sweep.ipynb").is_file()  # the failed run's notebook, kept
    assert "sweep --resume" in capsys.readouterr().err
    (sweep_dir / "fail-n").unlink()
    assert main(["sweep", "--resume", str(out), "-q"]) == 0, capsys.readouterr()
    rows = _rows(out)
    assert [(r["N"], r["status"], r["n_squared"]) for r in rows] == [
        ("2", "ok", "4"),
        ("3", "ok", "9"),
        ("4", "ok", "16"),
    ]
    assert [(sweep_dir / f"count-{n}.txt").read_text() for n in (2, 3, 4)] == ["x", "xx", "x"]
    assert [p.name for p in out.parent.iterdir() if p.name != "notebooks"] == ["sweep"]
    # A changed notebook, or a grid given with --resume, is refused (exit 2, one line).
    assert main(["sweep", "--resume", str(out), "--grid", "N=5"]) == 2
    assert "do not also name a notebook or give --grid" in capsys.readouterr().err
    make_notebook(sweep_dir / "01_sweep.ipynb", body="print('edited')\n")
    assert main(["sweep", "--resume", str(out)]) == 2
    assert "changed since the run" in capsys.readouterr().err


def test_a_dask_worker_killed_mid_sweep_the_sweep_completes_and_leaves_no_kernel(
    sweep_dir, tmp_path, monkeypatch
):
    distributed = pytest.importorskip("distributed")
    import threading

    from nbkit.sweep import run_sweep

    monkeypatch.setenv("SWEEP_SLEEP", "4")
    out = tmp_path / "sweep"
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        protocol="tcp",
    ) as cluster:
        got: dict = {}

        def sweep():
            try:
                got["result"] = run_sweep(
                    "01",
                    ["N=2,3,4"],
                    scheduler=cluster.scheduler_address,
                    output=out,
                    progress=False,
                    log=lambda _m: None,
                )
            except BaseException as exc:  # noqa: BLE001 (reported by the assertion below)
                got["error"] = exc

        thread = threading.Thread(target=sweep)
        thread.start()
        first = _wait_for("kernel-*.pid", sweep_dir)[0]
        victim = psutil.Process(
            int(first.stem.split("-")[2])
        ).parent()  # the Dask worker that started this kernel
        assert victim.pid != os.getpid()
        victim.kill()
        killed_at = time.monotonic()
        thread.join(timeout=240)
        assert not thread.is_alive(), "the sweep hung after its worker was killed"
        elapsed = time.monotonic() - killed_at
    assert "error" not in got, got.get("error")
    rows = _rows(out)
    assert sorted(r["N"] for r in rows) == ["2", "3", "4"]  # every combination, once
    assert all(r["status"] in ("ok", "failed") for r in rows), rows
    if any(r["status"] != "ok" for r in rows):  # the scheduler gave up on the task: resume completes it
        assert main(["sweep", "--resume", str(out), "-q"]) == 0
        assert [r["status"] for r in _rows(out)] == ["ok"] * 3
    kernels = [int(p.stem.split("-")[2]) for p in sweep_dir.glob("kernel-*.pid")]
    assert procs_gone(kernels), "a kernel of the killed worker survived"
    print(
        f"FIGURE Dask worker SIGKILL: sweep done {elapsed:.1f} s after the kill; statuses "
        f"{[r['status'] for r in rows]}"
    )
    assert elapsed < 200


def procs_gone(pids, timeout_s: float = 15.0) -> bool:
    from nbkit.procs import wait_gone

    return wait_gone(pids, timeout_s) == []


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MiB tmpfs of our own (needs root and mount rights: skipped elsewhere)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'not root'}); the monkeypatched test "
            "covers the path"
        )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_a_real_file_system_refusing_writes_mid_run(small_disk, tmp_path, fault):
    d = tmp_path / "notebooks"
    d.mkdir()
    make_notebook(d / "01_a.ipynb", body="import nbkit\nnbkit.record('name', 'a')\n")
    if fault == "full":  # 02's output (5 MB of text) does not fit on the 3 MiB disk
        make_notebook(d / "02_b.ipynb", body="print('x' * 5_000_000)\n")
    else:  # 02 waits until the test has remounted the disk read-only
        make_notebook(
            d / "02_b.ipynb",
            body="import pathlib, time\npathlib.Path('started').touch()\n"
            "while not pathlib.Path('go').exists():\n    time.sleep(0.1)\nprint('after')\n",
        )
    make_notebook(d / "03_c.ipynb", body="print('c')\n")
    out = small_disk / "r"
    proc = _nbkit(["run", "--all", "-q", "--output", str(out)], d)
    try:
        if fault == "read-only":
            _wait_for("started", d)
            subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
            (d / "go").touch()
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    why = "No space left on device (errno 28)" if fault == "full" else "Read-only file system (errno 30)"
    assert proc.returncode == 1 and err.count("nbkit: error:") == 1 and why in err, err
    assert "Traceback" not in err, err
    print(f"FIGURE disk {fault}: {[ln for ln in err.splitlines() if 'nbkit: error:' in ln][0]}")
    assert nbformat.read(out / "01_a.ipynb", as_version=4).cells and (out / "01_a.html").is_file()
    status = _status(out)
    assert status["01_a"]["status"] == "ok" and status["03_c"]["status"] == "not started", status
    assert not (out / "03_c.ipynb").exists()


def test_a_crashed_kernel_names_its_signal_and_what_it_last_said_and_a_quiet_kernel_leaves_no_log(
    tmp_path, monkeypatch
):
    """The kernel's own stdout and stderr go to NAME.kernel.log in the run folder, not into the run's
    output: a segfault's "Fatal Python error" (the kernel's fault handler writes it there) is quoted in
    the notebook's error; a kernel that wrote nothing of its own leaves no file."""
    d = tmp_path / "notebooks"
    d.mkdir()
    # Crashes on its first run only, so that --resume re-runs it to the end.
    make_notebook(
        d / "01_crash.ipynb",
        body="import ctypes, pathlib\nif not pathlib.Path('crashed').exists():\n"
        "    pathlib.Path('crashed').touch()\n    ctypes.string_at(0)\n",
    )
    make_notebook(d / "02_quiet.ipynb")
    out = tmp_path / "runs" / "r"
    proc = _nbkit(["run", "--all", "-q", "--output", str(out)], d)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    assert "01_crash: kernel died (signal 11, SIGSEGV) in cell 2" in err, err
    assert "it last said 'Fatal Python error: Segmentation fault' (01_crash.kernel.log)" in err, err
    assert "Traceback" not in err and "Fatal Python error" not in err.replace("it last said 'Fatal", ""), err
    assert "Fatal Python error" in (out / "01_crash.kernel.log").read_text()
    assert _status(out)["02_quiet"]["status"] == "ok"
    assert not (out / "02_quiet.kernel.log").exists()
    index = (out / "index.html").read_text()
    assert "href='01_crash.kernel.log'" in index and "02_quiet.kernel.log" not in index
    # Resumed, the notebook runs to its end with a quiet kernel: the crashed attempt's log goes with it.
    monkeypatch.setenv("NBKIT_NOTEBOOKS", str(d))
    assert main(["run", "--resume", str(out), "-q"]) == 0
    assert _status(out)["01_crash"]["status"] == "ok"
    assert not (out / "01_crash.kernel.log").exists() and "kernel.log" not in (out / "index.html").read_text()
