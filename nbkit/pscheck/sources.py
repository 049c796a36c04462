"""Finding and reading the input files: discovery, safe reading, decoding as Python does, parsing.

Everything that can go wrong with an input file becomes a ``PSC000`` diagnostic naming the file and
the place (never a traceback): unreadable paths, symlink loops, files over the size limit, bad
encodings, syntax errors, NUL bytes, absurdly nested code. FIFOs, sockets and devices named ``*.py``
are reported as skipped, never opened.
"""

from __future__ import annotations

import ast
import errno
import io
import os
import stat
import tokenize
from collections.abc import Iterable

from nbkit.pscheck.diagnostic import Diagnostic, unreadable
from nbkit.pscheck.report import LintReport

# Files above this are reported, not parsed. Parsing keeps the whole syntax tree of every file of
# the run: measured ~1.6 CPU-s and ~110 MB of memory per MiB of source (bench/pscheck/README.md),
# so 2 MiB (hand-written modules are far smaller; large generated ones can opt in) bounds one file
# at a few seconds and ~250 MB.
DEFAULT_MAX_BYTES = 2 * 1024 * 1024
COST_PER_MIB = "about 1.6 CPU-s and 110 MB of memory per MiB"
EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "__pycache__",
        "node_modules",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
        "build",
        "dist",
        ".eggs",
        "site-packages",
    }
)


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
            report.diagnostics.append(unreadable(d, _oserror(exc)))
            return
        key = (st.st_dev, st.st_ino)
        if key in visited_dirs:
            report.skipped.append((d, f"directory already walked as {visited_dirs[key]} (symlink cycle)"))
            return
        visited_dirs[key] = d
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            report.diagnostics.append(unreadable(d, _oserror(exc)))
            return
        for e in entries:
            full = os.path.join(d, e.name)
            try:
                is_dir = e.is_dir(follow_symlinks=True)
                is_file = e.is_file(follow_symlinks=True)
            except OSError as exc:
                if e.name.endswith(".py"):
                    report.diagnostics.append(unreadable(full, _oserror(exc)))
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
                    report.diagnostics.append(unreadable(full, _oserror(exc)))

    for raw in paths:
        p = os.fspath(raw)
        try:
            st = os.stat(p)
        except OSError as exc:
            report.diagnostics.append(unreadable(p, _oserror(exc)))
            continue
        if stat.S_ISDIR(st.st_mode):
            before = len(files)
            walk(p)
            if len(files) == before:  # ruff's convention: say so, exit 0 (nothing to check is not an error)
                report.notes.append(f"no Python files found under {p}")
        elif stat.S_ISREG(st.st_mode):
            add(p)
        else:
            report.diagnostics.append(
                unreadable(p, f"not a regular file or directory ({_file_kind(st.st_mode)})")
            )
    return files


def _file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return kind
    return "unknown file type"


def _oserror(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "cannot read: symlink loop (too many levels of symbolic links)"
    return f"cannot read: {exc.strerror or exc}"


def read_source(path: str, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[str | None, Diagnostic | None]:
    """The text of ``path``, or a ``PSC000`` saying why not (too large, unreadable, undecodable)."""
    try:
        size = os.stat(path).st_size
        if max_bytes and size > max_bytes:
            return None, unreadable(
                path,
                f"not checked: file is {size / 2**20:.1f} MiB, over the "
                f"{max_bytes / 2**20:.1f} MiB limit (pscheck needs {COST_PER_MIB}; "
                f"raise it with --max-bytes N, 0 = no limit)",
            )
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1 if max_bytes else -1)
    except OSError as exc:
        return None, unreadable(path, _oserror(exc))
    return decode_source(path, data)


def decode_source(path: str, data: bytes) -> tuple[str | None, Diagnostic | None]:
    """Decode as Python would (PEP 263 cookie, default UTF-8), locating the first bad byte."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if b"coding" in data[:400]:
            return None, unreadable(path, f"bad encoding declaration: {exc}")
        encoding = "utf-8"  # no cookie: the first lines are not UTF-8; decoding below locates the byte
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return None, unreadable(
            path,
            f"not valid {encoding}: byte 0x{data[exc.start]:02x} at line {line}, "
            f"column {col} (declare the encoding or re-save as UTF-8)",
            line,
            col,
        )
    except LookupError:
        return None, unreadable(path, f"unknown source encoding {encoding!r}")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, None


def parse_source(path: str, source: str) -> tuple[ast.Module | None, Diagnostic | None]:
    """The syntax tree of ``source``, or a ``PSC000`` locating the syntax error."""
    try:
        return ast.parse(source, filename=path, type_comments=False), None
    except SyntaxError as exc:
        line, col = exc.lineno or 1, exc.offset or 1
        return None, unreadable(path, f"syntax error: {exc.msg}", line, col)
    except ValueError as exc:  # NUL bytes on Python < 3.12
        return None, unreadable(path, f"cannot parse: {exc}")
    except (RecursionError, MemoryError):
        return None, unreadable(path, "cannot parse: expression nesting too deep for the Python parser")
