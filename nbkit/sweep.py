"""Parameter sweeps: one notebook, one papermill run per combination of a grid, one comparison.

``nbkit sweep 02 --grid WORLD_SIZE=1,2 --grid PRECISION=bf16,fp32 --smoke --jobs 2 --output DIR``
runs the notebook once per combination and writes

* ``DIR/runs/NNN/`` — each run's executed notebook and HTML page (``plotly.min.js`` once, in ``DIR``);
* ``DIR/comparison.csv`` — one row per run: its status, wall time, every grid parameter, every
  scalar metric the run recorded (nested dicts flattened as ``a.b``), each recorded claim's verdict
  (``verdict: <claim>``), and the error of a failed run;
* ``DIR/comparison.html`` — that table, plus one plot per numeric metric against the first grid key
  with one trace per value of the second.

Grid values are Python literals (``1,2``, ``0.1,1e-3``, ``'a','b'``; bare words are strings) and are
checked against the notebook's parameters cell — names, types, declared ranges and choices — before
anything runs or is written. Runs go to a local process pool (``--jobs N``, each kernel given
its share of the cores as thread counts) or, with ``--scheduler ADDRESS``, to an existing Dask
distributed cluster: each notebook is a task; its files come back through Dask, so workers need
nbkit and a ``python3`` kernel, not a shared filesystem. A failed run is a row with its error; the
sweep still lands.

``DIR`` exists from the start: each run's folder is renamed into ``DIR/runs/`` as it ends and the
comparison is rewritten (by rename) then, so an interrupted sweep keeps every finished run, its
rows saying ``interrupted`` or ``not started`` for the others. ``DIR/sweep.json`` records the
notebook (its SHA-256), the grid and the fixed parameters; ``nbkit sweep --resume DIR`` runs only
the combinations ``comparison.csv`` does not hold as ok (refused if the notebook or record changed).
A worker process killed mid-run fails only its own row; on Dask the scheduler reruns a lost
worker's task elsewhere.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import html
import io
import itertools
import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import nbkit.runfolder as rf
from nbkit.catalog import resolve_notebook
from nbkit.claims import as_claims
from nbkit.errors import RunError
from nbkit.execute import Job, NotebookResult, execute, kernel_exists
from nbkit.params import check_given, notebook_parameters, parse_value
from nbkit.pool import execute_jobs
from nbkit.publish import keep_unfinished, make_tmp_beside, prepare_output
from nbkit.record import read_notebook
from nbkit.replicates import dask_client
from nbkit.report import PLOTLY_JS, ensure_plotly_js
from nbkit.runfolder import move_in, write_atomic

MAX_RUNS = 256  # more than this needs --yes: a typo in a grid must not start a day of work


def parse_grid(items: Sequence[str] | None) -> dict[str, list[Any]]:
    """``["KEY=V1,V2", ...]`` → ``{KEY: [V1, V2]}``; a malformed or empty item is a RunError."""
    if not items:
        raise RunError("empty grid: give at least one --grid KEY=V1,V2")
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, rhs = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise RunError(f"--grid {item!r}: expected KEY=V1,V2,... with KEY a parameter name")
        if key in grid:
            raise RunError(f"--grid {key} given twice; list all its values in one --grid {key}=...")
        values = parse_values(rhs, key)
        seen: list[Any] = []
        for v in values:
            if any(type(v) is type(s) and v == s for s in seen):
                raise RunError(f"--grid {key}: value {v!r} given twice")
            seen.append(v)
        grid[key] = values
    return grid


def parse_values(text: str, key: str = "KEY") -> list[Any]:
    """Comma-separated Python literals; bare words are strings (``umls,kinships``)."""
    text = text.strip()
    if not text:
        raise RunError(f"--grid {key}: no values (expected {key}=V1,V2,...)")
    try:
        # One literal list parse keeps commas inside values ("[1,2],[3]", "'a,b'") intact.
        return list(ast.literal_eval(f"[{text}]"))
    except (ValueError, SyntaxError):
        parts = [p.strip() for p in text.split(",")]
        if any(not p for p in parts):
            raise RunError(f"--grid {key}={text}: an empty value between commas") from None
        return [parse_value(p) for p in parts]


def combinations(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid[k] for k in keys))]


def plan_sweep(
    notebook: str,
    grid_items: Sequence[str] | None,
    fixed: dict[str, Any] | None = None,
    *,
    smoke: bool = False,
    yes: bool = False,
) -> tuple[Path, dict[str, list[Any]], list[dict[str, Any]]]:
    """Resolve and check everything a sweep needs; returns (notebook, grid, per-run parameters)."""
    path = resolve_notebook(notebook)
    grid = parse_grid(grid_items)
    fixed = dict(fixed or {})
    both = sorted(set(grid) & (set(fixed) | ({"SMOKE"} if smoke else set())))
    if both:
        raise RunError(f"{', '.join(both)} given both as --grid and as -p/--smoke; give each parameter once")
    n = 1
    for values in grid.values():
        n *= len(values)
    if n > MAX_RUNS and not yes:
        raise RunError(f"the grid makes {n} runs (more than {MAX_RUNS}); pass --yes if you mean it")
    declared = notebook_parameters(path)
    base = {**fixed, **({"SMOKE": True} if smoke else {})}
    check_given(path, base, declared)
    for key, values in grid.items():  # each value once: the same checks as `nbkit run -p`
        for v in values:
            check_given(path, {key: v}, declared)
    return path, grid, [{**base, **combo} for combo in combinations(grid)]


# -- Dask ---------------------------------------------------------------------------------------------


def remote_execute(
    nb_bytes: bytes,
    nb_name: str,
    nb_dir: str,
    parameters: dict[str, Any],
    kernel: str,
    timeout: int | None,
    plotly_js: str,
) -> dict[str, Any]:
    """Run on a Dask worker: execute the notebook, return the result and the files it wrote.

    The notebook runs from its own folder where the worker sees it (same machine or a shared
    filesystem, so relative paths in it work), else from a copy of the bytes sent along.
    """
    with tempfile.TemporaryDirectory(prefix="nbkit-sweep-", dir=_worker_space()) as tmp:
        src = Path(nb_dir) / nb_name
        if not src.is_file() or src.read_bytes() != nb_bytes:
            src = Path(tmp) / "in" / nb_name
            src.parent.mkdir()
            src.write_bytes(nb_bytes)
        out = Path(tmp) / "out"
        out.mkdir()
        r = execute(src, out, parameters, kernel=kernel, progress=False, timeout=timeout, plotly_js=plotly_js)
        files = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
        return {"ok": r.ok, "seconds": r.seconds, "error": r.error, "metrics": r.metrics, "files": files}


def _worker_space() -> str | None:
    """The Dask worker's own local directory: Dask removes it when the worker ends, and purges it at the next
    worker's start when the worker was killed (which can run no clean-up of its own); None outside a
    worker (the system temp folder)."""
    try:
        from distributed import get_worker

        return str(get_worker().local_directory)
    except (ImportError, ValueError):
        return None


def execute_on_cluster(
    client,
    jobs: Sequence[Job],
    log: Callable[[str], Any] = print,
    on_done: Callable[[int, NotebookResult], Any] | None = None,
    results: list[NotebookResult | None] | None = None,
) -> list[NotebookResult | None]:
    """Submit each job as one Dask task; write the files each returns into its ``out_dir``.

    A worker lost mid-task is the scheduler's to handle (it reruns the task elsewhere, up to its
    ``allowed-failures``); a task that fails even so is that run's failed result.
    ``on_done(i, result)`` is called as each task ends.
    """
    from distributed import as_completed

    results = [None] * len(jobs) if results is None else results
    futures = {}
    for i, job in enumerate(jobs):
        fut = client.submit(
            remote_execute,
            job.path.read_bytes(),
            job.path.name,
            str(job.path.parent),
            job.parameters,
            job.kernel,
            job.timeout,
            job.plotly_js,
            pure=False,
        )
        futures[fut] = i
        log(f"▶ submitted {job.label}  parameters={job.parameters}")
    try:
        with client.as_current():  # as_completed finds the client this way, not as a process-wide default
            for fut in as_completed(list(futures)):
                i = futures[fut]
                job = jobs[i]
                try:
                    got = fut.result()
                except (
                    Exception
                ) as exc:  # the task itself failed (worker lost too often, nbkit missing there)
                    r = NotebookResult(
                        job.path.stem,
                        False,
                        0.0,
                        error=f"{job.path.stem}: task failed on the cluster: {type(exc).__name__}: {exc}",
                    )
                else:
                    job.out_dir.mkdir(parents=True, exist_ok=True)
                    for name, data in got["files"].items():
                        write_atomic(job.out_dir / name, data)
                    nb = job.out_dir / job.path.name
                    page = job.out_dir / f"{job.path.stem}.html"
                    r = NotebookResult(
                        job.path.stem,
                        got["ok"],
                        got["seconds"],
                        nb if nb.is_file() else None,
                        page if page.is_file() else None,
                        got["metrics"],
                        got["error"],
                    )
                results[i] = r
                log(
                    f"  {'✔' if r.ok else '✘'} {job.label} in {r.seconds:.1f}s"
                    + ("" if r.ok else f"\n    {r.error}")
                )
                if on_done is not None:
                    on_done(i, r)
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise
    return results


# -- the comparison -----------------------------------------------------------------------------------


def scalar_metrics(metrics: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every scalar among ``metrics``; nested dicts flattened as ``outer.inner``; lists left out."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(scalar_metrics(value, f"{name}."))
        elif value is None or isinstance(value, (bool, int, float, str)):
            out[name] = value
    return out


def claim_verdicts(recorded: Any) -> dict[str, str]:
    """``{"verdict: <claim key or text>": verdict}`` for a run's recorded claims (none if unreadable)."""
    try:
        claims = as_claims(recorded) if isinstance(recorded, list) else []
    except (TypeError, ValueError):
        return {}
    return {f"verdict: {c.key or c.claim[:60]}": c.verdict for c in claims}


