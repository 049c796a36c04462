"""Bad input to ``nbkit audit``: one line naming the file/line/key, exit 2, no traceback, fast."""

from __future__ import annotations

import time

import pytest

from nbkit.audit.cli import main
from nbkit.audit.sft import EXAMPLES_DIR

GOOD = str(EXAMPLES_DIR / "good.yaml")

BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(9)
) + "model: *j\n"

# (name, config text or None for GOOD, extra argv, text the one error line must contain)
CASES = [
    ("reversed range", None, ["--checks", "5-2"], "reversed"),
    ("only a comma", None, ["--checks", ","], "selects no check"),
    ("empty checks flag", None, ["--checks", ""], "selects no check"),
    ("unknown slug", None, ["--checks", "lora-bindin"], "unknown check 'lora-bindin'"),
    ("unknown number", None, ["--checks", "99"], "unknown check '99'"),
    ("negative threads", None, ["--threads", "-3"], "--threads must be ≥ 0"),
    ("empty checks list", "checks: []\n", [], "cfg.yaml:1: key 'checks'"),
    ("checks 99 with line", "model:\n  name: tiny\nchecks: [2, 99]\n", [], "cfg.yaml:3: key 'checks.1'"),
    ("bool for an int", "model:\n  seed: true\n", [], "cfg.yaml:2: key 'model.seed'"),
    ("float for an int", "model:\n  seed: 4.0\n", [], "cfg.yaml:2: key 'model.seed'"),
    ("string for an int", "lora:\n  r: \"4\"\n", [], "cfg.yaml:2: key 'lora.r'"),
    ("duplicate key", "lora:\n  r: 4\n  r: 8\n", [], "cfg.yaml:3: duplicate key 'r'"),
    ("billion laughs", BILLION_LAUGHS, [], "aliases expand to"),
    ("data path is a directory", "data:\n  path: .\n  schema: x.py:Y\n", [], "cfg.yaml:2: key 'data.path'"),
    ("not a mapping", "- a\n- b\n", [], "must be a YAML mapping"),
    ("bad yaml", "model: [unclosed\n", [], "not valid YAML"),
]


@pytest.mark.parametrize("name,text,argv,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, name, text, argv, expected):
    path = GOOD
    if text is not None:
        cfg = tmp_path / "cfg.yaml"
        cfg.write_text(text)
        path = str(cfg)
    t0 = time.perf_counter()
    assert main([path, *argv]) == 2
    assert time.perf_counter() - t0 < 5
    cap = capsys.readouterr()
    assert cap.out == ""
    assert expected in cap.err, cap.err
    assert "Traceback" not in cap.err
    assert cap.err.startswith("nbkit audit: error:")


def test_directory_as_config_path(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is a directory" in err and "Traceback" not in err


def test_empty_jsonl_fails_the_data_check(tmp_path, capsys):
    (tmp_path / "d.jsonl").write_text("")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"data:\n  path: d.jsonl\n  schema: {EXAMPLES_DIR / 'sft_schema.py'}:SFTExample\n")
    assert main([str(cfg), "--checks", "data-schema"]) == 1
    assert "[FAIL] data-schema: data file" in capsys.readouterr().out


def test_huge_lora_rank_fails_fast_without_allocating(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("lora:\n  r: 10000000\n")
    t0 = time.perf_counter()
    assert main([str(cfg), "--checks", "lora-binding", "--threads", "1"]) == 1
    assert time.perf_counter() - t0 < 60  # model load included; the adapter is never built
    assert "rank 10000000 exceeds" in capsys.readouterr().out
