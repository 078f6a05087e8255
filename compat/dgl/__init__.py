"""A ``dgl`` stand-in for distributed training scripts: change ``import dgl`` to
``import graphstore.compat.dgl as dgl`` (and ``from dgl.x import y`` to ``from graphstore.compat.dgl.x
import y``) and the script runs on graphstore.

What it provides (everything else of DGL is out of scope; see docs/compat.md):

- :mod:`.distributed`: ``initialize`` (also with a DGL ``ip_config.txt``), ``exit_client``,
  ``DistGraph``, ``DistTensor``, ``DistEmbedding``, ``node_split`` / ``edge_split``,
  ``sample_neighbors``, ``find_edges``, ``in_subgraph``, ``DistDataLoader``, the node and edge
  loaders, ``optim.SparseAdagrad`` / ``optim.SparseAdam``, the partition book and policies,
  ``load_partition`` / ``load_partition_book``;
- :mod:`.dataloading`: ``NeighborSampler`` (with ``prefetch_node_feats`` / ``prefetch_labels``),
  ``MultiLayerNeighborSampler``, ``MultiLayerFullNeighborSampler``, ``DistNodeDataLoader``,
  ``DistEdgeDataLoader``, ``negative_sampler.Uniform``;
- :mod:`.nn` / :mod:`.nn.pytorch`: ``SAGEConv``, ``GATConv``;
- ``NID`` / ``EID`` (``'_ID'``), ``to_block``.
"""

from graphstore.client.block import to_block
from graphstore.client.constants import EID, NID
from graphstore.compat.dgl import dataloading, distributed, nn

# DGL keeps the type of each node / edge of a heterogeneous subgraph under this key; graphstore
# graphs are homogeneous, but scripts refer to the name.
NTYPE = "_TYPE"
ETYPE = "_TYPE"

__all__ = ["EID", "ETYPE", "NID", "NTYPE", "dataloading", "distributed", "nn", "to_block"]