def comparison_rows(
    grid: dict[str, list[Any]], params: Sequence[dict[str, Any]], results: Sequence[NotebookResult]
) -> tuple[list[str], list[dict[str, Any]]]:
    rows, metric_cols = [], []
    for i, (p, r) in enumerate(zip(params, results, strict=True)):
        metrics = {**scalar_metrics(r.metrics), **claim_verdicts(r.metrics.get("claims"))}
        for k in metrics:
            if k not in metric_cols and k not in grid:
                metric_cols.append(k)
        rows.append(
            {
                "run": f"{i:03d}",
                "status": r.status,
                "seconds": round(r.seconds, 2),
                **{k: p[k] for k in grid},
                **metrics,
                "error": r.error or "",
            }
        )
    columns = ["run", "status", "seconds", *grid, *metric_cols, "error"]
    return columns, rows


def write_csv(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    """The comparison table, written by rename (it is rewritten as each run ends)."""
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k)) for k in columns})
    write_atomic(path, buf.getvalue())


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    return value


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def metric_figures(grid: dict[str, list[Any]], columns: list[str], rows: list[dict[str, Any]]) -> list:
    """One plotly figure per numeric metric: against the first grid key, a trace per second-key value."""
    import plotly.graph_objects as go

    keys = list(grid)
    x_key = keys[0]
    series_key = keys[1] if len(keys) > 1 else None
    numeric_x = all(_numeric(v) for v in grid[x_key])
    figures = []
    for col in columns:
        if col in ("run", "status", "error", *keys):
            continue
        values = [row.get(col) for row in rows]
        if not any(_numeric(v) for v in values) or any(
            v is not None and v != "" and not _numeric(v) for v in values
        ):
            continue
        fig = go.Figure()
        for s in grid[series_key] if series_key else [None]:
            pts = [
                (row[x_key], row[col])
                for row in rows
                if _numeric(row.get(col)) and (series_key is None or row[series_key] == s)
            ]
            if not pts:
                continue
            xs = [p[0] if numeric_x else str(p[0]) for p in pts]
            fig.add_scatter(
                x=xs,
                y=[p[1] for p in pts],
                mode="lines+markers",
                name=f"{series_key}={s!r}" if series_key else col,
            )
        fig.update_layout(
            title=col,
            xaxis_title=x_key,
            yaxis_title=col,
            height=340,
            template="plotly_white",
            margin=dict(l=60, r=20, t=50, b=50),
            showlegend=series_key is not None,
        )
        figures.append(fig)
    return figures


