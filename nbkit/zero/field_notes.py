"""The field notes' ZeRO and speculative-decoding figures and sections, written once: the claims judge
against them ("KISS audit" is the notes' second part). Their ``ds_config`` and its launch line are kept
verbatim in :mod:`nbkit.zero.dsconfig`, which explains them key by key; their figures are read there."""

from __future__ import annotations

from nbkit.zero.dsconfig import FIELD_NOTES_CLI, FIELD_NOTES_DS_CONFIG

# §2.2: Llama-2-7B on 8 A100 80 GB cards; per-card peak 78 GB under DDP, 52 GB with ZeRO-1, "another
# 10 GB" less with ZeRO-2, about 32 GB with ZeRO-3; Adam's states about 28 GB; ZeRO-3 keeps 1/8 of the
# parameters (14 GB), gradients and optimizer states per card: 1.75 GB of parameters
MEMORY_SECTION = "§2.2"
CARDS = FIELD_NOTES_CLI["world_size"]
PEAK_STAGE0_GB = 78.0
PEAK_STAGE1_GB = 52.0
STAGE2_DROP_GB = 10.0
PEAK_STAGE3_GB = 32.0
OPTIMIZER_GB = 28.0
STAGE3_PARAMS_GB = 1.75
# §3.2: the ds_config (train_batch_size 128, sub_group_size 1e9, persistence threshold 1e4: tensors under
# 10,000 elements stay whole on the card) and its launch line (micro-batch 2, accumulation 4, 8 GPUs)
CONFIG_SECTION = "§3.2"
TRAIN_BATCH_SIZE = FIELD_NOTES_DS_CONFIG["train_batch_size"]
MICRO_BATCH = FIELD_NOTES_CLI["micro_batch"]
PERSISTENCE_THRESHOLD = FIELD_NOTES_DS_CONFIG["zero_optimization"]["stage3_param_persistence_threshold"]
# §3.2 step 3: speculative decoding (Medusa heads on Llama-2-7B, A100) 32 → 58 tokens/s; about 7 % of
# requests fall back (the draft rejected)
SPECDEC_SECTION = "§3.2 step 3"
TOKENS_S_BEFORE, TOKENS_S_AFTER = 32.0, 58.0
FALLBACK_SHARE = 0.07
# §4.2: ZeRO-3's silent failures: scene 1 a rank killed by the OOM killer, scene 2 replicas whose loss
# differs per card without an error, scene 3 fp16 overflow, scene 4 an inconsistent checkpoint
OOM_KILL_SECTION = "§4.2 scene 1"
REPLICAS_SECTION = "§4.2 scene 2"
FP16_SECTION = "§4.2 scene 3"
CHECKPOINT_SECTION = "§4.2 scene 4"
# KISS audit §4.3: checkpointing every 50 steps, gap ratio 0.42 and 37 % OOM; every 200 steps, 0.18 and 4 %
FRAGMENTATION_SECTION = "KISS audit §4.3"
GAP_EVERY_50, GAP_EVERY_200 = 0.42, 0.18
