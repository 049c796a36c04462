"""Where the workbook's notebooks are, and which notebook a name on the command line means.

A notebook is an ``NN_name.ipynb`` file. The folder is found in the order a user expects
(``$NBKIT_NOTEBOOKS``, ``./notebooks``, the current folder, the notebooks that came with nbkit), and a
notebook can be named by path, stem, number or theme.
"""

from __future__ import annotations

import os
from pathlib import Path

from nbkit.errors import RunError


def _holds_notebooks(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("[0-9][0-9]_*.ipynb"))


def packaged_notebooks_dir() -> Path:
    """The notebooks that came with nbkit: the wheel's ``nbkit/notebooks/`` (package data), or the
    source checkout's ``notebooks/`` (their one copy in git) for an editable install."""
    package = Path(__file__).resolve().parent
    installed = package / "notebooks"
    return installed if _holds_notebooks(installed) else package.parent / "notebooks"


def field_notes_page() -> Path:
    """The page that says what the field notes are and where each ledger row's claim comes from: the
    wheel's ``nbkit/docs/field-notes.md`` (setup.py copies it there), or the source checkout's
    ``docs/field-notes.md`` (its one copy in git) for an editable install."""
    package = Path(__file__).resolve().parent
    installed = package / "docs" / "field-notes.md"
    return installed if installed.is_file() else package.parent / "docs" / "field-notes.md"


def notebooks_dir() -> Path:
    """Where the workbook's notebooks live: $NBKIT_NOTEBOOKS; ./notebooks; the current folder when it
    holds NN_name.ipynb notebooks (an ``nbkit init`` folder, or a kernel running in the notebooks'
    folder); else the notebooks that came with nbkit (:func:`packaged_notebooks_dir`)."""
    env = os.environ.get("NBKIT_NOTEBOOKS")
    if env:
        if not Path(env).is_dir():
            raise RunError(
                f"NBKIT_NOTEBOOKS={env}: not a folder (it should name the folder holding NN_name.ipynb "
                "notebooks)"
            )
        return Path(env)
    for here in (Path.cwd() / "notebooks", Path.cwd()):
        if _holds_notebooks(here):
            return here
    return packaged_notebooks_dir()


def available_notebooks(root: Path | None = None, *, required: bool = False) -> list[Path]:
    """The workbook's notebooks (``NN_name.ipynb``); ``required``: none found is a RunError."""
    root = root or notebooks_dir()
    found = sorted(p for p in root.glob("[0-9][0-9]_*.ipynb") if not p.name.startswith("."))
    if required and not found:
        raise RunError(f"no notebooks (NN_name.ipynb) found in {root}")
    return found


def resolve_notebook(spec: str, root: Path | None = None) -> Path:
    """Accept a path, a full stem (``01_kg_gnn``), its number (``01``/``1``) or its theme (``kg``)."""
    path = Path(spec)
    if path.suffix == ".ipynb" and path.is_file():
        return path.resolve()
    known = available_notebooks(root)
    key = spec.strip().lower().removesuffix(".ipynb")
    matches = [
        p
        for p in known
        if key in (p.stem.lower(), p.stem[:2])
        or (key.isdigit() and int(key) == int(p.stem[:2]))
        or p.stem.lower()[3:].startswith(key)
    ]
    if len(matches) == 1:
        return matches[0].resolve()
    names = ", ".join(p.stem for p in known) or "(none found)"
    if not matches:
        raise RunError(f"unknown notebook {spec!r}; known notebooks: {names}")
    raise RunError(f"notebook {spec!r} is ambiguous ({', '.join(p.stem for p in matches)}); known: {names}")
