"""nbkit diagnose's cross-file coupling: each coupled setting agreeing, disagreeing and left "auto"."""

from __future__ import annotations

import json

import pytest

from nbkit.diagnose.coupling import couplings
from nbkit.diagnose.setup import read_setup

TINY_MODEL = {
    "model_type": "llama",
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
}
BASE = {
    "base_model": "model.json",
    "micro_batch_size": 4,
    "gradient_accumulation_steps": 2,
    "learning_rate": 2e-5,
    "max_grad_norm": 1.0,
    "bf16": True,
    "sequence_len": 64,
    "deepspeed": "ds.json",
}


def _setup(tmp_path, trainer: dict, ds: dict, *, world=(1, 8), fmt="axolotl"):
    import yaml

    (tmp_path / "model.json").write_text(json.dumps(TINY_MODEL))
    (tmp_path / "ds.json").write_text(json.dumps(ds))
    if fmt == "axolotl":
        path = tmp_path / "axolotl.yaml"
        path.write_text(yaml.safe_dump({**BASE, **trainer}, sort_keys=False))
    else:
        path = tmp_path / "training_args.json"
        path.write_text(json.dumps(trainer))
    return read_setup(path, nodes=world[0], gpus_per_node=world[1])


def _row(rows, setting):
    hits = [r for r in rows if r.setting.startswith(setting)]
    assert hits, (setting, [r.setting for r in rows])
    return hits[0]


