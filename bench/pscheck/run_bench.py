"""pscheck vs. mypy (+ pydantic.mypy plugin) vs. flake8-pydantic on a labelled defect corpus.

    .venv/bin/python bench/pscheck/run_bench.py [--copies 10] [--repeat 3] [--json out.json]

Corpus: ``bench/pscheck/corpus/*.py``. Every seeded defect is one line ending in
``# DEFECT: <pscheck rule name>`` (``@class`` after the name also accepts a report on the
enclosing ``class`` line — mypy's plugin reports duplicate aliases there). ``clean_*.py`` files
hold no defect: any finding in them is a false positive.

Detection: a tool *finds* a defect when it reports anything on that line (flake8-pydantic's
PYD003 "unnecessary Field" is a style hint, never a defect, so it is not counted as a find).
Reports on unlabelled lines of defect files are listed as "unlabelled" (some are legitimate extra
reports, e.g. mypy flagging a deprecated import) and reports in clean files as false positives.

Speed: each tool runs as a fresh process on the corpus copied ``--copies`` times (modules renamed
per copy so mypy sees no duplicate module names), ``--repeat`` times; the medians of CPU seconds
(user+sys of the tool's processes: robust to other load on a shared machine) and of wall seconds
are reported as files per second. mypy is timed cold (empty cache, what a CI job pays) and warm
(its cache reused on unchanged files). A peer that is not installed is reported as absent, with how to
install it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
ROOT = HERE.parents[1]
DEFECT_RE = re.compile(r"#\s*DEFECT:\s*([a-z0-9-]+)(\s+@class)?")
NOT_A_DEFECT_CODE = {"flake8-pydantic": {"PYD003"}}
MYPY_INI = """\
[mypy]
plugins = pydantic.mypy
enable_error_code = deprecated
show_column_numbers = True
no_color_output = True
error_summary = False
follow_imports = silent

