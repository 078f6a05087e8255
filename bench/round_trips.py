"""Round trips and bytes per mini-batch of the node loader, with and without node rows carried by the
sampling answers (``DistNodeDataLoader(carry_node_data=...)``), printed as JSON.

The graph is the side-by-side benchmark's (``graphstore generate --num-nodes 200000 --avg-degree 20
--feat-dim 100 --num-classes 16 --seed 0``), partitioned in 2 with METIS; 2 servers on loopback and this
process as a trainer co-located with partition 0; ``NeighborSampler([10, 25])``, batch 1,024, the
features and labels the loader reads by default. Per batch it reports, from the client
(:func:`graphstore.client.call_counts`): calls, request bytes and answer bytes per method; and from the
remote server's own counters (``Stats``: ``calls_<Method>``): the calls it answered. Counts, not times:
the figures do not depend on the machine's load.

    python bench/round_trips.py --out bench/results/round-trips.json
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
from common import emit_report, ensure_partitions, parse_options, server_entries

import graphstore.client as gs
from graphstore.launcher.local_servers import start_servers

OPTIONS = [
    ("--graph", str, "/tmp/graphstore-round-trips/graph-200000.npz", "the .npz (generated when missing)"),
    ("--workdir", str, "/tmp/graphstore-round-trips", "partitions and server logs"),
    ("--batches", int, 20, "batches per measurement"),
    ("--out", str, "", "also write the JSON here"),
]


def ensure_graph(path: str) -> str:
    if not Path(path).is_file():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        cli = str(Path(sys.executable).with_name("graphstore"))
        subprocess.run(
            [cli, "generate", "--num-nodes", "200000", "--avg-degree", "20", "--feat-dim", "100"]
            + ["--num-classes", "16", "--seed", "0", "--out", path],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return path


def per_batch(g, remote, carry: bool, batches: int) -> dict:
    """Calls and bytes per batch of ``batches`` loader batches (client view and the remote server's)."""
    nodes = torch.arange(0, g.num_nodes(), 2)
    sampler = gs.NeighborSampler([10, 25], seed=0)
    loader = gs.DistNodeDataLoader(
        g, nodes, sampler, batch_size=1024, shuffle=True, seed=0, prefetch=0, carry_node_data=carry
    )
    counted = remote.stats().counters
    before = gs.call_counts()
    done = 0
    for _ in loader:
        done += 1
        if done == batches:
            break
    after = gs.call_counts()
    served = remote.stats().counters
    client = {}
    for method, counts in after.items():
        delta = counts - before.get(method, type(counts)())
        if delta.calls:
            client[method] = {
                "calls": delta.calls / done,
                "request_bytes": delta.request_bytes / done,
                "answer_bytes": delta.answer_bytes / done,
            }
    server = {
        key.removeprefix("calls_"): (served[key] - counted.get(key, 0)) / done
        for key in served
        if key.startswith("calls_") and served[key] != counted.get(key, 0) and key != "calls_Stats"
    }
    return {
        "batches": done,
        "round_trips_per_batch": sum(entry["calls"] for entry in client.values()),
        "bytes_per_batch": sum(entry["request_bytes"] + entry["answer_bytes"] for entry in client.values()),
        "client": client,
        "remote_server_calls_per_batch": server,
    }


def main(argv=None) -> dict:
    args = parse_options(__doc__, OPTIONS, argv)
    graph = ensure_graph(args.graph)
    config = ensure_partitions(graph, "bench", 2, Path(args.workdir) / "parts", part_method="metis")
    with start_servers(config, 2, log_dir=Path(args.workdir) / "logs", timeout=300) as group:
        gs.initialize(
            {
                "graph_name": "bench",
                "part_config": config,
                "servers": server_entries(group.addresses),
                "local_read": "on",
                "local_part_id": 0,
            }
        )
        try:
            g = gs.DistGraph("bench")
            remote = gs.get_context().partition(1)
            report = {
                "graph": {"nodes": g.num_nodes(), "edges": g.num_edges(), "partitions": 2},
                "loader": "NeighborSampler([10, 25]), batch 1,024, co-located with partition 0",
                "without_carried_rows": per_batch(g, remote, False, args.batches),
                "with_carried_rows": per_batch(g, remote, True, args.batches),
            }
        finally:
            gs.exit_client()
    emit_report(report, args.out)
    return report


if __name__ == "__main__":
    main()
