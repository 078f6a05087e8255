"""``HeteroGraphConv``: one homogeneous layer per relation of a typed block, their outputs aggregated per
destination node type (DGL's ``dgl.nn.HeteroGraphConv``).

Each relation's module runs on ``block[canonical_etype]``, a one-type block whose source and destination
nodes are those of the relation's two types (:class:`~graphstore.client.block.Block`), with the
``(h_src, h_dst)`` pair of those types, so :class:`~graphstore.client.nn.SAGEConv`,
:class:`~graphstore.client.nn.GATConv` or any layer with their ``(graph, feat)`` signature serves as
a relation's module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn

from graphstore.types import etype_key

AGGREGATES = ("sum", "max", "min", "mean", "stack")


def aggregate_outputs(outputs: list[torch.Tensor], how: str) -> torch.Tensor:
    """Combine the outputs of several relations for one destination type.

    Args:
        outputs: one tensor per relation, of equal shapes.
        how: ``'sum'``, ``'max'``, ``'min'``, ``'mean'`` or ``'stack'`` (a new dimension 1, one slice per
            relation in type-ID order).

    Returns:
        The combined tensor.
    """
    if how == "stack":
        return torch.stack(outputs, dim=1)
    stacked = torch.stack(outputs, dim=0)
    if how == "sum":
        return stacked.sum(dim=0)
    if how == "mean":
        return stacked.mean(dim=0)
    return stacked.amax(dim=0) if how == "max" else stacked.amin(dim=0)


class HeteroGraphConv(nn.Module):
    """A homogeneous layer per relation, outputs aggregated per destination node type.

    Args:
        mods: ``{etype: module}``; an edge type name serves every canonical type of that name, a
            canonical triple (or ``"src:etype:dst"``) one type.
        aggregate: ``'sum'``, ``'max'``, ``'min'``, ``'mean'``, ``'stack'``, or a callable
            ``(outputs, dst_type) -> tensor``.

    Raises:
        ValueError: an unknown ``aggregate`` or no module.
    """

    def __init__(self, mods: Mapping, aggregate: str | Callable = "sum"):
        super().__init__()
        if not mods:
            raise ValueError("HeteroGraphConv needs at least one module")
        if not callable(aggregate) and aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES} or a callable, got {aggregate!r}")
        self.mods = nn.ModuleDict(
            {etype_key(key) if isinstance(key, tuple) else str(key): module for key, module in mods.items()}
        )
        self.aggregate = aggregate

    def _module(self, canonical) -> nn.Module | None:
        key = etype_key(canonical)
        if key in self.mods:
            return self.mods[key]
        return self.mods[canonical[1]] if canonical[1] in self.mods else None

    def forward(self, g, inputs, mod_args: Mapping | None = None, mod_kwargs: Mapping | None = None):
        """Run each relation's module and aggregate per destination type.

        Args:
            g: a typed block (or pair graph).
            inputs: ``{ntype: features}`` of the source nodes (destination nodes first, as blocks keep
                them), or a ``(src_inputs, dst_inputs)`` pair of such dicts.
            mod_args, mod_kwargs: ``{etype name: args / kwargs}`` passed on to that relation's module.

        Returns:
            ``{dst type: tensor}`` for every destination type some relation with edges reached.

        Raises:
            KeyError: a relation with edges and inputs but no module.
        """
        mod_args, mod_kwargs = mod_args or {}, mod_kwargs or {}
        if isinstance(inputs, tuple):
            src_inputs, dst_inputs = inputs
        elif getattr(g, "is_block", False):
            src_inputs = inputs
            dst_inputs = {t: h[: g.num_dst_nodes(t)] for t, h in inputs.items() if t in g.dsttypes}
        else:
            src_inputs = dst_inputs = inputs
        outputs: dict[str, list[torch.Tensor]] = {}
        for canonical in g.canonical_etypes:
            src_type, etype, dst_type = canonical
            relation = g[canonical]
            if relation.num_edges() == 0 or src_type not in src_inputs or dst_type not in dst_inputs:
                continue
            module = self._module(canonical)
            if module is None:
                raise KeyError(f"HeteroGraphConv has no module for edge type {etype_key(canonical)}")
            out = module(
                relation,
                (src_inputs[src_type], dst_inputs[dst_type]),
                *mod_args.get(etype, ()),
                **mod_kwargs.get(etype, {}),
            )
            outputs.setdefault(dst_type, []).append(out)
        if callable(self.aggregate):
            return {t: self.aggregate(outs, t) for t, outs in outputs.items()}
        return {t: aggregate_outputs(outs, self.aggregate) for t, outs in outputs.items()}
