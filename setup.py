"""Build step: the wheel carries the workbook's notebooks as package data (``nbkit/notebooks/``), and the
field notes' page (``nbkit/docs/field-notes.md``).

``notebooks/`` at the repository root stays their one copy in git; this copies its ``NN_name.ipynb``
files and ``reference_seconds.json`` into the built package, so ``nbkit run`` and ``nbkit init``
work in an environment that installed the wheel and has no checkout. ``docs/field-notes.md`` is
copied the same way: a ledger row cites the notes' sections, and a user without a checkout reads
there what they are (``nbkit doctor`` prints its path). setuptools' package-data can only name files
inside a package folder, hence this small ``build_py`` step. Everything else about the build is
declared in pyproject.toml.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PACKAGED = ("[0-9][0-9]_*.ipynb", "reference_seconds.json")
PAGES = ("field-notes.md",)  # from docs/ into nbkit/docs/


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
        pages = [ROOT / "docs" / name for name in PAGES]
        if not all(p.is_file() for p in pages):
            raise SystemExit(
                f"nbkit build: {', '.join(str(p) for p in pages)} must exist; the wheel carries them"
            )
        target = Path(self.build_lib) / "nbkit" / "docs"
        self.mkpath(str(target))
        for src in pages:
            self.copy_file(str(src), str(target / src.name))


setup(cmdclass={"build_py": BuildPyWithNotebooks})
