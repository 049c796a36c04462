"""The repo's promises about itself: environment.yml agrees with pyproject, notebooks follow the rules."""

import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STANDARD_KEYS = {"SMOKE", "DEVICE", "SEED"}


# -- the distribution's name: the package index's `nbkit` is another project ---------------------------

DIST = "nbkit-workbook"
# Where a user reads an install command: the README, docs/, the notebooks, and every message nbkit (or a
# bench or script) prints.
INSTALL_TEXTS = ["README.md", "docs/*.md", "notebooks/*.py", "nbkit/**/*.py", "bench/**/*.py", "scripts/*.py"]
PIP_INSTALL = re.compile(r"pip install\b([^\n`]*)")
# A requirement naming the old distribution: `nbkit`, `'nbkit[all]'`, `"nbkit @ git+…"` (not `-e .`, a path).
OLD_REQUIREMENT = re.compile(r"""(?:^|\s)["']?nbkit(?:\[[^\]]*\])?(?=["'\s;)]|$| @)""")
OLD_EXTRA = re.compile(r"(?<![\w.-])nbkit\[")  # `nbkit[kg]` named as what to install, anywhere
OLD_WHEEL = re.compile(r"\bnbkit-\d[\w.]*-py3")


def _install_texts() -> list[Path]:
    return sorted({p for pattern in INSTALL_TEXTS for p in ROOT.glob(pattern) if p.is_file()})


def test_every_install_command_names_this_projects_distribution():
    """pyproject's name is nbkit-workbook, and no install command a user can read (README, docs, notebooks,
    nbkit's messages) names the package index's unrelated `nbkit`; the README and notebook 00 show the
    right one."""
    import tomllib

    from nbkit.extras import DIST as declared_dist
    from nbkit.extras import install_line

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == DIST == declared_dist
    assert install_line("all") == f"pip install '{DIST}[all]'" and install_line() == f"pip install {DIST}"
    wrong, seen = [], 0
    for path in _install_texts():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}"
            for command in PIP_INSTALL.findall(line):
                seen += DIST in command
                if OLD_REQUIREMENT.search(command):
                    wrong.append(where)
            if OLD_EXTRA.search(line) or OLD_WHEEL.search(line):
                wrong.append(where)
    assert not wrong, "install commands naming the package index's `nbkit`:\n" + "\n".join(wrong)
    assert seen >= 3
    for shown in ("README.md", "notebooks/00_start_here.py"):
        assert f"pip install '{DIST}[all]'" in (ROOT / shown).read_text(encoding="utf-8"), shown
    assert "nbkit_workbook-0.1.0-py3-none-any.whl" in (ROOT / "docs" / "development.md").read_text(
        encoding="utf-8"
    )


def test_the_install_check_catches_each_old_form():
    for text in (
        "pip install 'nbkit[all]'",
        "pip install nbkit",
        'pip install "nbkit @ git+https://x/nbkit"',
    ):
        (command,) = PIP_INSTALL.findall(text)
        assert OLD_REQUIREMENT.search(command), text
    for text in ("pip install 'nbkit-workbook[all]'", "pip install -e '.[all,dev]'", "pip install ./nbkit"):
        (command,) = PIP_INSTALL.findall(text)
        assert not OLD_REQUIREMENT.search(command), text
    assert OLD_EXTRA.search("needs nbkit[kg]") and not OLD_EXTRA.search("needs nbkit-workbook[kg]")
    assert OLD_WHEEL.search("dist/nbkit-0.1.0-py3-none-any.whl")
    assert not OLD_WHEEL.search("dist/nbkit_workbook-0.1.0-py3-none-any.whl")


def test_environment_yml_agrees_with_pyproject():
    rc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "sync_environment.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert rc.returncode == 0, rc.stderr


def test_test_modules_have_unique_basenames():
    # tests/ has no packages, so pytest imports each module by basename: two files with one name
    # stop collection of the whole suite.
    seen: dict[str, Path] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        assert path.name not in seen, f"{path} and {seen[path.name]} share a basename"
        seen[path.name] = path


