"""The trainer-side client: DistGraph, DistTensor, DistEmbedding, sampling, loaders, optimizers.

Names follow DGL's ``dgl.distributed`` so that a ported script changes only its imports.
"""

from graphstore.client.api import exit_client, get_num_clients, get_rank, initialize, is_initialized, shutdown
from graphstore.client.config import ClientConfig, load_client_config
from graphstore.client.constants import EID, NID
from graphstore.client.context import get_context
from graphstore.client.dist_embedding import DistEmbedding
from graphstore.client.dist_graph import DistGraph
from graphstore.client.dist_tensor import DistTensor
from graphstore.client.split import edge_split, node_split

__all__ = [
    "EID",
    "NID",
    "ClientConfig",
    "DistEmbedding",
    "DistGraph",
    "DistTensor",
    "edge_split",
    "exit_client",
    "get_context",
    "get_num_clients",
    "get_rank",
    "initialize",
    "is_initialized",
    "load_client_config",
    "node_split",
    "shutdown",
]
