"""Where nbkit keeps what it builds once and reuses: ``$NBKIT_CACHE``, default ``~/.cache/nbkit``.

One variable for every cache (SmolLM2's safetensors, DSPy's answers under ``dspy/``, Hetionet's download,
the llama-cpp-python sdist the llama-server build reads), read here and nowhere else, so a user who moves
the cache moves all of it. ``NBKIT_CACHE_DIR``, the name DSPy's cache and the server build once read, is
still honoured when ``NBKIT_CACHE`` is unset, with a one-line warning.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CACHE_ENV = "NBKIT_CACHE"
DEPRECATED_CACHE_ENV = "NBKIT_CACHE_DIR"

_warned: set[str] = set()


def cache_dir(*parts: str) -> Path:
    """The cache folder (``$NBKIT_CACHE``, else ``~/.cache/nbkit``), or ``parts`` below it; not created."""
    value = os.environ.get(CACHE_ENV, "")
    old = os.environ.get(DEPRECATED_CACHE_ENV, "")
    if old and not value:
        _warn_once(
            f"nbkit: {DEPRECATED_CACHE_ENV} is deprecated; using it as {CACHE_ENV}={old} "
            f"(set {CACHE_ENV} instead)"
        )
        value = old
    elif old and Path(old).expanduser() != Path(value).expanduser():
        _warn_once(f"nbkit: {DEPRECATED_CACHE_ENV}={old} is ignored: {CACHE_ENV}={value} is set")
    root = Path(value).expanduser() if value else Path.home() / ".cache" / "nbkit"
    return root.joinpath(*parts)


def use_cache_dir(path: str | os.PathLike) -> Path:
    """Point this process and the processes it starts (notebook kernels, servers) at cache ``path``."""
    os.environ[CACHE_ENV] = os.fspath(path)
    os.environ.pop(DEPRECATED_CACHE_ENV, None)
    return cache_dir()


def _warn_once(line: str) -> None:
    # One line on stderr, once per process: the warnings module would add the calling source line, and a
    # notebook run reads the cache dozens of times.
    if line not in _warned:
        _warned.add(line)
        print(line, file=sys.stderr)