def write_comparison_html(
    path: Path,
    notebook: str,
    grid: dict[str, list[Any]],
    fixed: dict[str, Any],
    columns: list[str],
    rows: list[dict[str, Any]],
    date: str,
) -> None:
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join(
        f"<tr class='{esc(row['status'])}'>"
        + "".join(
            f"<td>{esc(str(_cell(row.get(c))))}</td>"
            if c != "run"
            else f"<td><a href='runs/{row['run']}/{esc(notebook)}.html'>{row['run']}</a></td>"
            for c in columns
        )
        + "</tr>"
        for row in rows
    )
    figures = metric_figures(grid, columns, rows)
    plots = "".join(
        f.to_html(full_html=False, include_plotlyjs=False, div_id=f"metric-{i}")
        for i, f in enumerate(figures)
    )
    if figures and not (path.parent / PLOTLY_JS).is_file():
        with tempfile.TemporaryDirectory(prefix=".plotly-", dir=path.parent) as staging:
            move_in(ensure_plotly_js(Path(staging)).parent, path.parent)
    grid_text = "; ".join(f"{k} = {', '.join(repr(v) for v in vs)}" for k, vs in grid.items())
    fixed_text = ", ".join(f"{k}={v!r}" for k, v in fixed.items()) or "none"
    script = f"<script src='{PLOTLY_JS}'></script>" if figures else ""
    ok = sum(r["status"] == "ok" for r in rows)
    page = f"""<!doctype html><html><head><meta charset='utf-8'>{script}
<title>nbkit sweep {esc(notebook)} ({esc(date)})</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:left}}tr.failed{{background:#f6d3d0}}
.plots{{display:grid;grid-template-columns:repeat(auto-fill,minmax(460px,1fr));gap:1em}}</style></head><body>
<h1>Sweep of {esc(notebook)}</h1><p>{esc(date)} · {len(rows)} runs, {ok} ok ·
grid: <code>{esc(grid_text)}</code> · fixed: <code>{esc(fixed_text)}</code> ·
<a href='comparison.csv'>comparison.csv</a></p>
<h2>Runs</h2><div style='overflow-x:auto'><table id='comparison'><thead><tr>{head}</tr></thead>
<tbody>{body}</tbody></table></div>
<h2>Metrics against {esc(list(grid)[0])}</h2>
<div class='plots'>{plots or "<p>no numeric metric was recorded</p>"}</div>
</body></html>"""
    write_atomic(path, page)


