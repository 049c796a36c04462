"""pscheck's recall on v1-era code: every site bump-pydantic (pydantic's own v1-to-v2 codemod) rewrites.

    .venv/bin/python bench/pscheck/recall.py [--corpus /tmp/pscheck_recall] [--select migration,all]
        [--pscheck-src DIR] [--json out.json]

Set-up, from a fresh machine with Python 3.10+ and PyPI: nothing to install by hand. The script

1. creates a virtual environment for bump-pydantic under ``--corpus`` (``bump-pydantic-venv``) and
   installs :data:`BUMP_PYDANTIC` into it: bump-pydantic and every package it runs on, pinned. It
   gets its own environment because it needs pydantic 2 and libcst of its own, and is a peer under
   measurement, not a dependency of nbkit;
2. downloads each library of :data:`LIBRARIES` as its pinned wheel *without dependencies*
   (``pip download --no-deps``) and unpacks it under ``--corpus/src``; nothing is imported;
3. runs ``bump-pydantic --diff`` on each library's top-level package (bump-pydantic's own CLI and
   codemods; the diff is written verbatim to ``--corpus/diffs``, see :func:`run_bump_pydantic`) —
   the slow step (libcst), done once per library and version and reused by later runs;
4. runs pscheck (``python -m nbkit.pscheck.cli --format json``) on the same unpacked tree, once per
   ``--select`` value;
5. takes each contiguous change of the diff that is not an import a rewrite follows from as one
   *site* (:func:`sites_of`), sorts it into a kind (:func:`kind_of`), and counts a site as flagged
   when a reported line of pscheck falls on it (:func:`site_lines`); prints per library and per kind
   the share flagged and lists every miss.

The libraries are real code written for pydantic v1, of different styles and sizes: a web
framework's OpenAPI models (fastapi), a pure schema package (openapi-schema-pydantic), an ORM built
on pydantic's internals (sqlmodel), a MongoDB ODM (beanie) and an LLM framework built from
``root_validator``\\ s and ``class Config`` (langchain). bump-pydantic is the reference: a place it
rewrites is a place where v1 code means something else, or breaks, under v2. Figures and the
command: ``bench/RESULTS.md``, section "pscheck recall on v1 code".
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import resource
import subprocess
import sys
import textwrap
import venv
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RECALL_TARGET = 0.95
# (label, distribution, pinned version, style): v1-era releases, each before its pydantic-2 support.
LIBRARIES = [
    ("sqlmodel", "sqlmodel", "0.0.8", "ORM on pydantic internals"),
    ("openapi-schema-pydantic", "openapi-schema-pydantic", "1.2.4", "schema package"),
    ("fastapi", "fastapi", "0.99.1", "web framework"),
    ("beanie", "beanie", "1.20.0", "MongoDB ODM"),
    ("langchain", "langchain", "0.0.100", "LLM framework"),
]
# bump-pydantic and what it runs on, pinned (the set pip resolved for bump-pydantic 0.8.0).
BUMP_PYDANTIC = [
    "bump-pydantic==0.8.0",
    "libcst==1.9.0",
    "typer==0.29.2",
    "rich==15.0.0",
    "pydantic==2.14.4",
    "pydantic_core==2.50.5",
    "typing_extensions==4.16.0",
    "annotated-types==0.8.0",
    "typing-inspection==0.4.5",
    "annotated-doc==0.0.7",
    "markdown-it-py==4.3.0",
    "mdurl==0.1.2",
    "Pygments==2.21.0",
    "PyYAML==6.0.4",
    "shellingham==1.5.4",
]
KINDS = (
    "class Config",
    "validators",
    "root validators",
    "field defaults",
    "v1 methods",
    "imports of moved names",
    "other",
)
# Names bump-pydantic moves out of pydantic (its BP004 table, to pydantic-settings and
# pydantic-extra-types): an import change that takes one of them out of a pydantic import is a site.
MOVED_NAMES = ("BaseSettings", "Color", "PaymentCardNumber", "PaymentCardBrand")


def _norm(dist: str) -> str:
    return re.sub(r"[-_.]+", "_", dist).lower()


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# -- set-up -----------------------------------------------------------------------------------
def bump_pydantic_python(corpus: Path) -> Path:
    """The interpreter of bump-pydantic's own environment, created and filled on first use."""
    env_dir = corpus / "bump-pydantic-venv"
    python = env_dir / "bin" / "python"
    stamp = env_dir / "requirements.txt"
    wanted = "\n".join(BUMP_PYDANTIC) + "\n"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    print(f"setting up bump-pydantic in {env_dir} ...", flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    stamp.write_text(wanted)
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "-r", str(stamp)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        stamp.unlink()
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise SystemExit(f"recall: installing bump-pydantic into {env_dir} failed: {tail}")
    return python


@dataclass
class Library:
    label: str
    dist: str
    version: str
    style: str
    root: Path  # the unpacked wheel
    packages: list[str] = field(default_factory=list)  # its top-level package directories


def fetch(corpus: Path, label: str, dist: str, version: str, style: str) -> Library:
    """The pinned wheel of ``dist``, downloaded without dependencies and unpacked (once)."""
    wheels = corpus / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(f"{_norm(dist)}-{version}-*.whl"))
    if not found:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet"]
        proc = subprocess.run([*cmd, "-d", str(wheels), f"{dist}=={version}"], capture_output=True, text=True)
        found = sorted(wheels.glob(f"{_norm(dist)}-{version}-*.whl"))
        if proc.returncode != 0 or not found:
            tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
            raise SystemExit(f"recall: could not download {dist}=={version}: {tail}")
    dest = corpus / "src" / found[0].stem
    if not dest.exists():
        with zipfile.ZipFile(found[0]) as z:
            z.extractall(dest)
    pkgs = sorted(
        p.name
        for p in dest.iterdir()
        if p.is_dir() and not p.name.endswith((".dist-info", ".data")) and any(p.rglob("*.py"))
    )
    return Library(label, dist, version, style, dest, pkgs)


