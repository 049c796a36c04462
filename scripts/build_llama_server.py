"""Build llama.cpp's own ``llama-server`` from the llama-cpp-python sdist that this environment runs.

    python scripts/build_llama_server.py [--dest DIR] [--jobs N] [--force]

``make setup`` runs it after installing llama-cpp-python where the server is used (torch sees CUDA, or
``make setup LLAMA_SERVER=1``). It downloads the sdist of exactly the installed
llama-cpp-python version (``pip download --no-binary :all: --no-deps``), configures the vendored
``vendor/llama.cpp`` tree with CMake and builds only the ``llama-server`` target (static libraries, no web
UI, no TLS), then installs the binary as ``DEST/llama-server`` (default: this interpreter's ``bin``)
together with ``llama-server.json`` naming the version and flags it was built with. ``nbkit`` serves
notebook 03 with that binary; without it, llama-cpp-python's own server is the fallback, so a failed
build prints why (with its log) and exits 0: setup continues.

Why a second build at all: llama-cpp-python's wheel ships the llama.cpp libraries but not the server
program, and its own Python server answers one request at a time. ``llama-server`` decodes several
requests in one batch (``--parallel`` slots, continuous batching) and reuses prompt prefixes.

One source change is applied before building, so that a request answered alone gets the tokens
llama-cpp-python's server gives it (checked token by token in ``tests/unit/test_signatures_server.py``):
llama-server feeds the prompt's tokens into the repetition-penalty window before generating
(``init_sampler`` in ``tools/server/server-context.cpp``); llama-cpp-python's ``Llama.generate`` starts that
window empty and only adds generated tokens. The patch skips the prompt in that window. It is a textual
replacement checked to match exactly once, so a llama.cpp version where the code moved fails loudly here
rather than building a server that answers differently.

GPU builds: flags in ``CMAKE_ARGS`` (as for llama-cpp-python, e.g. ``CMAKE_ARGS="-DGGML_CUDA=on"``) are
passed to CMake.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from nbkit.cache import cache_dir

BINARY = "llama-server"
# The llama.cpp options that decide what gets built; GGML_NATIVE stays at its default (ON), as in the
# llama-cpp-python build, so both use the same CPU kernels on this machine.
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
)  # fmt: skip

PATCH_FILE = "tools/server/server-context.cpp"
PATCH_OLD = """        for (int i = 0; i < (int) prompt.tokens.size(); i++) {
            const llama_token id = prompt.tokens[i];

            if (id != LLAMA_TOKEN_NULL) {
                common_sampler_accept(smpl.get(), id, false);
                n_text++;
            }
        }"""
PATCH_NEW = (
    "        // nbkit: the repetition-penalty window starts empty, as in llama-cpp-python's Llama.generate\n"
    """        // (prompt tokens are not accepted into the sampler chain), so a request gets the same tokens.
        for (int i = 0; i < (int) prompt.tokens.size(); i++) {
            if (prompt.tokens[i] != LLAMA_TOKEN_NULL) {
                n_text++;
            }
        }"""
)
PATCH_ID = "penalty-window-without-prompt"


class BuildError(RuntimeError):
    """The build could not be done; the message says which step and where its log is."""


def installed_version() -> str:
    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:
        raise BuildError(
            "llama-cpp-python is not installed in this environment; install it first (make setup does)"
        ) from None


def build_info(llama_version: str, cmake_args: list[str]) -> dict:
    """What decides the binary: checked by ``make setup`` to skip an up-to-date build."""
    return {
        "llama_cpp_python": llama_version,
        "cmake_flags": [*CMAKE_FLAGS, *cmake_args],
        "patches": [PATCH_ID],
    }


def run_logged(cmd: list[str], log, cwd: Path | None = None) -> None:
    log.write(f"\n$ {shlex.join(cmd)}\n".encode())
    log.flush()
    result = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
    if result.returncode != 0:
        raise BuildError(f"`{shlex.join(cmd[:4])} …` exited with {result.returncode}")


def fetch_sdist(llama_version: str, cache: Path, log) -> Path:
    """The llama-cpp-python sdist of ``llama_version``, downloaded once into ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(f"llama_cpp_python-{llama_version}.tar.gz"))
    if found:
        return found[0]
    run_logged([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                f"llama-cpp-python=={llama_version}", "-d", str(cache)], log)  # fmt: skip
    found = sorted(cache.glob(f"llama_cpp_python-{llama_version}.tar.gz"))
    if not found:
        raise BuildError(f"pip download left no llama_cpp_python-{llama_version}.tar.gz in {cache}")
    return found[0]


