"""`nbkit init DIR` (the user's own copies of the notebooks) and `nbkit lab DIR`, with their bad input."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from nbkit import workspace
from nbkit.catalog import notebooks_dir, packaged_notebooks_dir
from nbkit.cli import main
from nbkit.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + ["reference_seconds.json"]


def test_init_copies_every_notebook_and_records_what_it_copied(tmp_path, capsys):
    target = tmp_path / "mine"
    assert main(["init", str(target)]) == 0
    assert sorted(p.name for p in target.iterdir() if not p.name.startswith(".")) == sorted(SHIPPED)
    for name in SHIPPED:
        assert (target / name).read_bytes() == (ROOT / "notebooks" / name).read_bytes()
    manifest = json.loads((target / workspace.MANIFEST).read_text())
    assert sorted(manifest["files"]) == sorted(SHIPPED)
    assert f"nbkit lab {target}" in capsys.readouterr().out
    # Again: nothing to do, nothing refused.
    res = workspace.init(target)
    assert sorted(res.unchanged) == sorted(SHIPPED)
    assert not res.copied and not res.updated


def test_init_defaults_to_notebooks_here_which_nbkit_run_then_uses(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NBKIT_NOTEBOOKS", raising=False)
    assert notebooks_dir().resolve() == packaged_notebooks_dir().resolve()
    assert main(["init"]) == 0
    assert notebooks_dir().resolve() == (tmp_path / "notebooks").resolve()
    monkeypatch.chdir(tmp_path / "notebooks")  # a kernel started in the folder, or `cd notebooks`
    assert notebooks_dir().resolve() == (tmp_path / "notebooks").resolve()


def test_init_refuses_to_overwrite_a_changed_notebook_and_writes_nothing(tmp_path, capsys):
    target = tmp_path / "mine"
    workspace.init(target)
    edited = target / SHIPPED[1]
    edited.write_text(edited.read_text() + " ")
    (target / SHIPPED[2]).unlink()  # would be copied, but the refusal writes nothing
    assert main(["init", str(target)]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and err.startswith("nbkit: error: ")
        and str(edited) in err
        and "Traceback" not in err
    )
    assert not (target / SHIPPED[2]).exists()


def test_init_updates_a_copy_nobody_changed_since_an_older_init(tmp_path):
    """After upgrading nbkit: a file still as the older init wrote it is replaced; the user's edits are
    not."""
    target = tmp_path / "mine"
    workspace.init(target)
    old = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n'
    manifest = json.loads((target / workspace.MANIFEST).read_text())
    name = SHIPPED[0]
    (target / name).write_bytes(old)
    import hashlib

    manifest["files"][name] = hashlib.sha256(old).hexdigest()
    (target / workspace.MANIFEST).write_text(json.dumps(manifest))
    res = workspace.init(target)
    assert res.updated == [name]
    assert (target / name).read_bytes() == (ROOT / "notebooks" / name).read_bytes()


def test_init_leaves_other_files_alone(tmp_path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "my_notes.txt").write_text("mine")
    workspace.init(target)
    assert (target / "my_notes.txt").read_text() == "mine"


def _a_file(tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("x")
    return f


def _bad_manifest(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / workspace.MANIFEST).write_text("[1, 2")
    return d


def _existing_foreign_notebook(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / SHIPPED[0]).write_text("{}")  # a notebook of the same name that nbkit init did not write
    return d


@pytest.mark.parametrize(
    "make_target, expected",
    [
        (_a_file, "is a file; give a folder"),
        (lambda t: _a_file(t) / "sub", "which is a file"),
        (_bad_manifest, "not the JSON object nbkit init writes"),
        (_existing_foreign_notebook, "changed since nbkit init copied it"),
        (lambda t: packaged_notebooks_dir(), "holds the notebooks nbkit came with"),
    ],
    ids=["dir-is-a-file", "dir-under-a-file", "bad-manifest", "foreign-notebook", "the-packaged-folder"],
)
def test_init_bad_input_is_one_line_exit_2(tmp_path, capsys, make_target, expected):
    target = make_target(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["init", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nbkit: error: ") and err.count("\n") == 1 and expected in err, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before, "a refused init wrote something"


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root writes anywhere")
def test_init_into_an_unwritable_folder_is_one_line_exit_2(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main(["init", str(locked / "nb")]) == 2
    assert "cannot write the notebooks there" in capsys.readouterr().err


@pytest.mark.parametrize(
    "make_dir, extra, expected",
    [
        (lambda t: t / "missing", [], "does not exist; make it with: nbkit init"),
        (_a_file, [], "is not a folder"),
        (lambda t: t, ["--port", "70000"], "--port 70000: expected a TCP port, 1..65535"),
        (lambda t: t, ["--port", "0"], "--port 0: expected a TCP port"),
    ],
    ids=["missing", "file", "port-too-big", "port-zero"],
)
def test_lab_bad_input_is_one_line_exit_2(tmp_path, capsys, make_dir, extra, expected):
    assert main(["lab", str(make_dir(tmp_path)), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nbkit: error: ") and err.count("\n") == 1 and expected in err, err


def test_lab_command_runs_jupyterlab_with_this_python_and_its_kernel(tmp_path):
    cmd, env = workspace.lab_command(tmp_path, port=9999, browser=False)
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"]
    assert (
        f"--ServerApp.root_dir={tmp_path.resolve()}" in cmd
        and "--no-browser" in cmd
        and "--ServerApp.port=9999" in cmd
    )
    assert env["JUPYTER_PREFER_ENV_PATH"] == "1"
    assert os.path.abspath(workspace.kernel_python(env)) == os.path.abspath(sys.executable)


def test_lab_refuses_when_the_python3_kernel_runs_another_python(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(workspace, "kernel_python", lambda env=None: "/opt/other/bin/python")
    assert main(["lab", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "/opt/other/bin/python" in err and "ipykernel install --sys-prefix" in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nbkit_lab_serves_the_folder_with_this_environments_kernel(tmp_path):
    """A real JupyterLab: its root is the init'ed folder and its default kernel starts this Python."""
    workspace.init(tmp_path / "nb")
    port, token = _free_port(), "nbkit-test-token"
    env = {**os.environ, "JUPYTER_TOKEN": token, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbkit.cli", "lab", str(tmp_path / "nb"), "--no-browser", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def get(path):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}?token={token}", timeout=5) as r:
            return json.loads(r.read())

    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                specs = get("/api/kernelspecs")
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()[-3000:]
                assert time.monotonic() < deadline, "JupyterLab did not answer within 120 s"
                time.sleep(0.5)
        assert specs["default"] == "python3"
        argv0 = specs["kernelspecs"]["python3"]["spec"]["argv"][0]
        # A bare "python" is started with the server's own interpreter by jupyter_client.
        assert argv0 in ("python", "python3") or os.path.abspath(argv0) == os.path.abspath(sys.executable), (
            argv0
        )
        names = sorted(item["name"] for item in get("/api/contents")["content"])
        assert [n for n in names if n.endswith(".ipynb")] == [n for n in SHIPPED if n.endswith(".ipynb")]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_run_folders_find_the_runs_beside_the_current_run_and_here(tmp_path, monkeypatch):
    runs = tmp_path / "elsewhere" / "runs"
    runs.mkdir(parents=True)
    # `nbkit run` names the folder the notebook is published into; it need not exist yet.
    monkeypatch.setenv("NBKIT_RUN_DIR", str(runs / "20260101-000000"))
    (tmp_path / "nb" / "runs").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "nb")
    assert workspace.run_folders() == [runs.resolve(), (tmp_path / "nb" / "runs").resolve()]
    monkeypatch.delenv("NBKIT_RUN_DIR")
    monkeypatch.chdir(tmp_path)
    assert workspace.run_folders() == []


def test_init_without_packaged_notebooks_says_to_reinstall(tmp_path, monkeypatch):
    import nbkit.catalog

    monkeypatch.setattr(nbkit.catalog, "packaged_notebooks_dir", lambda: tmp_path / "empty")
    with pytest.raises(UsageError, match="no notebooks came with this nbkit"):
        workspace.init(tmp_path / "nb")