# bump-pydantic prints its diff through rich, which reads ``[str]`` in ``List[str]`` as markup and
# wraps long lines, so the printed text is not the diff. This runs its real CLI (same codemods, same
# difflib call) and only replaces the printing with a verbatim write.
_VERBATIM_DIFF = """
import sys
import bump_pydantic.main as bp
out = open(sys.argv[1], "w", encoding="utf-8")
def write(console, lines):
    for line in lines:
        out.write(line if line.endswith("\\n") else line + "\\n")
bp.color_diff = write
sys.argv = ["bump-pydantic", *sys.argv[2:]]
try:
    bp.entrypoint()
finally:
    out.close()
"""


def run_bump_pydantic(python: Path, lib: Library, corpus: Path) -> tuple[Path, float, int]:
    """``bump-pydantic --diff`` on each top-level package of ``lib``; (diff file, CPU s, errors).

    Cached per library version and bump-pydantic pin: the diff is reused while both are unchanged.
    """
    diffs = corpus / "diffs"
    diffs.mkdir(parents=True, exist_ok=True)
    pin = BUMP_PYDANTIC[0].split("==")[1]
    out = diffs / f"{_norm(lib.dist)}-{lib.version}.bump-pydantic-{pin}.diff"
    meta = out.with_suffix(".json")
    if out.exists() and meta.exists():
        m = json.loads(meta.read_text())
        return out, m["cpu_s"], m["errors"]
    parts, cpu, errors = [], 0.0, 0
    for pkg in lib.packages:
        part = diffs / f"{out.name}.{pkg}.part"
        log = diffs / f"{out.name}.{pkg}.log"
        log.unlink(missing_ok=True)
        before = _cpu_children()
        proc = subprocess.run(
            [str(python), "-c", _VERBATIM_DIFF, str(part), "--diff", "--log-file", str(log), pkg],
            cwd=lib.root,
            capture_output=True,
            text=True,
            env=dict(os.environ, COLUMNS="200", NO_COLOR="1"),
        )
        cpu += _cpu_children() - before
        # Exit 1 means "there is a diff"; anything else, or no diff file, is a failure.
        if proc.returncode not in (0, 1) or not part.exists():
            said = (proc.stderr + proc.stdout).strip().splitlines()
            tail = " ".join(s.strip("│╭╰─ ") for s in said[-4:])
            raise SystemExit(
                f"recall: bump-pydantic (exit {proc.returncode}) failed on {lib.label}/{pkg}: {tail}"
            )
        # bump-pydantic logs each file it could not rewrite and ends with "Found N errors".
        said = re.search(r"Found (\d+) errors", proc.stdout)
        errors += int(said.group(1)) if said else 0
        parts.append(part.read_text(encoding="utf-8"))
        part.unlink()
    out.write_text("".join(parts), encoding="utf-8")
    meta.write_text(json.dumps({"cpu_s": cpu, "errors": errors}))
    return out, cpu, errors


