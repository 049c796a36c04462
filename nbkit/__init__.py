"""nbkit: the helper package behind the diagnostic workbook's notebooks.

Importing it is instant: theme packages (``nbkit.kg``, ``nbkit.zero``, ``nbkit.signatures``,
``nbkit.audit``, ``nbkit.pscheck``) import their heavy libraries inside functions, and ``nbkit.start``
(notebook 00's tables, reached as ``nbkit.start.…`` after ``import nbkit``) imports pandas and
nbformat only when a table is built.
"""

from nbkit import start
from nbkit.extras import require
from nbkit.params import check_parameters
from nbkit.record import record, recorded

__all__ = ["check_parameters", "record", "recorded", "require", "start", "__version__"]
__version__ = "0.1.0"
