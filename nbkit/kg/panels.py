"""Widget panels for notebook 01: each wires a config of ``nbkit.kg.config`` to its experiment.

``panel.run()`` runs exactly what the Run button runs (headless under papermill and in tests).
"""

from __future__ import annotations

from nbkit.kg import experiments as ex
from nbkit.kg.config import (
    AblationConfig,
    AggrConfig,
    DownstreamConfig,
    MinibatchConfig,
    ScaleConfig,
    SelectionConfig,
)


def _panel(cfg, run, title: str, figure_title: str, widget):
    from nbkit.live import LiveFigure
    from nbkit.panels import Panel

    figure = LiveFigure(figure_title, xaxis="epoch", yaxis="loss / valid MRR", widget=widget)
    return Panel(cfg, run, title=title, figure=figure, widget=widget, show_result=lambda r: r.table.round(4))


def selection_panel(cfg: SelectionConfig | None = None, widget=None):
    return _panel(cfg or SelectionConfig(), ex.run_selection, "Choices made on the validation split",
                  "selection: train loss and validation MRR per candidate", widget)


def ablation_panel(cfg: AblationConfig | None = None, widget=None):
    return _panel(cfg or AblationConfig(), ex.run_ablation, "KG link prediction: the ablation ladder",
                  "ablation ladder: train loss and validation MRR (first seed)", widget)


def aggr_panel(cfg: AggrConfig | None = None, widget=None):
    return _panel(cfg or AggrConfig(), ex.run_aggr, "Is aggr='mean' more stable than 'add'?", "RGCN aggr=mean vs add: loss per seed", widget)


def downstream_panel(cfg: DownstreamConfig | None = None, widget=None):
    return _panel(cfg or DownstreamConfig(), ex.run_downstream, "Downstream check: node type from untyped embeddings",
                  "downstream: macro-F1", widget)


def minibatch_panel(cfg: MinibatchConfig | None = None, widget=None):
    return _panel(cfg or MinibatchConfig(), ex.run_minibatch, "Mini-batch training on sampled neighbourhoods vs the full graph",
                  "rung 5: sampled vs full-graph message passing, same loss", widget)


def scale_panel(cfg: ScaleConfig | None = None, widget=None):
    return _panel(cfg or ScaleConfig(), ex.run_minibatch, "Mini-batch training at Hetionet's size (seeded synthetic graph)",
                  "rung 5 mini-batch on a Hetionet-sized graph", widget)
