"""Fine-tune audit: eighteen checks of the couplings that make LoRA/SFT runs silently go wrong.

Each check is one module under ``nbkit.audit.checks`` registered by slug (``lora-binding``,
``grad-accumulation``, …) in ``nbkit.audit.registry.REGISTRY``, with its config dataclass beside it;
``registry.run_audit(ctx)`` runs what the context's :class:`~nbkit.audit.config.AuditConfig` allows
and ``nbkit audit CONFIG.yaml`` is the CLI. A notebook opens one
:class:`~nbkit.audit.context.AuditContext` and runs each check with ``experiments.show(slug, ctx)``.
Importing this package is quick: torch, transformers and peft load inside the checks.
"""

from nbkit.audit.config import AuditConfig, ConfigError, load_config

__all__ = ["AuditConfig", "ConfigError", "load_config"]
