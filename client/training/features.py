"""A model's input from the stored node features: their width, the float32 rows the model reads (per
node type on a typed graph), and the labels of a batch's output nodes."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch


def feature_width(features) -> int:
    """A node's input width: the product of a feature tensor's per-node dimensions.

    Args:
        features: a ``DistTensor`` (or tensor) of shape ``[num_nodes, ...]``.

    Returns:
        The width.
    """
    return int(math.prod(features.shape[1:]))


def prepare_features(
    raw: torch.Tensor, feat_norm: str = "none", dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Stored features (float32 / float16 / bfloat16) -> the model's input in ``dtype`` (float32, or the
    AMP type when the loader delivers the features in it), L1-normalized per row with ``feat_norm='row'``
    (what DGL's citation datasets apply to their 0/1 word vectors).

    Args:
        raw: the pulled feature rows.
        feat_norm: ``none`` or ``row``.
        dtype: the model's input type.

    Returns:
        Rows in ``dtype``.

    Raises:
        ValueError: an unknown ``feat_norm``.
    """
    x = raw if raw.dtype == dtype else raw.to(dtype)
    if feat_norm == "row":
        x = x / x.abs().sum(dim=-1, keepdim=True).clamp(min=1e-12)
    elif feat_norm != "none":
        raise ValueError(f"feat_norm must be none or row, got {feat_norm!r}")
    return x


def model_input(raw, feat_norm: str = "none", dtype: torch.dtype = torch.float32):
    """:func:`prepare_features` of a batch's pulled features: one tensor, or ``{ntype: tensor}``."""
    if isinstance(raw, Mapping):
        return {ntype: prepare_features(rows, feat_norm, dtype) for ntype, rows in raw.items()}
    return prepare_features(raw, feat_norm, dtype)


def nbytes(raw) -> int:
    """Bytes of pulled rows: one tensor, or ``{ntype: tensor}``."""
    tensors = raw.values() if isinstance(raw, Mapping) else [raw]
    return sum(t.numel() * t.element_size() for t in tensors)


def batch_labels(block, label_name: str, target_ntype: str | None = None) -> torch.Tensor:
    """The labels of a batch's output nodes (of ``target_ntype`` on a typed graph), one per node.

    Args:
        block: the batch's last block (the loader put the labels in its destination frames).
        label_name: the label's node data name.
        target_ntype: the classified node type (None: a homogeneous graph).
    """
    frame = block.dstdata if target_ntype is None else block.dstnodes[target_ntype].data
    return frame[label_name].reshape(-1)
