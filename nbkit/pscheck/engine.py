"""Running the rules: file discovery, safe reading/parsing, suppression comments, the report.

Everything that can go wrong with an input file becomes a ``PSC000`` diagnostic naming the file and
the place (never a traceback): unreadable paths, symlink loops, files over the size limit, bad
encodings, syntax errors, NUL bytes, absurdly nested code. A rule that crashes becomes ``PSC999``.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import gc
import io
import os
import re
import stat
import sys
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from nbkit.pscheck.class_index import ClassIndex
from nbkit.pscheck.compat import in_regions
from nbkit.pscheck.diagnostic import UNREADABLE, Diagnostic
from nbkit.pscheck.hierarchy import MAX_ANCESTORS, resolve_models
from nbkit.pscheck.model import ModuleInfo
from nbkit.pscheck.reader import describe_module
from nbkit.pscheck.registry import PluginError, RuleRegistry
from nbkit.pscheck.rule import BaseRule, RuleContext
from nbkit.pscheck.runtime import runtime_check

RULE_CRASHED = "PSC999"
# Files above this are reported, not parsed. Parsing keeps the whole syntax tree of every file of
# the run: measured ~1.6 CPU-s and ~110 MB of memory per MiB of source (bench/pscheck/README.md),
# so 2 MiB (hand-written modules are far smaller; large generated ones can opt in) bounds one file
# at a few seconds and ~250 MB.
DEFAULT_MAX_BYTES = 2 * 1024 * 1024
COST_PER_MIB = "about 1.6 CPU-s and 110 MB of memory per MiB"
EXCLUDED_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "node_modules", ".tox", ".nox",
                           ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", "build", "dist",
                           ".eggs", "site-packages"})
_SUPPRESS = re.compile(r"#\s*(?:pscheck:\s*ignore|noqa)(?:\[([A-Z0-9,\s]+)\]|:\s*([A-Z0-9,\s]+))?", re.I)


@dataclass
class LintReport:
    """Everything one run found; ``lint_paths`` returns ``report.diagnostics``."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    files_checked: int = 0
    models_checked: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why) — never silent
    notes: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """A file could not be read/parsed/imported, or a rule crashed (exit status 2)."""
        return any(d.code in (UNREADABLE, RULE_CRASHED) for d in self.diagnostics)

    def at_or_above(self, level: str) -> list[Diagnostic]:
        rank = {"warning": 0, "error": 1}
        return [d for d in self.diagnostics if d.code not in (UNREADABLE, RULE_CRASHED)
                and rank[d.severity] >= rank[level]]


def _unreadable(path: str, message: str, line: int = 1, col: int = 1) -> Diagnostic:
    return Diagnostic(path=path, line=max(1, line), col=max(1, col), code=UNREADABLE, severity="error",
                      message=message, rule="unreadable-file")


def discover(paths: Iterable[str | os.PathLike[str]], report: LintReport) -> list[str]:
    """``.py`` files under ``paths`` (a file given explicitly is taken whatever its suffix)."""
    files: list[str] = []
    seen_files: set[str] = set()
    visited_dirs: dict[tuple[int, int], str] = {}

    def add(p: str) -> None:
        if p not in seen_files:
            seen_files.add(p)
            files.append(p)

    def walk(d: str) -> None:
        try:
            st = os.stat(d)
        except OSError as exc:
            report.diagnostics.append(_unreadable(d, _oserror(exc)))
            return
        key = (st.st_dev, st.st_ino)
        if key in visited_dirs:
            report.skipped.append((d, f"directory already walked as {visited_dirs[key]} (symlink cycle)"))
            return
        visited_dirs[key] = d
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            report.diagnostics.append(_unreadable(d, _oserror(exc)))
            return
        for e in entries:
            full = os.path.join(d, e.name)
            try:
                is_dir = e.is_dir(follow_symlinks=True)
                is_file = e.is_file(follow_symlinks=True)
            except OSError as exc:
                if e.name.endswith(".py"):
                    report.diagnostics.append(_unreadable(full, _oserror(exc)))
                continue
            if is_dir:
                if e.name in EXCLUDED_DIRS or e.name.endswith(".egg-info"):
                    report.skipped.append((full, "excluded directory"))
                    continue
                walk(full)
            elif e.name.endswith(".py"):
                if is_file:
                    add(full)
                    continue
                try:  # a FIFO, socket or device named *.py: never opened (a FIFO would block)
                    report.skipped.append((full, f"not a regular file ({_file_kind(os.stat(full).st_mode)})"))
                except OSError as exc:  # a dangling symlink
                    report.diagnostics.append(_unreadable(full, _oserror(exc)))

    for raw in paths:
        p = os.fspath(raw)
        try:
            st = os.stat(p)
        except OSError as exc:
            report.diagnostics.append(_unreadable(p, _oserror(exc)))
            continue
        if stat.S_ISDIR(st.st_mode):
            before = len(files)
            walk(p)
            if len(files) == before:  # ruff's convention: say so, exit 0 (nothing to check is not an error)
                report.notes.append(f"no Python files found under {p}")
        elif stat.S_ISREG(st.st_mode):
            add(p)
        else:
            report.diagnostics.append(_unreadable(p, f"not a regular file or directory ({_file_kind(st.st_mode)})"))
    return files


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return kind
    return "unknown file type"


