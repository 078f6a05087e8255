"""``dgl.nn``: the GNN layers over blocks, typed blocks and pair graphs (PyTorch backend, as ``dgl.nn``
re-exports it); see :mod:`graphstore.compat.dgl.nn.pytorch`."""

from graphstore.compat.dgl.nn import pytorch
from graphstore.compat.dgl.nn.pytorch import (
    GATConv,
    GraphConv,
    HeteroEmbedding,
    HeteroGraphConv,
    HeteroLinear,
    RelGraphConv,
    SAGEConv,
    TypedLinear,
    WeightBasis,
)

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
    "pytorch",
]
