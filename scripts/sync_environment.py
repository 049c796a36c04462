"""Write environment.yml's dependency list from pyproject.toml (one source of truth).

python scripts/sync_environment.py          # rewrite environment.yml
python scripts/sync_environment.py --check  # exit 1 if it disagrees with pyproject.toml
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent

HEADER = """\
# Conda environment equivalent to `make setup` (generated from pyproject.toml by
# scripts/sync_environment.py; tests/unit/test_packaging.py checks they agree).
# GPU users: replace the torch line with a CUDA build, e.g. `conda install pytorch-cuda` or
# `pip install torch --index-url https://download.pytorch.org/whl/cu128`.
name: nbkit
channels:
  - conda-forge
dependencies:
  - python=3.11
  - pip
  - pip:
"""


def pyproject_requirements() -> list[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = data["project"]
    reqs = list(project["dependencies"])
    for _extra, items in project["optional-dependencies"].items():
        reqs.extend(r for r in items if not r.startswith(f"{project['name']}["))  # `all` names the others
    seen, out = set(), []
    for r in reqs:
        if r not in seen:
            seen.add(r)
            out.append(r)
    return out


def render() -> str:
    lines = [f'      - "{r}"' for r in pyproject_requirements()]
    lines.append("      - -e .")
    return HEADER + "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    target = ROOT / "environment.yml"
    text = render()
    if "--check" in argv:
        if not target.exists() or target.read_text() != text:
            print(
                "environment.yml disagrees with pyproject.toml: run python scripts/sync_environment.py",
                file=sys.stderr,
            )
            return 1
        return 0
    target.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
