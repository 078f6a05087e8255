"""Relational graph convolution (R-GCN, Schlichtkrull et al., 2018) and its typed linear map.

:class:`RelGraphConv` has DGL's two forms: on a typed block with ``{ntype: features}`` (one relation per
canonical edge type: ``h'_v = sum_r W_r mean_{u in N_r(v)} h_u + W_0 h_v``, R-GCN's ``1 / c_{v,r}``
normalization), and DGL's homogeneous form ``forward(g, feat, etypes, norm)`` over a one-type block whose
edges carry a relation ID each (``h'_v = sum_{(u,v)} norm_e W_{r(e)} h_u + W_0 h_v``). The relation
weights ``W_r`` are a full tensor, a combination of ``num_bases`` shared bases (``'basis'``), or block
diagonal with ``num_bases`` blocks (``'bdd'``) (:class:`TypedLinear`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn

from graphstore.client.graph_ops import scatter_sum
from graphstore.client.nn.functional import aggregate_sum, split_features

REGULARIZERS = (None, "basis", "bdd")


class TypedLinear(nn.Module):
    """A linear map per type (DGL's ``TypedLinear``), optionally decomposed.

    Args:
        in_size, out_size: widths.
        num_types: number of types.
        regularizer: None (a weight per type), ``'basis'`` (``W_t = sum_b a_tb V_b``) or ``'bdd'`` (block
            diagonal ``W_t`` of ``num_bases`` blocks).
        num_bases: number of bases or blocks (default: ``num_types`` for ``'basis'``).

    Raises:
        ValueError: an unknown regularizer, non-positive sizes, or ``'bdd'`` blocks that do not divide
            the widths.
    """

    def __init__(
        self,
        in_size: int,
        out_size: int,
        num_types: int,
        regularizer: str | None = None,
        num_bases: int | None = None,
    ):
        super().__init__()
        if regularizer not in REGULARIZERS:
            raise ValueError(f"regularizer must be one of {REGULARIZERS}, got {regularizer!r}")
        for name, value in (("in_size", in_size), ("out_size", out_size), ("num_types", num_types)):
            if int(value) < 1:
                raise ValueError(f"{name} must be positive, got {value}")
        self.in_size, self.out_size, self.num_types = int(in_size), int(out_size), int(num_types)
        self.regularizer = regularizer
        if regularizer == "basis":
            self.num_bases = min(int(num_bases or num_types), self.num_types)
            self.W = nn.Parameter(torch.empty(self.num_bases, self.in_size, self.out_size))
            self.coeff = nn.Parameter(torch.empty(self.num_types, self.num_bases))
        elif regularizer == "bdd":
            self.num_bases = int(num_bases or 0)
            if self.num_bases < 1 or self.in_size % self.num_bases or self.out_size % self.num_bases:
                raise ValueError(
                    f"'bdd' needs num_bases dividing in_size ({in_size}) and out_size ({out_size}), "
                    f"got {num_bases}"
                )
            block_in, block_out = self.in_size // self.num_bases, self.out_size // self.num_bases
            self.W = nn.Parameter(torch.empty(self.num_types, self.num_bases, block_in, block_out))
        else:
            self.num_bases = None
            self.W = nn.Parameter(torch.empty(self.num_types, self.in_size, self.out_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weights (ReLU gain), as DGL."""
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_uniform_(self.W, gain=gain)
        if self.regularizer == "basis":
            nn.init.xavier_uniform_(self.coeff, gain=gain)

    def apply_type(self, x: torch.Tensor, type_id: int) -> torch.Tensor:
        """``x @ W_type``: ``[N, in_size]`` -> ``[N, out_size]``."""
        if self.regularizer == "bdd":
            blocks = x.reshape(x.shape[0], self.num_bases, self.in_size // self.num_bases)
            return torch.einsum("nbi,bio->nbo", blocks, self.W[type_id]).reshape(x.shape[0], self.out_size)
        weight = (
            self.W[type_id]
            if self.regularizer is None
            else torch.einsum("b,bio->io", self.coeff[type_id], self.W)
        )
        return x @ weight

    def forward(self, x: torch.Tensor, x_type) -> torch.Tensor:
        """Each row through its type's map.

        Args:
            x: ``[N, in_size]``.
            x_type: one type ID for every row, or ``[N]`` type IDs.

        Returns:
            ``[N, out_size]``.
        """
        if isinstance(x_type, int):
            return self.apply_type(x, x_type)
        out = x.new_zeros(x.shape[0], self.out_size)
        for type_id in torch.unique(x_type).tolist():
            rows = torch.nonzero(x_type == type_id, as_tuple=True)[0]
            out[rows] = self.apply_type(x[rows], int(type_id))
        return out

    def extra_repr(self) -> str:
        return (
            f"in_size={self.in_size}, out_size={self.out_size}, num_types={self.num_types}, "
            f"regularizer={self.regularizer!r}, num_bases={self.num_bases}"
        )


class RelGraphConv(nn.Module):
    """Relational graph convolution over blocks.

    Args:
        in_feat, out_feat: widths (every node type's input has ``in_feat`` columns).
        num_rels: number of relations (a typed block's canonical edge types, in type-ID order).
        regularizer: None, ``'basis'`` or ``'bdd'`` (see :class:`TypedLinear`).
        num_bases: bases / blocks of the decomposition.
        bias: add a learned bias.
        activation: optional callable applied to the output.
        self_loop: add ``W_0 h_v`` of each destination node's own input.
        dropout: dropout on the output.
        layer_norm: layer normalization of the output (before the activation).

    Raises:
        ValueError: see :class:`TypedLinear`.
    """

    def __init__(
        self,
        in_feat: int,
        out_feat: int,
        num_rels: int,
        regularizer: str | None = None,
        num_bases: int | None = None,
        bias: bool = True,
        activation: Callable | None = None,
        self_loop: bool = True,
        dropout: float = 0.0,
        layer_norm: bool = False,
    ):
        super().__init__()
        self.linear_r = TypedLinear(in_feat, out_feat, num_rels, regularizer, num_bases)
        self.num_rels = int(num_rels)
        self.out_feat = int(out_feat)
        self.activation = activation
        self.h_bias = nn.Parameter(torch.zeros(out_feat)) if bias else None
        self.loop_weight = None
        if self_loop:
            self.loop_weight = nn.Parameter(torch.empty(in_feat, out_feat))
            nn.init.xavier_uniform_(self.loop_weight, gain=nn.init.calculate_gain("relu"))
        self.layer_norm = nn.LayerNorm(out_feat, elementwise_affine=True) if layer_norm else None
        self.dropout = nn.Dropout(dropout)

    def _finish(self, h: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        if self.loop_weight is not None:
            h = h + h_dst @ self.loop_weight
        if self.h_bias is not None:
            h = h + self.h_bias
        if self.layer_norm is not None:
            h = self.layer_norm(h)
        if self.activation is not None:
            h = self.activation(h)
        return self.dropout(h)

    def forward(self, g, feat, etypes=None, norm: torch.Tensor | None = None):
        """New features of the destination nodes.

        Args:
            g: a typed block (with ``feat`` a dict) or a one-type block / graph (with ``etypes``).
            feat: ``{ntype: [num_src_nodes(ntype), in_feat]}`` (destination rows first), or one tensor
                (or ``(h_src, h_dst)``) for the one-type form.
            etypes: the one-type form's relation ID per edge (``[E]`` int64).
            norm: the one-type form's optional ``[E, 1]`` edge normalizer.

        Returns:
            ``{dst type: [num_dst_nodes(type), out_feat]}`` for each destination type with input rows,
            or one tensor in the one-type form.

        Raises:
            ValueError: a typed block whose number of edge types is not ``num_rels``, or the one-type
                form without ``etypes``.
        """
        if isinstance(feat, Mapping):
            return self._forward_typed(g, feat)
        if etypes is None:
            raise ValueError("RelGraphConv on a one-type graph needs etypes (the relation ID of each edge)")
        h_src, h_dst = split_features(g, feat)
        src, dst = g.edges()
        messages = self.linear_r(h_src[src], etypes)
        if norm is not None:
            messages = messages * norm.reshape(-1, 1)
        h = scatter_sum(messages, dst, g.num_dst_nodes()).to(h_src.dtype)
        return self._finish(h, h_dst)

    def _forward_typed(self, g, feat: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        canonical_etypes = g.canonical_etypes
        if len(canonical_etypes) != self.num_rels:
            raise ValueError(f"RelGraphConv has {self.num_rels} relations, the block {len(canonical_etypes)}")
        h_dst = {t: feat[t][: g.num_dst_nodes(t)] for t in g.dsttypes if t in feat}
        summed: dict[str, torch.Tensor] = {}
        for rel_id, canonical in enumerate(canonical_etypes):
            src_type, _, dst_type = canonical
            if src_type not in feat:
                continue
            relation = g[canonical]
            # Every relation runs, edges or not, so every weight takes part in every step (DDP).
            aggregated = aggregate_sum(relation, feat[src_type])
            degrees = relation.in_degrees().to(aggregated.dtype).clamp(min=1).unsqueeze(-1)
            message = self.linear_r.apply_type((aggregated / degrees).to(feat[src_type].dtype), rel_id)
            summed[dst_type] = summed[dst_type] + message if dst_type in summed else message
        out = {}
        for ntype, h in h_dst.items():
            base = summed.get(ntype)
            if base is None:
                base = h.new_zeros(h.shape[0], self.out_feat)
            out[ntype] = self._finish(base, h)
        return out
