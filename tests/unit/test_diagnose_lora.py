"""LoRA / QLoRA in nbkit diagnose: the adapter's trainable count against PEFT's own, the frozen base's bytes,
the ZeRO
rules for what is partitioned, a fits / does-not-fit pair around the boundary, the example end to end, and bad
input."""

from __future__ import annotations

import json

import pytest

from nbkit.claims import HOLDS, INCONCLUSIVE, REFUTED
from nbkit.diagnose import fit as F

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


def _config():
    from transformers import AutoConfig

    d = dict(TINY_MODEL)
    return AutoConfig.for_model(d.pop("model_type"), **d)


def _peft_count(targets) -> tuple[int, int]:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = get_peft_model(
            AutoModelForCausalLM.from_config(_config()), LoraConfig(r=8, target_modules=targets)
        )
    return model.get_nb_trainable_parameters()


def test_trainable_count_is_hand_computed_and_equals_peft():
    # q_proj 64→64, v_proj 64→32 (2 kv heads × head dim 16): 8·(64+64) + 8·(64+32) per layer, 2 layers
    ad = F.Adapter("lora", 8, ("q_proj", "v_proj"))
    trainable, frozen = F.adapter_params(_config(), ad, "bf16")
    assert trainable == 2 * (8 * 128 + 8 * 96) == 3584
    peft_trainable, peft_all = _peft_count(["q_proj", "v_proj"])
    assert trainable == peft_trainable and frozen == 2 * (peft_all - peft_trainable)
    everything = F.Adapter("lora", 8, "all-linear")
    assert F.adapter_params(_config(), everything, "bf16")[0] == _peft_count("all-linear")[0]


def test_nf4_bytes_and_what_stays_16_bit():
    assert F.nf4_bytes_per_weight(False) == 0.5 + 4 / 64
    assert F.nf4_bytes_per_weight(True) == 0.5 + 1 / 64 + 4 / (64 * 256)
    cfg = _config()
    _, lora = F.adapter_params(cfg, F.Adapter("lora", 8, ("q_proj",)), "bf16")
    _, q = F.adapter_params(cfg, F.Adapter("qlora", 8, ("q_proj",), double_quant=True), "bf16")
    # decoder-block linears per layer: q 64², k 64·32, v 64·32, o 64², gate/up 64·128 each, down 128·64
    quantised = 2 * (64 * 64 * 2 + 64 * 32 * 2 + 64 * 128 * 3)
    assert q == pytest.approx(lora - 2 * quantised + quantised * F.nf4_bytes_per_weight(True))


def test_zero_rules_for_frozen_and_trainable():
    from nbkit.zero.memory import formula_bytes

    psi, t, n = 1000, 100, 4
    assert formula_bytes(psi, n, 2) == formula_bytes(
        psi, n, 2, trainable_params=psi
    )  # the default: everything trains
    s2 = formula_bytes(psi, n, 2, trainable_params=t)
    assert s2["params"] == 2 * psi and s2["grads"] == 2 * t / n and s2["optimizer"] == 12 * t / n
    s1 = formula_bytes(psi, n, 1, trainable_params=t)
    assert s1["grads"] == 2 * t and s1["optimizer"] == 12 * t / n
    s3 = formula_bytes(psi, n, 3, trainable_params=t, frozen_bytes=450.0)
    assert s3["params"] == (2 * t + 450.0) / n  # stage 3 partitions the frozen base too
    with pytest.raises(ValueError, match="trainable_params"):
        formula_bytes(psi, n, 2, trainable_params=psi + 1)


def _plan(adapter=None, stage=2, micro=2):
    return F.Plan(
        stage=stage,
        precision="bf16",
        micro_batch=micro,
        grad_accum=2,
        seq_len=64,
        checkpointing=False,
        offload_optimizer=False,
        offload_param=False,
        world_size=2,
        adapter=adapter,
    )


