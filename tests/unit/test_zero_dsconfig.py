"""ds_config builder/validator: one clear error naming the key, before any rank starts."""

import json

import pytest

from nbkit.zero.dsconfig import (
    FIELD_NOTES_CLI,
    FIELD_NOTES_DS_CONFIG,
    DSConfigError,
    build_ds_config,
    check_batch_identity,
    explain_ds_config,
    validate_ds_config,
)


def test_seed_config_batch_identity_is_broken_by_its_own_launch_line():
    _table, findings = explain_ds_config(FIELD_NOTES_DS_CONFIG, world_size=8, micro_batch=2, grad_accum=4)
    assert findings[0].startswith("batch identity broken: train_batch_size=128")
    assert "= 64" in findings[0]
    with pytest.raises(DSConfigError, match="train_batch_size=128"):
        check_batch_identity(
            dict(FIELD_NOTES_DS_CONFIG, train_micro_batch_size_per_gpu=FIELD_NOTES_CLI["micro_batch"]), 8
        )


def test_inert_keys_are_flagged():
    table, findings = explain_ds_config(
        dict(FIELD_NOTES_DS_CONFIG, zero_optimization={"stage": 1, "offload_param": {"device": "cpu"}}),
        world_size=1,
    )
    assert any("offload_param" in f and "stage 1" in f for f in findings)
    assert any(f.startswith("flops_profiler.profile_step") for f in findings)
    assert set(table.columns) >= {"key", "value", "meaning", "acts"}


@pytest.mark.parametrize(
    ("cfg", "match"),
    [
        ({"train_batch_sise": 4}, "did you mean 'train_batch_size'"),
        ({"train_batch_size": 4, "zero_optimization": {"stage": 5}}, r"zero_optimization\.stage"),
        (
            {"train_batch_size": 4, "zero_optimization": {"stage": 2, "bucket": 1}},
            r"zero_optimization\.bucket",
        ),
        (
            {"train_batch_size": 4, "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}},
            "needs stage 3",
        ),
        ({"train_batch_size": 4, "fp16": {"enabled": True}, "bf16": {"enabled": True}}, "pick one"),
    ],
)
def test_invalid_configs_raise_naming_the_key(cfg, match):
    with pytest.raises(DSConfigError, match=match):
        validate_ds_config(cfg, world_size=2)


def test_file_errors_name_file_and_line(tmp_path):
    p = tmp_path / "ds.json"
    p.write_text('{\n  "train_batch_size": 4,\n  oops\n}')
    with pytest.raises(DSConfigError, match=r"ds\.json:3"):
        validate_ds_config(p)


def test_builder_satisfies_identity_and_round_trips_json():
    cfg = build_ds_config(
        stage=3, micro_batch=2, grad_accum=2, world_size=2, precision="bf16", offload_optimizer=True
    )
    assert cfg["train_batch_size"] == 8
    assert cfg["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert validate_ds_config(json.loads(json.dumps(cfg)), world_size=2) == cfg
