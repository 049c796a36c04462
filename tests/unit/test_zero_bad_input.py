"""Bad input to the ZeRO theme's entry points: one clear UsageError naming the key, before any rank starts.

Tables: the ds_config validator (dict and file), ``build_ds_config``, the launcher's pre-flight
checks, ``launch`` itself (nothing may be spawned), and the config dataclasses' bounds.
"""

import json
import subprocess

import pytest

from nbkit.errors import UsageError
from nbkit.zero.context import ZeroContext
from nbkit.zero.dsconfig import build_ds_config, check_batch_identity, validate_ds_config

BAD_DS = [
    ({"train_batch_size": -4}, "train_batch_size: expected an integer ≥ 1, got -4"),
    ({"train_micro_batch_size_per_gpu": 0}, "train_micro_batch_size_per_gpu: expected an integer ≥ 1, got 0"),
    (
        {"train_batch_size": 8, "gradient_accumulation_steps": 0},
        "gradient_accumulation_steps: expected an integer ≥ 1, got 0",
    ),
    ({"train_batch_size": "8"}, r"train_batch_size: expected an integer ≥ 1, got '8' \(str\)"),
    ({"train_batch_size": True}, r"train_batch_size: expected an integer ≥ 1, got True \(bool\)"),
    ({"train_batch_size": 8.0}, r"train_batch_size: expected an integer ≥ 1, got 8.0 \(float\)"),
    (
        {"train_batch_size": 8, "zero_optimization": {"stage": "3"}},
        "zero_optimization.stage: expected 0, 1, 2 or 3 \\(an integer\\), got '3'",
    ),
    (
        {"train_batch_size": 8, "zero_optimization": {"stage": True}},
        "zero_optimization.stage: expected 0, 1, 2 or 3",
    ),
    ({"train_batch_size": 8, "gradient_clipping": -1}, "gradient_clipping: expected a number ≥ 0"),
    ({"train_batch_size": 8, "steps_per_print": -1}, "steps_per_print: expected an integer ≥ 1, got -1"),
    ({"train_batch_size": 8, "optimizer": "adam"}, "optimizer: expected an object with 'type' and 'params'"),
    ({"train_batch_size": 8, "optimizer": {"type": "Adamz"}}, "optimizer.type: unknown optimizer 'Adamz'"),
    (
        {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": 3}},
        "optimizer.params: expected an object",
    ),
    (
        {"train_batch_size": 8, "optimizer": {"type": "AdamW", "lr": 0.1}},
        r"optimizer: unknown key\(s\) \['lr'\]",
    ),
    (
        {"train_batch_size": 8, "scheduler": {"type": "WarmupLRR"}},
        "scheduler.type: unknown scheduler 'WarmupLRR'",
    ),
    ({"train_batch_size": 7}, "train_batch_size=7 is not divisible by world_size = 2"),
]


@pytest.mark.parametrize(("cfg", "match"), BAD_DS)
def test_bad_ds_config_is_named(cfg, match):
    with pytest.raises(UsageError, match=match):
        validate_ds_config(cfg, world_size=2)


GOOD_DS = [
    (
        {"train_batch_size": 8},
        {"train_batch_size": 8, "micro_batch": 4, "grad_accum": 1},
    ),  # DeepSpeed derives micro = 8 / 2
    (
        {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3},
        {"train_batch_size": 12, "micro_batch": 2, "grad_accum": 3},
    ),
    (
        {"train_batch_size": 8, "zero_optimization": {"stage": 0, "offload_optimizer": {"device": "none"}}},
        None,
    ),  # DeepSpeed accepts it
    (
        {
            "train_batch_size": 8,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
            "scheduler": {"type": "WarmupLR"},
        },
        None,
    ),
    (
        {
            "train_batch_size": 8,
            "optimizer": {"type": "RMSprop"},
            "scheduler": {"type": "StepLR", "params": {"step_size": 2}},
        },
        None,
    ),
]


@pytest.mark.parametrize(("cfg", "identity"), GOOD_DS)
def test_valid_ds_configs_pass(cfg, identity):
    assert validate_ds_config(cfg, world_size=2) == cfg
    if identity is not None:
        assert check_batch_identity(cfg, 2) == identity


def test_bad_ds_config_files_are_named(tmp_path):
    binary = tmp_path / "ds.json"
    binary.write_bytes(b'{"train_batch_size": 8, "x": "\xff"}')
    with pytest.raises(UsageError, match=r"ds\.json: not UTF-8 text \(byte 0xff"):
        validate_ds_config(binary)
    with pytest.raises(UsageError, match="is a directory; expected a ds_config JSON file"):
        validate_ds_config(tmp_path)
    with pytest.raises(UsageError, match="no such file or directory; expected a ds_config JSON file"):
        validate_ds_config(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"stage": 1, "micro_batch": 0}, "micro_batch .* expected an integer ≥ 1, got 0"),
        ({"stage": 1, "grad_accum": -1}, "grad_accum .* expected an integer ≥ 1, got -1"),
        ({"stage": 4}, "zero_optimization.stage must be 0, 1, 2 or 3, got 4"),
        ({"stage": True}, "zero_optimization.stage must be 0, 1, 2 or 3, got True"),
        ({"stage": 1, "precision": "fp8"}, "precision must be"),
    ],
)
def test_build_ds_config_rejects(kwargs, match):
    with pytest.raises(UsageError, match=match):
        build_ds_config(**kwargs)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda L: L.check_world_size(True, "cpu"), "world_size must be a positive integer, got True"),
        (lambda L: L.check_world_size(2, "tpu"), "device: expected 'cpu' or 'cuda' for the ranks, got 'tpu'"),
        (
            lambda L: L.check_port(29500.7),
            r"master port: expected an integer in 1024..65535, got 29500.7 \(float\)",
        ),
        (
            lambda L: L.check_port("abc"),
            r"master port: expected an integer in 1024..65535, got 'abc' \(str\)",
        ),
        (lambda L: L.check_port(80), "master port must be in 1024..65535, got 80"),
    ],
)
def test_launcher_preflight(call, match):
    from nbkit.zero import launch

    with pytest.raises(UsageError, match=match):
        call(launch)


