"""The field notes' DSPy figures and sections, written once: the claims judge against them (the notes' §2.3,
§4.3; each section's words as the notes give them, in the comment above it)."""

from __future__ import annotations

# §2.3: any Module that keeps MedicalDiagnosis's input/output contract can replace another seamlessly
# ("所有这些Module只要遵守MedicalDiagnosis的输入输出契约就能无缝替换"): no figure
MODULES_SECTION = "§2.3"
# §2.3: a length bound written in the prompt ("不超过100字") cannot be enforced on an LLM's output
PROMPT_BOUNDS_SECTION = "§2.3"
PROMPT_BOUND = "不超过100字"
# §4.3 坑2: the signature asks for "confidence: 0.8" and the model keeps answering "high"
CONFIDENCE_SECTION = "§4.3 坑2"
# §4.3 坑1: compiled with BootstrapFewShot on standard questions only, F1 0.92 on the test set and 0.65 on
# real users' (colloquial) questions; the remedy: force 10 % non-standard questions into the examples, and
# FewShotWithRandomSearch instead of the default compiler
COMPILE_SECTION = "§4.3 坑1"
STANDARD_F1, COLLOQUIAL_F1 = 0.92, 0.65
COLLOQUIAL_SHARE = 0.10
