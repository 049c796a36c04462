"""``nbkit audit`` on the configs people already write: axolotl, PEFT, TRL/TrainingArguments, DeepSpeed."""

from __future__ import annotations

import json

import pytest

from nbkit.audit.cli import main
from nbkit.audit.config import ConfigError
from nbkit.audit.formats import detect, read_any

AXOLOTL = """\
base_model: HuggingFaceTB/SmolLM2-135M-Instruct
adapter: lora
lora_r: 16
lora_alpha: 32
lora_dropout: 0.05
lora_target_linear: true
sequence_len: 512
micro_batch_size: 2
gradient_accumulation_steps: 8
learning_rate: 0.0002
lr_scheduler: cosine
warmup_ratio: 0.1
max_steps: 200
bf16: auto
chat_template: chatml
train_on_inputs: false
datasets:
  - path: data/train.jsonl
    type: chat_template
deepspeed: ds.json
output_dir: ./out
"""

DS = {
    "train_batch_size": 64,
    "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 8,
    "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 1e9, "overlap_comm": True},
    "bf16": {"enabled": True},
    "gradient_clipping": 1.0,
}

PEFT = {
    "peft_type": "LORA",
    "base_model_name_or_path": "meta-llama/Llama-2-7b-hf",
    "r": 8,
    "lora_alpha": 16,
    "lora_dropout": 0.05,
    "target_modules": ["q_proj", "v_proj"],
    "task_type": "CAUSAL_LM",
    "bias": "none",
    "fan_in_fan_out": False,
}

TRAINING_ARGS = {
    "output_dir": "out",
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 4,
    "learning_rate": 5e-5,
    "lr_scheduler_type": "linear",
    "warmup_steps": 10,
    "max_steps": 100,
    "bf16": True,
    "save_steps": 50,
    "eval_steps": 20,
    "seed": 42,
    "logging_steps": 10,
    "report_to": ["none"],
    "max_seq_length": 256,
}


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text if isinstance(text, str) else json.dumps(text))
    return p


def test_axolotl_maps_keys_and_lists_what_is_not_covered(tmp_path):
    _write(tmp_path, "ds.json", DS)
    m = read_any(_write(tmp_path, "axolotl.yml", AXOLOTL))
    c = m.config
    assert m.fmt == "axolotl" and c.model.name == "smollm2" and not m.model_unavailable
    assert c.lora.r == 16 and c.lora.alpha == 32 and "down_proj" in c.lora.target_modules
    assert (
        c.train.seq_len == 512
        and c.train.micro_batch_size == 2
        and c.train.grad_accumulation == 8
        and c.train.autocast_dtype == "bfloat16"
    )
    assert [s.kind for s in c.scheduler.stages] == [
        "linear_warmup",
        "cosine",
    ] and c.scheduler.warmup_steps == 20
    assert (
        c.deepspeed.zero_stage == 3
        and c.deepspeed.stage3_param_persistence_threshold == 1e9
        and c.deepspeed.world_size == 4
    )
    status = {r["key"]: r["status"] for r in m.keys}
    assert (
        status["lora_r"] == "audited"
        and status["datasets"] == "audited"
        and status["output_dir"] == "not covered"
    )
    assert (
        c.trainer.tool == "axolotl"
        and c.trainer.dataset_types == ["chat_template"]
        and c.trainer.target_linear
    )
    assert status["deepspeed:zero_optimization.overlap_comm"] == "not covered"
    assert set(status) >= set(AXOLOTL_KEYS)  # every key of the file is in the table


AXOLOTL_KEYS = [line.split(":")[0] for line in AXOLOTL.splitlines() if line and not line.startswith(" ")]


def test_peft_and_training_args_and_deepspeed_detected(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        ConfigError,
        match="adapter_config.json: key 'base_model_name_or_path': model meta-llama/Llama-2-7b-hf: "
        ".*HF_HUB_OFFLINE",
    ):
        read_any(_write(tmp_path, "adapter_config.json", PEFT))  # a Hub id offline: one line naming the key
    peft = read_any(tmp_path / "adapter_config.json", model="tiny")
    assert (
        peft.fmt == "peft"
        and peft.config.lora.target_modules == ["q_proj", "v_proj"]
        and peft.config.model.name == "tiny"
    )
    assert {r["key"]: r["status"] for r in peft.keys}[
        "base_model_name_or_path"
    ] == "not covered"  # replaced by --model
    ta = read_any(_write(tmp_path, "args.json", TRAINING_ARGS))
    assert ta.model_unavailable.startswith("the base model (the file names none")
    assert (
        ta.fmt == "trl"
        and ta.config.train.micro_batch_size == 4
        and ta.config.checkpoint.interval == 50
        and ta.config.eval.interval == 20
    )
    assert ta.config.scheduler.stages[-1].kind == "linear_decay" and ta.config.model.seed == 42
    assert {r["key"]: r["status"] for r in ta.keys}["logging_steps"] == "not covered"
    ds = read_any(_write(tmp_path, "ds_config.json", DS))
    assert ds.fmt == "deepspeed" and ds.config.deepspeed.world_size == 4
    assert detect(tmp_path / "x.yaml", {"model": {}}) == "nbkit"


def test_cli_not_run_needs_a_model_and_prints_the_key_table(tmp_path, capsys):
    path = _write(tmp_path, "ds_config.json", DS)
    assert main([str(path), "--checks", "lora-binding,schedulers"]) == 0
    out = capsys.readouterr().out
    assert "deepspeed config:" in out and "not covered" in out
    assert (
        "[SKIP] lora-binding: not run: needs the base model (the file names none; pass --model PATH)" in out
    )
    assert "[SKIP] schedulers: not run: needs the config's 'scheduler' section" in out


@pytest.mark.parametrize(
    "name,content,expected",
    [
        ("adapter_config.json", {**PEFT, "peft_type": "IA3"}, "the audit checks LoRA adapters"),
        ("a.yml", "adapter: dora\nlora_r: 8\n", "a.yml:1: key 'adapter'"),
        ("a.yml", "adapter: lora\nlora_r: eight\n", "key 'lora_r': expected a positive integer"),
        ("a.yml", "adapter: lora\ndeepspeed: missing.json\n", "missing.json is not a file"),
        ("ds_config.json", {**DS, "train_batch_size": 63}, "is not micro (2) × accumulation (8)"),
        ("bad.json", "{not json", "bad.json:1:2: not valid JSON"),
    ],
)
def test_foreign_bad_input_exit_2(tmp_path, capsys, name, content, expected):
    assert main([str(_write(tmp_path, name, content))]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_unknown_from_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="expected one of"):
        read_any(_write(tmp_path, "a.json", PEFT), "keras")
