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
- ``DGLGraph`` / ``DGLHeteroGraph`` / ``DGLBlock``: the types of blocks, pair graphs and in-memory graphs;
- graphs in memory for partition scripts (:mod:`.convert`): ``graph``, ``heterograph``, ``from_scipy``,
  ``rand_graph``, ``rand_bipartite``, ``to_bidirected``, ``add_reverse_edges``, ``add_self_loop``,
  ``remove_self_loop``; ``save_graphs`` / ``load_graphs``;
- :mod:`.backend` (DGL's tensor functions over PyTorch) and :mod:`.data` (DGL's dataset names, which
  raise ``NotImplementedError``: graphstore downloads no datasets);
- ``NID`` / ``EID`` (``'_ID'``), ``NTYPE`` / ``ETYPE`` (``'_TYPE'``), ``to_block``.

``dgl.graph`` is the function, as in DGL; the module ``graphstore.compat.dgl.graph`` (the graph types)
is still imported by its full name.
"""

from graphstore.client.block import to_block
from graphstore.client.constants import EID, NID
from graphstore.compat.dgl import backend, convert, data, dataloading, distributed, function, nn
from graphstore.compat.dgl.convert import (
    add_reverse_edges,
    add_self_loop,
    from_scipy,
    heterograph,
    rand_bipartite,
    rand_graph,
    remove_self_loop,
    to_bidirected,
)
from graphstore.compat.dgl.data.utils import load_graphs, save_graphs
from graphstore.compat.dgl.graph import DGLBlock, DGLGraph, DGLHeteroGraph

# ``dgl.graph`` is the constructor, as in DGL: this rebinds the package attribute that importing the
# submodule ``graphstore.compat.dgl.graph`` (the graph types, still importable by that name) set.
graph = convert.graph

# DGL keeps the type of each node / edge of a heterogeneous subgraph under this key.
NTYPE = "_TYPE"
ETYPE = "_TYPE"

__all__ = [
    "EID",
    "add_reverse_edges",
    "add_self_loop",
    "backend",
    "data",
    "from_scipy",
    "graph",
    "heterograph",
    "load_graphs",
    "rand_bipartite",
    "rand_graph",
    "remove_self_loop",
    "save_graphs",
    "to_bidirected",
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
