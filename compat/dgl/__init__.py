"""A ``dgl`` stand-in for distributed training scripts: change ``import dgl`` to
``import graphstore.compat.dgl as dgl`` (and ``from dgl.x import y`` to ``from graphstore.compat.dgl.x
import y``) and the script runs on graphstore.

What it provides (DGL 2.4's names and signatures; docs/compat.md lists every public name of
``dgl.distributed`` and what becomes of it):

- :mod:`.distributed`: ``initialize`` (also with a DGL ``ip_config.txt``), ``exit_client``,
  ``DistGraph``, ``DistTensor``, ``DistEmbedding``, ``node_split`` / ``edge_split``,
  ``sample_neighbors``, ``find_edges``, ``in_subgraph``, ``DistDataLoader``, the node and edge
  loaders, ``optim.SparseAdagrad`` / ``optim.SparseAdam``, the partition book and policies,
  ``partition_graph``, ``load_partition`` / ``load_partition_book`` / ``load_partition_feats``;
- :mod:`.dataloading`: ``NeighborSampler`` (with ``prefetch_node_feats`` / ``prefetch_labels``),
  ``MultiLayerNeighborSampler``, ``MultiLayerFullNeighborSampler``, ``as_edge_prediction_sampler``,
  ``DistNodeDataLoader``, ``DistEdgeDataLoader``, ``negative_sampler.Uniform``;
- :mod:`.function`: the message and reduce built-ins (``copy_u``, ``u_dot_v``, ``sum``, ...) that
  blocks and pair graphs run in ``update_all`` / ``apply_edges``;
- :mod:`.nn` / :mod:`.nn.pytorch`: ``SAGEConv``, ``GATConv``, ``GraphConv``, ``HeteroGraphConv``,
  ``RelGraphConv``, ``WeightBasis``, ``TypedLinear``, ``HeteroLinear``, ``HeteroEmbedding``;
- ``DGLGraph`` / ``DGLHeteroGraph`` / ``DGLBlock``: the types of blocks and pair graphs;
- ``NID`` / ``EID`` (``'_ID'``), ``to_block``.
"""

from graphstore.client.block import to_block
from graphstore.client.constants import EID, NID
from graphstore.compat.dgl import dataloading, distributed, function, nn
from graphstore.compat.dgl.graph import DGLBlock, DGLGraph, DGLHeteroGraph

# DGL keeps the type of each node / edge of a heterogeneous subgraph under this key.
NTYPE = "_TYPE"
ETYPE = "_TYPE"

__all__ = [
    "EID",
    "ETYPE",
    "NID",
    "NTYPE",
    "DGLBlock",
    "DGLGraph",
    "DGLHeteroGraph",
    "dataloading",
    "distributed",
    "function",
    "nn",
    "to_block",
]
