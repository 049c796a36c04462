"""pscheck command line: output formats, exit codes 0/1/2, and bad input without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nbkit.pscheck import lint_paths
from nbkit.pscheck.cli import main

GOOD = (
    "from typing import Optional\nfrom pydantic import BaseModel\n\n"
    "class U(BaseModel):\n    name: Optional[str] = None\n"
)
ERROR = "from pydantic import BaseModel\n\nclass U(BaseModel):\n    email: str = None\n"
WARNING = (
    "from typing import Optional\nfrom pydantic import BaseModel\n\n"
    "class U(BaseModel):\n    note: Optional[str]\n"
)


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_exit_0_on_clean_file(tmp_path, capsys):
    code, out, err = run_cli(capsys, write(tmp_path, "a.py", GOOD))
    assert code == 0 and out == "" and "0 error(s)" in err


def test_exit_1_and_clickable_text_on_error(tmp_path, capsys):
    p = write(tmp_path, "a.py", ERROR)
    code, out, _ = run_cli(capsys, p)
    assert code == 1
    assert out.splitlines() == [
        f"{p}:4:18: PSC001 default None of 'email' is not of its type str; "
        f"Pydantic does not validate defaults, so instances silently hold it [error]"
    ]


def test_error_level_decides_whether_warnings_fail(tmp_path, capsys):
    p = write(tmp_path, "a.py", WARNING)
    assert (
        run_cli(capsys, p, "--extend-select", "migration")[0] == 0
    )  # warning printed, default level is error
    code, out, _ = run_cli(capsys, p, "--extend-select", "migration", "--error-level", "warning")
    assert code == 1 and "PSC002" in out
    assert run_cli(capsys, p, "--error-level", "warning")[0] == 0  # PSC002 is opt-in (migration group)


def test_seed_spelling_path_option_and_directory_walk(tmp_path, capsys):
    write(tmp_path, "pkg/a.py", ERROR)
    write(tmp_path, "pkg/sub/b.py", WARNING)
    write(tmp_path, "pkg/.venv/c.py", ERROR)  # excluded, reported as skipped
    write(tmp_path, "pkg/notes.txt", ERROR)  # not *.py
    code, out, err = run_cli(capsys, "--path", tmp_path / "pkg", "--strict", "--extend-select", "migration")
    assert code == 1
    assert [line.split(":")[0].rsplit("/", 1)[-1] for line in out.splitlines()] == ["a.py", "b.py"]
    assert "skipped" in err and ".venv" in err


def test_json_output_schema(tmp_path, capsys):
    p = write(tmp_path, "a.py", ERROR + "\nclass V(BaseModel):\n    x: int = Field(max_length=2)\n")
    code, out, _ = run_cli(capsys, p, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["schema_version"] == 1 and doc["tool"] == "pscheck"
    assert set(doc) == {"tool", "schema_version", "summary", "rules", "diagnostics", "skipped", "notes"}
    assert doc["summary"]["exit_code"] == 1 and doc["summary"]["files_checked"] == 1
    assert doc["summary"]["models_checked"] == 2 and doc["summary"]["errors"] == 2
    d = doc["diagnostics"][0]
    assert set(d) == {"path", "line", "col", "code", "severity", "message", "rule"}
    assert (d["line"], d["col"], d["code"], d["severity"], d["rule"]) == (
        4,
        18,
        "PSC001",
        "error",
        "default-type-mismatch",
    )


def test_select_ignore_and_unknown_codes(tmp_path, capsys):
    p = write(tmp_path, "a.py", ERROR)
    assert run_cli(capsys, p, "--ignore", "PSC001")[0] == 0
    assert run_cli(capsys, p, "--select", "PSC002")[0] == 0
    code, _, err = run_cli(capsys, p, "--select", "NOPE1")
    assert code == 2 and "unknown rule code or group: NOPE1" in err


def test_bad_arguments_exit_2(capsys):
    assert run_cli(capsys)[0] == 2  # no path
    assert run_cli(capsys, "--format", "xml", "x.py")[0] == 2
    assert run_cli(capsys, "--error-level", "info", "x.py")[0] == 2


def test_missing_path_is_exit_2(tmp_path, capsys):
    code, out, _ = run_cli(capsys, tmp_path / "nope.py")
    assert code == 2 and "PSC000 cannot read: No such file" in out


def test_syntax_error_reported_with_location(tmp_path, capsys):
    p = write(tmp_path, "bad.py", "from pydantic import BaseModel\n\nclass M(BaseModel:\n    x: int\n")
    code, out, _ = run_cli(capsys, p)
    assert code == 2
    assert out.startswith(f"{p}:3:") and "PSC000 syntax error" in out


def test_non_utf8_reported_with_byte_position(tmp_path, capsys):
    p = write(tmp_path, "latin.py", b"x = 1\ny = '\xe9t\xe9'\n")
    code, out, _ = run_cli(capsys, p)
    assert code == 2 and f"{p}:2:6: PSC000 not valid utf-8: byte 0xe9 at line 2, column 6" in out


def test_declared_latin1_encoding_is_honoured(tmp_path, capsys):
    p = write(tmp_path, "latin.py", b"# -*- coding: latin-1 -*-\n" + ERROR.encode() + b"# caf\xe9\n")
    code, out, _ = run_cli(capsys, p)
    assert code == 1 and "PSC001" in out


def test_nul_bytes_and_deep_nesting_do_not_crash(tmp_path, capsys):
    a = write(tmp_path, "nul.py", b"x = 1\x00\n")
    b = write(tmp_path, "deep.py", "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    code, out, _ = run_cli(capsys, a, b)
    assert code == 2 and out.count("PSC000") == 2


def test_symlink_loops(tmp_path, capsys):
    os.symlink(tmp_path / "loopB.py", tmp_path / "loopA.py")
    os.symlink(tmp_path / "loopA.py", tmp_path / "loopB.py")
    (tmp_path / "d").mkdir()
    os.symlink(tmp_path, tmp_path / "d" / "up")  # directory cycle
    write(tmp_path, "ok.py", GOOD)
    code, out, err = run_cli(capsys, tmp_path)
    assert code == 2 and "symlink loop" in out
    assert "symlink cycle" in err
    assert out.count("ok.py") == 0  # the clean file is checked once, not re-walked through d/up


def test_huge_file_is_reported_not_parsed(tmp_path, capsys):
    p = write(tmp_path, "big.py", ERROR + "# " + "x" * 5000 + "\n")
    code, out, _ = run_cli(capsys, p, "--max-bytes", "1000")
    assert code == 2 and "over the" in out and "--max-bytes" in out
    assert run_cli(capsys, p, "--max-bytes", "0")[0] == 1  # 0 = no limit


def test_large_generated_file_is_linted_quickly(tmp_path):
    body = "".join(
        f"class M{i}(BaseModel):\n    a: int = {i}\n    b: Optional[str] = None\n" for i in range(3000)
    )
    p = write(tmp_path, "gen.py", "from typing import Optional\nfrom pydantic import BaseModel\n" + body)
    assert lint_paths([p]) == []


def test_file_without_models_is_clean(tmp_path, capsys):
    assert run_cli(capsys, write(tmp_path, "plain.py", "def f():\n    return 1\n"))[0] == 0
    assert run_cli(capsys, write(tmp_path, "empty.py", ""))[0] == 0


def test_failing_plugin_is_exit_2_with_one_line(tmp_path, capsys, monkeypatch):
    write(tmp_path, "broken_plugin.py", "raise RuntimeError('boom at import')\n")
    write(tmp_path, "exiting_plugin.py", "import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    p = write(tmp_path, "a.py", GOOD)
    for plugin, text in (
        ("broken_plugin", "RuntimeError: boom at import"),
        ("exiting_plugin", "SystemExit"),
        ("no_such_plugin_mod", "ModuleNotFoundError"),
    ):
        code, out, err = run_cli(capsys, p, "--plugin", plugin)
        assert code == 2 and text in err and len(err.strip().splitlines()) == 1


def test_crashing_rule_is_reported_and_others_still_run(tmp_path, capsys, monkeypatch):
    write(
        tmp_path,
        "crashy.py",
        "from nbkit.pscheck import BaseRule\n"
        "class Crash(BaseRule):\n    code = 'ZZZ001'; name = 'crash'\n"
        "    def check_model(self, model, ctx):\n        raise KeyError('oops')\n"
        "PSCHECK_RULES = [Crash]\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    p = write(tmp_path, "a.py", ERROR)
    code, out, _ = run_cli(capsys, p, "--plugin", "crashy")
    assert code == 2
    assert "PSC999 rule ZZZ001 (crash) crashed on U: KeyError" in out and "PSC001" in out


def test_console_script_subprocess_no_traceback(tmp_path):
    p = write(tmp_path, "bad.py", "class (:\n")
    proc = subprocess.run(
        [sys.executable, "-m", "nbkit.pscheck.cli", str(p)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "PSC000 syntax error" in proc.stdout


def test_import_mode_finds_what_static_cannot(tmp_path, capsys):
    pytest.importorskip("pydantic")
    p = write(
        tmp_path,
        "rt_models.py",
        "from pydantic import BaseModel, Field\nDEFAULT_NAME = None\nNOT_CALLABLE = [1]\n"
        "print('module output must not corrupt pscheck')\n"
        "class M(BaseModel):\n    name: str = DEFAULT_NAME\n"
        "    tags: list = Field(default_factory=NOT_CALLABLE)\n"
        "    ok: int = len('abc')\n    email: str = None\n",
    )
    code, out, _ = run_cli(capsys, p)
    assert code == 1 and out.count("PSC") == 1  # statically only email is decidable
    code, out, err = run_cli(capsys, p, "--import")
    assert code == 1
    lines = out.splitlines()
    assert any(":6:" in ln and "PSC001" in ln and "--import" in ln for ln in lines), out
    assert any(":7:" in ln and "PSC004" in ln for ln in lines), out
    assert sum("PSC001" in ln for ln in lines) == 2  # email not reported twice
    assert "executed 1 module(s)" in err


def test_import_mode_reports_failing_import(tmp_path, capsys):
    pytest.importorskip("pydantic")
    p = write(
        tmp_path,
        "rt_broken.py",
        "from pydantic import BaseModel\nimport nonexistent_dep_xyz\nclass M(BaseModel):\n    x: int = 1\n",
    )
    code, out, _ = run_cli(capsys, p, "--import")
    assert code == 2 and "PSC000 --import: importing failed: ModuleNotFoundError" in out


def test_import_mode_hanging_module_times_out(tmp_path, capsys, monkeypatch):
    pytest.importorskip("pydantic")
    monkeypatch.setenv("PSCHECK_IMPORT_TIMEOUT", "3")
    p = write(
        tmp_path,
        "rt_hang.py",
        "from pydantic import BaseModel\nclass M(BaseModel):\n    x: str = None\nwhile True:\n    pass\n",
    )
    code, out, _ = run_cli(capsys, p, "--import")
    assert code == 2 and "did not finish within 3 s" in out and "PSC001" in out


def test_import_mode_with_source_text_is_static_only():
    from nbkit.pscheck import lint_paths_report  # noqa: F401  (API surface)
    from nbkit.pscheck.engine import lint

    report = lint(
        [("<string>", "from pydantic import BaseModel\nclass M(BaseModel):\n    x: str = None\n")],
        use_import=True,
    )
    assert [d.code for d in report.diagnostics] == ["PSC001"]
    assert any("not a file on disk" in n for n in report.notes)


def test_deep_but_parseable_code_is_fully_checked(tmp_path, capsys):
    chain = "+".join(["1"] * 1500)  # parses, but deeper than Python's default recursion limit allows to walk
    p = write(
        tmp_path,
        "deep_ok.py",
        f"from pydantic import BaseModel\nclass M(BaseModel):\n    x: int = {chain}\n"
        f"    y: str = None\ndef f(m: M):\n    return m.dict({chain})\n",
    )
    code, out, _ = run_cli(capsys, p)
    assert code == 1 and "PSC001" in out and "PSC018" in out and "PSC999" not in out
    assert sys.getrecursionlimit() < 10_000  # restored afterwards


def _run_with_closed_stdout(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the command line with a stdout whose reader is already gone (``pscheck ... | head`` once
    ``head`` has exited): every write to it fails with EPIPE."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(
            [sys.executable, "-m", "nbkit.pscheck.cli", *args],
            stdout=w,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parents[2],
        )
    finally:
        os.close(w)


def test_closed_stdout_ends_list_rules_quietly():
    proc = _run_with_closed_stdout("--list-rules", "--no-entry-points")
    assert proc.returncode == 0
    assert not any(noise in proc.stderr for noise in ("Traceback", "BrokenPipe", "Exception ignored"))


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_closed_stdout_keeps_the_lint_status_and_summary(tmp_path, fmt):
    p = write(tmp_path, "a.py", ERROR)
    proc = _run_with_closed_stdout(str(p), "--format", fmt)
    assert proc.returncode == 1
    assert not any(noise in proc.stderr for noise in ("Traceback", "BrokenPipe", "Exception ignored"))
    if fmt == "text":
        assert "1 error(s)" in proc.stderr
