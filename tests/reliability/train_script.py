"""A deterministic embedding-training job that ``graphstore launch`` runs in the reliability tests.

Each of the ``WORLD_SIZE`` trainers joins a gloo group, connects with ``initialize()`` (the cluster
YAML in ``GRAPHSTORE_CONFIG``), and for ``--steps`` steps: takes a batch of its ``node_split`` share
(seeded by rank and step), samples 3 in-neighbors of each seed (seeded), looks the batch and the
sampled nodes up in a ``DistEmbedding``, pulls their features, and takes one distributed
``SparseAdagrad`` step (gradients exchanged by all_to_all) on the loss ``sum((emb - feat[:, :DIM])^2)``.
Every step is a function of the seeds only, so two runs give bit-identical embeddings whatever else
happens on the cluster meanwhile.

Writes ``OUT/progress-RANK`` (steps done) as it goes and, at the end, ``OUT/result-RANK.json``; rank 0
also saves the final embedding (all rows, global ID order) to ``OUT/final.npy``. ``--pause-at`` /
``--resume-file`` and ``--hold-file`` let a test order events against the job's steps.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

DIM = 4
BATCH = 32


def wait_for_file(path: str, timeout_s: float = 120.0) -> None:
    """Block until ``path`` exists (the test's signal to go on); exit 1 after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while not Path(path).exists():
        if time.monotonic() > end:
            raise SystemExit(f"{path} did not appear within {timeout_s} s")
        time.sleep(0.02)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--graph-name", default="testgraph")
    parser.add_argument("--pause-at", type=int, default=None, help="before this step, wait for --resume-file")
    parser.add_argument("--resume-file", default=None)
    parser.add_argument("--hold-file", default=None, help="after the last step, wait for this file")
    args = parser.parse_args()

    import numpy as np
    import torch
    import torch.distributed as dist

    from graphstore.client.api import exit_client, initialize
    from graphstore.client.dist_embedding import DistEmbedding
    from graphstore.client.dist_graph import DistGraph
    from graphstore.client.optim import SparseAdagrad
    from graphstore.client.sampling import sample_neighbors
    from graphstore.client.split import node_split
    from graphstore.types import InitSpec

    rank = int(os.environ["RANK"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dist.init_process_group("gloo", timeout=timedelta(seconds=90))
    initialize()
    g = DistGraph(args.graph_name)
    num_nodes = g.num_nodes()
    mine = node_split(torch.ones(num_nodes, dtype=torch.bool), g.get_partition_book())
    emb = DistEmbedding(num_nodes, DIM, name="rel_emb", init_func=InitSpec("uniform", -0.1, 0.1, seed=3))
    dist.barrier()
    opt = SparseAdagrad([emb], lr=0.05)
    feat = g.ndata["feat"]
    started = time.monotonic()
    losses = []
    pid = os.getpid()
    for step in range(args.steps):
        if step == args.pause_at:
            wait_for_file(args.resume_file)
        rng = np.random.default_rng((rank, step))
        seeds = mine[torch.from_numpy(rng.choice(len(mine), size=min(BATCH, len(mine)), replace=False))]
        frontier = sample_neighbors(g, seeds, 3, random_seed=1000 * step + rank)
        ids = torch.unique(torch.cat([seeds, frontier.src]))
        target = feat[ids].to(torch.float32)[:, :DIM]
        loss = ((emb(ids) - target) ** 2).sum()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        (out / f"progress-{rank}").write_text(str(step + 1))
    if args.hold_file:
        wait_for_file(args.hold_file)
    dist.barrier()
    if rank == 0:
        np.save(out / "final.npy", emb.weight[torch.arange(num_nodes)].numpy())
    result = {
        "rank": rank,
        "steps": len(losses),
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "finite": bool(np.all(np.isfinite(losses))),
        "seconds": time.monotonic() - started,
        "pid_start": pid,
        "pid_end": os.getpid(),
    }
    (out / f"result-{rank}.json").write_text(json.dumps(result))
    dist.barrier()
    exit_client()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