# (case, trainer keys, ds_config, setting, expected status, text the row must show)
CASES = [
    ("micro agrees", {}, {"train_micro_batch_size_per_gpu": 4}, "micro batch per GPU", "agree", "4"),
    (
        "micro disagrees",
        {},
        {"train_micro_batch_size_per_gpu": 2},
        "micro batch per GPU",
        "error",
        "train_micro_batch_size_per_gpu=2",
    ),
    ("micro auto", {}, {"train_micro_batch_size_per_gpu": "auto"}, "micro batch per GPU", "auto", "auto → 4"),
    ("micro absent", {}, {"zero_optimization": {"stage": 1}}, "micro batch per GPU", "absent", "not set"),
    ("accumulation agrees", {}, {"gradient_accumulation_steps": 2}, "gradient accumulation", "agree", "2"),
    (
        "accumulation disagrees",
        {},
        {"gradient_accumulation_steps": 4},
        "gradient accumulation",
        "error",
        "gradient_accumulation_steps=4",
    ),
    (
        "accumulation auto",
        {},
        {"gradient_accumulation_steps": "auto"},
        "gradient accumulation",
        "auto",
        "auto → 2",
    ),
    ("global batch agrees", {}, {"train_batch_size": 64}, "global batch", "agree", "64"),
    (
        "global batch disagrees",
        {},
        {"train_batch_size": 128},
        "global batch",
        "error",
        "train_batch_size=128",
    ),
    ("global batch auto", {}, {"train_batch_size": "auto"}, "global batch", "auto", "auto → 64"),
    (
        "identity holds",
        {},
        {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2},
        "batch identity",
        "agree",
        "64 = 4 × 2 × 8",
    ),
    (
        "identity broken",
        {},
        {
            "train_batch_size": 32,
            "train_micro_batch_size_per_gpu": "auto",
            "gradient_accumulation_steps": "auto",
        },
        "batch identity",
        "error",
        "32 ≠ 4 × 2 × 8",
    ),
    ("bf16 agrees", {}, {"bf16": {"enabled": True}}, "bf16", "agree", "True"),
    ("bf16 disagrees", {"bf16": False}, {"bf16": {"enabled": True}}, "bf16", "error", "bf16.enabled=True"),
    ("bf16 auto", {}, {"bf16": {"enabled": "auto"}}, "bf16", "auto", "auto → True"),
    (
        "axolotl bf16 auto meets true",
        {"bf16": "auto"},
        {"bf16": {"enabled": True}},
        "bf16 (axolotl's 'auto'",
        "agree",
        "True",
    ),
    ("bf16 with no ds section", {}, {"zero_optimization": {"stage": 2}}, "bf16", "absent", "accelerate adds"),
    (
        "fp16 and bf16 both on",
        {"fp16": True},
        {"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}},
        "precision at deepspeed.initialize",
        "error",
        "both end up enabled",
    ),
    ("clipping agrees", {}, {"gradient_clipping": 1.0}, "gradient clipping", "agree", "1.0"),
    (
        "clipping disagrees",
        {},
        {"gradient_clipping": 0.5},
        "gradient clipping",
        "error",
        "gradient_clipping=0.5",
    ),
    ("clipping auto", {}, {"gradient_clipping": "auto"}, "gradient clipping", "auto", "auto → 1.0"),
    (
        "clipping absent, DeepSpeed's default equal",
        {},
        {"zero_optimization": {"stage": 2}},
        "gradient clipping",
        "absent",
        "DeepSpeed's default",
    ),
    (
        "clipping absent, DeepSpeed's default differs",
        {"max_grad_norm": 0.3},
        {"zero_optimization": {"stage": 2}},
        "gradient clipping",
        "warning",
        "not applied",
    ),
    (
        "accumulation absent",
        {},
        {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}},
        "gradient accumulation",
        "warning",
        "1 micro-batch",
    ),
    (
        "accumulation absent at 1",
        {"gradient_accumulation_steps": 1},
        {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}},
        "gradient accumulation",
        "absent",
        "not set",
    ),
    (
        "neither micro nor global batch",
        {},
        {"gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}},
        "batch at deepspeed",
        "error",
        "neither",
    ),
    (
        "no zero_optimization",
        {},
        {"train_micro_batch_size_per_gpu": "auto"},
        "zero_optimization",
        "error",
        "not set",
    ),
    (
        "lr agrees",
        {},
        {"optimizer": {"type": "AdamW", "params": {"lr": 2e-5}}},
        "learning rate",
        "agree",
        "2e-05",
    ),
    (
        "lr disagrees",
        {},
        {"optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}},
        "learning rate",
        "error",
        "optimizer.params.lr=0.0001",
    ),
    (
        "lr auto",
        {},
        {"optimizer": {"type": "AdamW", "params": {"lr": "auto"}}},
        "learning rate",
        "auto",
        "auto → 2e-05",
    ),
    (
        "betas disagree",
        {"adam_beta2": 0.95},
        {"optimizer": {"type": "AdamW", "params": {"betas": [0.9, 0.999]}}},
        "Adam betas",
        "error",
        "0.95",
    ),
    (
        "optimizer same family",
        {"optimizer": "adamw_torch"},
        {"optimizer": {"type": "AdamW", "params": {}}},
        "optimizer",
        "agree",
        "AdamW",
    ),
    (
        "optimizer replaced",
        {"optimizer": "adamw_bnb_8bit"},
        {"optimizer": {"type": "AdamW", "params": {}}},
        "optimizer",
        "warning",
        "adamw_bnb_8bit",
    ),
    (
        "schedule same shape",
        {"lr_scheduler": "cosine"},
        {"scheduler": {"type": "WarmupCosineLR", "params": {}}},
        "LR schedule",
        "agree",
        "cosine",
    ),
    (
        "schedule replaced",
        {"lr_scheduler": "cosine"},
        {"scheduler": {"type": "WarmupLR", "params": {}}},
        "LR schedule",
        "warning",
        "WarmupLR",
    ),
    (
        "peak lr disagrees",
        {},
        {"scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 3e-5}}},
        "peak learning rate",
        "error",
        "3e-05",
    ),
    (
        "warmup auto",
        {"warmup_steps": 10},
        {"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": "auto"}}},
        "warmup steps",
        "auto",
        "→ 10",
    ),
    (
        "warmup disagrees",
        {"warmup_steps": 10},
        {"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 50}}},
        "warmup steps",
        "error",
        "50",
    ),
    (
        "offload with the trainer's optimizer",
        {},
        {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}},
        "optimizer under offload",
        "error",
        "(the job stops)",
    ),
    (
        "offload allowed by force false",
        {},
        {
            "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}},
            "zero_force_ds_cpu_optimizer": False,
        },
        "optimizer under offload",
        "warning",
        "on the CPU",
    ),
    (
        "an auto nothing fills",
        {},
        {"zero_optimization": {"stage": 3, "sub_group_size": "auto"}},
        "zero_optimization.sub_group_size",
        "error",
        "'auto'",
    ),
    (
        "hidden-size auto filled",
        {},
        {"zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}},
        "zero_optimization.reduce_bucket_size",
        "auto",
        "4,096",
    ),
    (
        "stage-3 auto at stage 2",
        {},
        {"zero_optimization": {"stage": 2, "stage3_prefetch_bucket_size": "auto"}},
        "zero_optimization.stage3_prefetch_bucket_size",
        "error",
        "stage 2",
    ),
    (
        "stage-3 auto at stage 3",
        {},
        {"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": "auto"}},
        "zero_optimization.stage3_param_persistence_threshold",
        "auto",
        "640",
    ),
    (
        "ds activation checkpointing without gradient_checkpointing",
        {},
        {"activation_checkpointing": {"partition_activations": True}},
        "activation checkpointing",
        "warning",
        "gradient_checkpointing",
    ),
]


