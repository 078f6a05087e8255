"""``dgl.nn.pytorch``: ``SAGEConv``, ``GATConv`` and ``GraphConv`` with DGL's signatures and parameter
names (implemented in :mod:`graphstore.client.nn` and :mod:`graphstore.client.nn_graph_conv`)."""

from graphstore.client.nn import GATConv, SAGEConv
from graphstore.client.nn_graph_conv import GraphConv

__all__ = ["GATConv", "GraphConv", "SAGEConv"]
