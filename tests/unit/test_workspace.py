"""`nbkit init DIR` (the user's own copies of the notebooks) and `nbkit lab DIR`, with their bad input."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
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
        shipped = ROOT / "notebooks" / name
        assert (target / name).read_bytes() == workspace.plain_copy(shipped)
        if name.endswith(".ipynb"):  # the same notebook, without the repository's jupytext pairing
            copy, original = (nbformat.read(p, as_version=4) for p in (target / name, shipped))
            assert "jupytext" in original.metadata and "jupytext" not in copy.metadata
            assert copy.cells == original.cells and copy.metadata.kernelspec == original.metadata.kernelspec
    manifest = json.loads((target / workspace.MANIFEST).read_text())
    assert sorted(manifest["files"]) == sorted(SHIPPED)
    assert sorted(manifest["sources"]) == sorted(n for n in SHIPPED if n.endswith(".ipynb"))
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


def _edit_first_code_cell(path: Path, text: str = "# my note\n") -> None:
    nb = nbformat.read(path, as_version=4)
    code = next(
        c for c in nb.cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])
    )
    code.source = text + code.source
    nbformat.write(nb, path)


def _run_in_place(path: Path) -> None:
    """What running a notebook in JupyterLab and its autosave leave: outputs, counts, kernel metadata."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = i + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"ran {i}\n")]
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    nbformat.write(nb, path)


def test_init_keeps_an_edited_notebook_names_it_and_does_the_rest(tmp_path, capsys):
    target = tmp_path / "mine"
    workspace.init(target)
    edited = target / SHIPPED[1]
    _edit_first_code_cell(edited)
    before = edited.read_bytes()
    (target / SHIPPED[2]).unlink()
    assert main(["init", str(target)]) == 0
    out = capsys.readouterr().out
    assert f"kept as you edited them: {SHIPPED[1]} (" in out and f"copied: {SHIPPED[2]}" in out
    assert edited.read_bytes() == before and (target / SHIPPED[2]).is_file()


def test_init_keeps_a_notebook_it_did_not_write(tmp_path, capsys):
    target = tmp_path / "mine"
    target.mkdir()
    (target / SHIPPED[0]).write_text("{}")  # a notebook of the same name that nbkit init did not write
    assert main(["init", str(target)]) == 0
    assert f"kept as you edited them: {SHIPPED[0]}" in capsys.readouterr().out
    assert (target / SHIPPED[0]).read_text() == "{}"


def test_a_notebook_only_run_keeps_its_outputs_and_does_not_block_init(tmp_path, capsys):
    """Running a copy (outputs, counts, metadata saved) is not editing it: a later init leaves it as run
    and still updates or copies the others; one copied by an older init with the jupytext pairing has the
    pairing taken out, its outputs kept."""
    target = tmp_path / "mine"
    workspace.init(target)
    ran, paired = target / SHIPPED[1], target / SHIPPED[2]
    _run_in_place(ran)
    paired.write_bytes((ROOT / "notebooks" / SHIPPED[2]).read_bytes())  # as the older init copied it
    _run_in_place(paired)
    ran_bytes = ran.read_bytes()
    (target / SHIPPED[0]).unlink()
    assert main(["init", str(target)]) == 0
    out = capsys.readouterr().out
    assert "kept" not in out and f"copied: {SHIPPED[0]}" in out
    assert SHIPPED[1] in out.split("already there: ")[1].splitlines()[0]
    assert f"pairing with a .py file taken out: {SHIPPED[2]}" in out
    assert ran.read_bytes() == ran_bytes
    unpaired = nbformat.read(paired, as_version=4)
    assert "jupytext" not in unpaired.metadata
    assert all(c.outputs for c in unpaired.cells if c.cell_type == "code"), "the outputs were dropped"


def test_init_updates_a_notebook_only_run_since_an_older_init_copied_it(tmp_path):
    """After upgrading nbkit: a copy whose sources are those the older init wrote, run since (outputs),
    is replaced by the new version; an edited one is not."""
    target = tmp_path / "mine"
    workspace.init(target)
    name, edited_name = SHIPPED[1], SHIPPED[2]
    for n in (name, edited_name):  # what an older nbkit's init wrote: other sources, recorded as such
        _edit_first_code_cell(target / n, "# an older version of this cell\n")
    manifest = json.loads((target / workspace.MANIFEST).read_text())
    for n in (name, edited_name):
        data = (target / n).read_bytes()
        manifest["files"][n] = hashlib.sha256(data).hexdigest()
        manifest["sources"][n] = workspace.fingerprint(data)
    (target / workspace.MANIFEST).write_text(json.dumps(manifest))
    _run_in_place(target / name)
    _edit_first_code_cell(target / edited_name, "# the user's own line\n")
    res = workspace.init(target)
    assert res.updated == [name] and res.kept == [edited_name]
    assert (target / name).read_bytes() == workspace.plain_copy(ROOT / "notebooks" / name)
    assert "the user's own line" in (target / edited_name).read_text()


def test_opening_a_copy_in_jupyterlab_writes_no_py_twin(tmp_path):
    """jupytext's contents manager (what JupyterLab saves through here) pairs a notebook whose metadata
    asks for it: a copy made by init does not; the repository's own notebook, copied as is, would."""
    from jupytext import TextFileContentsManager

    target = tmp_path / "mine"
    workspace.init(target)
    raw = tmp_path / "raw"
    raw.mkdir()
    name = SHIPPED[2]
    (raw / name).write_bytes((ROOT / "notebooks" / name).read_bytes())
    for folder, twin in ((target, False), (raw, True)):
        cm = TextFileContentsManager(root_dir=str(folder))
        cm.save(cm.get(name), name)
        assert (folder / name).with_suffix(".py").exists() == twin, folder


def test_init_updates_a_copy_nobody_changed_since_an_older_init(tmp_path):
    """After upgrading nbkit: a file still as the older init wrote it is replaced; the user's edits are
    not."""
    target = tmp_path / "mine"
    workspace.init(target)
    old = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n'
    manifest = json.loads((target / workspace.MANIFEST).read_text())
    name = SHIPPED[0]
    (target / name).write_bytes(old)
    manifest["files"][name] = hashlib.sha256(old).hexdigest()
    (target / workspace.MANIFEST).write_text(json.dumps(manifest))
    res = workspace.init(target)
    assert res.updated == [name]
    assert (target / name).read_bytes() == workspace.plain_copy(ROOT / "notebooks" / name)


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


@pytest.mark.parametrize(
    "make_target, expected",
    [
        (_a_file, "is a file; give a folder"),
        (lambda t: _a_file(t) / "sub", "which is a file"),
        (_bad_manifest, "not the JSON object nbkit init writes"),
        (lambda t: packaged_notebooks_dir(), "holds the notebooks nbkit came with"),
    ],
    ids=["dir-is-a-file", "dir-under-a-file", "bad-manifest", "the-packaged-folder"],
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
