"""Run the workbook's notebooks headless with papermill, and collect what they recorded.

A run writes into a hidden temporary directory beside its destination and is renamed into place
only when every notebook succeeded, so ``runs/`` never holds a half-written run. A failed run's
executed notebooks are kept under the system temp dir, and the failing cell is named.
"""

from __future__ import annotations

import ast
import html
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from nbkit.record import read_notebook


class RunError(Exception):
    """A problem with the request itself (unknown notebook or parameter, wrong type, no kernel)."""


@dataclass
class NotebookResult:
    name: str
    ok: bool
    seconds: float
    output: Path | None = None
    html: Path | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def notebooks_dir() -> Path:
    """Where the workbook's notebooks live: $NBKIT_NOTEBOOKS, ./notebooks, or the source checkout's."""
    env = os.environ.get("NBKIT_NOTEBOOKS")
    if env:
        return Path(env)
    here = Path.cwd() / "notebooks"
    if here.is_dir() and any(here.glob("[0-9][0-9]_*.ipynb")):
        return here
    return Path(__file__).resolve().parent.parent / "notebooks"


def available_notebooks(root: Path | None = None) -> list[Path]:
    root = root or notebooks_dir()
    return sorted(p for p in root.glob("[0-9][0-9]_*.ipynb") if not p.name.startswith("."))


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


def notebook_parameters(path: Path) -> dict[str, dict[str, Any]]:
    """The ``parameters`` cell's names, inferred types and defaults (papermill's inspection)."""
    import papermill as pm

    try:
        params = pm.inspect_notebook(str(path))
    except Exception as exc:  # papermill raises plain errors for unreadable notebooks
        raise RunError(f"{path}: cannot read its parameters ({type(exc).__name__}: {exc})") from None
    out = {}
    for name, info in params.items():
        try:
            default = ast.literal_eval(info.get("default", "None"))
        except (ValueError, SyntaxError):
            default = info.get("default")
        # papermill infers a type only from annotations; an unannotated literal's type is its value's.
        inferred = info.get("inferred_type_name", "None")
        kind = inferred if inferred not in ("None", None) else type(default).__name__
        out[name] = {"type": kind, "default": default, "help": info.get("help", "")}
    return out


def parse_value(text: str) -> Any:
    """A ``-p KEY VALUE`` value: a Python literal when it is one, else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        lowered = text.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        return text


def check_parameters(path: Path, given: dict[str, Any]) -> dict[str, Any]:
    """Reject unknown parameters and values whose type differs from the default's."""
    declared = notebook_parameters(path)
    if not declared:
        raise RunError(f"{path.name}: has no cell tagged 'parameters'")
    checked = {}
    for key, value in given.items():
        if key not in declared:
            raise RunError(f"{path.stem}: unknown parameter {key!r}; it takes: {', '.join(sorted(declared))}")
        default = declared[key]["default"]
        if default is not None and not _same_kind(default, value):
            raise RunError(
                f"{path.stem}: parameter {key} expects {type(default).__name__} (default {default!r}), "
                f"got {value!r} ({type(value).__name__})"
            )
        checked[key] = value
    return checked


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    return isinstance(value, type(default))


def _kernel_exists(name: str) -> bool:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        return False
    return True


def execute(
    path: Path,
    out_dir: Path,
    parameters: dict[str, Any],
    *,
    kernel: str = "python3",
    progress: bool = True,
    timeout: int | None = None,
) -> NotebookResult:
    """Execute one notebook into ``out_dir`` (executed .ipynb + .html + recorded metrics)."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    out_nb = out_dir / path.name
    sink = out_dir / f".{path.stem}.metrics.jsonl"
    env_before = {k: os.environ.get(k) for k in ("NBKIT_HEADLESS", "NBKIT_RECORD_FILE")}
    os.environ["NBKIT_HEADLESS"] = "1"  # no widget frontend: live figures render statically
    os.environ["NBKIT_RECORD_FILE"] = str(sink)
    start = time.perf_counter()
    try:
        pm.execute_notebook(
            str(path),
            str(out_nb),
            parameters=parameters,
            kernel_name=kernel,
            progress_bar=progress,
            cwd=str(path.parent),
            execution_timeout=timeout,
            report_mode=False,
        )
    except PapermillExecutionError as exc:
        seconds = time.perf_counter() - start
        first_line = (exc.source or "").strip().splitlines()[:1]
        where = f"cell {exc.exec_count} ({first_line[0][:60]!r})" if first_line else f"cell {exc.exec_count}"
        return NotebookResult(path.stem, False, seconds, out_nb, error=f"{path.stem}: {where} raised {exc.ename}: {exc.evalue}")
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        seconds = time.perf_counter() - start
        return NotebookResult(path.stem, False, seconds, out_nb if out_nb.exists() else None, error=f"{path.stem}: {type(exc).__name__}: {exc}")
    finally:
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    seconds = time.perf_counter() - start
    metrics = read_notebook(out_nb)
    html_path = out_dir / f"{path.stem}.html"
    _to_html(out_nb, html_path)
    sink.unlink(missing_ok=True)
    return NotebookResult(path.stem, True, seconds, out_nb, html_path, metrics)


def _to_html(nb_path: Path, html_path: Path) -> None:
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(nb_path, as_version=4))
    html_path.write_text(body, encoding="utf-8")


def _attach_screenshots(run_dir: Path, final: Path) -> None:
    """Copy the browser tier's panel screenshots (tests/browser) into the run, for its index page."""
    shots = Path(os.environ.get("NBKIT_SCREENSHOTS_DIR") or final.parent / "browser-screenshots")
    pngs = sorted(shots.glob("*.png")) if shots.is_dir() else []
    if pngs:
        (run_dir / "screenshots").mkdir(exist_ok=True)
        for png in pngs:
            shutil.copy2(png, run_dir / "screenshots" / png.name)


