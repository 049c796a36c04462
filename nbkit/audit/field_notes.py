"""The field notes' fine-tuning figures and sections (a write-up of DeepSeek fine-tuning failures, numbered
as they number them), written once: the claims judge against them. Each figure is the notes' own."""

from __future__ import annotations

# §1, the KISS table: q/v rank-8 LoRA against q/v/o rank-64 ("3.2× the trainable parameters") — trainable
# share, validation-loss convergence steps, A100 memory
KISS_SECTION, KISS_SHARE_PCT, OVER_SHARE_PCT, PARAM_RATIO = "§1", 0.12, 0.87, 3.2
KISS_STEPS, OVER_STEPS, PEAK_KISS_GB, PEAK_OVER_GB = 890, 2140, 28.1, 42.3
BINDING_SECTION = "§2.1"  # the two shape asserts, and W = W0 + α·ΔW
# §2.2: boundary F1 of span labels after Chinese tokenisation, misaligned (94.1 aligned)
LABELS_SECTION, ZH_F1_PCT = "§2.2", 71.3
# §2.3: FlashAttention-2's throughput over naive attention on DeepSeek-R1's 32K context
FLASH_SECTION, FLASH_SPEEDUP = "§2.3", 3.8
SQRT_L_SECTION, SQRT_L_EXPONENT = "§2.4", -0.5  # accumulation scaled by √L keeps the variance constant
# §2.5: baddbmm runs in float32; index_add_ keeps bf16 (their table) and "implicitly promotes to float32"
# (their prose); index_copy_ recasts another dtype's source; the KV cache's undeclared transition
DTYPES_SECTION = "§2.5"
# §3.1 lax parsing coerces "42"; §3.2 len(input_ids) == len(labels) and the non -100 positions are
# exactly the target tokens'; §4.2 SequentialLR's warmup in the first stage only; §4.4 an evaluation
# without no_grad triggers all-reduce and pollutes the gradient state
SCHEMA_SECTION, MASK_SECTION, SCHEDULER_SECTION, EVAL_SECTION = "§3.1", "§3.2", "§4.2", "§4.4"
# §3.3: KL > 0.18 flags a significant shift, a CI shrink > 42 % over-fitting; kurtosis 2.1 → 5.7
REWARD_SECTION, KL_THRESHOLD, SHRINK_THRESHOLD = "§3.3", 0.18, 0.42
KURTOSIS_COLD, KURTOSIS_CONCENTRATED = 2.1, 5.7
