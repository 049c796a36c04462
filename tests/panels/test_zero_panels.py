"""Notebook 02's panels: set controls, click, the figure's data changes."""

import pytest

pytest.importorskip("ipywidgets")


def _ys(panel):
    return [tuple(t.y) if t.y is not None else () for t in panel.live.figure.data]


def test_memory_panel_reacts_to_world_size():
    from nbkit.zero.panels import memory_panel

    panel = memory_panel(widget=True)
    panel.controls["model"].value = "SmolLM2-135M"
    panel.controls["world_size"].value = 2
    panel.click()
    assert panel.error is None, panel.error
    before = _ys(panel)
    panel.controls["world_size"].value = 16
    panel.click()
    assert panel.error is None, panel.error
    assert _ys(panel) != before
    assert panel.result["size"].n_params > 100_000_000


@pytest.mark.slow
def test_ladder_panel_click_runs_ranks_and_streams_losses():
    from nbkit.zero.ladder import LadderParams
    from nbkit.zero.panels import ladder_panel

    panel = ladder_panel(LadderParams(stages=(0, 3), steps=2, show_persistence=False, device="cpu", timeout_s=200), widget=True)
    panel.controls["steps"].value = 2
    panel.click()
    assert panel.error is None, panel.error
    first = _ys(panel)
    assert first and any(first)
    panel.controls["stages"].value = (1,)
    panel.click()
    assert panel.error is None, panel.error
    assert _ys(panel) != first
    assert {r["stage"] for r in panel.result["ladder"]} == {1}


def test_bad_input_becomes_one_readable_line():
    from nbkit.zero.ladder import LadderParams
    from nbkit.zero.panels import ladder_panel

    panel = ladder_panel(LadderParams(device="cpu"), widget=True)
    panel.controls["stages"].value = ()
    panel.click()
    assert panel.error and "pick at least one ZeRO stage" in panel.error
