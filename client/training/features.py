"""A model's input from the stored node features: their width, and the float32 rows the model reads."""

from __future__ import annotations

import math

import torch


def feature_width(features) -> int:
    """A node's input width: the product of a feature tensor's per-node dimensions.

    Args:
        features: a ``DistTensor`` (or tensor) of shape ``[num_nodes, ...]``.

    Returns:
        The width.
    """
    return int(math.prod(features.shape[1:]))


def prepare_features(raw: torch.Tensor, feat_norm: str = "none") -> torch.Tensor:
    """Stored features (float32 / float16 / bfloat16) -> the model's float32 input, L1-normalized per
    row with ``feat_norm='row'`` (what DGL's citation datasets apply to their 0/1 word vectors).

    Args:
        raw: the pulled feature rows.
        feat_norm: ``none`` or ``row``.

    Returns:
        float32 rows.

    Raises:
        ValueError: an unknown ``feat_norm``.
    """
    x = raw.float()
    if feat_norm == "row":
        x = x / x.abs().sum(dim=-1, keepdim=True).clamp(min=1e-12)
    elif feat_norm != "none":
        raise ValueError(f"feat_norm must be none or row, got {feat_norm!r}")
    return x