def _oserror(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "cannot read: symlink loop (too many levels of symbolic links)"
    return f"cannot read: {exc.strerror or exc}"


def read_source(path: str, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[str | None, Diagnostic | None]:
    try:
        size = os.stat(path).st_size
        if max_bytes and size > max_bytes:
            return None, _unreadable(path, f"not checked: file is {size / 2**20:.1f} MiB, over the "
                                           f"{max_bytes / 2**20:.1f} MiB limit (pscheck needs {COST_PER_MIB}; "
                                           f"raise it with --max-bytes N, 0 = no limit)")
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1 if max_bytes else -1)
    except OSError as exc:
        return None, _unreadable(path, _oserror(exc))
    return decode_source(path, data)


def decode_source(path: str, data: bytes) -> tuple[str | None, Diagnostic | None]:
    """Decode as Python would (PEP 263 cookie, default UTF-8), locating the first bad byte."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if b"coding" in data[:400]:
            return None, _unreadable(path, f"bad encoding declaration: {exc}")
        encoding = "utf-8"  # no cookie: the first lines are not UTF-8; decoding below locates the byte
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return None, _unreadable(path, f"not valid {encoding}: byte 0x{data[exc.start]:02x} at line {line}, "
                                       f"column {col} (declare the encoding or re-save as UTF-8)", line, col)
    except LookupError:
        return None, _unreadable(path, f"unknown source encoding {encoding!r}")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, None


def parse_source(path: str, source: str) -> tuple[ast.Module | None, Diagnostic | None]:
    try:
        return ast.parse(source, filename=path, type_comments=False), None
    except SyntaxError as exc:
        line, col = exc.lineno or 1, exc.offset or 1
        return None, _unreadable(path, f"syntax error: {exc.msg}", line, col)
    except ValueError as exc:  # NUL bytes on Python < 3.12
        return None, _unreadable(path, f"cannot parse: {exc}")
    except (RecursionError, MemoryError):
        return None, _unreadable(path, "cannot parse: expression nesting too deep for the Python parser")


def _suppressed(d: Diagnostic, lines_by_path: dict[str, list[str]]) -> bool:
    lines = lines_by_path.get(d.path)
    if not lines or d.line > len(lines):
        return False
    m = _SUPPRESS.search(lines[d.line - 1])
    if not m:
        return False
    codes = m.group(1) or m.group(2)
    if not codes:
        return True
    return any(d.code.startswith(c.strip().upper()) for c in codes.split(",") if c.strip())


def _in_v1_code(d: Diagnostic, v1_code: dict[str, list[tuple[int, int, int, int]]]) -> bool:
    """A finding in a compatibility branch only Pydantic v1 runs (``if PYDANTIC_V1:`` ...)."""
    regions = v1_code.get(d.path)
    return bool(regions) and d.code not in (UNREADABLE, RULE_CRASHED) and in_regions(regions, d.line, d.col - 1)


def build_registry(plugins: Sequence[Any] = (), load_entry_points: bool = True
                   ) -> tuple[RuleRegistry, set[str], list[str]]:
    """Built-ins + entry-point rules + ``plugins``; returns (registry, codes the plugins added, notes).

    ``plugins`` items are module names (``pkg.mod`` / ``pkg.mod:attr``), rule classes or instances.
    A plugin that fails raises :class:`PluginError`; a broken entry point is reported as a note.
    """
    reg = RuleRegistry.default()
    notes: list[str] = []
    if load_entry_points:
        reg.load_entry_points()
        notes += reg.plugin_errors
    forced: set[str] = set()
    for p in plugins:
        if isinstance(p, str):
            forced.update(reg.load_plugin(p))
            if p.partition(":")[0] in _ENTRY_POINT_MODULES(reg):
                forced.update(_ENTRY_POINT_MODULES(reg)[p.partition(":")[0]])
        elif isinstance(p, BaseRule) or (isinstance(p, type) and issubclass(p, BaseRule)):
            reg.register(p)
            forced.add(p.code)
        else:
            raise PluginError(f"plugin {p!r} is neither a module name nor a BaseRule")
    return reg, forced, notes


def _ENTRY_POINT_MODULES(reg: RuleRegistry) -> dict[str, set[str]]:  # noqa: N802 - constant-like helper
    """Rules already registered (e.g. via entry points) grouped by defining module."""
    out: dict[str, set[str]] = {}
    for rule in reg:
        out.setdefault(type(rule).__module__, set()).add(rule.code)
    return out


def run_rules(modules: list[ModuleInfo], rules: list[BaseRule], strict: bool, report: LintReport) -> None:
    index = ClassIndex(modules)
    models = resolve_models(modules, index)
    deep = [m for m in models if m.too_deep]
    if deep:
        first = min(deep, key=lambda m: (m.path, m.node.lineno))
        report.diagnostics.append(_unreadable(
            first.path, f"not checked: {len(deep)} model(s) from {first.name} on inherit from more than "
                        f"{MAX_ANCESTORS} classes (pscheck's limit on hierarchy depth)", first.node.lineno))
        models = [m for m in models if not m.too_deep]
    report.models_checked += len(models)
    ctx = RuleContext(models=models, strict=strict, index=index)
    for rule in rules:
        for module in modules:
            _guard(rule, lambda: list(rule.check_module(module, ctx)), module.path, report)  # noqa: B023
        for model in models:
            _guard(rule, lambda: list(rule.check_model(model, ctx)), model.path, report,  # noqa: B023
                   line=model.node.lineno, where=f" on {model.name}")


def _guard(rule: BaseRule, fn: Any, path: str, report: LintReport, line: int = 1, where: str = "") -> None:
    try:
        found = fn()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a rule (often a plugin) must not take the run down
        report.diagnostics.append(Diagnostic(path=path, line=line, col=1, code=RULE_CRASHED, severity="error",
                                             message=f"rule {rule.code} ({rule.name}) crashed{where}: "
                                                     f"{type(exc).__name__}: {exc}", rule="rule-crashed"))
        return
    for d in found:
        if not isinstance(d, Diagnostic):
            report.diagnostics.append(Diagnostic(path=path, line=line, col=1, code=RULE_CRASHED, severity="error",
                                                 message=f"rule {rule.code} yielded {type(d).__name__}, "
                                                         f"not a Diagnostic", rule="rule-crashed"))
            continue
        report.diagnostics.append(d)


def lint(sources: Sequence[tuple[str, str | None]], *, paths: Sequence[str | os.PathLike[str]] = (),
         select: Iterable[str] | None = None, ignore: Iterable[str] | None = None, strict: bool = False,
         plugins: Sequence[Any] = (), use_import: bool = False, max_bytes: int = DEFAULT_MAX_BYTES,
         load_entry_points: bool = True, extend_select: Iterable[str] | None = None) -> LintReport:
    """The one implementation behind :func:`lint_paths` and :func:`lint_source`."""
    with _recursion_headroom(), _no_cyclic_gc():
        return _lint(sources, paths=paths, select=select, ignore=ignore, strict=strict, plugins=plugins,
                     use_import=use_import, max_bytes=max_bytes, load_entry_points=load_entry_points,
                     extend_select=extend_select)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the run (and restore it after).

    Syntax trees are millions of small container objects, all alive until the run ends and none
    in a cycle; the collector's repeated passes over them were ~30% of a run's CPU time on large
    files (measured: 3.9 s -> 2.7 s on a 2 MiB file). Reference counting still frees everything.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def _recursion_headroom(limit: int = 10_000) -> Iterator[None]:
    """Anything ``ast.parse`` accepts (nesting up to ~1,000 levels) must also be walkable by the
    rules' recursive visitors; Python-to-Python calls do not use the C stack on 3.11+."""
    old = sys.getrecursionlimit()
    if old < limit:
        sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _lint(sources: Sequence[tuple[str, str | None]], *, paths: Sequence[str | os.PathLike[str]],
          select: Iterable[str] | None, ignore: Iterable[str] | None, strict: bool, plugins: Sequence[Any],
          use_import: bool, max_bytes: int, load_entry_points: bool,
          extend_select: Iterable[str] | None) -> LintReport:
    report = LintReport()
    registry, forced, notes = build_registry(plugins, load_entry_points)
    report.notes += notes
    sel = list(select) if select else None
    if forced and sel is not None:
        sel += sorted(forced)
    rules = registry.select(sel, ignore, strict, extend_select)
    if forced and not sel:
        rules += [registry.get(c) for c in sorted(forced) if all(r.code != c for r in rules)
                  and not any(c.startswith(i.strip().upper()) for i in (ignore or ()) if i.strip())]
    report.rules = [r.code for r in rules]

    items: list[tuple[str, str | None]] = list(sources)
    for f in discover(paths, report):
        items.append((f, None))
    modules: list[ModuleInfo] = []
    for path, text in items:
        if text is None:
            text, err = read_source(path, max_bytes)
            if err:
                report.diagnostics.append(err)
                continue
        assert text is not None
        tree, err = parse_source(path, text)
        if err:
            report.diagnostics.append(err)
            continue
        assert tree is not None
        try:
            modules.append(describe_module(path, text, tree))
        except Exception as exc:  # never expected; if it happens, say where instead of a traceback
            report.diagnostics.append(Diagnostic(path=path, line=1, col=1, code=RULE_CRASHED, severity="error",
                                                 message=f"could not describe the models: {type(exc).__name__}: "
                                                         f"{exc}", rule="rule-crashed"))
            continue
        report.files_checked += 1
    run_rules(modules, rules, strict, report)
    if use_import:
        runtime_check(modules, rules, report)
    lines_by_path = {m.path: m.lines for m in modules}
    v1_code = {m.path: m.v1_regions for m in modules if m.v1_regions}
    kept = sorted({d for d in report.diagnostics if not _suppressed(d, lines_by_path)
                   and not _in_v1_code(d, v1_code)},
                  key=lambda d: (d.path, d.line, d.col, d.code, d.message))
    report.diagnostics = kept
    return report
