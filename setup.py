"""Build step: the wheel carries the workbook's notebooks as package data (``nbkit/notebooks/``).

``notebooks/`` at the repository root stays their one copy in git; this copies its ``NN_name.ipynb``
files and ``reference_seconds.json`` into the built package, so ``nbkit run`` and ``nbkit init``
work in an environment that installed the wheel and has no checkout. setuptools' package-data can
only name files inside a package folder, hence this small ``build_py`` step. Everything else about
the build is declared in pyproject.toml.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PACKAGED = ("[0-9][0-9]_*.ipynb", "reference_seconds.json")


class BuildPyWithNotebooks(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads notebooks/ in place (nbkit.runner finds the checkout's)
        found = sorted(p for pattern in PACKAGED for p in (ROOT / "notebooks").glob(pattern))
        if not any(p.suffix == ".ipynb" for p in found):
            # A wheel without its notebooks installs fine and fails later, far from the cause.
            raise SystemExit(
                f"nbkit build: no notebooks/NN_name.ipynb under {ROOT}; the wheel must carry them"
            )
        target = Path(self.build_lib) / "nbkit" / "notebooks"
        self.mkpath(str(target))
        for src in found:
            self.copy_file(str(src), str(target / src.name))


setup(cmdclass={"build_py": BuildPyWithNotebooks})