@pytest.mark.parametrize("case,trainer,ds,setting,status,shown", CASES, ids=[c[0] for c in CASES])
def test_coupling_case(tmp_path, case, trainer, ds, setting, status, shown):
    row = _row(couplings(_setup(tmp_path, trainer, ds)), setting)
    assert row.status == status, (case, row)
    assert shown in f"{row.trainer} {row.deepspeed} {row.resolved} {row.why}", (case, row)
    # both sides are named by file and key
    assert (
        "axolotl.yaml" in row.trainer
        or row.trainer in ("—",)
        or "world size" in row.trainer
        or "hidden_size" in row.trainer
    )
    assert "ds.json" in row.deepspeed


def test_each_side_names_its_line(tmp_path):
    row = _row(couplings(_setup(tmp_path, {}, {"train_micro_batch_size_per_gpu": 2})), "micro batch per GPU")
    assert (
        row.trainer.startswith("axolotl.yaml:2 micro_batch_size")
        and row.deepspeed == "ds.json: train_micro_batch_size_per_gpu = 2"
    )


def test_trl_json_with_an_inline_ds_config(tmp_path):
    (tmp_path / "model.json").write_text(json.dumps(TINY_MODEL))
    args = {
        "output_dir": "out",
        "model_name_or_path": "model.json",
        "per_device_train_batch_size": 2,
        "gradient_accumulation_steps": 4,
        "learning_rate": 1e-5,
        "max_grad_norm": 1.0,
        "bf16": True,
        "lr_scheduler_type": "linear",
        "deepspeed": {
            "train_micro_batch_size_per_gpu": "auto",
            "gradient_accumulation_steps": 8,
            "bf16": {"enabled": "auto"},
            "gradient_clipping": "auto",
        },
    }
    path = tmp_path / "training_args.json"
    path.write_text(json.dumps(args))
    setup = read_setup(path, nodes=2, gpus_per_node=4)
    rows = couplings(setup)
    assert setup.fmt == "trl" and setup.ds_source == "training_args.json deepspeed (inline)"
    assert (
        _row(rows, "micro batch per GPU").status == "auto"
        and _row(rows, "gradient accumulation").status == "error"
    )
    assert _row(rows, "global batch").resolved == "64"  # absent in the ds_config: the trainer's 2 × 4 × 8


def test_no_deepspeed_means_nothing_coupled(tmp_path):
    (tmp_path / "model.json").write_text(json.dumps(TINY_MODEL))
    path = tmp_path / "a.yaml"
    path.write_text("base_model: model.json\nmicro_batch_size: 2\n")
    assert couplings(read_setup(path)) == []
