"""Audit panels: widgets built from the checks' config dataclasses; a click re-runs the check."""

from __future__ import annotations

import pytest

from nbkit.audit.config import load_config
from nbkit.audit.experiments import make_context
from nbkit.audit.panels import check_panel
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
    return make_context(load_config(EXAMPLES_DIR / "good.yaml"), "cpu", progress=False)


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
    both = panel.run().data.figures
    zh = panel.run(language="zh").data.figures
    assert "en_spans" in both and "zh_spans" in both
    assert "en_spans" not in zh and zh["zh_spans"] == both["zh_spans"]


def test_trainer_check_panels_come_from_the_axolotl_config_and_a_click_reruns(ctx):
    """Checks 14-18 read the trainer section of a mapped axolotl config; unticking a control changes the
    verdict."""
    from nbkit.audit.formats import read_any

    mapped = read_any(EXAMPLES_DIR / "axolotl_smollm2.yml", model="tiny")
    tctx = make_context(mapped.config, "cpu", progress=False, share_models_with=ctx)
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
