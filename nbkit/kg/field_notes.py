"""The field notes' KG figures, written once: the claims judge against them and the figures draw them."""

from __future__ import annotations

# §2.1: validation AUC without and with explicit reverse (r_inv) relations
REVERSE_AUC_BEFORE = 0.53
REVERSE_AUC_AFTER = 0.79
# §3.1: node embeddings -> logistic regression, 5-fold macro-F1
DOWNSTREAM_F1 = 0.82