def write_index(run_dir: Path, results: list[NotebookResult], parameters: dict[str, dict[str, Any]]) -> Path:
    """An index page linking each executed notebook, its HTML, its parameters and metrics."""
    rows = []
    for r in results:
        metrics = html.escape(json.dumps(r.metrics, indent=1)[:4000])
        params = html.escape(json.dumps(parameters.get(r.name, {})))
        link = f"<a href='{r.name}.html'>{r.name}</a>" if r.html else r.name
        status = "ok" if r.ok else f"FAILED: {html.escape(r.error or '')}"
        rows.append(
            f"<tr><td>{link}<br><small><a href='{r.name}.ipynb'>ipynb</a></small></td><td>{status}</td>"
            f"<td>{r.seconds:.1f}</td><td><code>{params}</code></td><td><pre>{metrics}</pre></td></tr>"
        )
    shots = sorted((run_dir / "screenshots").glob("*.png")) if (run_dir / "screenshots").is_dir() else []
    gallery = "".join(f"<figure><img src='screenshots/{p.name}' width='480'><figcaption>{p.stem}</figcaption></figure>" for p in shots)
    page = f"""<!doctype html><html><head><meta charset='utf-8'><title>nbkit run {run_dir.name}</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{border:1px solid #ccc;padding:4px;vertical-align:top}}
table{{border-collapse:collapse}}pre{{max-height:20em;overflow:auto;margin:0}}</style></head><body>
<h1>nbkit workbook run {html.escape(run_dir.name)}</h1>
<table><tr><th>notebook</th><th>status</th><th>seconds</th><th>parameters</th><th>recorded metrics</th></tr>
{''.join(rows)}</table>{('<h2>Screenshots</h2>' + gallery) if gallery else ''}</body></html>"""
    index = run_dir / "index.html"
    index.write_text(page, encoding="utf-8")
    return index


def run_notebooks(
    specs: list[str],
    parameters: dict[str, Any] | None = None,
    *,
    smoke: bool = False,
    output: Path | None = None,
    kernel: str = "python3",
    progress: bool = True,
    log=print,
) -> tuple[Path | None, list[NotebookResult]]:
    """Execute notebooks; publish ``output`` (default ``runs/<timestamp>``) only if all succeed."""
    paths = [resolve_notebook(s) for s in specs] if specs else available_notebooks()
    if not paths:
        raise RunError(f"no notebooks found in {notebooks_dir()}")
    if not _kernel_exists(kernel):
        raise RunError(f"Jupyter kernel {kernel!r} is not installed; run `make setup` (it registers the python3 kernel)")
    given = dict(parameters or {})
    per_nb: dict[str, dict[str, Any]] = {}
    for p in paths:
        wanted = dict(given)
        if smoke:
            wanted["SMOKE"] = True
        # A parameter given for several notebooks need only exist in those that declare it, but
        # must exist in at least one (checked below) — a typo must not pass silently.
        declared = notebook_parameters(p)
        per_nb[p.stem] = check_parameters(p, {k: v for k, v in wanted.items() if k in declared or len(paths) == 1})
    for key in given:
        if not any(key in per_nb[p.stem] for p in paths):
            raise RunError(f"unknown parameter {key!r}: no selected notebook declares it")
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    # Absolute: the kernel runs with the notebook's folder as cwd and writes its metrics sink here.
    final = (Path(output) if output else Path("runs") / stamp).resolve()
    if final.exists() and any(final.iterdir()):
        raise RunError(f"output directory {final} exists and is not empty")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    results: list[NotebookResult] = []
    try:
        for p in paths:
            log(f"▶ {p.stem}  parameters={per_nb[p.stem]}")
            r = execute(p, tmp, per_nb[p.stem], kernel=kernel, progress=progress)
            results.append(r)
            log(f"  {'✔' if r.ok else '✘'} {p.stem} in {r.seconds:.1f}s" + ("" if r.ok else f"\n    {r.error}"))
        if all(r.ok for r in results):
            (tmp / "metrics.json").write_text(json.dumps({r.name: r.metrics for r in results}, indent=2), encoding="utf-8")
            _attach_screenshots(tmp, final)
            write_index(tmp, results, per_nb)
            if final.exists():
                final.rmdir()
            tmp.rename(final)
            for r in results:
                r.output = final / r.output.name if r.output else None
                r.html = final / r.html.name if r.html else None
            return final, results
        kept = Path(tempfile.gettempdir()) / f"nbkit-failed-{stamp}"
        shutil.move(str(tmp), kept)
        log(f"  nothing written to {final}; the executed notebooks of the failed run are in {kept}")
        return None, results
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