def test_qlora_below_lora_below_full():
    shape = F.model_shape(_config())
    full = F.predict(shape, _plan(), {"stage": 2, "reduce_bucket_size": 1000})
    lora = F.predict(
        shape, _plan(F.Adapter("lora", 8, ("q_proj", "v_proj"))), {"stage": 2, "reduce_bucket_size": 1000}
    )
    qlora = F.predict(
        shape, _plan(F.Adapter("qlora", 8, ("q_proj", "v_proj"))), {"stage": 2, "reduce_bucket_size": 1000}
    )
    assert qlora.parts["total"] < lora.parts["total"] < full.parts["total"]
    assert qlora.parts["params"] < lora.parts["params"] == full.parts["params"] + 2 * 3584
    assert lora.parts["grads"] == 2 * 3584 / 2 and lora.parts["optimizer"] == 12 * 3584 / 2


def test_the_adapter_band_is_wider_and_stated():
    lo, hi = F.stage_ratio(2)
    alo, ahi = F.plan_ratio(_plan(F.Adapter("lora", 8, ("q_proj",))))
    assert alo == pytest.approx(lo * (1 - F.ADAPTER_TOLERANCE), abs=1e-4) and ahi == pytest.approx(
        hi * (1 + F.ADAPTER_TOLERANCE), abs=1e-4
    )
    assert F.plan_ratio(_plan()) == (lo, hi)


def test_lora_changes_include_qlora_checkpointing_micro_batch_and_next_stage():
    whats = [w for w, _ in F.changes(_plan(F.Adapter("lora", 8, ("q_proj",)), stage=1))]
    assert whats[0] == "ZeRO stage 2" and any("checkpointing" in w for w in whats)
    assert any(w.startswith("micro batch 1") for w in whats) and any(
        w.startswith("QLoRA instead of LoRA") for w in whats
    )
    assert not any("QLoRA" in w for w, _ in F.changes(_plan(F.Adapter("qlora", 8, ("q_proj",)))))


def _write(tmp_path, extra=None, stage=2, ds_extra=None):
    import yaml

    (tmp_path / "model.json").write_text(json.dumps(TINY_MODEL))
    (tmp_path / "ds.json").write_text(
        json.dumps(
            {
                "train_micro_batch_size_per_gpu": "auto",
                "gradient_accumulation_steps": "auto",
                "bf16": {"enabled": "auto"},
                "gradient_clipping": "auto",
                "zero_optimization": {"stage": stage, "reduce_bucket_size": 10000, **(ds_extra or {})},
            }
        )
    )
    cfg = {
        "base_model": "model.json",
        "micro_batch_size": 4,
        "gradient_accumulation_steps": 2,
        "sequence_len": 128,
        "bf16": True,
        "deepspeed": "ds.json",
        "adapter": "lora",
        "lora_r": 8,
        "lora_target_modules": ["q_proj", "v_proj"],
        **(extra or {}),
    }
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path / "a.yaml"


def _diagnose(path, **kw):
    from nbkit.diagnose.diagnosis import diagnose

    return diagnose(path, audit=False, nodes=1, gpus_per_node=2, **kw)


def test_lora_fits_and_does_not_fit_around_the_boundary(tmp_path):
    d = _diagnose(_write(tmp_path))
    assert (
        d.fit is not None
        and d.fit.parts["trainable_params"] == 3584
        and "LoRA r=8 on q_proj,v_proj" in d.fit.plan
    )
    assert any("not measured" in n for n in d.fit.notes)
    peak, (lo, hi) = d.fit.peak_gib, d.fit.ratio
    fits = _diagnose(_write(tmp_path), gpu_memory_gib=peak / lo * 1.001)
    near = _diagnose(_write(tmp_path), gpu_memory_gib=peak)
    short = _diagnose(_write(tmp_path), gpu_memory_gib=peak / hi * 0.999)
    assert fits.fit.verdict == HOLDS and fits.exit_code == 0
    assert near.fit.verdict == INCONCLUSIVE
    assert short.fit.verdict == REFUTED and short.exit_code == 1 and short.fit.fixes
    for fix in short.fit.fixes:
        assert fix["verdict"] == HOLDS and fix["predicted_peak_gib"] < peak


