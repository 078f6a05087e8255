"""Per-type parameter layers of relational models, with DGL 2.x's names and parameter names:
``WeightBasis`` (per-relation weights combined from a few shared bases, R-GCN's basis decomposition),
``HeteroLinear`` (a linear map per node type) and ``HeteroEmbedding`` (a dense embedding table per node
type, for the featureless types of a graph small enough to keep them on the trainer).

They hold no graph: a relational layer (``HeteroGraphConv`` of ``GraphConv(weight=False)``) takes the
weights :class:`WeightBasis` makes through ``mod_kwargs``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn


def _type_key(key) -> str:
    """A ``ModuleDict`` / ``ParameterDict`` key for a type: the name, or ``str`` of a canonical triple."""
    return key if isinstance(key, str) else str(tuple(key))


class WeightBasis(nn.Module):
    """``num_outputs`` weights of one ``shape``, each a learned combination of ``num_bases`` bases.

    ``forward()`` returns ``[num_outputs, *shape]``: output ``r`` is ``sum_b w_comp[r, b] * weight[b]``.

    Args:
        shape: the shape of one weight (e.g. ``(in_feat, out_feat)``).
        num_bases: number of shared bases.
        num_outputs: number of weights made (e.g. one per relation).

    Raises:
        ValueError: a non-positive size.
    """

    def __init__(self, shape, num_bases: int, num_outputs: int):
        super().__init__()
        self.shape = tuple(int(s) for s in shape)
        if not self.shape or min(self.shape) < 1:
            raise ValueError(f"shape must be positive sizes, got {shape}")
        for name, value in (("num_bases", num_bases), ("num_outputs", num_outputs)):
            if int(value) < 1:
                raise ValueError(f"{name} must be positive, got {value}")
        self.num_bases, self.num_outputs = int(num_bases), int(num_outputs)
        self.weight = nn.Parameter(torch.empty(self.num_bases, *self.shape))
        self.w_comp = nn.Parameter(torch.empty(self.num_outputs, self.num_bases))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform bases and coefficients (ReLU gain)."""
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_uniform_(self.weight, gain=gain)
        nn.init.xavier_uniform_(self.w_comp, gain=gain)

    def forward(self) -> torch.Tensor:
        """The ``[num_outputs, *shape]`` weights."""
        combined = self.w_comp @ self.weight.reshape(self.num_bases, -1)
        return combined.reshape(self.num_outputs, *self.shape)


class HeteroLinear(nn.Module):
    """A linear map per type: ``{type: [N_t, in_size[t]]}`` to ``{type: [N_t, out_size]}``.

    Args:
        in_size: ``{type: input width}`` (a type is a node type name or a canonical edge type).
        out_size: the output width of every type.
        bias: learn a bias per type.

    Attributes:
        linears: ``{str(type): nn.Linear}``.

    Raises:
        ValueError: no type, or a non-positive width.
    """

    def __init__(self, in_size: Mapping, out_size: int, bias: bool = True):
        super().__init__()
        if not in_size:
            raise ValueError("HeteroLinear needs at least one type in in_size")
        if int(out_size) < 1:
            raise ValueError(f"out_size must be positive, got {out_size}")
        self.linears = nn.ModuleDict(
            {_type_key(t): nn.Linear(int(width), int(out_size), bias=bias) for t, width in in_size.items()}
        )

    def forward(self, feat: Mapping) -> dict:
        """Each type's rows through its map.

        Args:
            feat: ``{type: [N_t, in_size[t]]}`` (a subset of the types).

        Returns:
            ``{type: [N_t, out_size]}``.

        Raises:
            KeyError: a type the layer was not built for.
        """
        return {t: self.linears[_type_key(t)](h) for t, h in feat.items()}


class HeteroEmbedding(nn.Module):
    """A dense embedding table per type (``nn.Embedding`` each, initialized N(0, 1)).

    Args:
        num_embeddings: ``{type: number of rows}``.
        embedding_dim: width of every row.

    Attributes:
        embeds: ``{str(type): nn.Embedding}``.

    Raises:
        ValueError: no type, or a non-positive size.
    """

    def __init__(self, num_embeddings: Mapping, embedding_dim: int):
        super().__init__()
        if not num_embeddings:
            raise ValueError("HeteroEmbedding needs at least one type in num_embeddings")
        if int(embedding_dim) < 1:
            raise ValueError(f"embedding_dim must be positive, got {embedding_dim}")
        self._types = {_type_key(t): t for t in num_embeddings}
        self.embeds = nn.ModuleDict(
            {_type_key(t): nn.Embedding(int(rows), int(embedding_dim)) for t, rows in num_embeddings.items()}
        )

    @property
    def weight(self) -> dict:
        """``{type: [rows, embedding_dim]}``: every table's weight."""
        return {self._types[key]: table.weight for key, table in self.embeds.items()}

    def reset_parameters(self) -> None:
        """Draw every table again from N(0, 1)."""
        for table in self.embeds.values():
            table.reset_parameters()

    def forward(self, input_ids: Mapping) -> dict:
        """The rows of the given IDs per type.

        Args:
            input_ids: ``{type: int64 IDs}``.

        Returns:
            ``{type: [len(ids), embedding_dim]}``.

        Raises:
            KeyError: a type the layer was not built for.
        """
        return {t: self.embeds[_type_key(t)](ids) for t, ids in input_ids.items()}
