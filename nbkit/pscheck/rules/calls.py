"""Which calls the default rules recognise: those whose value changes per call (a default computed
with one is frozen at import), those that build a callable, and builtins that build a value.
"""

from __future__ import annotations

import ast

from nbkit.pscheck.model import ModuleInfo

# Calls whose value changes between calls: computing a default with one freezes it at import.
VOLATILE_CALLS = frozenset(
    {
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
        "time.time",
        "time.time_ns",
        "time.monotonic",
        "time.perf_counter",
        "uuid.uuid1",
        "uuid.uuid4",
        "os.urandom",
        "os.getpid",
        "pendulum.now",
        "arrow.now",
        "arrow.utcnow",
    }
)
VOLATILE_PREFIXES = ("random.", "secrets.", "numpy.random.")
# Calls that build a *callable* (fine as default_factory=...()).
FACTORY_BUILDERS = frozenset(
    {
        "functools.partial",
        "partial",
        "operator.itemgetter",
        "operator.attrgetter",
        "operator.methodcaller",
        "itertools.count",
    }
)
VALUE_BUILTINS = frozenset(
    {
        "list",
        "dict",
        "set",
        "tuple",
        "frozenset",
        "str",
        "int",
        "float",
        "bool",
        "bytes",
        "object",
        "bytearray",
        "complex",
        "range",
    }
)


def call_qualname(node: ast.Call, module: ModuleInfo) -> str:
    """The called name as the module's imports spell it out (``datetime.datetime.now``), or ``""``."""
    return module.resolver.canonical(node.func) or ""
