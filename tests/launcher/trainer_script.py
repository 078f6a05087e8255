"""A small trainer that ``graphstore launch`` (and the compose test) runs in the launcher tests.

Modes:

- ``train`` (default): joins the gloo group from launch's torchrun variables, connects through
  ``graphstore.client.initialize()`` (``GRAPHSTORE_CONFIG``), checks pulled features against the
  expected rows, writes and reads back a shared DistTensor (every rank writes its own rows, then
  reads everyone's), trains a linear classifier for a few DDP steps on pulled features, checks that
  every rank ends with identical weights, and writes ``OUT/result-RANK.json``.
- ``fail``: every rank writes its PID and a grandchild's PID to ``OUT``; rank ``--fail-rank`` then
  waits until every rank has done so and exits with ``--exit-code``; the others sleep (launch must end
  them).
- ``sleep``: every rank writes its PIDs and sleeps (launch must end them on SIGTERM).
- ``resume``: for torchrun's restarts (``TORCHELASTIC_RESTART_COUNT``): every rank reads, then bumps,
  its slot of a persistent DistTensor ``restart_progress`` on the servers; in the first attempt rank
  ``--fail-rank`` then exits with ``--exit-code``; a later attempt writes ``OUT/resume-RANK.json``
  with the slots it found (what the earlier attempts left on the same servers).

Also accepts ``--graph-name``, ``--part-config`` and ``--epochs`` like ``examples/train_dist.py``,
so the compose test can run it in the trainer service's place.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path


def write_pids(out: Path, rank: int) -> None:
    """Start a grandchild that sleeps, then record both PIDs (the test checks they end)."""
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (out / f"trainer-{rank}-grandchild.pid").write_text(str(grandchild.pid))
    (out / f"trainer-{rank}.pid").write_text(str(os.getpid()))


def wait_for_pid_files(out: Path, world_size: int, timeout_s: float = 60.0) -> None:
    """Block until every rank wrote its PID files (exit 1 after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while len(list(out.glob("trainer-*.pid"))) < 2 * world_size:
        if time.monotonic() > deadline:
            raise SystemExit(f"not every rank wrote its PID files to {out} within {timeout_s} s")
        time.sleep(0.02)


def train(args: argparse.Namespace, rank: int, world_size: int) -> dict:
    import numpy as np
    import torch
    import torch.distributed as dist

    from graphstore.client.api import exit_client, initialize
    from graphstore.client.dist_graph import DistGraph
    from graphstore.client.dist_tensor import DistTensor
    from graphstore.client.split import node_split

    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    initialize()
    g = DistGraph(args.graph_name)
    num_nodes = g.num_nodes()
    result = {"rank": rank, "world_size": world_size, "num_nodes": num_nodes}

    # Features pulled from both servers are the partitioned graph's rows.
    rng = np.random.default_rng(rank)
    ids = torch.from_numpy(rng.choice(num_nodes, size=min(300, num_nodes), replace=True))
    feats = g.ndata["feat"][ids]
    if args.expect_feat:
        expected = np.load(args.expect_feat)
        if not np.array_equal(feats.numpy(), expected[ids.numpy()]):
            raise SystemExit(f"rank {rank}: pulled features differ from the expected rows")
        result["features_checked"] = int(ids.numel())

    # A shared tensor: each rank writes rows i with i % world_size == rank, then reads all of them.
    shared = DistTensor((num_nodes, 3), torch.float32, name="launch_test_shared")
    mine = torch.arange(rank, num_nodes, world_size)
    shared[mine] = mine.to(torch.float32).unsqueeze(1) * torch.tensor([1.0, 10.0, 100.0])
    dist.barrier()
    everything = shared[torch.arange(num_nodes)]
    want = torch.arange(num_nodes, dtype=torch.float32).unsqueeze(1) * torch.tensor([1.0, 10.0, 100.0])
    if not torch.equal(everything, want):
        raise SystemExit(f"rank {rank}: shared tensor rows differ after every rank wrote its own")

    # A few DDP steps of a linear classifier on pulled features.
    torch.manual_seed(0)
    train_ids = node_split(g.ndata["train_mask"], g.get_partition_book())
    labels_all = g.ndata["label"]
    num_classes = int(labels_all[torch.arange(num_nodes)].max()) + 1
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(feats.shape[1], num_classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(args.epochs * args.steps):
        batch = train_ids[torch.randint(len(train_ids), (min(64, len(train_ids)),))]
        x = g.ndata["feat"][batch].to(torch.float32)
        y = labels_all[batch].to(torch.long)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    if not all(np.isfinite(losses)):
        raise SystemExit(f"rank {rank}: non-finite loss {losses}")
    weight = model.module.weight.detach().clone()
    gathered = [torch.empty_like(weight) for _ in range(world_size)]
    dist.all_gather(gathered, weight)
    if not all(torch.equal(gathered[0], w) for w in gathered):
        raise SystemExit(f"rank {rank}: DDP replicas diverged")
    result.update(steps=len(losses), first_loss=losses[0], last_loss=losses[-1], train_nodes=len(train_ids))
    dist.barrier()
    del shared
    exit_client()
    dist.destroy_process_group()
    return result


def resume(args: argparse.Namespace, rank: int, world_size: int, out: Path) -> int:
    import torch
    import torch.distributed as dist

    from graphstore.client.api import exit_client, initialize
    from graphstore.client.dist_graph import DistGraph
    from graphstore.client.dist_tensor import DistTensor
    from graphstore.client.training import init_process_group

    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    init_process_group(torch.device("cpu"))  # what examples/train_dist.py does
    initialize()
    num_nodes = DistGraph(args.graph_name).num_nodes()
    # Node-shaped (a DistTensor's rows are nodes or edges); row RANK is this rank's slot.
    progress = DistTensor((num_nodes, 1), torch.int64, name="restart_progress", persistent=True)
    mine = torch.tensor([rank])
    found = int(progress[mine][0, 0])
    progress[mine] = torch.tensor([[found + 1]])
    dist.barrier()
    if attempt == 0 and rank == args.fail_rank:
        print(f"trainer {rank} failing on purpose in attempt {attempt}", file=sys.stderr, flush=True)
        os._exit(args.exit_code)  # a crash: no exit_client(), no clean leave of the group
    dist.barrier()  # the failing rank never arrives in attempt 0: torchrun restarts everyone
    result = {"rank": rank, "attempt": attempt, "found": found, "world_size": world_size}
    (out / f"resume-{rank}.json").write_text(json.dumps(result))
    exit_client()
    dist.destroy_process_group()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("train", "fail", "sleep", "resume"), default="train")
    parser.add_argument("--out", default=None, help="folder for result / pid files")
    parser.add_argument("--graph-name", default="testgraph")
    parser.add_argument("--part-config", default=None, help="accepted like examples/train_dist.py")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3, help="training steps per epoch")
    parser.add_argument("--expect-feat", default=None, help=".npy of the features in global ID order")
    parser.add_argument("--fail-rank", type=int, default=1)
    parser.add_argument("--exit-code", type=int, default=3)
    args = parser.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)

    if args.mode in ("fail", "sleep"):
        write_pids(out, rank)
        if args.mode == "fail" and rank == args.fail_rank:
            # Fail once every rank has recorded its PIDs, so the test can check that all of them end.
            wait_for_pid_files(out, world_size)
            print(f"trainer {rank} failing on purpose with exit code {args.exit_code}", file=sys.stderr)
            return args.exit_code
        time.sleep(600)
        return 0

    if args.mode == "resume":
        return resume(args, rank, world_size, out)
    result = train(args, rank, world_size)
    result["env"] = {
        key: os.environ.get(key)
        for key in (
            "RANK",
            "LOCAL_RANK",
            "WORLD_SIZE",
            "LOCAL_WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
            "GRAPHSTORE_CONFIG",
            "PYTHONUNBUFFERED",
        )
    }
    print(f"trainer {rank}: {json.dumps(result)}")
    if out is not None:
        (out / f"result-{rank}.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
