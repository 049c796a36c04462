"""Notebook 02 on the user's cluster plan, the phased peak prediction, the crossover."""

import json

import pytest

from nbkit.errors import UsageError
from nbkit.zero.context import ZeroContext

LLAMA_70B = {
    "model_type": "llama",
    "vocab_size": 32000,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "tie_word_embeddings": False,
}


@pytest.fixture
def llama70b(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_70B))
    return path


def _ds(tmp_path, cfg, name="ds_config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return str(path)


def test_memory_model_reads_stage_offload_and_precision_from_the_users_ds_config(tmp_path, llama70b):
    from nbkit.zero.config import MemoryConfig
    from nbkit.zero.experiments import run_memory_model

    ds = _ds(
        tmp_path,
        {
            "train_batch_size": 64,
            "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": 4,
            "bf16": {"enabled": True},
            "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
        },
    )
    out = run_memory_model(
        MemoryConfig(
            model_path=str(llama70b),
            ds_config=ds,
            world_size=16,
            gpus_per_node=8,
            offload_optimizer=False,
            precision="fp32",
        ),
        ZeroContext("cpu"),
    )
    plan = out.metrics.plan
    assert (plan["stage"], plan["precision"], plan["offload_optimizer"], plan["offload_param"]) == (
        3,
        "bf16",
        True,
        False,
    )
    psi = 68_976_648_192
    assert out.metrics.n_params == psi and (out.metrics.nodes, out.metrics.gpus_per_node) == (2, 8)
    # stage 3, optimizer offloaded: 2Ψ/N params + 2Ψ/N grads on the GPU, 12Ψ/N on the host
    assert plan["formula_device_gib"] * 2**30 == pytest.approx(4 * psi / 16)
    assert plan["formula_cpu_gib"] * 2**30 == pytest.approx(12 * psi / 16)
    # DeepSpeed's CPU estimate is per node: 8 GPUs of 16 share one host
    one_node = run_memory_model(
        MemoryConfig(model_path=str(llama70b), ds_config=ds, world_size=16, gpus_per_node=16),
        ZeroContext("cpu"),
    )
    two = out.table.set_index("stage").loc[3, "deepspeed_cpu_gib_per_node"]
    one = one_node.table.set_index("stage").loc[3, "deepspeed_cpu_gib_per_node"]
    assert two < one


def test_presets_hf_dir_and_bare_config_json_name_the_architecture(llama70b):
    from nbkit.model_files import smollm2_dir
    from nbkit.zero.config import MemoryConfig
    from nbkit.zero.experiments import run_memory_model

    assert (
        run_memory_model(MemoryConfig(model_path="SmolLM2-135M"), ZeroContext("cpu")).metrics.n_params
        == run_memory_model(MemoryConfig(model_path=str(smollm2_dir())), ZeroContext("cpu")).metrics.n_params
        == 134_515_008
    )
    assert (
        run_memory_model(MemoryConfig(model_path="Llama-2-7B"), ZeroContext("cpu")).metrics.n_params
        == 6_738_415_616
    )


@pytest.mark.parametrize(
    ("cfg", "match"),
    [
        (
            {"train_batch_size": 8, "zero_optimization": {"stage": 5}},
            r"ds_config\.json: zero_optimization.stage",
        ),
        (
            {"train_batch_size": 8, "zero_optimisation": {"stage": 2}},
            r"ds_config\.json: unknown top-level key 'zero_optimisation'",
        ),
        (
            {"train_batch_size": 8, "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}},
            r"ds_config\.json: zero_optimization.offload_param needs stage 3",
        ),
        (
            {"train_batch_size": 8, "zero_optimization": {"stage": 2, "reduce_bucket_sise": 5}},
            r"ds_config\.json: zero_optimization.reduce_bucket_sise",
        ),
    ],
)
def test_a_ds_config_deepspeed_would_reject_is_named_by_file_and_key(tmp_path, cfg, match):
    from nbkit.zero.config import MemoryConfig
    from nbkit.zero.experiments import run_memory_model

    with pytest.raises(UsageError, match=match):
        run_memory_model(MemoryConfig(ds_config=_ds(tmp_path, cfg)), ZeroContext("cpu"))


def test_world_size_must_be_whole_nodes():
    from nbkit.zero.config import MemoryConfig
    from nbkit.zero.experiments import run_memory_model

    with pytest.raises(UsageError, match="MemoryConfig.world_size: 12 GPUs is not a whole number of nodes"):
        run_memory_model(MemoryConfig(world_size=12, gpus_per_node=8), ZeroContext("cpu"))


def test_the_ladder_runs_the_users_architecture_scaled(llama70b):
    from nbkit.model_files import smollm2_dir
    from nbkit.zero.config import LadderConfig
    from nbkit.zero.ladder import ladder_model, model_config
    from nbkit.zero.memory import model_size

    big = ladder_model(
        LadderConfig(launches=1, model_path=str(llama70b), hidden_size=256, num_hidden_layers=2)
    )["config"]
    # head size 128 and 8 query heads per key-value head, as in the 70B; MLP ratio 3.5; vocabulary kept
    assert (
        big["num_attention_heads"],
        big["num_key_value_heads"],
        big["intermediate_size"],
        big["vocab_size"],
    ) == (8, 1, 896, 32000)
    small = ladder_model(
        LadderConfig(launches=1, model_path=str(smollm2_dir()), hidden_size=192, num_hidden_layers=2)
    )
    c = small["config"]
    assert (
        c["num_attention_heads"],
        c["num_key_value_heads"],
        c["intermediate_size"],
        c["tie_word_embeddings"],
    ) == (3, 1, 512, True)
    assert model_size(model_config(small)).n_params == 10_224_576
    with pytest.raises(UsageError, match="LadderConfig.model_path: .*no such file"):
        ladder_model(LadderConfig(launches=1, model_path="/nonexistent/model"))


def test_local_ranks_cap_the_plan_to_this_machine():
    from nbkit.zero.context import CPU_RANKS

    assert ZeroContext("cpu", world_size=1).ranks == 1
    assert ZeroContext("cpu", world_size=64).ranks == CPU_RANKS


def test_step_temporaries_and_the_phase_that_wins():
    from nbkit.zero.peak import predict_peak, step_temporaries

    psi = 1_000_000
    assert step_temporaries(0, psi, 2, "bf16") == 4 * psi  # fp32 copies of every 16-bit gradient
    assert step_temporaries(2, psi, 2, "bf16") == 6 * psi / 2  # 16-bit flat partition + its fp32 cast
    assert step_temporaries(3, psi, 2, "bf16") == 4 * psi / 2
    assert step_temporaries(0, psi, 2, "fp32") == 0
    common = dict(
        n_params=psi,
        largest_layer_params=psi // 10,
        world_size=2,
        precision="bf16",
        ds_zero={},
        baseline_bytes=0,
    )
    small_acts = predict_peak(stage=0, activation_bytes=10, **common)
    assert small_acts["phase"] == "optimizer_step" and small_acts["total"] == 16 * psi + 4 * psi
    big_acts = predict_peak(stage=3, activation_bytes=50 * psi, **common)
    assert big_acts["phase"] == "backward" and big_acts["step_temporaries"] == 0
    assert (
        big_acts["total"] == 8 * psi + 50 * psi + 2 * psi
    )  # states + activations + all 16-bit params gathered
    cpu = predict_peak(
        stage=1, activation_bytes=0, device="cpu", **dict(common, ds_zero={"reduce_bucket_size": 5e8})
    )
    gpu = predict_peak(
        stage=1, activation_bytes=0, device="cuda", **dict(common, ds_zero={"reduce_bucket_size": 5e8})
    )
    assert cpu["buffers"] == 2 * psi and gpu["buffers"] == 2 * 5e8  # CPU pages back only what gradients fill


def _rows(saves: dict[str, list[float]]):
    sizes = [("a", 1), ("b", 2), ("c", 3)]
    return [
        {"size": s, "n_params": n, "stage": st, "growth_vs_stage0_max": saves[f"stage{st}"][i]}
        for i, (s, n) in enumerate(sizes)
        for st in (1, 2, 3)
    ]


@pytest.mark.parametrize(
    ("saves", "expected"),
    [
        (
            {"stage1": [0.9, 0.9, 0.9], "stage2": [1.1, 0.9, 0.8], "stage3": [1.2, 1.1, 1.05]},
            {"stage1": "a", "stage2": "b", "stage3": None},
        ),
        # saving at "a" but not at "b": it only pays from "c" on
        (
            {"stage1": [0.9, 0.99, 0.9], "stage2": [0.97, 0.98, 0.975], "stage3": [0.5, 0.6, 0.99]},
            {"stage1": "c", "stage2": "a", "stage3": None},
        ),
    ],
)
def test_crossover_is_the_smallest_size_from_which_a_stage_keeps_saving(saves, expected):
    from nbkit.zero.peak import crossover_sizes

    assert crossover_sizes(_rows(saves)) == expected


@pytest.mark.parametrize("sizes", ["512", "512x", "16x2", "axb", "512x8,"])
def test_crossover_sizes_are_checked(sizes):
    from nbkit.zero.config import CrossoverConfig

    with pytest.raises(UsageError, match="CrossoverConfig.sizes: item"):
        CrossoverConfig(sizes=sizes)