# -- sites -----------------------------------------------------------------------------------
@dataclass
class Site:
    """One contiguous change of bump-pydantic's diff (removed and added lines with no context between)."""

    library: str
    path: str  # as in the diff: relative to the unpacked wheel
    anchor: int  # old-file line the change starts at (for a pure insertion: the line it comes before)
    removed: list[tuple[int, str]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    kind: str = ""
    lines: set[int] = field(default_factory=set)  # old-file lines a finding may sit on
    flagged: dict[str, list[str]] = field(default_factory=dict)  # select -> codes reported there

    def text(self) -> str:
        first = self.removed[0][1] if self.removed else self.added[0]
        return " ".join(first.split())


def parse_diff(text: str, library: str) -> list[Site]:
    """Split a unified diff into its contiguous changes (runs of ``-``/``+`` lines).

    A hunk of bump-pydantic's diff keeps three lines of context and so can join two rewrites a few
    lines apart (two fields, a validator and the next field); each run is one site.
    """
    out: list[Site] = []
    path, old, cur = "", 0, None
    for line in text.splitlines():
        if line.startswith("--- "):
            path, cur = line[4:].strip(), None
            continue
        if line.startswith("+++ "):
            continue
        m = re.match(r"@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@", line)
        if m:
            old, cur = int(m.group(1)), None
            continue
        tag, body = line[:1], line[1:]
        if tag == "-" or tag == "+":
            if cur is None:
                cur = Site(library, path, old)
                out.append(cur)
            if tag == "-":
                cur.removed.append((old, body))
                old += 1
            else:
                cur.added.append(body)
        else:  # context (" ") ends a run
            cur = None
            old += 1
    return out


_TREES: dict[Path, tuple[list[tuple[int, int, bool]], list[tuple[int, int]]]] = {}


def _statements(path: Path) -> tuple[list[tuple[int, int, bool]], list[tuple[int, int]]]:
    """(first line, last line, is whole) of every statement — whole for simple statements and
    ``class Config`` blocks, header-only for other compound ones — and the spans of import statements."""
    if path not in _TREES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        stmts, imports = [], []
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt):
                end = node.end_lineno or node.lineno
                compound = any(isinstance(getattr(node, f, None), list) for f in ("body", "orelse"))
                config = isinstance(node, ast.ClassDef) and node.name == "Config"
                stmts.append((node.lineno, end, config or not compound))
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    imports.append((node.lineno, end))
        _TREES[path] = (stmts, imports)
    return _TREES[path]


def site_lines(site: Site, root: Path) -> set[int]:
    """The old-file lines a finding on ``site`` may be reported on.

    Its removed lines, widened to the whole of each simple statement they touch (bump-pydantic
    appends ``= None`` to the last line of a field written over several; pscheck reports the
    statement's first) and of the ``class Config`` they sit in; for a pure insertion, the lines just
    before and after it, widened the same way.
    """
    stmts, _ = _statements(root / site.path)
    seeds = [n for n, _ in site.removed] or [site.anchor - 1, site.anchor]
    lines = set(seeds)
    for n in seeds:
        for first, last, whole in stmts:
            if whole and first <= n <= last:
                lines.update(range(first, last + 1))
    return lines