def _spec(**over):
    spec = {
        "rungs": [{"name": "stage1", "stage": 1}],
        "steps": 1,
        "micro_batch": 2,
        "seq_len": 16,
        "seed": 0,
        "precision": "fp32",
        "model": {},
    }
    spec.update(over)
    return spec


@pytest.mark.parametrize(
    ("spec", "kwargs", "match"),
    [
        (
            _spec(rungs=[{"name": "stage4", "stage": 4}]),
            {},
            "zero_optimization.stage must be 0, 1, 2 or 3, got 4",
        ),
        (_spec(micro_batch=0), {}, "micro_batch .* got 0"),
        (_spec(rungs=[]), {}, "spec.rungs: expected a non-empty list"),
        (_spec(steps=0), {}, "spec.steps: expected a positive integer"),
        (_spec(), {"device": "tpu"}, "device: expected 'cpu' or 'cuda'"),
        (_spec(), {"port": "abc"}, "master port: expected an integer"),
        (_spec(), {"out_dir": "FILE"}, "is a file, not a directory"),
        (_spec(), {"out_dir": "FILE/sub"}, "is a file, not a directory"),
    ],
)
def test_launch_fails_before_spawning_a_rank(tmp_path, monkeypatch, spec, kwargs, match):
    from nbkit.zero import launch as L

    def no_spawn(*a, **k):
        raise AssertionError("a rank was spawned before the bad input was caught")

    monkeypatch.setattr(subprocess, "Popen", no_spawn)
    (tmp_path / "FILE").write_text("not a folder")
    if "out_dir" in kwargs:
        kwargs["out_dir"] = tmp_path / kwargs["out_dir"]
    with pytest.raises(UsageError, match=match):
        L.launch(spec, world_size=2, **kwargs)
    assert (tmp_path / "FILE").read_text() == "not a folder"


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        ("LadderConfig", {"world_size": 0}, r"LadderConfig.world_size: expected a value in 1..256, got 0"),
        (
            "LadderConfig",
            {"world_size": 257},
            r"LadderConfig.world_size: expected a value in 1..256, got 257",
        ),
        ("LadderConfig", {"world_size": "2"}, r"LadderConfig.world_size: expected an integer, got '2'"),
        ("LadderConfig", {"world_size": True}, r"LadderConfig.world_size: expected an integer, got True"),
        ("LadderConfig", {"steps": 0}, r"LadderConfig.steps: expected a value in 1..200"),
        ("LadderConfig", {"stages": (4,)}, r"LadderConfig.stages: expected one of \[0, 1, 2, 3\], got 4"),
        ("LadderConfig", {"stages": ("3",)}, r"LadderConfig.stages: expected an integer, got '3'"),
        ("LadderConfig", {"stages": (True,)}, r"LadderConfig.stages: expected an integer, got True"),
        ("LadderConfig", {"stages": ()}, "pick at least one ZeRO stage"),
        ("LadderConfig", {"precision": "fp8"}, r"LadderConfig.precision: expected one of"),
        ("LadderConfig", {"timeout_s": float("nan")}, r"LadderConfig.timeout_s: expected a finite number"),
        ("LadderConfig", {"micro_batch": 0}, r"LadderConfig.micro_batch: expected a value in 1..32, got 0"),
        ("LadderConfig", {"offload_param": "yes"}, r"LadderConfig.offload_param: expected true or false"),
        ("FailureDrillConfig", {"rank": 5, "world_size": 2}, "rank 5 does not exist in a world of 2"),
        ("FailureDrillConfig", {"how": "explode"}, r"FailureDrillConfig.how: expected one of"),
        ("FragmentationConfig", {"intervals": ()}, "pick at least one interval"),
        ("FragmentationConfig", {"intervals": (7,)}, r"FragmentationConfig.intervals: expected one of"),
        (
            "FragmentationConfig",
            {"expandable_segments": (1,)},
            r"FragmentationConfig.expandable_segments: expected true or false",
        ),
        ("SpecDecConfig", {"methods": ("medusa",)}, r"SpecDecConfig.methods: expected one of"),
        ("SpecDecConfig", {"prompts": ("",)}, r"SpecDecConfig.prompts: expected non-empty strings"),
        ("MemoryConfig", {"world_size": 0}, r"MemoryConfig.world_size: expected a value in 1..65536"),
        ("MemoryConfig", {"gpus_per_node": 0}, r"MemoryConfig.gpus_per_node: expected a value in 1..64"),
        ("MemoryConfig", {"model": "GPT-5"}, r"MemoryConfig.model: expected one of"),
    ],
)
def test_config_bounds_are_enforced(cls, kwargs, match):
    from nbkit.zero import config

    with pytest.raises(UsageError, match=match):
        getattr(config, cls)(**kwargs)


