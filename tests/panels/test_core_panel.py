"""Drive a Panel the way a user does: set widget values, press Run, see the figure change."""

from dataclasses import dataclass, field

import plotly.graph_objects as go
import pytest

from nbkit.panels import Panel, PanelError


@dataclass
class CurveParams:
    steps: int = field(default=5, metadata={"min": 1, "max": 50})
    rate: float = field(default=0.5, metadata={"min": 0.01, "max": 1.0})
    shape: str = field(default="decay", metadata={"choices": ["decay", "growth"]})
    explode: bool = False


def run_curve(params: CurveParams, live):
    if params.explode:
        raise ValueError("rate too high: loss diverged")
    value = 1.0
    for step in range(params.steps):
        value = value * (1 - params.rate) if params.shape == "decay" else value * (1 + params.rate)
        live.add("loss", step, value)
    return {"final": value}


def test_controls_follow_the_dataclass():
    panel = Panel(CurveParams(), run_curve, title="curve", widget=True)
    kinds = {name: type(c).__name__ for name, c in panel.controls.items()}
    assert kinds == {"steps": "IntSlider", "rate": "FloatSlider", "shape": "Dropdown", "explode": "Checkbox"}


def test_changing_a_control_and_pressing_run_changes_the_figure():
    panel = Panel(CurveParams(), run_curve, title="curve", widget=True)
    panel.click()
    first = list(panel.live.figure.data[0].y)
    assert len(first) == 5
    panel.controls["steps"].value = 9
    panel.controls["shape"].value = "growth"
    panel.click()
    second = list(panel.live.figure.data[0].y)
    assert len(second) == 9 and second != first[: len(second)]
    assert panel.runs == 2 and panel.error is None


def test_error_becomes_one_readable_line():
    panel = Panel(CurveParams(), run_curve, widget=True)
    panel.controls["explode"].value = True
    panel.click()
    assert panel.error.startswith("ValueError: rate too high: loss diverged")
    assert "Traceback" not in panel.error
    assert panel.run_button.disabled is False


def test_plain_run_without_widgets_and_overrides():
    panel = Panel(CurveParams(), run_curve, widget=False)
    assert panel.run(steps=2)["final"] == pytest.approx(0.25)
    with pytest.raises(PanelError, match="ValueError"):
        panel.run(explode=True)
    with pytest.raises(TypeError, match="no parameter"):
        panel.run(nope=1)


def test_returned_figure_replaces_panel_figure():
    def bars(params):
        return go.Figure(go.Bar(x=["a", "b"], y=[params.steps, 1]))

    panel = Panel(CurveParams(), bars, widget=True)
    panel.click()
    assert list(panel.live.figure.data[0].y) == [5, 1]


@dataclass
class GridParams:
    steps: int = field(default=5, metadata={"min": 1, "max": 50})
    rungs: tuple = field(default=(1, 2, 3), metadata={"choices": [1, 2, 3, 4], "advanced": False})
    rates: tuple = field(default=(0.1, 0.5), metadata={"choices": [0.1, 0.2, 0.5]})
    patience: int = field(default=4, metadata={"min": 0, "max": 20, "advanced": True})
    hidden_knob: int = field(default=1, metadata={"hidden": True})


def run_grid(params: GridParams, live):
    for step in range(params.steps):
        live.add("loss", step, sum(params.rates) / (step + 1))
    return {"rungs": params.rungs, "rates": params.rates, "patience": params.patience}


def test_grids_and_advanced_knobs_fold_under_one_closed_section_with_the_same_defaults():
    import ipywidgets as w

    panel = Panel(GridParams(), run_grid, title="grid", widget=True)
    main = panel._box.children[1]
    assert [c.description for c in main.children] == ["steps", "rungs"]  # the lesson in view
    assert isinstance(panel.advanced, w.Accordion) and panel.advanced.selected_index is None  # closed
    assert panel.advanced.titles == ("advanced (2 settings)",)
    assert [c.description for c in panel.advanced.children[0].children] == ["rates", "patience"]
    assert panel.run() == {"rungs": (1, 2, 3), "rates": (0.1, 0.5), "patience": 4}  # defaults unchanged
    panel.controls["rates"].value = (0.2,)
    panel.controls["patience"].value = 7
    assert panel.run() == {"rungs": (1, 2, 3), "rates": (0.2,), "patience": 7}  # folded controls still act
    assert Panel(CurveParams(), run_curve, widget=True).advanced is None  # nothing to fold: no section


def test_param_writes_the_advanced_metadata():
    from nbkit.experiment import param

    assert param(3, advanced=True).metadata["advanced"] is True
    assert param((1,), choices=[1, 2], advanced=False).metadata["advanced"] is False
    assert "advanced" not in param(3).metadata
