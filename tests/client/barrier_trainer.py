"""One trainer of the two-trainer barrier test (``test_dist_graph.py``), run as its own process.

``writer`` (rank 0) waits for a line on stdin, then writes row 7 of the tensor and enters the barrier.
``reader`` (rank 1) creates the tensor (zeros), enters the barrier, then reads row 7 and prints it as
JSON. The test sends the writer its line only once the reader waits at the barrier (or has finished),
so the reader sees the write exactly when the barrier held it until the writer arrived.

Usage: ``barrier_trainer.py ROLE CLUSTER_JSON TENSOR_NAME NUM_NODES`` with ``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT`` set.
"""

from __future__ import annotations

import json
import sys

import torch

from graphstore.client import api
from graphstore.client.dist_graph import DistGraph
from graphstore.client.dist_tensor import DistTensor

ROW = 7
WRITTEN = 42.0
BARRIER_TIMEOUT_S = 60.0


def main() -> int:
    role, config, tensor_name, num_nodes = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    api.initialize(config)
    graph = DistGraph(config["graph_name"])
    if role == "reader":
        tensor = DistTensor((num_nodes, 1), torch.float32, name=tensor_name, persistent=True)
        graph.barrier(timeout_s=BARRIER_TIMEOUT_S)
        print(json.dumps(tensor[[ROW]].tolist()), flush=True)
    elif role == "writer":
        sys.stdin.readline()
        tensor = DistTensor.attach(tensor_name)
        tensor[[ROW]] = torch.tensor([[WRITTEN]])
        graph.barrier(timeout_s=BARRIER_TIMEOUT_S)
    else:
        raise SystemExit(f"role must be 'reader' or 'writer', got {role!r}")
    api.exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