def test_fp16_on_cpu_ranks_is_refused_before_launch(monkeypatch):
    from nbkit.zero.config import LadderConfig
    from nbkit.zero.experiments import run_ladder

    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: (_ for _ in ()).throw(AssertionError("spawned")))
    with pytest.raises(UsageError, match="DeepSpeed's CPU accelerator has no fp16"):
        run_ladder(LadderConfig(launches=1, precision="fp16"), ZeroContext("cpu"))


def test_spec_json_round_trips(tmp_path):
    from nbkit.zero.config import LadderConfig
    from nbkit.zero.ladder import write_spec

    path = write_spec(LadderConfig.smoke(), tmp_path / "spec.json", device="cpu")
    spec = json.loads(path.read_text())
    assert spec["out_dir"] == str(tmp_path.resolve()) and spec["device"] == "cpu"
    assert [r["name"] for r in spec["rungs"]] == [
        "stage0",
        "stage1",
        "stage2",
        "stage3",
        "stage0_control",
        "stage3_default_persistence",
        "stage3_sub_group",
    ]
    assert spec["rungs"][-1]["sub_group_size"] == 20_000 and spec["rungs"][4]["lr_scale"] == 0.5


def test_memory_model_takes_a_config_json_or_model_dir(tmp_path):
    """The user's architecture by path, counted on the meta device (a 70B config costs nothing)."""
    from nbkit.zero.config import MemoryConfig
    from nbkit.zero.experiments import run_memory_model

    cfg = {
        "model_type": "llama",
        "vocab_size": 32000,
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "tie_word_embeddings": False,
    }
    (tmp_path / "llama70b").mkdir()
    (tmp_path / "llama70b" / "config.json").write_text(json.dumps(cfg))
    by_dir = run_memory_model(MemoryConfig(model_path=str(tmp_path / "llama70b")), ZeroContext("cpu"))
    by_file = run_memory_model(
        MemoryConfig(model_path=str(tmp_path / "llama70b" / "config.json")), ZeroContext("cpu")
    )
    assert by_dir.metrics.n_params == by_file.metrics.n_params == 68_976_648_192


