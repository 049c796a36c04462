"""scripts/build_llama_server.py (run by make setup): what it refuses, skips and patches, without
compiling."""

import io
import json
import tarfile
from pathlib import Path

import pytest
from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def b():
    return load_script(ROOT / "scripts" / "build_llama_server.py", "build_llama_server")


def _tree(tmp_path, text):
    src = tmp_path / "llama.cpp"
    (src / "tools" / "server").mkdir(parents=True)
    (src / "tools" / "server" / "server-context.cpp").write_text(text)
    return src


def test_patch_makes_the_penalty_window_start_empty(b, tmp_path):
    src = _tree(tmp_path, "void init_sampler() const {\n" + b.PATCH_OLD + "\n}\n")
    b.apply_patch(src)
    text = (src / b.PATCH_FILE).read_text()
    assert "common_sampler_accept" not in text and "n_text++" in text and "nbkit:" in text


@pytest.mark.parametrize(
    ("text", "pattern"),
    [("// the code moved away\n",
      r"server-context.cpp: the code the 'penalty-window-without-prompt' patch replaces "
      r"was not found exactly once"),
     ("{old}\n{old}\n", r"not found exactly once")],
)  # fmt: skip
def test_patch_refuses_a_source_it_does_not_match(b, tmp_path, text, pattern):
    src = _tree(tmp_path, text.format(old=b.PATCH_OLD))
    with pytest.raises(b.BuildError, match=pattern):
        b.apply_patch(src)


def test_extract_takes_only_the_vendored_llama_cpp(b, tmp_path):
    sdist = tmp_path / "llama_cpp_python-9.9.9.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        # The real sdist also carries the submodule's git metadata under .git/modules/vendor/llama.cpp.
        for name in (
            "llama_cpp_python-9.9.9/llama_cpp/__init__.py",
            "llama_cpp_python-9.9.9/vendor/llama.cpp/CMakeLists.txt",
            "llama_cpp_python-9.9.9/.git/modules/vendor/llama.cpp/HEAD",
        ):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"x\n"))
    src = b.extract_llama_cpp(sdist, tmp_path / "out")
    assert (
        src == tmp_path / "out" / "llama_cpp_python-9.9.9" / "vendor" / "llama.cpp"
        and (src / "CMakeLists.txt").is_file()
    )
    assert not (tmp_path / "out" / "llama_cpp_python-9.9.9" / "llama_cpp").exists()
    assert not (tmp_path / "out" / "llama_cpp_python-9.9.9" / ".git").exists()
    empty = tmp_path / "empty.tar.gz"
    with tarfile.open(empty, "w:gz"):
        pass
    with pytest.raises(b.BuildError, match=r"empty.tar.gz has no vendor/llama.cpp tree"):
        b.extract_llama_cpp(empty, tmp_path / "out2")


def test_up_to_date_binary_is_not_rebuilt(b, tmp_path, monkeypatch):
    monkeypatch.setattr(b, "installed_version", lambda: "1.2.3")
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    (tmp_path / "llama-server").write_text("binary")
    (tmp_path / "llama-server.json").write_text(json.dumps(b.build_info("1.2.3", [])))
    monkeypatch.setattr(b, "fetch_sdist", lambda *a: pytest.fail("an up-to-date binary must not be rebuilt"))
    assert b.build(tmp_path, jobs=1) == tmp_path / "llama-server"
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_CUDA=on")  # another build (a GPU one): no longer up to date
    assert b.build_info("1.2.3", ["-DGGML_CUDA=on"]) != json.loads(
        (tmp_path / "llama-server.json").read_text()
    )


@pytest.mark.parametrize(
    ("setup", "pattern"),
    [
        ("no_llama", r"llama-cpp-python is not installed in this environment"),
        ("no_cmake", r"`cmake` is not on PATH \(needed to build llama-server\)"),
        ("download_fails", r"`\S+ -m pip download …` exited with 1; build log: .*build.log"),
    ],
)
def test_failed_build_warns_names_the_step_and_setup_goes_on(
    b, tmp_path, monkeypatch, capsys, setup, pattern
):
    import shutil
    import subprocess

    monkeypatch.setenv("NBKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("NBKIT_CACHE_DIR", raising=False)
    monkeypatch.setattr(b, "installed_version", lambda: "1.2.3")
    if setup == "no_llama":
        monkeypatch.setattr(
            b,
            "installed_version",
            lambda: (_ for _ in ()).throw(
                b.BuildError("llama-cpp-python is not installed in this environment")
            ),
        )
    if setup == "no_cmake":
        monkeypatch.setattr(shutil, "which", lambda tool: None)
    if setup == "download_fails":
        monkeypatch.setattr(shutil, "which", lambda tool: f"/usr/bin/{tool}")
        monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1))
    assert b.main(["--dest", str(tmp_path / "bin")]) == 0  # setup continues: notebook 03 falls back
    err = capsys.readouterr().err
    assert (
        "nbkit: warning: llama-server was not built" in err
        and "falls back to llama-cpp-python's server" in err
    )
    import re

    assert re.search(pattern, err), err
    assert not (tmp_path / "bin" / "llama-server").exists()
    assert b.main(["--dest", str(tmp_path / "bin"), "--strict"]) == 1