def extract_llama_cpp(sdist: Path, into: Path) -> Path:
    """Unpack only ``vendor/llama.cpp`` of the sdist; returns that directory."""
    with tarfile.open(sdist) as tar:
        # Only <top>/vendor/llama.cpp/…: the sdist also carries git metadata under
        # <top>/.git/modules/vendor/llama.cpp.
        members = [m for m in tar.getmembers() if m.name.split("/")[1:3] == ["vendor", "llama.cpp"]]
        if not members:
            raise BuildError(f"{sdist} has no vendor/llama.cpp tree")
        tar.extractall(into, members=members, filter="data")
    (root,) = {m.name.split("/vendor/llama.cpp")[0] for m in members}
    return into / root / "vendor" / "llama.cpp"


def apply_patch(src: Path) -> None:
    path = src / PATCH_FILE
    text = path.read_text()
    if text.count(PATCH_OLD) != 1:
        raise BuildError(
            f"{path}: the code the '{PATCH_ID}' patch replaces was not found exactly once (llama.cpp "
            "changed?)"
        )
    path.write_text(text.replace(PATCH_OLD, PATCH_NEW))


def build(dest: Path, jobs: int, force: bool = False) -> Path:
    llama_version = installed_version()
    cmake_args = shlex.split(os.environ.get("CMAKE_ARGS", ""))
    info = build_info(llama_version, cmake_args)
    binary, info_path = dest / BINARY, dest / f"{BINARY}.json"
    if not force and binary.is_file() and info_path.is_file() and json.loads(info_path.read_text()) == info:
        print(f"{binary} is up to date (llama-cpp-python {llama_version})")
        return binary
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise BuildError(f"`{tool}` is not on PATH (needed to build {BINARY})")
    cache = cache_dir("llama-cpp-python-sdist")
    work = Path(tempfile.mkdtemp(prefix="nbkit-llama-server-"))
    log_path = work / "build.log"
    start = time.perf_counter()
    try:
        with open(log_path, "ab") as log:
            print(
                f"building {BINARY} from llama-cpp-python {llama_version}'s llama.cpp (log: {log_path}) …",
                flush=True,
            )
            sdist = fetch_sdist(llama_version, cache, log)
            src = extract_llama_cpp(sdist, work / "src")
            apply_patch(src)
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            run_logged(
                ["cmake", "-S", str(src), "-B", str(work / "build"), *generator, *CMAKE_FLAGS, *cmake_args],
                log,
            )
            run_logged(["cmake", "--build", str(work / "build"), "--target", BINARY, "-j", str(jobs)], log)
        built = work / "build" / "bin" / BINARY
        if not built.is_file():
            raise BuildError(f"the build finished but {built} is missing")
        dest.mkdir(parents=True, exist_ok=True)
        tmp = dest / f".{BINARY}.tmp"
        shutil.copy2(built, tmp)
        os.replace(tmp, binary)  # never a half-copied binary under the real name
        info_path.write_text(json.dumps(info, indent=1) + "\n")
    except BuildError as exc:
        raise BuildError(f"{exc}; build log: {log_path}") from None
    shutil.rmtree(work, ignore_errors=True)  # on failure the folder stays, with its log
    print(f"{binary}: built in {time.perf_counter() - start:.0f} s")
    return binary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dest",
        type=Path,
        default=Path(sys.executable).parent,
        help="where the binary goes (default: this Python's bin)",
    )
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel compile jobs")
    ap.add_argument(
        "--force", action="store_true", help="rebuild even when the installed binary is up to date"
    )
    ap.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when the build fails (default: warn and exit 0, the fallback server works)",
    )
    args = ap.parse_args(argv)
    try:
        build(args.dest, args.jobs, args.force)
    except (
        BuildError,
        OSError,
        ValueError,
        tarfile.TarError,
    ) as exc:  # setup goes on: the fallback server works
        print(f"nbkit: warning: {BINARY} was not built: {exc}\n"
              "nbkit: notebook 03 falls back to llama-cpp-python's server (one request at a time per server)",
              file=sys.stderr)  # fmt: skip
        return 1 if args.strict else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
