"""pscheck on real code: pydantic-v2 libraries people use, precision per rule from hand labels.

    .venv/bin/python bench/pscheck/real_code.py [--corpus /tmp/pscheck_corpus] [--no-download]
        [--select default,migration] [--pscheck-src DIR] [--peer-packages dspy,fastapi]
        [--write-unlabelled FILE] [--json out.json]

Packages: the pydantic-v2 libraries installed in this environment (``INSTALLED``, read from
site-packages) and more, fetched as wheels *without their dependencies* into a throwaway folder
(``WHEELS``, pinned versions; ``--corpus``, downloaded with pip unless ``--no-download``) and
unpacked there. Nothing is imported: pscheck reads them statically, one fresh process per package
(``python -m nbkit.pscheck.cli DIRS --format json``), as a user would run it. Per package the bench
records the files, models, wall and CPU seconds, files per second and findings per rule.

Precision: ``labels.jsonl`` next to this file holds hand labels, one JSON object a line:
``{"key", "code", "label": true|false, "why", ...context}``. A finding's key is
``package:path:code:scope:source line#n`` (path inside the package, the enclosing
class/function, the whitespace-normalised text of the reported line, and n to tell identical
lines apart), so labels survive line shifts and version bumps that leave the code alone. Per rule,
every finding is in the sample when the rule fires at most 30 times over the whole corpus;
otherwise 30 are drawn deterministically (lowest SHA-256 of the key). Precision = true / labelled
in the sample, with a Wilson 95 % interval and n. Verdict per default-group rule, stated before
measuring: *holds* when every sampled finding is labelled and precision >= 0.95, *refuted* when
labelled precision < 0.95 with every sampled finding labelled, *inconclusive* otherwise (some
unlabelled: ``--write-unlabelled FILE`` writes them as stubs to label). A default rule with no
finding in the corpus is *no findings* (nothing to measure).

Speed: litellm-sized trees must lint in under 30 s (static mode). ``--peer-packages`` also times
flake8-pydantic (``flake8 --select PYD``, the peer in bench/pscheck/run_bench.py) on those packages
in the same run and prints pscheck's speed ratio against it.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import math
import os
import re
import resource
import subprocess
import sys
import time
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LABELS = HERE / "labels.jsonl"
SAMPLE_PER_RULE = 30
PRECISION_TARGET = 0.95
LITELLM_BUDGET_S = 30.0
# (label, distribution, top-level import names): pydantic-v2 libraries of this environment.
INSTALLED = [
    ("openai", "openai", ["openai"]),
    ("litellm", "litellm", ["litellm"]),
    ("dspy", "dspy", ["dspy"]),
    ("pydantic_settings", "pydantic-settings", ["pydantic_settings"]),
    ("deepspeed", "deepspeed", ["deepspeed"]),
    ("fastapi", "fastapi", ["fastapi"]),
]
# (label, distribution, pinned version): widely used pydantic-v2 libraries read from their wheels.
WHEELS = [
    ("anthropic", "anthropic", "2.16.0"),
    ("google-genai", "google-genai", "3.6.1"),
    ("haystack-ai", "haystack-ai", "3.4.1"),
    ("instructor", "instructor", "1.17.0"),
    ("langchain-core", "langchain-core", "1.8.4"),
    ("langgraph", "langgraph", "1.2.24"),
    ("llama-index-core", "llama-index-core", "0.14.25"),
    ("mcp", "mcp", "2.3.0"),
    ("ollama", "ollama", "0.6.3"),
    ("openai-agents", "openai-agents", "0.24.0"),
    ("pydantic-ai-slim", "pydantic-ai-slim", "2.68.0"),
    ("sqlmodel", "sqlmodel", "0.0.50"),
]


@dataclass
class Package:
    label: str
    version: str
    source: str  # "installed" or "wheel"
    root: Path | None  # the directory the package dirs live in (site-packages or the unpacked wheel)
    dirs: list[Path] = field(default_factory=list)
    absent: str = ""  # why it could not be read


@dataclass
class Finding:
    package: str
    path: str  # relative to the package root
    line: int
    code: str
    severity: str
    message: str
    text: str
    scope: str
    key: str = ""


def _norm(dist: str) -> str:
    return re.sub(r"[-_.]+", "_", dist).lower()


def installed_packages() -> list[Package]:
    out = []
    for label, dist, names in INSTALLED:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out.append(Package(label, "-", "installed", None, absent=f"not installed (pip install {dist})"))
            continue
        dirs = []
        for name in names:
            spec = importlib.util.find_spec(name)  # top-level: locates without executing the package
            if spec is not None and spec.submodule_search_locations:
                dirs += [Path(p) for p in spec.submodule_search_locations]
        root = dirs[0].parent if dirs else None
        out.append(
            Package(
                label,
                version,
                "installed",
                root,
                dirs,
                absent="" if dirs else "installed but no package directory found",
            )
        )
    return out


def wheel_packages(corpus: Path, download: bool) -> list[Package]:
    wheels = corpus / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    out = []
    for label, dist, version in WHEELS:
        found = sorted(wheels.glob(f"{_norm(dist)}-{version}-*.whl"))
        if not found and download:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--quiet",
                "-d",
                str(wheels),
                f"{dist}=={version}",
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
                out.append(Package(label, version, "wheel", None, absent=f"download failed: {tail}"))
                continue
            found = sorted(wheels.glob(f"{_norm(dist)}-{version}-*.whl"))
        if not found:
            out.append(
                Package(
                    label, version, "wheel", None, absent=f"wheel not in {wheels} (run without --no-download)"
                )
            )
            continue
        dest = corpus / "src" / found[0].stem
        if not dest.exists():
            with zipfile.ZipFile(found[0]) as z:
                z.extractall(dest)
        dirs = sorted(
            p for p in dest.iterdir() if p.is_dir() and not p.name.endswith((".dist-info", ".data"))
        )
        out.append(Package(label, version, "wheel", dest, dirs))
    return out


def _scopes(tree: ast.Module) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of every class and function, outermost first."""
    out: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                out.append((child.lineno, child.end_lineno or child.lineno, name))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


