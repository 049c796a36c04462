"""Optional pscheck rule plugins shipped with nbkit.

A plugin is a module exposing ``PSCHECK_RULES`` (a list of :class:`nbkit.pscheck.BaseRule`
subclasses) or a ``register(registry)`` function. Load one with ``pscheck --plugin MODULE`` or
advertise it in the ``nbkit.pscheck.rules`` entry-point group. See docs/pscheck.md.

* :mod:`nbkit.pscheck.plugins.created_at` — the field notes' example policy (PSP001).
"""
