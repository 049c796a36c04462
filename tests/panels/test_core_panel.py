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
