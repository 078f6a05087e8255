"""The trainer-side client: DistGraph, DistTensor, DistEmbedding, sampling, loaders, optimizers.

Names follow DGL's ``dgl.distributed`` so that a ported script changes only its imports.
"""

from graphstore.client import checkpoint, device, optim
from graphstore.client.api import exit_client, get_num_clients, get_rank, initialize, is_initialized, shutdown
from graphstore.client.block import Block, to_block
from graphstore.client.constants import EID, NID
from graphstore.client.context import get_context
from graphstore.client.dataloader import DistDataLoader, DistEdgeDataLoader, DistNodeDataLoader
from graphstore.client.dist_embedding import DistEmbedding
from graphstore.client.dist_graph import DistGraph
from graphstore.client.dist_tensor import DistTensor
from graphstore.client.frontier import SampledSubgraph
from graphstore.client.nn import (
    DistHeteroEmbedding,
    GATConv,
    GraphConv,
    GraphSAGE,
    HeteroGraphConv,
    RelGraphConv,
    SAGEConv,
    TypedLinear,
)
from graphstore.client.optim import SparseAdagrad, SparseAdam
from graphstore.client.samplers import (
    MultiLayerFullNeighborSampler,
    MultiLayerNeighborSampler,
    NeighborSampler,
)
from graphstore.client.sampling import find_edges, in_subgraph, sample_neighbors
from graphstore.client.split import edge_split, node_split
from graphstore.config import ClusterConfig, load_cluster_config

__all__ = [
    "Block",
    "DistDataLoader",
    "DistEdgeDataLoader",
    "DistNodeDataLoader",
    "GATConv",
    "GraphConv",
    "GraphSAGE",
    "HeteroGraphConv",
    "MultiLayerFullNeighborSampler",
    "MultiLayerNeighborSampler",
    "NeighborSampler",
    "RelGraphConv",
    "SAGEConv",
    "SampledSubgraph",
    "SparseAdagrad",
    "SparseAdam",
    "TypedLinear",
    "checkpoint",
    "device",
    "find_edges",
    "in_subgraph",
    "optim",
    "sample_neighbors",
    "to_block",
    "EID",
    "NID",
    "ClusterConfig",
    "DistEmbedding",
    "DistHeteroEmbedding",
    "DistGraph",
    "DistTensor",
    "edge_split",
    "exit_client",
    "get_context",
    "get_num_clients",
    "get_rank",
    "initialize",
    "is_initialized",
    "load_cluster_config",
    "node_split",
    "shutdown",
]
