"""Pruning building blocks.

* masks: ERK densities and random masks, global and layer-wise magnitude masks, prune-and-regrow,
  information loss of a mask;
* schedules: cubic sparsity, incremental regularisation lambda_t, decayed learning rate;
* snip: SNIP connection sensitivity;
* hooks: engine hooks for masked and straight-through (error feedback) training, layer-wise L2;
* synflow: data-free iterative SynFlow saliency, structured group scores and masks;
* supermask: sign / binary supermask transforms and their straight-through estimators.
"""

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
from .supermask import (
    binary_ste,
    bnn_sign_ste,
    classifier_layer,
    hard_sign,
    quantise,
    scaled_grads,
    sign_ste,
    supermask_transform,
)
from .synflow import (
    default_prunable,
    group_scores,
    resolve_layers,
    strict_keep,
    structural_masks,
    synflow_group_mask,
    synflow_scores,
    weight_fraction,
    weight_layers,
)

__all__ = [
    "DEFAULT_EXCLUDE",
    "LAMBDA_VARIANTS",
    "apply_mask",
    "binary_ste",
    "bnn_sign_ste",
    "check_lambda",
    "check_mask",
    "check_sparsity",
    "classifier_layer",
    "cubic_sparsity",
    "decayed_lr",
    "default_prunable",
    "erk_densities",
    "erk_mask",
    "global_magnitude_mask",
    "group_scores",
    "hard_sign",
    "incremental_lambda",
    "information_loss",
    "keep_counts",
    "layer_l2_penalty",
    "layerwise_magnitude_mask",
    "mask_grads",
    "mask_sparsity",
    "masked",
    "prunable_names",
    "prune_and_regrow",
    "quantise",
    "resolve_layers",
    "scaled_grads",
    "sign_ste",
    "snip_mask",
    "snip_scores",
    "straight_through",
    "strict_keep",
    "structural_masks",
    "supermask_transform",
    "synflow_group_mask",
    "synflow_scores",
    "weight_fraction",
    "weight_layers",
    "zero_fraction",
]
