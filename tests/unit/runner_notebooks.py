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