def test_qlora_under_zero3_warns_unless_storage_matches(tmp_path):
    from nbkit.diagnose.coupling import AGREE, WARNING

    bad = _diagnose(_write(tmp_path, {"adapter": "qlora", "load_in_4bit": True}, stage=3))
    row = next(c for c in bad.couplings if c.setting == "QLoRA under ZeRO-3")
    assert row.status == WARNING and "bnb_4bit_quant_storage" in row.why
    good = _diagnose(
        _write(
            tmp_path,
            {"adapter": "qlora", "bnb_config_kwargs": {"bnb_4bit_quant_storage": "bfloat16"}},
            stage=3,
        )
    )
    assert next(c for c in good.couplings if c.setting == "QLoRA under ZeRO-3").status == AGREE
    assert not any(
        c.setting == "QLoRA under ZeRO-3" for c in _diagnose(_write(tmp_path, {"adapter": "qlora"})).couplings
    )


def test_targets_matching_no_layer_are_not_predicted(tmp_path):
    d = _diagnose(_write(tmp_path, {"lora_target_modules": ["c_attn"]}))
    assert d.fit is None and "c_attn" in d.fit_skipped and "q_proj" in d.fit_skipped


@pytest.mark.parametrize(
    "extra,needle",
    [
        ({"lora_r": 0}, "lora_r"),
        ({"lora_r": "8"}, "lora_r"),
        ({"lora_dropout": 2}, "lora_dropout"),
        ({"lora_target_modules": 5}, "lora_target_modules"),
        ({"lora_target_modules": []}, "lora_target_modules"),
        ({"lora_target_linear": "yes"}, "lora_target_linear"),
        ({"adapter": "ia3"}, "adapter"),
        ({"bnb_config_kwargs": {"bnb_4bit_use_double_quant": "no"}}, "bnb_4bit_use_double_quant"),
    ],
)
def test_bad_adapter_input_exits_2_naming_the_key(tmp_path, capsys, extra, needle):
    from nbkit.diagnose.cli import main

    rc = main([str(_write(tmp_path, extra)), "--no-audit"])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "a.yaml" in err and "Traceback" not in err


def test_the_lora_example_end_to_end(tmp_path):
    from nbkit.diagnose.cli import main

    out = tmp_path / "d.json"
    assert (
        main(
            [
                "axolotl_lora.yaml",
                "--gpu-memory",
                "24",
                "--no-audit",
                "--format",
                "json",
                "--output",
                str(out),
            ]
        )
        == 1
    )
    fit = json.loads(out.read_text())["fit"]
    assert (
        fit["verdict"] == "does not fit" and fit["trainable_params"] == 41_943_040
    )  # r=16 on all 7 linears × 32 layers
    assert (
        fit["fixes"]
        and all(x["verdict"] == "fits" for x in fit["fixes"])
        and fit["accuracy"]["adapter_tolerance"] == F.ADAPTER_TOLERANCE
    )
    assert "trainable_params" not in fit["parts_bytes"]
    assert (
        main(
            [
                "axolotl_lora.yaml",
                "--gpu-memory",
                "200",
                "--no-audit",
                "--format",
                "json",
                "--output",
                str(out),
            ]
        )
        == 0
    )


def test_lora_checkpointing_lowers_the_activations_and_lora_saves_less_than_full():
    cfg = _config()
    lora = F.Adapter("lora", 8, ("q_proj", "v_proj")).peft()
    whole = F.activation_bytes(cfg, 2, 64, "bf16", False, "fused", lora)
    ckpt = F.activation_bytes(cfg, 2, 64, "bf16", True, "fused", lora)
    full = F.activation_bytes(cfg, 2, 64, "bf16", False, "fused")
    assert 0 < ckpt < whole < full  # a frozen weight's matmul keeps no input for a weight gradient


def test_a_trl_qlora_json_is_read_with_trls_defaults(tmp_path):
    (tmp_path / "model.json").write_text(json.dumps(TINY_MODEL))
    (tmp_path / "t.json").write_text(
        json.dumps(
            {
                "model_name_or_path": "model.json",
                "use_peft": True,
                "load_in_4bit": True,
                "lora_r": 4,
                "lora_target_modules": ["q_proj"],
                "bf16": True,
                "per_device_train_batch_size": 2,
            }
        )
    )
    d = _diagnose(tmp_path / "t.json")
    assert d.setup.lora == F.Adapter(
        "qlora", 4, ("q_proj",), dropout=0.05, double_quant=False
    )  # TRL ModelConfig: no nested quant
    assert d.fit.trainable_params == 2 * 4 * (64 + 64) and "QLoRA r=4 on q_proj, NF4" in d.fit.plan
