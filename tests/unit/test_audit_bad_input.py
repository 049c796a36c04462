"""Bad input to ``nbkit audit``: one line naming the file/line/key, exit 2, no traceback, fast."""

from __future__ import annotations

import time

import pytest

from nbkit.audit.cli import main
from nbkit.audit.sft import EXAMPLES_DIR

GOOD = str(EXAMPLES_DIR / "good.yaml")

BILLION_LAUGHS = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9)
    )
    + "model: *j\n"
)

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
    ("string for an int", 'lora:\n  r: "4"\n', [], "cfg.yaml:2: key 'lora.r'"),
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


# Foreign formats and models by path: (name, file name, file text — "{dir}" is the test's folder —, extra
# argv, the error must contain)
FOREIGN = [
    (
        "axolotl unknown adapter",
        "lora.yml",
        "base_model: tiny\nadapter: loha\nlora_r: 8\n",
        [],
        "lora.yml:2: key 'adapter'",
    ),
    (
        "axolotl adapter not a name",
        "lora.yml",
        "adapter: [lora]\nlora_r: 8\n",
        [],
        "lora.yml:1: key 'adapter'",
    ),
    (
        "TrainingArguments before 4.41",
        "args.json",
        '{"output_dir": "o", "per_device_train_batch_size": 8, "evaluation_strategy": "steps"}',
        [],
        "args.json: key 'evaluation_strategy': written by transformers older than 4.41",
    ),
    (
        "TrainingArguments per_gpu batch",
        "args.json",
        '{"output_dir": "o", "per_gpu_train_batch_size": 8}',
        [],
        "key 'per_gpu_train_batch_size': written by transformers older than 2.9",
    ),
    (
        "base_model dir without config.json",
        "lora.yml",
        "base_model: {dir}/empty_model\nadapter: lora\n",
        [],
        "key 'base_model': model directory {dir}/empty_model has no config.json",
    ),
    (
        "base_model dir without weights",
        "lora.yml",
        "base_model: {dir}/config_only\nadapter: lora\n",
        [],
        "key 'base_model': model directory {dir}/config_only has no weights",
    ),
    (
        "base_model relative dir without weights",
        "lora.yml",
        "base_model: config_only\nadapter: lora\n",
        [],
        "model directory {dir}/config_only has no weights",
    ),
    (
        "base_model missing path",
        "lora.yml",
        "base_model: ./no/such/model\nadapter: lora\n",
        [],
        "key 'base_model': model ./no/such/model: no such file",
    ),
    (
        "base_model Hub id offline",
        "lora.yml",
        "base_model: NousResearch/Llama-3.2-1B\nadapter: lora\n",
        [],
        "lora.yml:1: key 'base_model': model NousResearch/Llama-3.2-1B: not a local path, and not in the "
        "Hugging Face cache",
    ),
    (
        "base_model not a string",
        "lora.yml",
        "base_model: 3\nadapter: lora\n",
        [],
        "lora.yml:1: key 'base_model': expected a model name or path",
    ),
    (
        "--model dir without weights",
        "lora.yml",
        "adapter: lora\nlora_r: 8\n",
        ["--model", "{dir}/config_only"],
        "--model: model directory",
    ),
    (
        "nbkit model.name dir without config",
        "cfg.yaml",
        "model:\n  name: {dir}/empty_model\n",
        [],
        "key 'model.name': model directory",
    ),
    (
        "datasets not a list",
        "lora.yml",
        "adapter: lora\ndatasets: data.jsonl\n",
        [],
        "lora.yml:2: key 'datasets': expected a list of mappings",
    ),
    (
        "bad train_on_eos",
        "lora.yml",
        "adapter: lora\ndatasets:\n  - path: d\n    type: chat_template\n    train_on_eos: always\n",
        [],
        "key 'datasets.0.train_on_eos': expected turn, all, last or none",
    ),
    (
        "modules_to_save not names",
        "lora.yml",
        "adapter: lora\nlora_modules_to_save: {lm_head: true}\n",
        [],
        "lora.yml:2: key 'lora_modules_to_save': expected a list of names",
    ),
    (
        "train_on_inputs not a bool",
        "lora.yml",
        'adapter: lora\ntrain_on_inputs: "yes"\n',
        [],
        "lora.yml:2: key 'train_on_inputs': expected true or false",
    ),
    (
        "TRL packing not a bool",
        "sft.json",
        '{"output_dir": "o", "per_device_train_batch_size": 2, "packing": "true"}',
        [],
        "key 'packing': expected true or false",
    ),
]


@pytest.mark.parametrize("name,file,text,argv,expected", FOREIGN, ids=[c[0] for c in FOREIGN])
def test_foreign_bad_input_is_one_line_exit_2(
    tmp_path, capsys, monkeypatch, name, file, text, argv, expected
):
    import json

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty_model").mkdir()
    (tmp_path / "empty_model" / "tokenizer.json").write_text("{}")
    (tmp_path / "config_only").mkdir()
    (tmp_path / "config_only" / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_attention_heads": 4,
                "num_hidden_layers": 1,
                "intermediate_size": 128,
                "vocab_size": 256,
            }
        )
    )
    path = tmp_path / file
    path.write_text(text.replace("{dir}", str(tmp_path)))
    before = sorted(p.name for p in tmp_path.iterdir())
    t0 = time.perf_counter()
    assert main([str(path), *[a.replace("{dir}", str(tmp_path)) for a in argv]]) == 2
    assert time.perf_counter() - t0 < 15
    cap = capsys.readouterr()
    assert cap.out == "" and "Traceback" not in cap.err and cap.err.startswith("nbkit audit: error:")
    assert expected.replace("{dir}", str(tmp_path)) in cap.err, cap.err
    assert len(cap.err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