def test_bench_and_scripts_import_only_what_nbkit_has():
    # The benches import nbkit inside the pair or step they run, so a renamed or removed name surfaces only
    # when someone runs that bench; this reads every such import and resolves it.
    import ast
    import importlib

    def resolves(name: str) -> bool:
        """``name`` is an nbkit module, or an attribute of one."""
        module, _, attr = name.rpartition(".")
        try:
            importlib.import_module(name)
            return True
        except ModuleNotFoundError:
            return (
                bool(module)
                and module.startswith("nbkit")
                and resolves(module)
                and attr in dir(importlib.import_module(module))
            )

    missing = []
    for path in sorted([*(ROOT / "bench").glob("*.py"), *(ROOT / "scripts").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            missing += [
                f"{path.name}:{node.lineno}: {n}" for n in names if n.startswith("nbkit") and not resolves(n)
            ]
    assert not missing, missing


def test_four_themed_notebooks_exist():
    stems = [p.stem for p in NOTEBOOKS]
    for prefix in ("01_kg_gnn", "02_zero_ladder", "03_dspy_signatures", "04_finetune_audit"):
        assert prefix in stems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_has_one_literal_parameters_cell_with_standard_keys(path):
    import ast

    nb = nbformat.read(path, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    tree = ast.parse(tagged[0].source)
    names = set()
    for node in tree.body:
        assert isinstance(node, ast.Assign), (
            f"parameters cell holds assignments only, got {ast.dump(node)[:60]}"
        )
        ast.literal_eval(node.value)  # literals only
        names.update(t.id for t in node.targets)
    assert STANDARD_KEYS <= names
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.lstrip().startswith("# "), "title first"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_stripped_and_paired(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                "store notebooks stripped (nbstripout)"
            )
    paired = path.with_suffix(".py")
    assert paired.is_file(), "paired py:percent file (jupytext)"
    import jupytext

    from_py = jupytext.read(paired)
    assert [c.source for c in from_py.cells] == [c.source for c in nb.cells], (
        f"{path.name} and {paired.name} out of sync: make sync"
    )


def test_import_nbkit_is_instant_and_light():
    code = (
        "import time, sys; t=time.perf_counter(); import nbkit, nbkit.kg, nbkit.zero, nbkit.signatures, "
        "nbkit.audit, nbkit.pscheck; "
        "heavy=[m for m in ('torch','torch_geometric','deepspeed','dspy','peft','transformers','pykeen') if "
        "m in sys.modules]; "
        "print(time.perf_counter()-t, heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    seconds, heavy = out.stdout.split(" ", 1)
    assert heavy.strip() == "[]", f"import nbkit pulled in heavy modules: {heavy}"


# -- the wheel: notebooks as package data, honest extras, the user's torch kept ----------------------

WHEEL_SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "nbkit", "notebooks", "docs")
FIELD_NOTES = ROOT / "docs" / "field-notes.md"  # the page the ledgers' sources point to: in the wheel too
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info", "build")


def _pip_env() -> dict[str, str]:
    """This environment without the machine's pip settings (extra indexes, find-links, constraints):
    pip sees only what a test gives it."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def _copy_sources(dest: Path) -> Path:
    """The files a build reads, copied out of the checkout so building writes nothing into it."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in WHEEL_SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=IGNORED)
        else:
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = _copy_sources(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("wheel")
    # --no-build-isolation --no-index: built with this environment's setuptools, no network.
    rc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        env=_pip_env(),
    )
    assert rc.returncode == 0, rc.stderr[-3000:]
    (built,) = out.glob("nbkit_workbook-*.whl")
    return built


def _tracked_package_data() -> list[str]:
    """Every file under nbkit/ that is not Python source: the data notebooks and themes read."""
    return sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "nbkit").rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    )


def test_wheel_carries_the_notebooks_and_every_data_file(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for nb in NOTEBOOKS:
            inside = f"nbkit/notebooks/{nb.name}"
            assert inside in names, f"{nb.name} is not in the wheel"
            assert z.read(inside) == nb.read_bytes(), (
                f"the wheel's {nb.name} differs from notebooks/{nb.name}"
            )
        assert (
            z.read("nbkit/notebooks/reference_seconds.json")
            == (ROOT / "notebooks" / "reference_seconds.json").read_bytes()
        )
        assert z.read("nbkit/docs/field-notes.md") == FIELD_NOTES.read_bytes()
        missing = [f for f in _tracked_package_data() if f not in names]
        assert not missing, f"package data left out of the wheel: {missing}"
        # The paired py:percent scripts stay in the repository: the wheel carries one copy, the .ipynb.
        assert not [n for n in names if n.startswith("nbkit/notebooks/") and n.endswith(".py")]


def test_sdist_carries_the_notebooks_the_wheel_is_built_from(tmp_path):
    src = _copy_sources(tmp_path / "src")
    rc = subprocess.run(
        [sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "dist")],
        cwd=src,
        capture_output=True,
        text=True,
    )
    assert rc.returncode == 0, rc.stderr[-3000:]
    (sdist,) = (tmp_path / "dist").glob("nbkit_workbook-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {f"notebooks/{nb.name}" for nb in NOTEBOOKS} | {
        "notebooks/reference_seconds.json",
        "docs/field-notes.md",
        "setup.py",
    } <= names


def _wheel_requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    return [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]


def test_core_requirements_leave_torch_and_model_libraries_to_the_extras(wheel):
    from nbkit.extras import requirements

    reqs = requirements(tuple(_wheel_requirements(wheel)))
    core = {r.name for r in reqs["core"]}
    assert not core & {
        "torch",
        "transformers",
        "deepspeed",
        "dspy",
        "peft",
        "torch-geometric",
        "llama-cpp-python",
    }
    assert {"papermill", "ipykernel", "jupyterlab", "pydantic", "packaging"} <= core
    for extra in ("kg", "zero", "audit"):
        assert "torch" in {r.name for r in reqs[extra]}, f"nbkit-workbook[{extra}] must bring torch"
    every = {
        r.name for extra in ("kg", "zero", "signatures", "audit", "mlflow", "cluster") for r in reqs[extra]
    }
    assert {r.name for r in reqs["all"]} == every


CORE_ONLY_NOTEBOOK = "00_start_here"
PSCHECK_IMPORTS = "nbkit.pscheck"


def test_notebook_00_and_pscheck_import_only_core_packages(wheel):
    """`pip install nbkit-workbook` alone runs notebook 00 and pscheck: every module they import at top level
    comes from the core requirements (checked by importing them with the extras' packages hidden)."""
    from nbkit.extras import requirements

    reqs = requirements(tuple(_wheel_requirements(wheel)))
    core = {r.name.lower().replace("-", "_") for r in reqs["core"]}
    hidden = sorted(
        {
            r.name.lower().replace("-", "_")
            for extra, rs in reqs.items()
            if extra not in ("core", "dev")
            for r in rs
        }
        - core
        | {"torch_geometric", "sklearn", "llama_cpp"}
    )
    nb = nbformat.read(ROOT / "notebooks" / f"{CORE_ONLY_NOTEBOOK}.ipynb", as_version=4)
    imports = "\n".join(
        line
        for c in nb.cells
        if c.cell_type == "code"
        for line in c.source.splitlines()
        if line.startswith(("import ", "from "))
    )
    code = (
        f"import sys\nfor m in {hidden!r}: sys.modules[m] = None\n{imports}\n"
        "from nbkit.device import device_name, device_report\n"
        "from nbkit.cli import doctor_report\n"
        "assert device_name('auto') == 'cpu' and device_report()['torch'] is None\n"
        "r = doctor_report()\nassert r['extras']['core']['ok'], r['extras']['core']\n"
        f"import {PSCHECK_IMPORTS}.cli\nfrom nbkit.pscheck.cli import main\n"
        f"sys.exit(main([{str(ROOT / 'nbkit' / 'pscheck')!r}, '--format', 'json']) not in (0, 1))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]


FAKE_CUDA_TORCH = "2.4.1+cu121"  # the README's floor (torch>=2.4) as a CUDA build a user already has


def _satisfying_version(req) -> str:
    from importlib import metadata

    try:
        version = metadata.version(req.name)
        if req.specifier.contains(version, prereleases=True):
            return version
    except metadata.PackageNotFoundError:
        pass
    floors = [s.version for s in req.specifier if s.operator in (">=", "==", "~=")]
    assert floors and req.specifier.contains(floors[0], prereleases=True), f"no version to stub for {req}"
    return floors[0]


def _env_with(tmp: Path, versions: dict[str, str]) -> Path:
    """A fresh venv (no pip) whose site-packages holds installed-distribution records of ``versions``."""
    import sysconfig

    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    assert site != Path(sysconfig.get_paths()["purelib"])
    for name, version in versions.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "INSTALLER").write_text("test\n")
        (info / "RECORD").write_text("")
    return python


def _resolver_plan(python: Path, wheel: Path, spec: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--dry-run",
            "--no-index",
            "--find-links",
            str(wheel.parent),
            "--quiet",
            "--report",
            "-",
            spec,
        ],
        capture_output=True,
        text=True,
        env=_pip_env(),
    )


