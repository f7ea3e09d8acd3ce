"""Pruning building blocks: data-free SynFlow saliency with structured masks, supermasks."""
# ruff: noqa: F401  (re-exports)

from .supermask import (
    binary_ste,
    bnn_sign_ste,
    classifier_layer,
    hard_sign,
    quantise,  # noqa: F401
    scaled_grads,
    sign_ste,
    supermask_transform,
)
from .synflow import (
    default_prunable,
    group_scores,
    resolve_layers,
    strict_keep,  # noqa: F401
    structural_masks,
    synflow_group_mask,
    synflow_scores,
    weight_fraction,
    weight_layers,
)
