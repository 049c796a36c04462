"""bench/cpu_floor.py's reading of a run's LM work from llama-cpp-python's server logs, and its bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def floor():
    return load_script(ROOT / "bench" / "cpu_floor.py", "cpu_floor_bench")


# What llama-cpp-python's server writes per request (llama.cpp's perf lines, its prefix-match line).
LOG = """\
Llama.generate: 374 prefix-match hit, remaining 219 prompt tokens to eval
llama_perf_context_print: prompt eval time =    1500.00 ms /   219 tokens (    6.85 ms per token)
llama_perf_context_print:        eval time =     800.00 ms /    50 runs   (   16.00 ms per token)
llama_perf_context_print:       total time =    2300.00 ms /   269 tokens
Llama.generate: 12 prefix-match hit, remaining 589 prompt tokens to eval
llama_perf_context_print: prompt eval time =    4000.00 ms /   589 tokens (    6.79 ms per token)
llama_perf_context_print:        eval time =     160.00 ms /    10 runs   (   16.00 ms per token)
"""


def test_a_runs_lm_work_is_summed_over_every_server_log(floor, tmp_path):
    (tmp_path / "nbkit-llama-server-1-0.log").write_text(LOG)
    (tmp_path / "nbkit-llama-server-1-1.log").write_text(LOG.split("Llama.generate: 12")[0])
    (tmp_path / "other.log").write_text(LOG)  # not a server log: not read
    work = floor.run_lm_work(tmp_path)
    assert work == {
        "requests": 3,
        "prompt_evaluated": 219 + 589 + 219,
        "prompt_reused": 374 + 12 + 374,
        "generated": 50 + 10 + 50,
    }


def test_a_folder_without_server_logs_is_one_clear_error(floor, tmp_path):
    with pytest.raises(FileNotFoundError, match="no nbkit-llama-server-"):
        floor.run_lm_work(tmp_path)
    for bad in (tmp_path / "missing", tmp_path):  # no folder; a folder without server logs
        with pytest.raises(SystemExit) as exit_:
            floor.main(["--run", str(bad)])  # before any measuring
        assert exit_.value.code == 2
