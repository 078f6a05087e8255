"""PyG's NodeLoader over graphstore's stores with every partition behind a real server (no co-located
reads): the batches hold the stored rows and the graph's edges."""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.loader import NodeLoader

from graphstore.client import api
from graphstore.client.dist_graph import DistGraph
from graphstore.compat.pyg import NeighborSampler, stores
from graphstore.config import ClusterConfig, ServerSpec
from graphstore.launcher.local_servers import start_servers
from graphstore.rpc import RpcPolicy


def test_node_loader_over_two_servers(homo_files, tmp_path):
    config_path, new = homo_files
    group = start_servers(config_path, 2, log_dir=tmp_path / "logs")
    try:
        servers = tuple(
            ServerSpec("127.0.0.1", int(address.rsplit(":", 1)[1]), part)
            for part, address in enumerate(group.addresses)
        )
        api.initialize(ClusterConfig(servers=servers, rpc=RpcPolicy(deadline_s=30.0), local_read="off"))
        g = DistGraph("testgraph")
        seeds = torch.arange(0, 600, 4)
        loader = NodeLoader(
            stores(g), node_sampler=NeighborSampler(g, [5, 5]), input_nodes=seeds, batch_size=50
        )
        batches = list(loader)
        assert len(batches) == 3
        for batch in batches:
            n_id, e_id = batch.n_id.numpy(), batch.e_id.numpy()
            row, col = batch.edge_index.numpy()
            assert torch.equal(batch.x, torch.from_numpy(new["feat"][n_id]))
            assert np.array_equal(n_id[row], new["src"][e_id]) and np.array_equal(n_id[col], new["dst"][e_id])
            assert torch.equal(batch.n_id[: batch.batch_size], seeds[batch.input_id])
    finally:
        api.exit_client()
        group.stop()
