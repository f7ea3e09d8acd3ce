"""Pruning building blocks: masks (ERK, magnitude, prune-and-regrow), schedules (cubic sparsity,
incremental lambda), SNIP scores, and the engine hooks for masked and straight-through training."""

from .hooks import layer_l2_penalty, mask_grads, masked, straight_through
from .masks import (
    DEFAULT_EXCLUDE,
    apply_mask,
    check_mask,
    check_sparsity,
    erk_densities,
    erk_mask,
    global_magnitude_mask,
    information_loss,
    keep_counts,
    layerwise_magnitude_mask,
    mask_sparsity,
    prunable_names,
    prune_and_regrow,
    zero_fraction,
)
from .schedules import LAMBDA_VARIANTS, check_lambda, cubic_sparsity, decayed_lr, incremental_lambda
from .snip import snip_mask, snip_scores
