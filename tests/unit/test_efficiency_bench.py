"""bench/efficiency.py without its engines: the line it prints per pair, the interleaving, its exit codes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def eff():
    return load_script(ROOT / "bench" / "efficiency.py", "efficiency_bench")


def test_the_line_of_a_pair_starts_at_column_0_with_the_ratio_and_its_goal(eff):
    r = eff.PairResult("lm-token", "per token", [0.2, 0.3, 0.25], [0.1, 0.1, 0.1], "ref", "what", "how")
    first, second = r.lines()[:2]
    assert re.fullmatch(
        r"efficiency lm-token: 2\.50 \(nbkit's time ÷ the reference's time; goal ≤ 1\.1\)", first
    )
    assert second.startswith("    nbkit 250.0 ms per token, ref 100.0 ms per token") and "ABOVE" in second
    slower = eff.PairResult("kg-eval", "per evaluation", [1.0] * 5, [4.0] * 5, "PyKEEN", "w", "c")
    assert slower.ratio == 0.25 and "the reference is 4.00× slower than nbkit" in slower.lines()[1]


def test_repeats_alternate_which_side_goes_first(eff, capsys):
    calls = []
    a, b = eff.interleaved(lambda: calls.append("n") or 1.0, lambda: calls.append("r") or 2.0, 4)
    assert calls == ["n", "r", "r", "n", "n", "r", "r", "n"] and a == [1.0] * 4 and b == [2.0] * 4


def test_fewer_than_five_repeats_is_a_usage_error(eff, capsys):
    with pytest.raises(SystemExit) as exc:
        eff.main(["--repeats", "3"])
    assert exc.value.code == 2 and "at least 5" in capsys.readouterr().err


def test_a_pair_that_does_not_do_the_same_work_is_not_measured_and_the_run_exits_1(eff, monkeypatch, capsys):
    def refuse(args):
        raise eff.NotSameWork("kg-eval: ranks differ in 3 of 2000 queries")

    monkeypatch.setitem(eff.PAIRS, "kg-eval", refuse)
    assert eff.main(["--only", "kg-eval"]) == 1
    out = capsys.readouterr().out
    assert "\nefficiency kg-eval: not measured — NotSameWork: kg-eval: ranks differ" in out