def _write_sweep_record(
    final: Path, path: Path, grid: dict[str, list[Any]], base: dict[str, Any], *, smoke: bool, kernel: str
) -> None:
    params = {"grid": {k: [repr(v) for v in vs] for k, vs in grid.items()}, "fixed": rf.literal_params(base)}
    rf.write_json(
        final / rf.SWEEP_RECORD,
        {
            "version": rf.RECORD_VERSION,
            "kind": "sweep",
            "smoke": smoke,
            "kernel": kernel,
            "notebook": {"name": path.stem, "path": str(path), "sha256": rf.source_hash(path)},
            "parameters": params,
            "parameters_sha256": rf.params_hash(params),
            "packages": rf.package_versions(),
        },
    )


def _plan_sweep_resume(
    folder: Path | str,
) -> tuple[Path, Path, dict[str, list[Any]], list[dict[str, Any]], dict[str, Any]]:
    """(sweep folder, notebook, grid, per-run parameters, record) of the sweep ``folder`` holds."""
    final = Path(folder).expanduser().resolve()
    record = rf.read_record(final, rf.SWEEP_RECORD)
    where = final / rf.SWEEP_RECORD
    nb = record.get("notebook") or {}
    path = Path(nb.get("path", ""))
    rf.check_source(where, nb.get("name", "?"), path, nb.get("sha256", ""))
    params = record["parameters"]
    grid = {
        k: [rf.params_from_literals({k: v}, str(where))[k] for v in vs] for k, vs in params["grid"].items()
    }
    base = rf.params_from_literals(params["fixed"], str(where))
    return final, path, grid, [{**base, **combo} for combo in combinations(grid)], record


