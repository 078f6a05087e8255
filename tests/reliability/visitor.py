"""A client that comes and goes while a training job runs (an inference / evaluation job).

``initialize()`` with the cluster YAML given, then: attach to the training job's embedding and read
rows of it, pull features and check them, sample neighbors, create its own tensor, write and read it
back, and leave with ``exit_client()`` (its tensor is deleted). It keeps reading the embedding until
``--leave-file`` exists (at least once), so a test decides when it leaves, or kills it mid-way. Writes
``--out`` (JSON) when done.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--expect-feat", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", default="visitor")
    parser.add_argument("--leave-file", required=True, help="keep reading until this file exists")
    args = parser.parse_args()

    import numpy as np
    import torch

    from graphstore.client.api import exit_client, initialize
    from graphstore.client.dist_graph import DistGraph
    from graphstore.client.dist_tensor import DistTensor
    from graphstore.client.sampling import sample_neighbors

    expected = np.load(args.expect_feat)
    initialize(args.config)
    g = DistGraph("testgraph")
    n = g.num_nodes()
    ids = torch.arange(0, n, 3)
    if not np.array_equal(g.ndata["feat"][ids].numpy(), expected[ids.numpy()]):
        raise SystemExit("visitor: features differ")
    reads = 0
    deadline = time.monotonic() + 30
    while "rel_emb" not in g.ndata:  # the job may still be creating it
        if time.monotonic() > deadline:
            raise SystemExit("visitor: the training embedding never appeared")
        time.sleep(0.1)
    emb = DistTensor.attach("rel_emb")
    rows = emb[ids]
    if not torch.isfinite(rows).all():
        raise SystemExit("visitor: non-finite embedding rows")
    frontier = sample_neighbors(g, ids[:40], 4)
    mine = DistTensor((n, 2), torch.float32, name=f"{args.name}_scratch")
    mine[ids] = torch.stack([ids.to(torch.float32), -ids.to(torch.float32)], dim=1)
    if not torch.equal(mine[ids][:, 0], ids.to(torch.float32)):
        raise SystemExit("visitor: its own tensor did not read back")
    deadline = time.monotonic() + 120
    while True:
        emb[ids]
        reads += 1
        if Path(args.leave_file).exists():
            break
        if time.monotonic() > deadline:
            raise SystemExit("visitor: --leave-file never appeared")
        time.sleep(0.05)
    result = {"name": args.name, "edges": int(frontier.src.numel()), "reads": reads}
    exit_client()
    Path(args.out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
