"""``dgl.nn``: the GNN layers over sampled blocks (PyTorch backend, as ``dgl.nn`` re-exports it)."""

from graphstore.compat.dgl.nn import pytorch
from graphstore.compat.dgl.nn.pytorch import GATConv, GraphConv, SAGEConv

__all__ = ["GATConv", "GraphConv", "SAGEConv", "pytorch"]