def _kept_runs(
    final: Path, path: Path, grid: dict[str, list[Any]], per_run: Sequence[dict[str, Any]]
) -> dict[int, NotebookResult]:
    """The runs an earlier sweep finished ok (a row of comparison.csv with status ok and its notebook on
    disk)."""
    try:
        with open(final / "comparison.csv", newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError:
        return {}
    kept = {}
    for row in rows:
        try:
            i = int(row.get("run", ""))
        except ValueError:
            continue
        if row.get("status") != "ok" or not 0 <= i < len(per_run):
            continue
        if any(str(_cell(per_run[i][k])) != row.get(k) for k in grid):
            continue  # not the combination this run number stands for now: run it again
        nb = final / "runs" / f"{i:03d}" / path.name
        if not nb.is_file():
            continue
        page = nb.with_suffix(".html")
        try:
            seconds = float(row.get("seconds") or 0.0)
        except ValueError:
            seconds = 0.0
        kept[i] = NotebookResult(
            path.stem, True, seconds, nb, page if page.is_file() else None, read_notebook(nb)
        )
    return kept


def run_sweep(
    notebook: str | None,
    grid_items: Sequence[str] | None,
    fixed: dict[str, Any] | None = None,
    *,
    smoke: bool = False,
    jobs: int = 1,
    output: Path | None = None,
    scheduler: str | None = None,
    yes: bool = False,
    kernel: str = "python3",
    progress: bool = True,
    log: Callable[[str], Any] = print,
    resume: Path | str | None = None,
) -> tuple[Path, list[NotebookResult]]:
    """Check, run and compare; returns the sweep folder and each run's result.

    The folder exists from the start and its comparison is rewritten as each run ends, so an
    interrupted or failed sweep keeps every finished run; ``resume=DIR`` runs only the combinations
    DIR's ``comparison.csv`` does not hold as ok, with the grid recorded in DIR.
    """
    if jobs < 1:
        raise RunError(f"--jobs must be at least 1, got {jobs}")
    now = datetime.now()
    if resume is not None:
        if notebook or grid_items or fixed or smoke or output is not None:
            raise RunError(
                "--resume DIR re-runs DIR's sweep with the notebook and grid recorded there; "
                "do not also name a notebook or give --grid, -p, --smoke or --output"
            )
        final, path, grid, per_run, record = _plan_sweep_resume(resume)
        smoke, kernel = bool(record.get("smoke")), str(record.get("kernel") or kernel)
    else:
        if not notebook:
            raise RunError(
                "name the notebook to sweep (e.g. `nbkit sweep 02 --grid WORLD_SIZE=1,2`), or give --resume "
                "DIR"
            )
        path, grid, per_run = plan_sweep(notebook, grid_items, fixed, smoke=smoke, yes=yes)
    client = None
    if scheduler:
        client = dask_client(scheduler, timeout_s=10.0)
    elif not kernel_exists(kernel):
        raise RunError(
            f"Jupyter kernel {kernel!r} is not installed; run `make setup` (it registers the python3 kernel)"
        )
    try:
        if resume is None:
            final = prepare_output(
                output, Path("runs") / f"sweep-{path.stem}-{now.strftime('%Y%m%d-%H%M%S')}"
            )
            try:
                (final / "runs").mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise RunError(f"output {final}: cannot create it ({exc.strerror or exc})") from None
            _write_sweep_record(
                final,
                path,
                grid,
                {k: v for k, v in per_run[0].items() if k not in grid},
                smoke=smoke,
                kernel=kernel,
            )
        results = _sweep_into(
            final,
            path,
            grid,
            per_run,
            kernel=kernel,
            jobs=jobs,
            client=client,
            progress=progress,
            log=log,
            date=now.strftime("%Y-%m-%d %H:%M"),
            resuming=resume is not None,
        )
    finally:
        if client is not None:
            client.close()
    return final, results


def _sweep_into(
    final: Path,
    path: Path,
    grid: dict[str, list[Any]],
    per_run: list[dict[str, Any]],
    *,
    kernel: str,
    jobs: int,
    client,
    progress: bool,
    log: Callable[[str], Any],
    date: str,
    resuming: bool,
) -> list[NotebookResult]:
    """Run every combination not already ok in ``final``; each run's folder is renamed into ``final/runs``
    as it ends and the comparison rewritten; an interrupt keeps what finished."""
    kept = _kept_runs(final, path, grid, per_run) if resuming else {}
    state: list[NotebookResult] = [
        kept.get(i) or NotebookResult(path.stem, False, 0.0, status=rf.NOT_STARTED)
        for i in range(len(per_run))
    ]
    todo = [i for i in range(len(per_run)) if i not in kept]
    if resuming:
        log(f"resuming {final}: {len(kept)} of {len(per_run)} runs ok, running {len(todo)}")
    fixed_shown = {k: v for k, v in per_run[0].items() if k not in grid}

    def write_comparison() -> None:
        columns, rows = comparison_rows(grid, per_run, state)
        write_csv(final / "comparison.csv", columns, rows)
        write_comparison_html(final / "comparison.html", path.stem, grid, fixed_shown, columns, rows, date)

    write_comparison()
    tmp = make_tmp_beside(final)
    # Each run's page loads plotly.js from one copy at the sweep's top, not one per run.
    if not (final / PLOTLY_JS).is_file():
        move_in(ensure_plotly_js(tmp).parent, final)
    jobs_list = [
        Job(
            path,
            tmp / f"{i:03d}",
            per_run[i],
            kernel,
            label=f"run {i + 1}/{len(per_run)} " + " ".join(f"{k}={per_run[i][k]!r}" for k in grid),
            plotly_js=f"../../{PLOTLY_JS}",
            run_dir=final / "runs" / f"{i:03d}",
        )
        for i in todo
    ]
    published: set[int] = set()

    def publish_one(j: int, r: NotebookResult) -> None:
        i = todo[j]
        dest = final / "runs" / f"{i:03d}"
        staged = jobs_list[j].out_dir
        staged.mkdir(parents=True, exist_ok=True)
        for leftover in staged.glob(".*"):  # a dead worker's kernel note: not part of the run
            leftover.unlink(missing_ok=True)
        rf.move_dir_in(staged, dest)
        r.output = dest / r.output.name if r.output else None
        r.html = dest / r.html.name if r.html else None
        state[i] = r
        published.add(j)
        write_comparison()

    results: list[NotebookResult | None] = [None] * len(jobs_list)
    try:
        if client is not None:
            execute_on_cluster(client, jobs_list, log=log, on_done=publish_one, results=results)
        else:
            execute_jobs(
                jobs_list,
                n_jobs=jobs,
                progress=progress and jobs == 1,
                log=log,
                on_done=publish_one,
                results=results,
            )
    except BaseException as exc:
        keep_unfinished(
            jobs_list, results, published, publish_one, interrupted=not isinstance(exc, rf.OutputError)
        )
        with contextlib.suppress(rf.OutputError, OSError):
            write_comparison()
        shutil.rmtree(tmp, ignore_errors=True)
        log(
            f"  {sum(r.ok for r in state)} of {len(per_run)} runs ok are kept in {final} (comparison.csv); "
            f"`nbkit sweep --resume {final}` runs the others"
        )
        raise
    shutil.rmtree(tmp, ignore_errors=True)
    return state
