"""AuditConfig validation and the `nbkit audit` CLI (exit codes 0 / 1 / 2, text and JSON)."""

from __future__ import annotations

import json

import pytest

from nbkit.audit.cli import main
from nbkit.audit.config import AuditConfig, ConfigError, load_config, parse_config
from nbkit.audit.sft import EXAMPLES_DIR

GOOD = EXAMPLES_DIR / "good.yaml"
BROKEN = EXAMPLES_DIR / "broken.yaml"
INVALID = EXAMPLES_DIR / "invalid.yaml"


def test_example_configs_load_and_resolve_paths():
    good = load_config(GOOD)
    assert isinstance(good, AuditConfig)
    assert good.data.path == (EXAMPLES_DIR / "sft.jsonl").resolve()
    assert good.data.schema_ref.endswith("sft_schema.py:SFTExample")
    assert good.lora.target_modules == ["q_proj", "v_proj"]
    broken = load_config(BROKEN)
    assert broken.lora.r == 256 and broken.template.mask_pad_labels


def test_invalid_config_names_file_line_key_and_type():
    with pytest.raises(ConfigError) as exc:
        load_config(INVALID)
    msg = str(exc.value)
    assert "invalid.yaml:5: key 'lora.r'" in msg and "valid integer" in msg and "'eight'" in msg
    assert "key 'lora.rank_pattern': unknown key (allowed: r, alpha" in msg
    assert "key 'train.micro_batch_size'" in msg and "list" in msg
    assert {p["key"] for p in exc.value.problems} == {"lora.r", "lora.rank_pattern", "train.micro_batch_size"}


def test_nested_list_items_and_missing_keys(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "scheduler:\n  stages:\n    - {kind: cosine, steps: 10, warmup: 3}\n    - {kind: bogus, steps: 5}\n"
    )
    with pytest.raises(ConfigError) as exc:
        load_config(cfg)
    msg = str(exc.value)
    assert "key 'scheduler.stages.0.warmup': unknown key (allowed: kind, steps" in msg
    assert "c.yaml:4: key 'scheduler.stages.1.kind'" in msg
    with pytest.raises(ConfigError, match="data.path': required key is missing"):
        parse_config({"data": {"schema": "x:Y"}})


def test_yaml_syntax_error_and_non_mapping(tmp_path):
    bad = tmp_path / "b.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="b.yaml:2: not valid YAML"):
        load_config(bad)
    bad.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_config(bad)
    with pytest.raises(ConfigError, match="no such file or directory; expected a YAML audit config file"):
        load_config(tmp_path / "missing.yaml")


def test_cli_exit_2_on_invalid_config(capsys):
    assert main([str(INVALID)]) == 2
    err = capsys.readouterr().err
    assert "invalid.yaml:5: key 'lora.r'" in err and "valid integer" in err


def test_registry_keys_are_slugs_and_numbers_map_through_it():
    from nbkit.audit.experiments import REGISTRY

    assert (
        len(REGISTRY) == 18
        and REGISTRY.slugs[0] == "kiss-lora"
        and REGISTRY.slugs[12] == "ddp-eval"
        and REGISTRY.slugs[-1] == "eval-batch"
    )
    assert REGISTRY[2].slug == REGISTRY["2"].slug == "lora-binding"
    assert REGISTRY.select("schedulers, 2,7-8") == ["schedulers", "lora-binding", "data-schema", "loss-mask"]
    for c in REGISTRY:  # every check's config has a smoke preset and maps from the default config
        assert isinstance(c.Config.smoke(), c.Config)
        assert c.needs or isinstance(c.config_from(AuditConfig()), c.Config)


def test_cli_good_config_passes_static_checks(capsys):
    assert main([str(GOOD), "--checks", "data-schema,zero3-layout,11,12", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    statuses = {f["check"]: f["status"] for f in out["findings"]}
    assert statuses == {
        "data-schema": "pass",
        "zero3-layout": "pass",
        "schedulers": "pass",
        "fragmentation": "needs_gpu",
    }
    assert out["failed"] == 0


def test_cli_broken_config_fails_with_exit_1(capsys):
    assert main([str(BROKEN), "--checks", "2,7-8,10-11"]) == 1
    out = capsys.readouterr().out
    for slug in ("lora-binding", "data-schema", "loss-mask", "zero3-layout", "schedulers"):
        assert f"[FAIL] {slug}:" in out
    assert "summary: 5 fail" in out


def test_missing_section_is_skipped_and_says_what_it_needs(capsys):
    cfg = AuditConfig()
    from nbkit.audit.experiments import run_audit

    [f] = run_audit(cfg, ["reward-weights"], device="cpu", progress=False).data
    assert f.status == "skipped" and "not run: needs the config's 'sampling' section" in f.summary


def test_check_configs_come_from_the_audit_config_and_smoke_sizes_win():
    from nbkit.audit.check import from_audit_values
    from nbkit.audit.checks.kiss import KissConfig
    from nbkit.audit.experiments import REGISTRY

    kiss = REGISTRY["kiss-lora"]
    assert kiss.config_from(load_config(GOOD)).budget_steps == 0  # the YAML kiss section opts in to training
    assert kiss.config_from(load_config(GOOD), smoke=True) == KissConfig.smoke()
    # the notebook's overrides apply on the defaults; under SMOKE the smoke preset's sizes win
    given = {"budget_steps": 30, "lr": 1e-3, "model": "smollm2", "seeds": 4}
    assert from_audit_values(KissConfig, given) == KissConfig(**given)
    assert from_audit_values(KissConfig, given, smoke=True) == KissConfig.smoke()
    assert REGISTRY["reward-weights"].config_from(AuditConfig()) is None  # no sampling section


def test_open_audit_replaces_model_and_seed_without_touching_the_file_s_config():
    from nbkit.audit import panels

    ctx = panels.open_audit(GOOD, model="tiny", seed=3, device="cpu")
    assert (ctx.config.model.name, ctx.config.model.seed) == ("tiny", 3) and ctx.device == "cpu"
    assert load_config(GOOD).model.seed == 0 and ctx.results == {}


def test_a_panel_override_of_the_wrong_type_is_one_line():
    from nbkit.audit import panels
    from nbkit.errors import UsageError

    ctx = panels.open_audit(GOOD, device="cpu")
    p = panels.check_panel("kiss-lora", ctx, from_config=False, widget=False, budget_steps=60, lr=None)
    assert p.params.budget_steps == 60 and p.params.lr == 1e-3  # None keeps the check's default
    with pytest.raises(UsageError, match="KissConfig.budget_steps expects int"):
        panels.check_panel("kiss-lora", ctx, from_config=False, widget=False, budget_steps="many")
    with pytest.raises(UsageError, match="has no field stpes"):
        panels.check_panel("kiss-lora", ctx, from_config=False, widget=False, stpes=3)
