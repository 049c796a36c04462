"""nbkit diagnose's fit: notebook 02's memory model on the user's setup, judged two-sided around a known
boundary."""

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


@pytest.mark.parametrize(
    "gpu,expected", [(100.0 / 0.98 + 0.01, HOLDS), (100.0 / 1.02 - 0.01, REFUTED), (100.0, INCONCLUSIVE)]
)
def test_verdict_fits_each_way(gpu, expected):
    v = F.verdict_fits(100.0, gpu, (0.98, 1.02))
    assert v.verdict == expected and "GiB" in v.why


def test_accuracy_comes_from_the_bench_file():
    acc = F.accuracy()
    assert "bench/zero_peak.py" in acc["command"] and set(acc["pred_over_meas"]) == {"0", "1", "2", "3"}
    assert F.stage_ratio(3) == tuple(acc["pred_over_meas"]["3"])


def _write(tmp_path, *, micro=4, seq=128, stage=2, ckpt=False, gpu=None, nodes=1, gpus=2):
    import yaml

    (tmp_path / "model.json").write_text(json.dumps(TINY_MODEL))
    (tmp_path / "ds.json").write_text(
        json.dumps(
            {
                "train_micro_batch_size_per_gpu": "auto",
                "gradient_accumulation_steps": "auto",
                "bf16": {"enabled": "auto"},
                "gradient_clipping": "auto",
                "zero_optimization": {"stage": stage, "reduce_bucket_size": 10000},
            }
        )
    )
    (tmp_path / "a.yaml").write_text(
        yaml.safe_dump(
            {
                "base_model": "model.json",
                "micro_batch_size": micro,
                "gradient_accumulation_steps": 2,
                "sequence_len": seq,
                "bf16": True,
                "gradient_checkpointing": ckpt,
                "deepspeed": "ds.json",
            }
        )
    )
    return tmp_path / "a.yaml"


def _diagnose(path, **kw):
    from nbkit.diagnose.diagnosis import diagnose

    return diagnose(path, audit=False, nodes=1, gpus_per_node=2, **kw)


def test_the_peak_is_notebook_02s_predict_peak(tmp_path):
    from nbkit.zero.memory import model_size
    from nbkit.zero.peak import predict_activation_bytes, predict_peak

    d = _diagnose(_write(tmp_path))
    cfg = d.setup.model_config
    size = model_size(cfg)
    acts = predict_activation_bytes(
        F._model_cfg(cfg, "fused"), 4, 128, "bf16"
    )  # sdpa (the default) runs a fused kernel on a GPU
    want = predict_peak(
        n_params=size.n_params,
        largest_layer_params=size.largest_layer_params,
        stage=2,
        world_size=2,
        precision="bf16",
        ds_zero={"stage": 2, "reduce_bucket_size": 10000},
        activation_bytes=acts,
        baseline_bytes=0,
        device="cuda",
    )
    assert (
        d.fit.parts["total"] == want["total"] and d.fit.verdict == INCONCLUSIVE
    )  # no --gpu-memory: predicted, not judged


def test_fits_and_does_not_fit_around_the_boundary(tmp_path):
    d = _diagnose(_write(tmp_path))
    peak, (lo, hi) = d.fit.peak_gib, d.fit.ratio
    fits = _diagnose(_write(tmp_path), gpu_memory_gib=peak / lo * 1.001)
    short = _diagnose(_write(tmp_path), gpu_memory_gib=peak / hi * 0.999)
    assert fits.fit.verdict == HOLDS and fits.exit_code == 0 and fits.fit.fixes == []
    assert short.fit.verdict == REFUTED and short.exit_code == 1
    # each change offered makes it fit, by the same rule, and is predicted below the original
    assert short.fit.fixes
    for fix in short.fit.fixes:
        assert fix["verdict"] == HOLDS and fix["predicted_peak_gib"] * (1 / lo) <= peak / hi * 0.999 + 1e-6
        assert fix["predicted_peak_gib"] < peak


def test_a_smaller_micro_batch_keeps_the_global_batch():
    plan = F.Plan(
        stage=3,
        precision="bf16",
        micro_batch=4,
        grad_accum=2,
        seq_len=128,
        checkpointing=True,
        offload_optimizer=True,
        offload_param=True,
        world_size=2,
    )
    micro = [(w, p) for w, p in F.changes(plan) if "micro batch" in w]
    assert [(p.micro_batch, p.grad_accum) for _, p in micro] == [(2, 4), (1, 8)]
    assert all(p.micro_batch * p.grad_accum == 8 for _, p in micro)


def test_checkpointing_lowers_the_activations(tmp_path):
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(**TINY_MODEL)
    full = F.activation_bytes(cfg, 4, 128, "bf16", checkpointing=False)
    ckpt = F.activation_bytes(cfg, 4, 128, "bf16", checkpointing=True)
    assert 0 < ckpt < full


def test_a_fused_kernel_saves_no_scores_and_eager_does():
    from transformers import AutoConfig

    from nbkit.zero.peak import predict_activation_bytes

    cfg = AutoConfig.for_model(**TINY_MODEL)
    fused = [F.activation_bytes(cfg, 1, s, "bf16", False, "fused") for s in (128, 256)]
    eager = [F.activation_bytes(cfg, 1, s, "bf16", False, "eager") for s in (128, 256)]
    assert fused[1] == pytest.approx(2 * fused[0], rel=0.02)  # linear in the sequence length
    assert eager[1] > 2.2 * eager[0]  # the S×S scores: faster than linear
    assert fused[1] < predict_activation_bytes(F._model_cfg(cfg, "eager"), 1, 256, "bf16")


def test_lora_without_its_keys_is_predicted_with_the_defaults_stated(tmp_path):
    path = _write(tmp_path)
    path.write_text(path.read_text() + "adapter: lora\n")
    d = _diagnose(path, gpu_memory_gib=80)
    assert d.fit is not None and "LoRA r=8 on q_proj,v_proj" in d.fit.plan
    assert any("lora_r not set; assumed 8" in n for n in d.fit.notes) and any(
        "PEFT's default" in n for n in d.fit.notes
    )