@pytest.mark.parametrize("torch_version, kept", [(FAKE_CUDA_TORCH, True), ("2.3.1+cu121", False)])
def test_installing_nbkit_all_keeps_the_users_torch(wheel, tmp_path, torch_version, kept):
    """pip's plan for `pip install 'nbkit-workbook[all]'` into an environment that already has every
    requirement and its own CUDA build of torch installs nbkit alone. The control (a torch below the
    floor) shows the same check sees a plan that would replace torch: offline, pip can only fail on it."""
    import json

    from packaging.requirements import Requirement

    from nbkit.extras import requirements

    reqs = requirements(tuple(_wheel_requirements(wheel)))
    needed = {r.name: r for extra in ("core", "all") for r in reqs[extra]}
    versions = {name: _satisfying_version(r) for name, r in needed.items()}
    versions["torch"] = torch_version
    assert Requirement("torch>=2.4").specifier.contains(FAKE_CUDA_TORCH)
    python = _env_with(tmp_path, versions)
    plan = _resolver_plan(python, wheel, "nbkit-workbook[all]")
    if kept:
        assert plan.returncode == 0, plan.stderr[-3000:]
        installs = [item["metadata"]["name"] for item in json.loads(plan.stdout)["install"]]
        assert installs == ["nbkit-workbook"], f"pip would also install {installs}"
    else:
        assert plan.returncode != 0 and "No matching distribution found for torch" in plan.stderr, (
            plan.stderr[-3000:]
        )


