"""Widget panels built from a parameters dataclass.

A theme exposes a *plain* run function ``run(params, live) -> result`` (``live`` is a
``LiveFigure`` it may stream curves into; it may also just return a finished plotly figure). A
``Panel`` wires it to widgets: one control per dataclass field, a Run button, a progress bar, the
live figure and an output area where a failure shows as one readable line, never a traceback wall.

``Panel.run(**overrides)`` runs exactly what the button runs, without widgets, so a notebook's
default run executes headless under papermill and tests can drive it.

Field metadata steers the controls::

    @dataclass
    class LadderParams:
        epochs: int = field(default=20, metadata={"min": 1, "max": 200})
        lr: float = field(default=0.01, metadata={"min": 1e-4, "max": 1.0, "step": 1e-4})
        aggr: str = field(default="mean", metadata={"choices": ["mean", "add"]})
        rungs: tuple = field(default=(1, 2), metadata={"choices": [1, 2, 3, 4]})  # multi-select

The controls that change the lesson in view come first; multi-select grids and fields marked
``advanced`` are folded under one closed "advanced" section (:func:`is_advanced`). The defaults are the
config's either way.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

from nbkit.errors import describe_error  # noqa: F401  (re-exported: panels show errors as one line)
from nbkit.live import LiveFigure, in_kernel, widgets_available


class PanelError(RuntimeError):
    """A run failed; ``message`` is the one readable line the panel shows."""


def _field_choices(f: dataclasses.Field) -> list | None:
    choices = f.metadata.get("choices")
    return list(choices) if choices is not None else None


def is_advanced(f: dataclasses.Field, value: Any) -> bool:
    """Whether a field's control is folded under the panel's "advanced" section: as its ``advanced``
    metadata says, else when it is a multi-select grid (a tuple of choices: what a sweep over settings
    varies, not the lesson in view)."""
    if "advanced" in f.metadata:
        return bool(f.metadata["advanced"])
    return isinstance(value, (list, tuple)) and _field_choices(f) is not None


def build_control(f: dataclasses.Field, value: Any):
    """The ipywidgets control for one dataclass field."""
    import ipywidgets as w

    md = f.metadata
    label = md.get("label", f.name)
    style = {"description_width": "initial"}
    choices = _field_choices(f)
    if choices is not None and isinstance(value, (list, tuple)):
        return w.SelectMultiple(
            options=choices, value=tuple(value), description=label, style=style, rows=min(6, len(choices))
        )
    if choices is not None:
        return w.Dropdown(options=choices, value=value, description=label, style=style)
    if isinstance(value, bool):
        return w.Checkbox(value=value, description=label, indent=False)
    if isinstance(value, int):
        lo, hi = md.get("min", min(0, value)), md.get("max", max(10, value * 4))
        return w.IntSlider(
            value=value,
            min=lo,
            max=hi,
            step=md.get("step", 1),
            description=label,
            style=style,
            continuous_update=False,
        )
    if isinstance(value, float):
        lo, hi = md.get("min", min(0.0, value)), md.get("max", max(1.0, value * 4))
        if md.get("log"):
            import math

            return w.FloatLogSlider(
                value=value,
                min=math.log10(lo),
                max=math.log10(hi),
                description=label,
                style=style,
                continuous_update=False,
            )
        return w.FloatSlider(
            value=value,
            min=lo,
            max=hi,
            step=md.get("step", (hi - lo) / 100),
            description=label,
            style=style,
            continuous_update=False,
        )
    if isinstance(value, str):
        return w.Text(value=value, description=label, style=style)
    raise TypeError(
        f"panel field {f.name!r}: no control for {type(value).__name__} (give it 'choices' metadata)"
    )


class Panel:
    """Controls + Run button + progress + live figure + readable errors, around a plain function."""

    def __init__(
        self,
        params: Any,
        run: Callable[..., Any],
        *,
        title: str = "",
        figure: LiveFigure | None = None,
        widget: bool | None = None,
        show_result: Callable[[Any], Any] | None = None,
    ):
        if not dataclasses.is_dataclass(params) or isinstance(params, type):
            raise TypeError("Panel needs a dataclass *instance* of parameters")
        self.params = params
        self._run_fn = run
        self.title = title
        self.widget = widgets_available() if widget is None else widget
        self.live = figure if figure is not None else LiveFigure(title, widget=self.widget)
        self._wants_live = "live" in inspect.signature(run).parameters
        self._show_result = show_result
        self.result: Any = None
        self.error: str | None = None
        self.runs = 0
        self.controls: dict[str, Any] = {}
        self.advanced: Any = None  # the closed "advanced" section, when the config has such settings
        self._box = None
        if self.widget:
            self._build_widgets()

    # -- the plain path ------------------------------------------------------------------
    def current_params(self, **overrides):
        """The dataclass with the controls' values (and ``overrides``) applied."""
        values = {f.name: getattr(self.params, f.name) for f in dataclasses.fields(self.params)}
        for name, ctl in self.controls.items():
            v = ctl.value
            values[name] = tuple(v) if isinstance(values[name], (tuple, list)) else v
        unknown = set(overrides) - set(values)
        if unknown:
            raise TypeError(
                f"{type(self.params).__name__} has no parameter(s) {sorted(unknown)}; known: {sorted(values)}"
            )
        values.update(overrides)
        return dataclasses.replace(self.params, **values)

    def run(self, raise_errors: bool = True, **overrides):
        """Run with the current control values; returns the run function's result."""
        known = {f.name for f in dataclasses.fields(self.params)}
        if set(overrides) - known:  # a caller's typo is a programming error, not a run failure
            raise TypeError(
                f"{type(self.params).__name__} has no parameter(s) {sorted(set(overrides) - known)}; known: "
                f"{sorted(known)}"
            )
        self.error = None
        self.live.reset()
        try:
            # Inside the try: a control value the dataclass rejects is shown as one readable line too.
            params = self.current_params(**overrides)
            result = self._run_fn(params, live=self.live) if self._wants_live else self._run_fn(params)
        except KeyboardInterrupt:
            self.error = "interrupted"
            self._show_error(self.error)
            raise
        except Exception as exc:  # the panel's job: turn any failure into one readable line
            self.error = describe_error(exc)
            self._show_error(self.error)
            if raise_errors:
                raise PanelError(self.error) from exc
            return None
        self.live.flush()
        fig = getattr(result, "figure", None) if not _is_figure(result) else result
        if fig is None and isinstance(result, dict):
            fig = result.get("figure")
        if _is_figure(fig):
            self.live.set_figure(fig)
        self.result = result
        self.runs += 1
        self._show(result)
        return result

    # -- widgets -------------------------------------------------------------------------
    def _build_widgets(self):
        import ipywidgets as w

        main, folded = [], []
        for f in dataclasses.fields(self.params):
            if f.metadata.get("hidden"):
                continue
            value = getattr(self.params, f.name)
            self.controls[f.name] = build_control(f, value)
            (folded if is_advanced(f, value) else main).append(self.controls[f.name])
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.status = w.HTML(value="")
        self.output = w.Output()
        self.run_button.on_click(lambda _b: self._on_click())
        header = w.HTML(f"<b>{self.title}</b>") if self.title else w.HTML("")
        columns = w.Layout(grid_template_columns="repeat(2, 48%)")
        sections: list[Any] = [header, w.GridBox(main, layout=columns)]
        if folded:  # one section, closed: the grids and knobs a first reading does not need
            self.advanced = w.Accordion(
                children=[w.GridBox(folded, layout=columns)],
                titles=(f"advanced ({len(folded)} setting{'' if len(folded) == 1 else 's'})",),
                selected_index=None,
            )
            self.advanced.add_class("nbkit-advanced")
            sections.append(self.advanced)
        self._box = w.VBox([*sections, w.HBox([self.run_button, self.status]), self.live.figure, self.output])

    def _on_click(self):
        self.run_button.disabled = True
        self.status.value = "running…"
        self.output.clear_output()
        try:
            with self.output:
                try:
                    self.run(raise_errors=False)
                except KeyboardInterrupt:
                    # Interrupting the kernel stops the experiment (its processes end as it unwinds);
                    # run() showed "interrupted". A click has no caller to pass it to: no traceback.
                    pass
        finally:
            self.run_button.disabled = False
            self.status.value = (
                "<span style='color:#b00'>failed</span>" if self.error else f"done (run {self.runs})"
            )

    def click(self):
        """Press Run (tests and scripted demos)."""
        if self.widget:
            self.run_button.click()
        else:
            self.run(raise_errors=False)

    def _show_error(self, message: str):
        if not in_kernel():
            return
        from IPython.display import HTML, display

        html = HTML(f"<div style='color:#b00;font-family:monospace'>⚠ {_escape(message)}</div>")
        if self.widget:
            with self.output:
                display(html)
        else:
            display(html)

    def _show(self, result):
        if not in_kernel():
            return
        from IPython.display import display

        shown = self._show_result(result) if self._show_result else None
        if shown is not None:
            if self.widget:
                with self.output:
                    display(shown)
            else:
                display(shown)

    def display(self):
        """Show the panel (widgets), or the live figure when headless."""
        from IPython.display import display

        if self.widget:
            display(self._box)
        else:
            self.live.show()
        return self

    def _ipython_display_(self):
        self.display()


def _is_figure(obj) -> bool:
    return (
        type(obj).__name__ in ("Figure", "FigureWidget") and hasattr(obj, "data") and hasattr(obj, "layout")
    )


def _escape(text: str) -> str:
    import html

    return html.escape(text)
