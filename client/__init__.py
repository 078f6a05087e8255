"""The trainer-side client: DistGraph, DistTensor, DistEmbedding, sampling, loaders, optimizers.

Names follow DGL's ``dgl.distributed`` so that a ported script changes only its imports.

The names below are loaded on first use (:mod:`graphstore.lazy`): ``import graphstore.client`` and its
light submodules (``graphstore.client.transport.channel``, which ``graphstore status --probe`` uses)
do not import torch; ``from graphstore.client import DistGraph`` loads what DistGraph needs.
"""

from typing import TYPE_CHECKING

from graphstore.config import ClusterConfig, load_cluster_config
from graphstore.lazy import lazy_exports

_EXPORTS = {
    "checkpoint": "graphstore.client.checkpoint",
    "device": "graphstore.client.device",
    "optim": "graphstore.client.optim",
    "call_counts": "graphstore.client.api",
    "exit_client": "graphstore.client.api",
    "get_num_clients": "graphstore.client.api",
    "get_rank": "graphstore.client.api",
    "initialize": "graphstore.client.api",
    "is_initialized": "graphstore.client.api",
    "shutdown": "graphstore.client.api",
    "Block": "graphstore.client.block",
    "to_block": "graphstore.client.block",
    "EID": "graphstore.client.constants",
    "NID": "graphstore.client.constants",
    "get_context": "graphstore.client.context",
    "DistDataLoader": "graphstore.client.dataloader",
    "DistEdgeDataLoader": "graphstore.client.dataloader",
    "DistNodeDataLoader": "graphstore.client.dataloader",
    "DistEmbedding": "graphstore.client.dist_embedding",
    "DistGraph": "graphstore.client.dist_graph",
    "DistTensor": "graphstore.client.dist_tensor",
    "SampledSubgraph": "graphstore.client.frontier",
    "DistHeteroEmbedding": "graphstore.client.nn",
    "GATConv": "graphstore.client.nn",
    "GraphConv": "graphstore.client.nn",
    "GraphSAGE": "graphstore.client.nn",
    "HeteroGraphConv": "graphstore.client.nn",
    "RelGraphConv": "graphstore.client.nn",
    "SAGEConv": "graphstore.client.nn",
    "TypedLinear": "graphstore.client.nn",
    "SparseAdagrad": "graphstore.client.optim",
    "SparseAdam": "graphstore.client.optim",
    "MultiLayerFullNeighborSampler": "graphstore.client.samplers",
    "MultiLayerNeighborSampler": "graphstore.client.samplers",
    "NeighborSampler": "graphstore.client.samplers",
    "find_edges": "graphstore.client.sampling",
    "in_subgraph": "graphstore.client.sampling",
    "sample_neighbors": "graphstore.client.sampling",
    "edge_split": "graphstore.client.split",
    "node_split": "graphstore.client.split",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from graphstore.client import checkpoint, device, optim
    from graphstore.client.api import (
        call_counts,
        exit_client,
        get_num_clients,
        get_rank,
        initialize,
        is_initialized,
        shutdown,
    )
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
    "call_counts",
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
