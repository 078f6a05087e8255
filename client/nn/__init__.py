"""GNN layers over sampled blocks, in plain PyTorch, with DGL's signatures and parameter names (a DGL
state dict loads into them).

- :mod:`.sage` (``SAGEConv``, ``GraphSAGE``), :mod:`.gat` (``GATConv``), :mod:`.graph_conv`
  (``GraphConv``): homogeneous layers, also usable per relation of a typed block.
- :mod:`.hetero_graph_conv` (``HeteroGraphConv``), :mod:`.rel_graph_conv` (``RelGraphConv``,
  ``TypedLinear``), :mod:`.typed` (``WeightBasis``, ``HeteroLinear``, ``HeteroEmbedding``): relational
  models on typed blocks.
- :mod:`.hetero_embedding` (``DistHeteroEmbedding``): learnable server-side input rows per node type.
- :mod:`.functional`: the aggregations they share (``aggregate_sum``, ``edge_softmax``; ``scatter_sum``
  is :func:`graphstore.client.graph_ops.scatter_sum`).

Import the layers from here (``from graphstore.client.nn import SAGEConv``) or from
``graphstore.client``.
"""

from graphstore.client.graph_ops import scatter_sum
from graphstore.client.nn.functional import aggregate_sum, edge_softmax
from graphstore.client.nn.gat import GATConv
from graphstore.client.nn.graph_conv import GraphConv
from graphstore.client.nn.hetero_embedding import DistHeteroEmbedding
from graphstore.client.nn.hetero_graph_conv import HeteroGraphConv
from graphstore.client.nn.rel_graph_conv import RelGraphConv, TypedLinear
from graphstore.client.nn.sage import GraphSAGE, SAGEConv
from graphstore.client.nn.typed import HeteroEmbedding, HeteroLinear, WeightBasis

__all__ = [
    "DistHeteroEmbedding",
    "GATConv",
    "GraphConv",
    "GraphSAGE",
    "HeteroEmbedding",
    "HeteroGraphConv",
    "HeteroLinear",
    "RelGraphConv",
    "SAGEConv",
    "TypedLinear",
    "WeightBasis",
    "aggregate_sum",
    "edge_softmax",
    "scatter_sum",
]
