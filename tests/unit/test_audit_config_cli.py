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
    from nbkit.audit.check_names import CHECK_NAMES
    from nbkit.audit.experiments import REGISTRY

    slugs = REGISTRY.check_slugs
    assert (
        len(slugs) == 18 and slugs[0] == "kiss-lora" and slugs[12] == "ddp-eval" and slugs[-1] == "eval-batch"
    )
    assert slugs == list(CHECK_NAMES.values())  # the config's name list is the registry's
    assert {"audit", "trainer-config", "diagnose"} <= set(REGISTRY.slugs)  # the experiments that run several
    assert REGISTRY.check(2).slug == REGISTRY.check("2").slug == "lora-binding"
    assert REGISTRY.select("schedulers, 2,7-8") == ["schedulers", "lora-binding", "data-schema", "loss-mask"]
    for (
        c
    ) in REGISTRY.checks():  # every check's config has a smoke preset and takes the default config's values
        assert isinstance(c.Config.smoke(), c.Config)
        assert isinstance(c.config(values=c.audit_values(AuditConfig())), c.Config)


def test_a_check_registered_under_another_number_fails():
    import dataclasses

    from nbkit.audit.check import CheckRegistry
    from nbkit.audit.experiments import REGISTRY

    with pytest.raises(ValueError, match="check_names lists 'lora-binding'"):
        CheckRegistry("x").register(dataclasses.replace(REGISTRY.check("schedulers"), number=2))


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
    from nbkit.audit.context import AuditContext
    from nbkit.audit.registry import run_audit

    [f] = run_audit(AuditContext("cpu", progress=False), ["reward-weights"]).data
    assert f.status == "skipped" and "not run: needs the config's 'sampling' section" in f.summary


def test_a_config_without_the_section_gives_one_status_on_every_path():
    """No scheduler section: what nbkit audit runs (run_check), what a notebook's cell runs
    (REGISTRY.run, a panel's run) and a whole audit all skip the check with one finding naming the
    section, and measure nothing."""
    from nbkit.audit.context import AuditContext
    from nbkit.audit.experiments import REGISTRY
    from nbkit.audit.registry import run_audit, run_check

    cfg = load_config(GOOD).model_copy(update={"scheduler": None})
    check = REGISTRY.check("schedulers")
    paths = {
        "run_check": lambda ctx: run_check(check, ctx).data,
        "REGISTRY.run": lambda ctx: REGISTRY.run("schedulers", ctx).data,
        "panel": lambda ctx: REGISTRY.panel("schedulers", ctx, widget=False).run().data,
        "run_audit": lambda ctx: run_audit(ctx, ["schedulers"]).data[0],
    }
    for path, run in paths.items():
        ctx = AuditContext("cpu", config=cfg, progress=False)
        f = run(ctx)
        assert (f.status, f.summary) == ("skipped", "not run: needs the config's 'scheduler' section"), path
        assert "schedulers" not in ctx.results and ctx.checked["schedulers"] is f, path
    # with the section, every path runs the check itself
    ctx = AuditContext("cpu", config=GOOD, progress=False)
    assert REGISTRY.run("schedulers", ctx).data.status == run_check(check, ctx).data.status == "pass"


def test_a_value_the_check_does_not_run_is_skipped_on_every_path():
    """A checkpoint interval the fragmentation experiment does not run: skipped by a notebook's cell as by
    nbkit audit, naming the intervals it takes."""
    from nbkit.audit.context import AuditContext
    from nbkit.audit.experiments import REGISTRY
    from nbkit.audit.registry import run_check

    good = load_config(GOOD)
    cfg = good.model_copy(update={"checkpoint": good.checkpoint.model_copy(update={"interval": 500})})
    for run in (
        lambda c: REGISTRY.run("fragmentation", c),
        lambda c: run_check(REGISTRY.check("fragmentation"), c),
    ):
        f = run(AuditContext("cpu", config=cfg, progress=False)).data
        assert f.status == "skipped" and "every 500 steps" in f.summary


def test_check_configs_come_from_the_audit_config_and_smoke_sizes_win():
    from nbkit.audit.checks.kiss import KissConfig
    from nbkit.audit.checks.reward_weights import RewardWeightsConfig
    from nbkit.audit.context import AuditContext
    from nbkit.audit.experiments import REGISTRY

    kiss = REGISTRY.check("kiss-lora")
    # a YAML kiss section without a budget leaves the check to its own defaults (nbkit audit skips it)
    assert kiss.switched_off(load_config(GOOD))
    assert kiss.audit_values(load_config(GOOD)) == {}
    opted = load_config(GOOD).model_copy(
        update={"kiss": load_config(GOOD).kiss.model_copy(update={"budget_steps": 9})}
    )
    assert kiss.config(values=kiss.audit_values(opted)).budget_steps == 9
    assert kiss.config(True, values=kiss.audit_values(opted)) == KissConfig.smoke()  # the smoke sizes win
    ctx = AuditContext("cpu", config=GOOD, progress=False)
    p = REGISTRY.panel("reward-weights", ctx, widget=False)
    assert (p.params.beta, p.params.gamma) == (0.5, 0.0)  # good_smollm2.yaml's sampling section
    p = REGISTRY.panel("reward-weights", ctx, widget=False, beta=2.0)
    assert p.params.beta == 2.0  # a notebook's override wins
    assert REGISTRY.panel("reward-weights", AuditContext("cpu", progress=False), widget=False).params == (
        RewardWeightsConfig()
    )  # no sampling section: the check's defaults


def test_the_context_replaces_model_and_seed_without_touching_the_file_s_config():
    from nbkit.audit.context import AuditContext

    ctx = AuditContext("cpu", config=GOOD, model="tiny", seed=3)
    assert (ctx.config.model.name, ctx.config.model.seed) == ("tiny", 3) and ctx.device == "cpu"
    assert load_config(GOOD).model.seed == 0 and ctx.results == {}
    assert AuditContext("cpu", config="good.yaml").config.model.name == "tiny"  # a bundled example by name


def test_an_unknown_override_is_one_line():
    from nbkit.audit.context import AuditContext
    from nbkit.audit.experiments import REGISTRY
    from nbkit.errors import UsageError

    ctx = AuditContext("cpu", config=GOOD)
    p = REGISTRY.panel("kiss-lora", ctx, widget=False, budget_steps=60)
    assert p.params.budget_steps == 60 and (p.params.kiss_lr, p.params.over_lr) == (3e-3, 1e-3)
    with pytest.raises(UsageError, match="KissConfig has no field stpes"):
        REGISTRY.panel("kiss-lora", ctx, widget=False, stpes=3)