[pydantic-mypy]
init_forbid_extra = True
init_typed = True
warn_required_dynamic_aliases = True
"""
LINE_RE = re.compile(r"^(?P<path>[^:\n]+\.py):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?:error:\s*)?(?P<msg>.*)$")


@dataclass(frozen=True)
class Defect:
    file: str
    line: int
    rule: str
    class_line: int | None


@dataclass
class ToolRun:
    name: str
    available: bool
    why_absent: str = ""
    findings: list[tuple[str, int, str, str]] = field(default_factory=list)  # file, line, code, message
    seconds: list[float] = field(default_factory=list)
    seconds_warm: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    cpu_warm: list[float] = field(default_factory=list)


def load_labels(corpus: Path) -> tuple[list[Defect], list[str]]:
    import ast

    defects: list[Defect] = []
    files = sorted(p.name for p in corpus.glob("*.py"))
    for name in files:
        text = (corpus / name).read_text(encoding="utf-8")
        class_of: dict[int, int] = {}
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                for ln in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    class_of[ln] = node.lineno  # innermost wins: walk visits outer first
        for i, line in enumerate(text.splitlines(), 1):
            m = DEFECT_RE.search(line)
            if m:
                defects.append(Defect(name, i, m.group(1), class_of.get(i) if m.group(2) else None))
    return defects, files


def _code_of(tool: str, msg: str) -> str:
    if tool == "flake8-pydantic":
        return msg.split()[0]
    if tool == "mypy":
        m = re.search(r"\[([a-z0-9-]+)\]\s*$", msg)
        return m.group(1) if m else "error"
    return msg.split()[0]


def parse_output(tool: str, text: str) -> list[tuple[str, int, str, str]]:
    out = []
    for raw in text.splitlines():
        if ": note:" in raw:
            continue
        m = LINE_RE.match(raw.strip())
        if not m:
            continue
        msg = m.group("msg").strip()
        out.append((Path(m.group("path")).name, int(m.group("line")), _code_of(tool, msg), msg))
    return out


def commands(tool: str, target: Path, files: list[Path], cache: Path, ini: Path) -> list[str]:
    py = sys.executable
    if tool == "pscheck":
        # every group, as a user hunting all of the corpus's defect kinds would run it
        return [py, "-m", "nbkit.pscheck.cli", "--strict", "--extend-select", "migration", str(target)]
    if tool == "mypy":
        return [py, "-m", "mypy", "--config-file", str(ini), "--cache-dir", str(cache), *map(str, files)]
    if tool == "flake8-pydantic":
        return [py, "-m", "flake8", "--select", "PYD", "--jobs", "1", *map(str, files)]
    raise ValueError(tool)


def availability() -> dict[str, str]:
    """Tool -> reason it cannot run ('' when it can)."""
    why = {"pscheck": ""}
    if importlib.util.find_spec("mypy") is None:
        why["mypy"] = "mypy is not installed (pip install 'nbkit-workbook[dev]' or pip install mypy)"
    elif importlib.util.find_spec("pydantic") is None:
        why["mypy"] = "pydantic is not installed, so the pydantic.mypy plugin cannot load"
    else:
        why["mypy"] = ""
    if importlib.util.find_spec("flake8") is None or importlib.util.find_spec("flake8_pydantic") is None:
        why["flake8-pydantic"] = (
            "flake8-pydantic is not installed (pip install 'nbkit-workbook[dev]' or pip install "
            "flake8-pydantic)"
        )
    else:
        why["flake8-pydantic"] = ""
    return why


def make_scaled(corpus: Path, dest: Path, copies: int) -> list[Path]:
    files = []
    stems = [p.stem for p in sorted(corpus.glob("*.py"))]
    for c in range(copies):
        for stem in stems:
            text = (corpus / f"{stem}.py").read_text(encoding="utf-8")
            for other in stems:  # keep cross-file imports pointing at this copy
                text = re.sub(rf"\bfrom {other} import\b", f"from {other}_{c:03d} import", text)
            p = dest / f"{stem}_{c:03d}.py"
            p.write_text(text, encoding="utf-8")
            files.append(p)
    return files


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_tool(
    tool: str, target: Path, files: list[Path], work: Path, ini: Path, cache: Path
) -> tuple[str, float, float]:
    """(stdout, wall seconds, CPU seconds of the tool's process tree)."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    )
    env["MYPYPATH"] = str(target)
    c0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(
        commands(tool, target, files, cache, ini),
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=1800,
    )
    dt = time.perf_counter() - t0
    cpu = _children_cpu() - c0
    if proc.returncode not in (0, 1) and not (tool == "mypy" and proc.returncode == 1):
        if tool == "mypy" and proc.returncode == 2:
            raise RuntimeError(f"mypy failed: {proc.stderr.strip()[-500:]}")
        if tool != "pscheck" or proc.returncode != 2:
            raise RuntimeError(
                f"{tool} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-500:]}"
            )
    return proc.stdout, dt, cpu


# pscheck alone on generated worst cases: inheritance depth (a chain C0 <- C1 <- ... <- C{n-1}, one
# field each) and file size (the corpus repeated into one module, classes renamed per copy).
CHAIN_DEPTHS = (400, 800, 3000)
FILE_MIB = (1, 2)
_MEASURE = (
    "import resource, sys\nfrom nbkit.pscheck.cli import main\ncode = main(sys.argv[1:])\n"
    "print('maxrss_kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def chain_source(n: int) -> str:
    return "from pydantic import BaseModel\n\n" + "".join(
        f"class C{i}({'BaseModel' if i == 0 else f'C{i - 1}'}):\n    f{i}: int = {i}\n\n" for i in range(n)
    )


def big_source(corpus: Path, mib: float) -> str:
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(corpus.glob("*.py")))
    names = sorted(set(re.findall(r"^class (\w+)", text, re.M)), key=len, reverse=True)
    parts, size, copy = [], 0, 0
    while size < mib * 2**20:
        chunk = re.sub(rf"\b({'|'.join(names)})\b", rf"\1_{copy}", text)
        parts.append(chunk)
        size += len(chunk.encode())
        copy += 1
    return "\n".join(parts)


def scaling(work: Path) -> list[dict]:
    """CPU seconds and peak memory of one fresh ``pscheck --strict`` process per generated input."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    )
    cases = [(f"chain of {n} classes", chain_source(n)) for n in CHAIN_DEPTHS]
    cases += [(f"{mib} MiB module", big_source(CORPUS, mib)) for mib in FILE_MIB]
    rows = []
    for label, text in cases:
        path = work / "scaling_input.py"
        path.write_text(text, encoding="utf-8")
        c0 = _children_cpu()
        proc = subprocess.run(
            [sys.executable, "-c", _MEASURE, "--strict", "--max-bytes", "0", str(path)],
            capture_output=True,
            text=True,
            env=env,
            cwd=work,
            timeout=1800,
        )
        cpu = _children_cpu() - c0
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"pscheck exited {proc.returncode} on {label}: {proc.stderr.strip()[-500:]}")
        rss = int(re.search(r"maxrss_kib (\d+)", proc.stderr).group(1))
        rows.append(
            {"input": label, "bytes": len(text.encode()), "cpu_seconds": cpu, "max_rss_mib": rss / 1024}
        )
    return rows


def score(defects: list[Defect], files: list[str], runs: dict[str, ToolRun]) -> dict:
    by_line: dict[tuple[str, int], list[Defect]] = defaultdict(list)
    for d in defects:
        by_line[(d.file, d.line)].append(d)
    result: dict = {"per_tool": {}, "per_rule": defaultdict(dict), "defects": []}
    found_by: dict[str, set[Defect]] = {}
    for name, run in runs.items():
        if not run.available:
            continue
        skip = NOT_A_DEFECT_CODE.get(name, set())
        hits: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
        for f, ln, code, msg in run.findings:
            if code not in skip:
                hits[(f, ln)].append((code, msg))
        found = {
            d
            for d in defects
            if (d.file, d.line) in hits or (d.class_line and (d.file, d.class_line) in hits)
        }
        found_by[name] = found
        labelled_lines = {(d.file, d.line) for d in defects} | {
            (d.file, d.class_line) for d in defects if d.class_line
        }
        extra = sorted(
            {(f, ln, code, msg) for f, ln, code, msg in run.findings if (f, ln) not in labelled_lines}
        )
        fps = [e for e in extra if e[0].startswith("clean_")]
        unlabelled = [e for e in extra if not e[0].startswith("clean_")]
        same_rule = None
        if name == "pscheck":
            from nbkit.pscheck import RuleRegistry

            names = {r.code: r.name for r in RuleRegistry.default()}
            same_rule = sum(
                1 for d in found if any(names.get(c) == d.rule for c, _ in hits[(d.file, d.line)])
            )
        result["per_tool"][name] = {
            "found": len(found),
            "missed": len(defects) - len(found),
            "false_positives_clean_files": len(fps),
            "unlabelled_in_defect_files": len(unlabelled),
            "found_with_matching_rule": same_rule,
            "fp_list": fps,
            "unlabelled_list": unlabelled,
        }
    rules = sorted({d.rule for d in defects})
    for rule in rules:
        ds = [d for d in defects if d.rule == rule]
        for name in found_by:
            result["per_rule"][rule][name] = sum(d in found_by[name] for d in ds)
        result["per_rule"][rule]["labelled"] = len(ds)
    peers_found = (
        set().union(*(found_by[n] for n in found_by if n != "pscheck")) if len(found_by) > 1 else set()
    )
    result["peer_found_pscheck_missed"] = sorted(
        (d.file, d.line, d.rule) for d in peers_found - found_by.get("pscheck", set())
    )
    result["only_pscheck"] = sorted(
        (d.file, d.line, d.rule) for d in found_by.get("pscheck", set()) - peers_found
    )
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=10, help="corpus copies for the speed run (default 10)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per tool; the median is reported")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["mypy", "flake8-pydantic", "scaling"],
        help="leave a peer (or the scaling section) out",
    )
    a = ap.parse_args(argv)
    defects, files = load_labels(CORPUS)
    why = availability()
    for s in a.skip:
        why[s] = "skipped with --skip"
    runs = {
        t: ToolRun(t, available=not why[t], why_absent=why[t]) for t in ("pscheck", "mypy", "flake8-pydantic")
    }
    for t, r in runs.items():
        if not r.available:
            print(f"[{t}] not run: {r.why_absent}")

    with tempfile.TemporaryDirectory(prefix="pscheck-bench-") as tmp:
        work = Path(tmp)
        ini = work / "mypy.ini"
        ini.write_text(MYPY_INI)
        # 1) detection on the corpus itself
        corpus_files = [CORPUS / f for f in files]
        for t, r in runs.items():
            if not r.available:
                continue
            cache = work / f"cache-detect-{t}"
            out, _, _ = run_tool(t, CORPUS, corpus_files, work, ini, cache)
            r.findings = parse_output(t, out)
        # 2) speed on the scaled corpus
        scaled = work / "scaled"
        scaled.mkdir()
        scaled_files = make_scaled(CORPUS, scaled, a.copies)
        for t, r in runs.items():
            if not r.available:
                continue
            print(f"timing {t} on {len(scaled_files)} files ({a.repeat} run(s))...", flush=True)
            for i in range(a.repeat):
                cache = work / f"cache-{t}-{i}"
                shutil.rmtree(cache, ignore_errors=True)
                _, dt, cpu = run_tool(t, scaled, scaled_files, work, ini, cache)
                r.seconds.append(dt)
                r.cpu.append(cpu)
                if t == "mypy":
                    _, dt_warm, cpu_warm = run_tool(t, scaled, scaled_files, work, ini, cache)
                    r.seconds_warm.append(dt_warm)
                    r.cpu_warm.append(cpu_warm)
        # 3) pscheck alone on deep hierarchies and large files
        scale_rows = [] if "scaling" in a.skip else scaling(work)

    res = score(defects, files, runs)
    n_files = len(files) * a.copies
    speed = {}
    for t, r in runs.items():
        if r.available:
            speed[t] = {
                "seconds": statistics.median(r.seconds),
                "files_per_s": n_files / statistics.median(r.seconds),
                "cpu_seconds": statistics.median(r.cpu),
                "files_per_cpu_s": n_files / max(statistics.median(r.cpu), 1e-9),
            }
            if r.seconds_warm:
                speed[t]["seconds_warm"] = statistics.median(r.seconds_warm)
                speed[t]["files_per_s_warm"] = n_files / statistics.median(r.seconds_warm)
                speed[t]["cpu_seconds_warm"] = statistics.median(r.cpu_warm)
                speed[t]["files_per_cpu_s_warm"] = n_files / max(statistics.median(r.cpu_warm), 1e-9)
    report(defects, files, runs, res, speed, n_files)
    if scale_rows:
        print("\nScaling (pscheck --strict alone, one fresh process per input; CPU seconds and peak memory):")
        for row in scale_rows:
            print(
                f"  {row['input']:<22} {row['bytes'] / 2**20:6.2f} MiB  {row['cpu_seconds']:6.2f} CPU-s  "
                f"{row['max_rss_mib']:7.1f} MiB max RSS"
            )
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {
                    "defects": len(defects),
                    "files": len(files),
                    "results": res,
                    "speed": speed,
                    "scaling": scale_rows,
                    "absent": {t: r.why_absent for t, r in runs.items() if not r.available},
                },
                indent=2,
                default=list,
            )
        )
    return 0


def report(defects, files, runs, res, speed, n_files) -> None:
    tools = [t for t, r in runs.items() if r.available]
    clean = [f for f in files if f.startswith("clean_")]
    print(
        f"\nCorpus: {len(files)} files ({len(clean)} clean), {len(defects)} labelled defects, "
        f"{len({d.rule for d in defects})} defect kinds"
    )
    print("\nFound per defect kind (labelled defects found / labelled):")
    w = max(len(r) for r in res["per_rule"]) + 2
    print("  " + "rule".ljust(w) + "".join(t.rjust(18) for t in tools))
    for rule, row in sorted(res["per_rule"].items()):
        print("  " + rule.ljust(w) + "".join(f"{row.get(t, 0)}/{row['labelled']}".rjust(18) for t in tools))
    print("\nTotals:")
    print("  " + "".ljust(34) + "".join(t.rjust(18) for t in tools))
    for key, label in (
        ("found", "found"),
        ("missed", "missed"),
        ("false_positives_clean_files", "false positives (clean files)"),
        ("unlabelled_in_defect_files", "reports on unlabelled lines"),
    ):
        print("  " + label.ljust(34) + "".join(str(res["per_tool"][t][key]).rjust(18) for t in tools))
    if "pscheck" in res["per_tool"]:
        print(
            "  pscheck findings naming the labelled rule: "
            f"{res['per_tool']['pscheck']['found_with_matching_rule']}"
            f"/{len(defects)}"
        )
    for t in tools:
        for kind in ("fp_list", "unlabelled_list"):
            items = res["per_tool"][t][kind]
            if items:
                title = "false positives" if kind == "fp_list" else "unlabelled reports"
                print(f"\n  {t} {title}:")
                for f, ln, code, msg in items[:15]:
                    print(f"    {f}:{ln} [{code}] {msg[:110]}")
                if len(items) > 15:
                    print(f"    ... {len(items) - 15} more")
    print(f"\nDefects a peer found and pscheck missed: {res['peer_found_pscheck_missed'] or 'none'}")
    print(f"Defects only pscheck found: {len(res['only_pscheck'])} of {len(defects)}")
    print(f"\nSpeed on {n_files} files (fresh process per run, median of runs). CPU seconds (user+sys of the")
    print("tool's processes) are robust to other load on the machine; wall seconds are what a user waits.")
    for t in tools:
        s = speed[t]
        line = (
            f"  {t:<16} {s['cpu_seconds']:6.2f} CPU-s {s['files_per_cpu_s']:7.1f} files/CPU-s | "
            f"{s['seconds']:6.2f} wall-s {s['files_per_s']:7.1f} files/s"
        )
        if "seconds_warm" in s:
            line += (
                f"\n  {'mypy (warm cache)':<16} {s['cpu_seconds_warm']:6.2f} CPU-s "
                f"{s['files_per_cpu_s_warm']:7.1f} files/CPU-s | {s['seconds_warm']:6.2f} wall-s "
                f"{s['files_per_s_warm']:7.1f} files/s"
            )
        print(line)
    if "pscheck" in speed:
        p = speed["pscheck"]
        for t in tools:
            if t == "pscheck":
                continue
            q = speed[t]
            print(
                f"  pscheck vs {t}: {p['files_per_cpu_s'] / q['files_per_cpu_s']:.1f}x files per CPU-s, "
                f"{p['files_per_s'] / q['files_per_s']:.1f}x files per wall-s"
            )
            if "files_per_cpu_s_warm" in q:
                print(
                    f"  pscheck vs {t} (warm cache): "
                    f"{p['files_per_cpu_s'] / q['files_per_cpu_s_warm']:.1f}x files "
                    f"per CPU-s, {p['files_per_s'] / q['files_per_s_warm']:.1f}x files per wall-s"
                )
    for t, r in runs.items():
        if not r.available:
            print(f"  {t}: absent — {r.why_absent}")


if __name__ == "__main__":
    sys.exit(main())