def _fresh_venv_reusing_this_one(tmp: Path, wheel: Path) -> Path:
    """A new venv that sees this environment's packages (a .pth line naming its site-packages; a
    venv's --system-site-packages would see the base Python's, not ours) and has the wheel installed
    with --no-deps, as a user's environment that already holds the dependencies would."""
    import sysconfig

    venv = tmp / "user-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # Appended after the venv's own site-packages: the wheel's nbkit wins over this env's editable one.
    (site / "reuse_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # nbconvert's HTML templates are data files its install puts under <prefix>/share/jupyter; the
    # user's environment would have them there (not this env's kernel specs: the kernel is the venv's).
    templates = Path(sysconfig.get_paths()["data"]) / "share" / "jupyter" / "nbconvert"
    (venv / "share" / "jupyter").mkdir(parents=True)
    (venv / "share" / "jupyter" / "nbconvert").symlink_to(templates, target_is_directory=True)
    rc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        env=_pip_env(),
    )
    assert rc.returncode == 0, rc.stderr[-3000:]
    return venv


def test_installed_wheel_finds_its_field_notes_page(wheel, tmp_path):
    """Outside a checkout, `nbkit doctor` points at the wheel's copy of docs/field-notes.md."""
    import os

    venv = _fresh_venv_reusing_this_one(tmp_path, wheel)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import nbkit.catalog as c; print(c.field_notes_page())"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    page = Path(out)
    assert page.is_relative_to(venv) and page.read_bytes() == FIELD_NOTES.read_bytes(), page


def _input_path(run_dir: Path, stem: str) -> Path:
    meta = nbformat.read(run_dir / f"{stem}.ipynb", as_version=4).metadata["papermill"]
    return Path(meta["input_path"]).resolve()


@pytest.mark.slow
def test_installed_wheel_runs_the_workbook_outside_the_checkout(wheel, tmp_path):
    """What a user of `pip install 'nbkit-workbook[all]'` does, in a folder that is not a clone: `nbkit
    run 00` runs the notebook that came in the wheel, `nbkit init` copies the notebooks, and `nbkit run
    02 --smoke` there runs the user's copy. Nothing is written into the installed package."""
    import os

    venv = _fresh_venv_reusing_this_one(tmp_path, wheel)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NBKIT_NOTEBOOKS", "NBKIT_RUN_DIR")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    nbkit_cmd = str(venv / "bin" / "nbkit")

    def nbkit(*args, cwd=work):
        out = subprocess.run(
            [nbkit_cmd, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
        )
        assert out.returncode == 0, f"nbkit {' '.join(args)}: {out.stderr[-3000:]}"
        return out

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import nbkit.catalog as c; print(c.packaged_notebooks_dir())"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    packaged = Path(where)
    assert packaged.is_relative_to(venv) and ROOT not in packaged.parents, f"nbkit imported from {packaged}"
    before = sorted(p.name for p in packaged.iterdir())

    kernel = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from jupyter_client.kernelspec import KernelSpecManager as K;"
            "print(K().get_kernel_spec('python3').argv[0])",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert kernel == str(venv / "bin" / "python"), (
        f"the python3 kernel here runs {kernel}, not the user's venv"
    )

    nbkit("run", "00", "-q", "--output", "runs/from-wheel")
    assert _input_path(work / "runs" / "from-wheel", "00_start_here").parent == packaged.resolve()

    nbkit("init")
    copied = sorted(p.name for p in (work / "notebooks").glob("*.ipynb"))
    assert copied == [nb.name for nb in NOTEBOOKS]
    assert "already there" in nbkit("init").stdout

    nbkit("run", "02", "--smoke", "-q", "--output", "runs/zero")
    assert _input_path(work / "runs" / "zero", "02_zero_ladder").parent == (work / "notebooks").resolve()
    metrics = json.loads((work / "runs" / "zero" / "metrics.json").read_text())
    assert metrics["02_zero_ladder"].get("claims"), "notebook 02 recorded no claims"
    assert sorted(p.name for p in packaged.iterdir()) == before, "a run wrote into the installed package"