def _classes(path: Path) -> list[tuple[int, int]]:
    """(first line, last line) of every class of the file but ``Config`` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (n.lineno, n.end_lineno or n.lineno)
        for n in ast.walk(tree)
        if isinstance(n, ast.ClassDef) and n.name != "Config"
    ]


def _owner(classes: list[tuple[int, int]], line: int) -> tuple[int, int] | None:
    inside = [c for c in classes if c[0] <= line <= c[1]]
    return max(inside, default=None)  # the innermost: it starts last


def pair_model_config(sites: list[Site], root: Path) -> list[Site]:
    """Join each inserted ``model_config = ...`` to the ``class Config`` removal of the same class.

    bump-pydantic writes the new attribute where the class's fields end and deletes the nested
    class further down; a blank line between them makes the two one rewrite in two runs.
    """
    out: list[Site] = []
    for site in sites:
        if site.removed or not any("model_config" in a for a in site.added):
            out.append(site)
            continue
        classes = _classes(root / site.path)
        owner = _owner(classes, site.anchor)
        mate = next(
            (
                o
                for o in sites
                if o is not site
                and o.path == site.path
                and any(re.match(r"\s*class Config\b", t) for _, t in o.removed)
                and _owner(classes, o.removed[0][0]) == owner
            ),
            None,
        )
        if mate is None or owner is None:
            out.append(site)
        else:
            mate.added = site.added + mate.added
    return out


def merge(sites: list[Site]) -> list[Site]:
    """Join consecutive changes of one file whose lines overlap into one site.

    bump-pydantic turns a whole ``class Config`` into one ``model_config = ConfigDict(...)``; a
    line diff of that re-indented block comes out as several runs with unchanged lines (a lone
    ``{``) between them. They are one rewrite, and :func:`site_lines` gives them overlapping lines.
    """
    out: list[Site] = []
    for site in sites:
        prev = out[-1] if out else None
        if prev is not None and prev.path == site.path and prev.lines & site.lines:
            prev.removed += site.removed
            prev.added += site.added
            prev.lines |= site.lines
        else:
            out.append(site)
    return out


def is_import_change(site: Site, root: Path) -> bool:
    """Whether the change only edits import statements."""
    _, imports = _statements(root / site.path)
    if site.removed:
        return all(any(a <= n <= b for a, b in imports) for n, _ in site.removed)
    try:
        body = ast.parse(textwrap.dedent("\n".join(site.added))).body
    except SyntaxError:
        return False
    return bool(body) and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in body)


def kind_of(site: Site) -> str:
    """Which kind of rewrite a site is, from what it removes and adds (one of :data:`KINDS`)."""
    old = "\n".join(t for _, t in site.removed)
    new = "\n".join(site.added)
    if re.search(r"^\s*class Config\b", old, re.M) or "model_config" in new:
        return "class Config"
    if re.search(r"\broot_validator\b", old):
        return "root validators"
    if re.search(r"\bvalidator\b", old):
        return "validators"
    if re.search(r"\.(dict|json|copy|parse_obj|parse_raw|construct|schema|schema_json)\(", old):
        return "v1 methods"
    if site.removed and len(site.removed) == len(site.added):
        pairs = zip([t for _, t in site.removed], site.added, strict=True)
        if all(
            b.rstrip() == a.rstrip() or re.sub(r"\s*=\s*None(?=\s*(#.*)?$)", "", b) == a for a, b in pairs
        ):
            return "field defaults"
    return "other"


def other_kind(site: Site) -> str:
    """A finer name for a site of kind ``other`` (for the list of misses)."""
    old = "\n".join(t for _, t in site.removed)
    new = "\n".join(site.added)
    for pattern, name in (
        (r"GenericModel", "GenericModel base"),
        (r"__root__", "__root__ field"),
        (r"\bcon(str|int|float|decimal|bytes|list|set|frozenset)\(", "con* type"),
        (r"__get_validators__|__modify_schema__", "custom type hook"),
        (
            r"\b(min_items|max_items|allow_mutation|example|regex|env|const|unique_items)\s*=",
            "Field argument",
        ),
    ):
        if re.search(pattern, old) or re.search(pattern, new):
            return name
    return "unclassified"


def moves_a_name(site: Site) -> bool:
    """Whether an import change takes a name bump-pydantic moves out of pydantic out of a pydantic
    import. Where bump-pydantic adds the new import elsewhere (after the other imports), that
    insertion is the counterpart of this change, not a site of its own."""
    old = "\n".join(t for _, t in site.removed)
    new = "\n".join(site.added)
    return "pydantic" in old and any(
        re.search(rf"\b{n}\b", old) and not re.search(rf"from pydantic\S* import .*\b{n}\b", new)
        for n in MOVED_NAMES
    )


def sites_of(lib: Library, diff: Path) -> tuple[list[Site], int]:
    """The sites of ``lib``'s diff and the number of import-only changes left out.

    An import-only change is a site when it moves a name out of pydantic (``BaseSettings`` to
    pydantic-settings, :func:`moves_a_name`); the others follow from a rewrite counted elsewhere
    (``validator`` becoming ``field_validator`` changes the import line too) and are left out.
    """
    runs = parse_diff(diff.read_text(encoding="utf-8"), lib.label)
    for run in runs:
        run.lines = site_lines(run, lib.root)
    sites, dropped = [], 0
    for site in pair_model_config(merge(runs), lib.root):
        if is_import_change(site, lib.root):
            if not moves_a_name(site):
                dropped += 1
                continue
            site.kind = "imports of moved names"
        else:
            site.kind = kind_of(site)
        sites.append(site)
    return sites, dropped


# -- pscheck --------------------------------------------------------------------------------------
def run_pscheck(lib: Library, select: str, src: Path) -> tuple[dict, float]:
    """pscheck on the library's packages, as a user runs it (a fresh process, JSON out); (doc, CPU s)."""
    env = dict(os.environ, PYTHONPATH=str(src))
    cmd = [sys.executable, "-m", "nbkit.pscheck.cli", *(str(lib.root / p) for p in lib.packages)]
    before = _cpu_children()
    proc = subprocess.run(
        [*cmd, "--format", "json", "--no-entry-points", "--select", select],
        capture_output=True,
        text=True,
        env=env,
        cwd=src,
    )
    cpu = _cpu_children() - before
    try:
        return json.loads(proc.stdout), cpu
    except json.JSONDecodeError:
        said = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"recall: pscheck failed on {lib.label} (exit {proc.returncode}): {said}") from None


