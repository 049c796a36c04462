"""nbkit: the helper package behind the diagnostic workbook's notebooks.

Importing it is instant: theme packages (``nbkit.kg``, ``nbkit.zero``, ``nbkit.signatures``,
``nbkit.audit``, ``nbkit.pscheck``) import their heavy libraries inside functions.
"""

from nbkit.extras import require
from nbkit.record import record, recorded

__all__ = ["record", "recorded", "require", "__version__"]
__version__ = "0.1.0"
