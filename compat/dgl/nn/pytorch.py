"""``dgl.nn.pytorch``: ``SAGEConv`` and ``GATConv`` with DGL's signatures and parameter names
(implemented in :mod:`graphstore.client.nn`)."""

from graphstore.client.nn import GATConv, SAGEConv

__all__ = ["GATConv", "SAGEConv"]