def mark(sites: list[Site], doc: dict, lib: Library, select: str) -> None:
    by_line: dict[tuple[str, int], list[str]] = defaultdict(list)
    for d in doc["diagnostics"]:
        if d["code"] in ("PSC000", "PSC999"):
            continue
        by_line[(os.path.relpath(d["path"], lib.root), d["line"])].append(d["code"])
    for site in sites:
        codes = sorted({c for n in site.lines for c in by_line.get((site.path, n), [])})
        if codes:
            site.flagged[select] = codes


def _share(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.0%})" if n else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--corpus",
        type=Path,
        default=Path("/tmp/pscheck_recall"),
        help="throwaway folder for bump-pydantic's environment, the wheels and the diffs",
    )
    ap.add_argument(
        "--select",
        action="append",
        help="a pscheck --select value to measure (repeatable; default: migration, then all)",
    )
    ap.add_argument(
        "--pscheck-src",
        type=Path,
        default=ROOT,
        help="directory holding the nbkit package to measure (default: this checkout)",
    )
    ap.add_argument("--only", default="", help="comma-separated library labels (default: every library)")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write every site and figure as JSON")
    args = ap.parse_args(argv)
    selects = args.select or ["migration", "all"]
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = only - {row[0] for row in LIBRARIES}
    if unknown:
        print(f"recall: --only: unknown library {sorted(unknown)[0]!r}", file=sys.stderr)
        return 2
    python = bump_pydantic_python(args.corpus)
    print(
        f"pscheck recall on v1 code: {BUMP_PYDANTIC[0]} --diff is the reference; pscheck from "
        f"{args.pscheck_src}, Python {sys.version.split()[0]}; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
    )
    rows, every = [], []
    for label, dist, version, style in LIBRARIES:
        if only and label not in only:
            continue
        lib = fetch(args.corpus, label, dist, version, style)
        diff, bump_cpu, errors = run_bump_pydantic(python, lib, args.corpus)
        sites, dropped = sites_of(lib, diff)
        row: dict = {
            "library": label,
            "version": version,
            "style": style,
            "files": sum(1 for p in lib.packages for _ in (lib.root / p).rglob("*.py")),
            "sites": len(sites),
            "import_changes_left_out": dropped,
            "bump_pydantic_cpu_s": round(bump_cpu, 1),
            "bump_pydantic_errors": errors,
        }
        for select in selects:
            doc, cpu = run_pscheck(lib, select, args.pscheck_src)
            mark(sites, doc, lib, select)
            row[f"pscheck_cpu_s[{select}]"] = round(cpu, 2)
            row[f"flagged[{select}]"] = sum(1 for s in sites if select in s.flagged)
        rows.append(row)
        every += sites
    _report(rows, every, selects)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "libraries": rows,
                    "sites": [
                        {
                            "library": s.library,
                            "path": s.path,
                            "line": s.anchor,
                            "kind": s.kind,
                            "removed": [t for _, t in s.removed],
                            "added": s.added,
                            "flagged": s.flagged,
                        }
                        for s in every
                    ],
                },
                indent=1,
            ),
            encoding="utf-8",
        )
    first = selects[0] if selects else ""
    return (
        0 if all(r["sites"] == 0 or r[f"flagged[{first}]"] / r["sites"] >= RECALL_TARGET for r in rows) else 1
    )


