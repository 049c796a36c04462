"""The audit's checks: one module per check, each ending with its :class:`~nbkit.audit.check.Check`.

A module holds what its check is about (the measurements), the check's config dataclass (widget
metadata on its fields, ``smoke()``, ``audit_values``), its frozen metrics dataclass and ``finding``;
``nbkit.audit.experiments`` registers every module's ``CHECK`` in the audit's ``REGISTRY``.
"""