_FILE_CACHE: dict[str, tuple[list[str], list[tuple[int, int, str]]]] = {}


def _context(path: str, line: int) -> tuple[str, str]:
    """(whitespace-normalised text of ``line``, innermost enclosing class/function)."""
    if path not in _FILE_CACHE:
        try:
            src = Path(path).read_text(encoding="utf-8", errors="replace")
            _FILE_CACHE[path] = (src.splitlines(), _scopes(ast.parse(src)))
        except (OSError, SyntaxError, ValueError):
            _FILE_CACHE[path] = ([], [])
    lines, scopes = _FILE_CACHE[path]
    text = " ".join(lines[line - 1].split()) if 0 < line <= len(lines) else ""
    inner = [s for s in scopes if s[0] <= line <= s[1]]
    return text, (inner[-1][2] if inner else "<module>")


def run_pscheck(pkg: Package, select: str, src: Path) -> tuple[dict, float, float]:
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    cmd = [
        sys.executable,
        "-m",
        "nbkit.pscheck.cli",
        *map(str, pkg.dirs),
        "--format",
        "json",
        "--no-entry-points",
        "--select",
        select,
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=src)  # cwd: ``-m`` puts it first
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SystemExit(
            f"pscheck failed on {pkg.label} (exit {proc.returncode}): "
            f"{(proc.stderr.strip().splitlines() or ['no output'])[-1]}"
        ) from None
    return doc, wall, cpu


def run_peer(pkg: Package) -> float | None:
    """Wall seconds of flake8-pydantic on the same tree (None when flake8 is not installed)."""
    if importlib.util.find_spec("flake8") is None:
        return None
    cmd = [sys.executable, "-m", "flake8", "--select", "PYD", "--jobs", "1", *map(str, pkg.dirs)]
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, text=True)
    return time.perf_counter() - t0


def findings_of(pkg: Package, doc: dict) -> list[Finding]:
    out = []
    assert pkg.root is not None
    for d in doc["diagnostics"]:
        if d["code"] in ("PSC000", "PSC999"):
            continue
        rel = os.path.relpath(d["path"], pkg.root)
        text, scope = _context(d["path"], d["line"])
        out.append(Finding(pkg.label, rel, d["line"], d["code"], d["severity"], d["message"], text, scope))
    seen: Counter[str] = Counter()
    for f in out:
        base = f"{f.package}:{f.path}:{f.code}:{f.scope}:{f.text}"
        f.key = f"{base}#{seen[base]}"
        seen[base] += 1
    return out


def sample(findings: list[Finding]) -> dict[str, list[Finding]]:
    by_code: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_code[f.code].append(f)
    out = {}
    for code, fs in sorted(by_code.items()):
        if len(fs) <= SAMPLE_PER_RULE:
            out[code] = fs
        else:
            out[code] = sorted(fs, key=lambda f: hashlib.sha256(f.key.encode()).hexdigest())[:SAMPLE_PER_RULE]
    return out


