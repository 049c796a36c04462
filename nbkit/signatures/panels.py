"""Notebook 03's panels: each wires one config dataclass to its experiment, bound to the session.

The signatures theme shares one LM session (servers started once) across experiments, so each factory
takes the session first: ``modules_panel(session, cfg=None, widget=None) -> Panel``.
"""

from __future__ import annotations

import functools
from typing import Any

from nbkit.panels import Panel
from nbkit.signatures import config as c
from nbkit.signatures import experiments as x


def _table(result) -> Any:
    return getattr(result, "table", None)


def _text(result) -> Any:
    from IPython.display import Pretty

    text = (getattr(result, "data", None) or {}).get("text")
    return Pretty(text[-6000:]) if text else None


def _panel(run, cfg, session, title, widget, show=_table) -> Panel:
    return Panel(cfg, functools.partial(run, session=session), title=title, widget=widget, show_result=show)


def token_limit_panel(session, cfg=None, widget=None) -> Panel:
    return _panel(x.run_token_limit, cfg or c.TokenLimitConfig(), session, "Does max_tokens reach the server?", widget)


def retrieval_panel(session, cfg=None, widget=None) -> Panel:
    return _panel(x.run_retrieval, cfg or c.RetrievalConfig(), session, "Retrievers, chosen on validation", widget)


def modules_panel(session, cfg=None, widget=None) -> Panel:
    return _panel(x.run_modules, cfg or c.ModulesConfig(), session, "Modules behind one signature", widget)


def contracts_panel(session, cfg=None, widget=None) -> Panel:
    return _panel(x.run_contracts, cfg or c.ContractsConfig(), session, "Contract failures per adapter", widget)


def compile_panel(session, cfg=None, widget=None) -> Panel:
    return _panel(x.run_compile, cfg or c.CompileConfig(), session, "Compiling and the colloquial mix", widget)


def ask_panel(session, cfg=None, widget=None) -> Panel:
    return _panel(x.run_ask, cfg or c.AskConfig(), session, "Ask the modules", widget)


def history_panel(session, cfg=None, widget=None) -> Panel:
    return _panel(x.run_history, cfg or c.HistoryConfig(), session, "LM call history (inspect_history)", widget, show=_text)


def user_contract_panel(session, cfg=None, widget=None) -> Panel:
    return _panel(x.run_user_contract, cfg or c.UserContractConfig(), session, "Your own contract", widget)
