"""Audit panels: widgets built from the checks' config dataclasses; a click re-runs the check."""

from __future__ import annotations

import pytest

from nbkit.audit import experiments
from nbkit.audit.context import AuditContext
from nbkit.audit.sft import EXAMPLES_DIR


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny tensors gain nothing from intra-op threads, and on a shared CPU the threads' spinning
    makes these checks ~10-30× slower (measured); restore the setting afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def ctx():
    return AuditContext("cpu", config=EXAMPLES_DIR / "good.yaml", progress=False)


def check_panel(slug, ctx, smoke=False, widget=True):
    """The one panel factory (the registry's), as a notebook cell's ``experiments.show`` builds it."""
    return experiments.panel(slug, ctx, smoke=smoke, widget=widget)


def _ys(panel):
    return [tuple(t.y) if t.y is not None else () for t in panel.live.figure.data]


def test_scheduler_panel_click_changes_the_lr_plot(ctx):
    panel = check_panel("schedulers", ctx, widget=True)
    panel.controls["preset"].value = "warmup+cosine"
    first = panel.run()
    assert first.data.status == "pass"
    before = _ys(panel)
    panel.controls["preset"].value = "onecycle+warmup+step"
    panel.controls["resume_restores_scheduler"].value = False
    panel.click()
    assert panel.error is None, panel.error
    assert panel.result.data.status == "fail" and "warmup repeated" in panel.result.data.summary
    assert _ys(panel) != before


def test_lora_panel_rank_control_flips_the_finding(ctx):
    panel = check_panel("lora-binding", ctx, widget=True)
    panel.run()
    before = _ys(panel)
    panel.controls["r"].value = 64  # wider than the tiny model's v_proj (32)
    panel.click()
    assert panel.result.data.status == "fail" and "exceeds" in panel.result.data.summary
    assert _ys(panel) != before


def test_sampling_panel_beta_moves_the_marker(ctx):
    panel = check_panel("reward-weights", ctx, smoke=True, widget=True)
    panel.run()
    marker = [t for t in panel.live.figure.data if t.name == "this config (KL)"][0].x
    panel.controls["beta"].value = 12.0
    panel.click()
    assert [t for t in panel.live.figure.data if t.name == "this config (KL)"][0].x != marker


def test_data_panel_broken_file_shows_an_error_free_failing_finding(ctx):
    panel = check_panel("data-schema", ctx, widget=True)
    panel.controls["path"].value = "sft_broken.jsonl"
    panel.click()
    assert panel.error is None and panel.result.data.status == "fail"
    panel.controls["schema"].value = "broken_schema.py:SFTExample"
    panel.click()
    assert panel.result.data.status == "fail" and "does not import" in panel.result.data.summary


def test_label_panel_language_filter_is_part_of_the_check(ctx):
    panel = check_panel("label-alignment", ctx, widget=False)
    both = panel.run().metrics
    zh = panel.run(language="zh").metrics
    assert both.en is not None and both.zh is not None
    assert zh.en is None and zh.zh == both.zh
    assert ctx.results["label-alignment"].metrics is zh  # the panel's run is kept in the context


def test_trainer_check_panels_come_from_the_axolotl_config_and_a_click_reruns(ctx):
    """Checks 14-18 read the trainer section of a mapped axolotl config; unticking a control changes the
    verdict."""
    from nbkit.audit.formats import read_any

    mapped = read_any(EXAMPLES_DIR / "axolotl_smollm2.yml", model="tiny")
    tctx = AuditContext("cpu", config=mapped.config, progress=False, share_models_with=ctx)
    panel = check_panel("train-on-inputs", tctx, widget=True)
    assert (
        panel.controls["train_on_inputs"].value is True
        and panel.controls["dataset_types"].value == "chat_template"
    )
    assert panel.run().data.status == "fail"
    panel.controls["train_on_inputs"].value = False
    assert panel.run().data.status == "pass"
    packing = check_panel("packing-attention", tctx, widget=True)
    assert packing.run().data.status == "fail"
    packing.controls["attn_implementation"].value = "flash_attention_2"
    assert packing.run().data.status == "pass"


def test_a_whole_config_s_audit_is_one_panel_sharing_the_models(ctx):
    """The broken config's audit runs every check it allows in a context of its own that shares the
    notebook's loaded models; its typed metrics carry the data-schema counts the claims read."""
    checked_before = dict(ctx.checked)
    panel = experiments.panel("audit", ctx, widget=False, checks="data-schema,lora-binding")
    result = panel.run()
    m = result.metrics
    assert m.file == "broken.yaml" and m.format == "nbkit" and m.failures == 2
    assert [c.check for c in m.checks] == ["data-schema", "lora-binding"]  # in the order asked
    assert m.data_schema is not None and m.data_schema.coerced_values == 2
    assert ctx.results["audit"] is result
    assert ctx.checked == checked_before  # the good config's findings stay apart from the broken one's
