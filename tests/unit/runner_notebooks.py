"""Small generated notebooks for the runner, sweep and CLI tests (a kernel starts in ~2 s)."""

from __future__ import annotations

import nbformat

PARAMETERS = (
    "SMOKE = False\n"
    "DEVICE = 'auto'\n"
    "SEED = 0\n"
    "N = 3  # items; range: 1..100\n"
    "RATE = 0.5\n"
    "DATASET = 'alpha'  # choices: alpha, beta, <path>\n"
)

# Records a metric, the claims ledger and a headline; touches ran.txt so a test can tell it ran.
RECORDING = """
import pathlib
import nbkit
from nbkit.claims import Claim
pathlib.Path('ran.txt').write_text('ran')
nbkit.record('n_squared', N * N)
nbkit.record('rate', RATE)
nbkit.record('dataset', DATASET)
nbkit.record('headline', {'n squared': N * N, 'rate': RATE})
nbkit.record('claims', [
    Claim(claim='N squared is at least 4', field_note='≥ 4', measured=str(N * N),
          verdict='holds' if N * N >= 4 else 'refuted',
          rule='N*N ≥ 4 exactly', n='1 computation', why=f'{N * N} vs 4'),
    Claim(claim='rate is a half', field_note='0.5', measured=str(RATE),
          verdict='holds' if RATE == 0.5 else 'inconclusive',
          rule='RATE == 0.5', n='1 value', why='as given'),
])
"""


# A theme in one cell: two experiments, the second its summary; each run returns a finished figure of N
# points; the headline numbers carry their tolerances; one exact claim on b's total (RATE moves it).
THEME = """
from dataclasses import dataclass
import plotly.graph_objects as go
import nbkit
from nbkit.claims import ARITHMETIC, ClaimSpec, HeadlineSpec, Reading, exact_at_least
from nbkit.experiment import Context, Experiment, Registry, Result, param

@dataclass
class Cfg:
    n: int = param(3, min=1, max=100)
    rate: float = param(0.5, min=0.0, max=1.0)

    @classmethod
    def smoke(cls):
        return cls()

@dataclass(frozen=True)
class Met:
    total: float

def _run(title):
    def run(cfg, ctx, live):
        ys = [cfg.rate * (i + 1) for i in range(cfg.n)]
        fig = go.Figure(go.Scatter(x=list(range(cfg.n)), y=ys, name=title), layout={"title": title})
        return Result(Met(sum(ys)), figure=fig)
    return run

REG = Registry("toy", summary="b")
REG.register(Experiment("a", "experiment a", Cfg, Met, _run("a curve")))
REG.register(Experiment("b", "experiment b", Cfg, Met, _run("b curve")))
REG.headline_number(HeadlineSpec("total of b", "total of b", ("b",), lambda b: b.total, tolerance=0.1))
REG.headline_number(
    HeadlineSpec("total of a", "total of a", ("a",), lambda a: a.total, tolerance=0.05, relative=True)
)
REG.claim(ClaimSpec(
    key="b_total", claim="b's points sum to at least 2", source="toy", field_note="2", kind=ARITHMETIC,
    reads=("b",), read=lambda b: Reading(b.total, f"{b.total:g}", "1 sum"),
    rule=exact_at_least(2.0, "b's total"),
))
ctx = Context("cpu", smoke=SMOKE)
REG.show("a", ctx, n=N)
REG.show("b", ctx, n=N, rate=RATE)
REG.headline(ctx)
REG.judge(ctx)
"""


def make_notebook(path, body: str = RECORDING, parameters: str = PARAMETERS):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        nbformat.v4.new_markdown_cell("# t\n\n## Section one"),
        params,
        nbformat.v4.new_code_cell(body),
    ]
    nbformat.write(nb, path)
    return path