def load_labels(path: Path) -> dict[str, dict]:
    labels = {}
    if not path.exists():
        return labels
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(
                f"{path}:{n}: not JSON ({exc.msg}); expected one label object per line"
            ) from None
        if not isinstance(row, dict) or "key" not in row or row.get("label") not in (True, False, None):
            raise SystemExit(f"{path}:{n}: expected an object with 'key' and 'label' true/false/null")
        labels[row["key"]] = row
    return labels


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def rule_groups(src: Path) -> dict[str, str]:
    """code -> group, from the pscheck under test (``--list-rules``)."""
    env = dict(os.environ, PYTHONPATH=str(src))
    proc = subprocess.run(
        [sys.executable, "-m", "nbkit.pscheck.cli", "--list-rules", "--no-entry-points"],
        capture_output=True,
        text=True,
        env=env,
        cwd=src,
    )
    out = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^(\S+)\s+\S+\s+\S+?( \((\w+)(?:, opt-in)?\))?(?: \(also in [\w, ]+\))*:", line)
        if m:
            out[m.group(1)] = m.group(3) or "default"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--corpus",
        type=Path,
        default=Path("/tmp/pscheck_corpus"),
        help="throwaway folder for the downloaded wheels (default /tmp/pscheck_corpus)",
    )
    ap.add_argument("--no-download", action="store_true", help="use only wheels already in --corpus")
    ap.add_argument(
        "--select",
        default="default,migration",
        help="what pscheck runs (default: default,migration — migration rules are measured too)",
    )
    ap.add_argument(
        "--pscheck-src",
        type=Path,
        default=ROOT,
        help="directory holding the nbkit package to measure (default: this checkout)",
    )
    ap.add_argument("--labels", type=Path, default=LABELS)
    ap.add_argument(
        "--peer-packages",
        default="dspy,fastapi",
        help="packages to also time flake8-pydantic on ('' = none; on litellm it takes minutes)",
    )
    ap.add_argument(
        "--write-unlabelled", type=Path, metavar="FILE", help="write sampled findings without a label"
    )
    ap.add_argument("--json", type=Path, metavar="FILE", help="write every finding and figure as JSON")
    args = ap.parse_args(argv)

    packages = installed_packages() + wheel_packages(args.corpus, download=not args.no_download)
    groups = rule_groups(args.pscheck_src)
    peers = {p.strip() for p in args.peer_packages.split(",") if p.strip()}
    rows, everything = [], []
    print(
        f"pscheck on real code: {sys.executable} (Python {sys.version.split()[0]}), "
        f"pscheck from {args.pscheck_src}, --select {args.select}; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
    )
    print(
        f"{'package':<20} {'version':>10} {'source':>9} {'files':>6} {'models':>6} "
        f"{'wall s':>7} {'CPU s':>6} "
        f"{'files/s':>8} {'/CPU-s':>7} findings per rule"
    )
    for pkg in packages:
        if pkg.absent:
            print(f"{pkg.label:<20} {pkg.version:>10} {pkg.source:>9}  absent: {pkg.absent}")
            rows.append(
                {"package": pkg.label, "version": pkg.version, "source": pkg.source, "absent": pkg.absent}
            )
            continue
        doc, wall, cpu = run_pscheck(pkg, args.select, args.pscheck_src)
        fs = findings_of(pkg, doc)
        everything += fs
        per_rule = dict(sorted(Counter(f.code for f in fs).items()))
        s = doc["summary"]
        row = {
            "package": pkg.label,
            "version": pkg.version,
            "source": pkg.source,
            "files": s["files_checked"],
            "models": s["models_checked"],
            "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
            "files_per_s": round(s["files_checked"] / wall, 1) if wall else None,
            "files_per_cpu_s": round(s["files_checked"] / cpu, 1) if cpu else None,
            "unreadable": s["unreadable"],
            "findings": per_rule,
        }
        if pkg.label in peers:
            peer = run_peer(pkg)
            row["flake8_pydantic_wall_s"] = None if peer is None else round(peer, 2)
        rows.append(row)
        rule_txt = ", ".join(f"{n} × {c}" for c, n in per_rule.items()) or "0"
        print(
            f"{pkg.label:<20} {pkg.version:>10} {pkg.source:>9} {row['files']:>6} {row['models']:>6} "
            f"{wall:>7.1f} {cpu:>6.1f} {row['files_per_s']:>8} {row['files_per_cpu_s']:>7} {rule_txt}"
            + (f"  [{s['unreadable']} unreadable]" if s["unreadable"] else "")
        )
    for row in rows:
        if "flake8_pydantic_wall_s" in row:
            peer = row["flake8_pydantic_wall_s"]
            if peer is None:
                print(
                    "peer: flake8-pydantic not installed (pip install flake8-pydantic); "
                    f"no ratio for {row['package']}"
                )
            else:
                print(
                    f"peer on {row['package']}: flake8-pydantic {peer:.1f} s wall "
                    f"vs pscheck {row['wall_s']:.1f} s: "
                    f"pscheck is {peer / row['wall_s']:.2f}x its speed"
                )
        if row.get("package") == "litellm" and "wall_s" in row:
            # Judged on CPU seconds (user+sys of the pscheck process): on a shared machine the wall
            # clock also counts the time other processes held the cores.
            ok = row["cpu_s"] < LITELLM_BUDGET_S
            print(
                f"speed target (litellm under {LITELLM_BUDGET_S:.0f} s static, CPU seconds): "
                f"{'holds' if ok else 'refuted'} ({row['cpu_s']:.1f} CPU-s, {row['wall_s']:.1f} s wall, "
                f"{row['files']} files, {row['files'] / row['cpu_s']:.0f} files per CPU-s)"
            )

    labels = load_labels(args.labels)
    samples = sample(everything)
    total = Counter(f.code for f in everything)
    print(
        f"\nPrecision per rule (labels: {os.path.relpath(args.labels, ROOT)}; "
        "every finding when a rule fires "
        f"<= {SAMPLE_PER_RULE} times, else {SAMPLE_PER_RULE} drawn by SHA-256 of the key):"
    )
    print(
        f"{'rule':<8} {'group':<10} {'findings':>8} {'sampled':>7} {'labelled':>8} {'true':>5} "
        f"{'precision':>9} {'Wilson 95%':>13}  verdict (default rules: >= {PRECISION_TARGET:.0%})"
    )
    unlabelled: list[Finding] = []
    precision = {}
    for code in sorted(set(groups) | set(total)):
        group = groups.get(code, "?")
        fs = samples.get(code, [])
        lab = [labels[f.key]["label"] for f in fs if f.key in labels and labels[f.key]["label"] is not None]
        unlabelled += [f for f in fs if f.key not in labels or labels[f.key]["label"] is None]
        k, n = sum(lab), len(lab)
        lo, hi = wilson(k, n)
        if not total[code]:
            verdict = "no findings"
        elif n < len(fs):
            verdict = f"inconclusive ({len(fs) - n} unlabelled)"
        else:
            verdict = "holds" if k / n >= PRECISION_TARGET else "refuted"
        if group != "default" and total[code]:
            verdict = f"(opt-in) {verdict.replace('holds', '>= target').replace('refuted', 'below target')}"
        if not total[code] and group != "default":
            continue
        prec = f"{k / n:.2f}" if n else "-"
        print(
            f"{code:<8} {group:<10} {total[code]:>8} {len(fs):>7} {n:>8} {k:>5} {prec:>9} "
            f"{(f'[{lo:.2f}, {hi:.2f}]' if n else '-'):>13}  {verdict}"
        )
        precision[code] = {
            "group": group,
            "findings": total[code],
            "sampled": len(fs),
            "labelled": n,
            "true": k,
            "precision": (k / n) if n else None,
            "wilson95": [lo, hi] if n else None,
            "verdict": verdict,
        }
    if unlabelled:
        print(
            f"\n{len(unlabelled)} sampled finding(s) have no label"
            + (
                f"; stubs written to {args.write_unlabelled}"
                if args.write_unlabelled
                else " (--write-unlabelled FILE writes them as stubs)"
            )
        )
        if args.write_unlabelled:
            with open(args.write_unlabelled, "w", encoding="utf-8") as fh:
                for f in unlabelled:
                    fh.write(
                        json.dumps(
                            {
                                "key": f.key,
                                "code": f.code,
                                "label": None,
                                "why": "",
                                "package": f.package,
                                "path": f.path,
                                "line": f.line,
                                "text": f.text,
                                "message": f.message,
                            },
                            ensure_ascii=False,
                        )
                        + "\n"
                    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"packages": rows, "precision": precision, "findings": [f.__dict__ for f in everything]},
                indent=1,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
