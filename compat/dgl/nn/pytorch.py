"""``dgl.nn.pytorch``: the GNN layers over blocks, typed blocks and pair graphs, with DGL 2.x's names,
signatures and parameter names (implemented in :mod:`graphstore.client.nn`).

- ``SAGEConv``, ``GATConv``, ``GraphConv`` on a one-type block or pair graph, or on one relation of a
  typed block through ``HeteroGraphConv``;
- ``HeteroGraphConv(mods, aggregate)``: a module per relation, outputs aggregated per destination type;
- ``RelGraphConv``, ``TypedLinear``, ``WeightBasis``, ``HeteroLinear``, ``HeteroEmbedding``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from graphstore.client import nn as client_nn
from graphstore.client.nn import GATConv, GraphConv, HeteroEmbedding, HeteroLinear, SAGEConv, WeightBasis


class HeteroGraphConv(client_nn.HeteroGraphConv):
    """``HeteroGraphConv(mods, aggregate='sum')``: ``mods`` is ``{etype: module}`` (a name serves every
    canonical type of that name), ``aggregate`` one of ``'sum'``, ``'max'``, ``'min'``, ``'mean'``,
    ``'stack'`` or a callable ``(outputs, dst_type) -> tensor``.

    As in DGL, a destination node that a relation does not reach is not an error for that relation's
    module: every module with ``set_allow_zero_in_degree`` gets ``True`` (a relation of a typed block
    leaves most destination nodes without in-edges). ``forward(g, inputs, mod_args=None,
    mod_kwargs=None)``: ``mod_args`` / ``mod_kwargs`` are keyed by edge type name, e.g.
    ``mod_kwargs={rel: {"weight": w}}`` for ``GraphConv(weight=False)`` modules.

    Raises:
        ValueError: an unknown ``aggregate`` or no module.
    """

    def __init__(self, mods: Mapping, aggregate: str | Callable = "sum"):
        super().__init__(mods, aggregate)
        for module in self.mods.values():
            allow = getattr(module, "set_allow_zero_in_degree", None)
            if callable(allow):
                allow(True)


class TypedLinear(client_nn.TypedLinear):
    """``TypedLinear(in_size, out_size, num_types, regularizer=None, num_bases=None)``: a linear map per
    type, full, ``'basis'``-decomposed or ``'bdd'`` (block diagonal); see
    :class:`graphstore.client.nn.TypedLinear`."""

    def forward(self, x: torch.Tensor, x_type, sorted_by_type: bool = False) -> torch.Tensor:
        """Each row of ``x`` through its type's map.

        Args:
            x: ``[N, in_size]``.
            x_type: ``[N]`` type IDs.
            sorted_by_type: DGL's hint that ``x_type`` is sorted; the result is the same either way.

        Returns:
            ``[N, out_size]``.
        """
        return super().forward(x, x_type)


class RelGraphConv(client_nn.RelGraphConv):
    """``RelGraphConv(in_feat, out_feat, num_rels, regularizer=None, num_bases=None, bias=True,
    activation=None, self_loop=True, dropout=0.0, layer_norm=False)``; see
    :class:`graphstore.client.nn.RelGraphConv` (DGL's one-type form, and ``{ntype: feat}``
    on a typed block)."""

    def forward(self, g, feat, etypes, norm: torch.Tensor | None = None, *, presorted: bool = False):
        """New destination features: ``forward(g, feat, etypes, norm=None, *, presorted=False)``.

        Args:
            g: a one-type block or graph (DGL's form), or a typed block with ``feat`` a dict.
            feat: source features (destination rows first), or ``{ntype: features}`` on a typed block.
            etypes: ``[E]`` relation ID of each edge (ignored on a typed block: its edge types are
                the relations, in type-ID order).
            norm: optional ``[E, 1]`` edge normalizer.
            presorted: DGL's hint that the edges are sorted by relation; the result is the same.

        Returns:
            ``[num_dst_nodes, out_feat]``, or ``{dst type: ...}`` on a typed block.
        """
        return super().forward(g, feat, etypes, norm)


__all__ = [
    "GATConv",
    "GraphConv",
    "HeteroEmbedding",
    "HeteroGraphConv",
    "HeteroLinear",
    "RelGraphConv",
    "SAGEConv",
    "TypedLinear",
    "WeightBasis",
]
