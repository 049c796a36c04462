"""Fine-tune audit: eighteen checks of the couplings that make LoRA/SFT runs silently go wrong.

Each check is one module under ``nbkit.audit.checks`` registered by slug (``lora-binding``,
``grad-accumulation``, …) in ``nbkit.audit.experiments.REGISTRY``, with its config dataclass beside it;
``experiments.run_audit(config)`` runs what an :class:`~nbkit.audit.config.AuditConfig` allows and
``nbkit audit CONFIG.yaml`` is the CLI. Importing this package is quick: torch, transformers and
peft load inside the checks.
"""

from nbkit.audit.config import AuditConfig, ConfigError, load_config

__all__ = ["AuditConfig", "ConfigError", "load_config"]
