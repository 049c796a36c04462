"""Notebook 02's panels: set controls, click, the figure's data changes; bad values are one line."""

import pytest

pytest.importorskip("ipywidgets")


def _ys(panel):
    return [tuple(t.y) if t.y is not None else () for t in panel.live.figure.data]


def test_memory_panel_reacts_to_world_size():
    from nbkit.zero.context import ZeroContext
    from nbkit.zero.experiments import panel as zero_panel

    panel = zero_panel("memory", ZeroContext(), widget=True)
    panel.controls["model"].value = "SmolLM2-135M"
    panel.controls["world_size"].value = 2
    panel.click()
    assert panel.error is None, panel.error
    before = _ys(panel)
    panel.controls["world_size"].value = 16
    panel.click()
    assert panel.error is None, panel.error
    assert _ys(panel) != before
    assert panel.result.metrics.n_params == 134_515_008


@pytest.mark.slow
def test_ladder_panel_click_runs_ranks_and_streams_losses():
    from nbkit.zero.context import ZeroContext
    from nbkit.zero.experiments import panel as zero_panel

    panel = zero_panel(
        "ladder",
        ZeroContext("cpu"),
        widget=True,
        stages=(0, 3),
        steps=2,
        show_persistence=False,
        sub_group_elements=0,
        hidden_size=64,
        num_hidden_layers=2,
        checkpoint=False,
        control=False,
        timeout_s=200,
        launches=1,
    )
    panel.controls["steps"].value = 2
    panel.click()
    assert panel.error is None, panel.error
    first = _ys(panel)
    assert first and any(first)
    panel.controls["stages"].value = (1,)
    panel.click()
    assert panel.error is None, panel.error
    assert _ys(panel) != first
    assert set(panel.result.table["stage"]) == {1}


def test_bad_input_becomes_one_readable_line():
    from nbkit.zero.context import ZeroContext
    from nbkit.zero.experiments import panel as zero_panel

    panel = zero_panel("ladder", ZeroContext("cpu"), widget=True)
    panel.controls["stages"].value = ()
    panel.click()
    assert panel.error and "pick at least one ZeRO stage" in panel.error
    # A value the slider would clamp, given through run(): named by config and field, nothing launched.
    assert panel.run(raise_errors=False, stages=(0,), seq_len=4) is None
    assert "LadderConfig.seq_len: expected a value in 8..1024, got 4" in panel.error


def test_crossover_panel_names_a_bad_size_and_the_memory_panel_takes_a_ds_config(tmp_path):
    import json

    from nbkit.zero.context import ZeroContext
    from nbkit.zero.experiments import panel as zero_panel

    ctx = ZeroContext()
    panel = zero_panel("crossover", ctx, widget=True)
    panel.controls["sizes"].value = "512x8,big"
    panel.click()
    assert panel.error and "CrossoverConfig.sizes: item 'big': expected HIDDENxLAYERS" in panel.error
    ds = tmp_path / "ds.json"
    ds.write_text(
        json.dumps(
            {
                "train_batch_size": 16,
                "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}},
            }
        )
    )
    mem = zero_panel("memory", ctx, widget=True)
    mem.controls["ds_config"].value = str(ds)
    mem.click()
    assert mem.error is None, mem.error
    assert mem.result.metrics.plan["stage"] == 2 and mem.result.metrics.plan["offload_optimizer"] is True


def test_every_zero_experiment_has_a_panel_and_an_unknown_field_is_named():
    from nbkit.errors import UsageError
    from nbkit.zero.context import ZeroContext
    from nbkit.zero.experiments import REGISTRY
    from nbkit.zero.experiments import panel as zero_panel

    ctx = ZeroContext("cpu")
    for slug in REGISTRY.slugs:
        assert zero_panel(slug, ctx, smoke=True, widget=False).params == REGISTRY[slug].Config.smoke()
        assert REGISTRY[slug].show_result is not None, slug  # what the cell used to print, under the panel
    with pytest.raises(UsageError, match="LadderConfig has no field stepz"):
        zero_panel("ladder", ctx, stepz=3)