@pytest.mark.parametrize(
    ("setup", "match"),
    [
        (lambda d: d / "missing", "no such file or directory"),
        (lambda d: (d / "empty").mkdir() or d / "empty", "has no config.json"),
        (lambda d: (d / "bad.json").write_text("{oops") and d / "bad.json", "not a JSON config"),
        (
            lambda d: (d / "nomt.json").write_text('{"hidden_size": 8}') and d / "nomt.json",
            "no 'model_type' key",
        ),
    ],
)
def test_memory_model_bad_paths_are_named(tmp_path, setup, match):
    from nbkit.zero.config import MemoryConfig
    from nbkit.zero.experiments import run_memory_model

    with pytest.raises(UsageError, match=f"MemoryConfig.model_path: .*{match}"):
        run_memory_model(MemoryConfig(model_path=str(setup(tmp_path))), ZeroContext("cpu"))


def test_explain_the_users_ds_config(tmp_path):
    from nbkit.zero.dsconfig import explain

    path = tmp_path / "ds.json"
    path.write_text(
        json.dumps(
            {
                "train_micro_batch_size_per_gpu": 4,
                "gradient_accumulation_steps": 2,
                "train_batch_size": 16,
                "zero_optimization": {"stage": 2, "stage3_prefetch_bucket_size": 1000},
            }
        )
    )
    table, findings, identity = explain(str(path), world_size=2)
    assert identity == {"train_batch_size": 16, "micro_batch": 4, "grad_accum": 2, "world_size": 2}
    assert any(
        f.startswith("zero_optimization.stage3_prefetch_bucket_size: does nothing here") for f in findings
    )
    assert "zero_optimization.stage" in set(table["key"])
    path.write_text(json.dumps({"train_batch_size": 16, "zero_optimization": {"stage": "2"}}))
    with pytest.raises(UsageError, match=r"ds\.json: zero_optimization.stage: expected 0, 1, 2 or 3"):
        explain(str(path), world_size=2)
    _t, _f, field_notes = explain("")
    assert field_notes == {"train_batch_size": 128, "micro_batch": 2, "grad_accum": 4, "world_size": 8}


def test_the_context_names_a_device_it_cannot_open():
    """The device lives in the context alone: a bad DEVICE is named there, before anything runs."""
    with pytest.raises(ValueError, match="DEVICE must be one of .* got 'tpu'"):
        _ = ZeroContext("tpu").torch_device
