"""Fine-tune audit: 13 checks of the couplings that make LoRA/SFT runs silently go wrong.

Each check lives in one module (``lora``, ``tokens``, ``attention``, ``gradients``, ``dtypes``,
``data``, ``template``, ``sampling``, ``zero3``, ``schedulers``, ``fragmentation``, ``ddp``) and
returns a :class:`~nbkit.audit.findings.Finding`; ``runner.run_audit(config)`` runs what an
:class:`~nbkit.audit.config.AuditConfig` allows and ``nbkit audit CONFIG.yaml`` is the CLI.
Importing this package is instant: torch, transformers and peft load inside the checks.
"""

from nbkit.audit.config import AuditConfig, ConfigError, load_config
from nbkit.audit.findings import Finding

__all__ = ["AuditConfig", "ConfigError", "Finding", "load_config"]