def _report(rows: list[dict], sites: list[Site], selects: list[str]) -> None:
    head = f"{'library':<24} {'version':>8} {'files':>5} {'sites':>5} {'bump CPU-s':>10}"
    print("\n" + head + "".join(f"  {'--select ' + s:>22}" for s in selects))
    for r in rows:
        shares = "".join(f"  {_share(r[f'flagged[{s}]'], r['sites']):>22}" for s in selects)
        print(
            f"{r['library']:<24} {r['version']:>8} {r['files']:>5} {r['sites']:>5} "
            f"{r['bump_pydantic_cpu_s']:>10.0f}{shares}"
            + (
                f"  [bump-pydantic failed on {r['bump_pydantic_errors']} file(s)]"
                if r["bump_pydantic_errors"]
                else ""
            )
        )
    libs = [r["library"] for r in rows]
    for select in selects:
        print(f"\nShare flagged by --select {select}, per kind of site (flagged/sites):")
        print(f"{'kind':<24}" + "".join(f" {lib[:16]:>17}" for lib in libs) + f" {'all':>17}")
        for kind in KINDS:
            cells = []
            for lib in [*libs, None]:
                ss = [s for s in sites if s.kind == kind and (lib is None or s.library == lib)]
                cells.append(_share(sum(1 for s in ss if select in s.flagged), len(ss)))
            print(f"{kind:<24}" + "".join(f" {c:>17}" for c in cells))
        for r in rows:
            share = r[f"flagged[{select}]"] / r["sites"] if r["sites"] else 1.0
            verdict = "holds" if share >= RECALL_TARGET else "refuted"
            target = f"target >= {RECALL_TARGET:.0%}"
            print(f"  {r['library']}: {share:.1%} of {r['sites']} sites ({target}): {verdict}")
        misses = [s for s in sites if select not in s.flagged]
        print(
            f"\nMisses of --select {select} ({len(misses)}):"
            if misses
            else f"\nMisses of --select {select}: none"
        )
        for s in misses:
            sub = f" ({other_kind(s)})" if s.kind == "other" else ""
            print(f"  {s.library} {s.path}:{s.anchor} [{s.kind}{sub}] {s.text()[:110]}")
    codes = Counter(c for s in sites for c in s.flagged.get(selects[0], []) if selects)
    if codes:
        print(
            "\nRules reporting on the sites ("
            + selects[0]
            + "): "
            + ", ".join(f"{c} × {n}" for c, n in sorted(codes.items()))
        )


if __name__ == "__main__":
    sys.exit(main())
