"""The cost of PyG's loader path over graphstore: PyG's ``NodeLoader`` on ``graphstore.compat.pyg``'s
stores and sampler next to graphstore's own ``DistNodeDataLoader``, on the same graph and the same seed
batches, printed as JSON.

The graph: the 200k-node anchor graph (``../shared/bench/anchor_graph.py``: average degree 20, 100-d
float32 features), partitioned in 2 with METIS. Two modes, one after the other in one run:

- ``standalone``: every partition loaded in this process (no servers);
- ``2 servers``: one server per partition on loopback, this process the one client, co-located with
  partition 0 (``local_read: on``), as in ``bench/loader.py``.

Per mode, the loaders take turns for ``--repeats`` rounds of ``--batches`` batches of ``--batch-size``
training nodes, each producing its batches one after the other in this thread (no prefetch, no
workers), features pulled for every input node:

- ``pyg``: ``NodeLoader((FeatureStore(g), GraphStore(g)), NeighborSampler(g, [10, 25]))`` (PyG's
  order: the seeds' hop first), yielding PyG ``Data`` batches with ``x`` and ``y``;
- ``graphstore``: ``DistNodeDataLoader`` with ``NeighborSampler([25, 10])`` (DGL's order, input layer
  first: the same fanouts), ``load_features=('feat',)``, ``load_labels='label'``, ``prefetch=0``;
- ``graphstore_prefetch``: the same with ``prefetch=2`` in 2 threads (what the examples run).

PyG's sampler samples each node's neighbors once (hop 2 only from the nodes hop 1 added), DGL's samples
every layer's destination nodes again, so the two differ in work per batch: input nodes and sampled edges
per batch are reported beside batches/s. The ratio pyg / graphstore (batches/s, median of the paired
rounds) is the cost of PyG's loader path. ``pyg_in_memory``: PyG's own ``NeighborLoader`` on a ``Data``
holding the whole graph in this process, where its sampler installs (pyg-lib or torch-sparse); else the
reason it did not run.

    python bench/pyg_loader.py --out pyg_loader.json
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from pathlib import Path

import numpy as np
from anchor import make_anchor_graph
from common import emit_report, ensure_partitions, parse_options, server_entries

OPTIONS = [
    ("--graph", str, "/tmp/g200k.npz", "200k anchor graph (made when missing)"),
    ("--num-nodes", int, 200_000, "nodes of the anchor graph when it is made"),
    ("--workdir", str, "/tmp/graphstore-bench-pyg", "partitions and server logs"),
    ("--batches", int, 10, "batches per round"),
    ("--repeats", int, 3, "rounds per loader and mode"),
    ("--batch-size", int, 1024, None),
    ("--fanouts", str, "10,25", "PyG's order: the seeds' hop first"),
    ("--modes", str, "standalone,servers", "comma-separated: standalone, servers"),
    ("--num-threads", int, 1, "torch threads (several spin against each other on a busy 2-core machine)"),
    ("--seed", int, 0, None),
    ("--out", str, None, "also write the JSON here"),
]


def parse_args(argv=None) -> argparse.Namespace:
    return parse_options(__doc__, OPTIONS, argv)


def batch_seeds(train, batch_size: int, num_batches: int, seed: int):
    """The same seed batches for every loader: a seeded permutation of the training nodes."""
    import torch

    order = torch.from_numpy(np.random.default_rng(seed).permutation(train.numel()))
    return train[order[: batch_size * num_batches]]


def run_pyg(g, seeds, args) -> tuple[float, list[int], list[int]]:
    from torch_geometric.loader import NodeLoader

    from graphstore.compat.pyg import NeighborSampler, stores

    fanouts = [int(f) for f in args.fanouts.split(",")]
    loader = NodeLoader(
        stores(g), node_sampler=NeighborSampler(g, fanouts), input_nodes=seeds, batch_size=args.batch_size
    )
    nodes, edges = [], []
    start = time.perf_counter()
    for batch in loader:
        nodes.append(int(batch.n_id.numel()))
        edges.append(int(batch.edge_index.shape[1]))
    return time.perf_counter() - start, nodes, edges


def run_graphstore(g, seeds, args, prefetch: int) -> tuple[float, list[int], list[int]]:
    from graphstore.client.dataloader import DistNodeDataLoader
    from graphstore.client.samplers import NeighborSampler

    fanouts = [int(f) for f in args.fanouts.split(",")][::-1]  # DGL's order: input layer first
    loader = DistNodeDataLoader(
        g,
        seeds,
        NeighborSampler(fanouts),
        batch_size=args.batch_size,
        shuffle=False,
        load_features=("feat",),
        load_labels="label",
        prefetch=prefetch,
        num_workers=max(1, prefetch),
    )
    nodes, edges = [], []
    start = time.perf_counter()
    try:
        for input_nodes, _, blocks in loader:
            nodes.append(int(input_nodes.shape[0]))
            edges.append(sum(block.num_edges() for block in blocks))
    finally:
        loader.close()
    return time.perf_counter() - start, nodes, edges


def run_in_memory(g, seeds, args) -> dict:
    """PyG's own NeighborLoader on the whole graph in this process, or why it did not run."""
    import torch
    import torch_geometric.typing
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader

    from graphstore.compat.pyg import GraphStore

    if not (torch_geometric.typing.WITH_PYG_LIB or torch_geometric.typing.WITH_TORCH_SPARSE):
        return {"skipped": "PyG's NeighborLoader needs pyg-lib or torch-sparse; neither is installed here"}
    row, col = GraphStore(g).get_edge_index(edge_type=None, layout="coo")
    everything = torch.arange(g.num_nodes())
    data = Data(
        x=g.ndata["feat"][everything], y=g.ndata["label"][everything], edge_index=torch.stack([row, col])
    )
    fanouts = [int(f) for f in args.fanouts.split(",")]
    rates, nodes, edges = [], [], []
    for _ in range(args.repeats):
        loader = NeighborLoader(data, num_neighbors=fanouts, input_nodes=seeds, batch_size=args.batch_size)
        start = time.perf_counter()
        count = 0
        for batch in loader:
            count += 1
            nodes.append(int(batch.n_id.numel()))
            edges.append(int(batch.edge_index.shape[1]))
        rates.append(count / (time.perf_counter() - start))
    return {
        "batches_per_s": round(statistics.median(rates), 2),
        "input_nodes_per_batch": round(float(np.mean(nodes))),
        "sampled_edges_per_batch": round(float(np.mean(edges))),
    }


def measure_mode(g, train, args) -> dict:
    seeds = batch_seeds(train, args.batch_size, args.batches, args.seed)
    runners = {
        "pyg": lambda: run_pyg(g, seeds, args),
        "graphstore": lambda: run_graphstore(g, seeds, args, 0),
        "graphstore_prefetch": lambda: run_graphstore(g, seeds, args, 2),
    }
    run_pyg(g, seeds[: args.batch_size], args)  # warm-up: page cache, connections
    run_graphstore(g, seeds[: args.batch_size], args, 0)
    rates = {name: [] for name in runners}
    sizes = {name: ([], []) for name in runners}
    for _ in range(args.repeats):
        for name, run in runners.items():  # the loaders take turns: load drifts reach all alike
            seconds, nodes, edges = run()
            rates[name].append(len(nodes) / seconds)
            sizes[name][0].extend(nodes)
            sizes[name][1].extend(edges)
    out = {}
    for name in runners:
        out[name] = {
            "batches_per_s": round(statistics.median(rates[name]), 2),
            "input_nodes_per_batch": round(float(np.mean(sizes[name][0]))),
            "sampled_edges_per_batch": round(float(np.mean(sizes[name][1]))),
        }
    paired = [p / o for p, o in zip(rates["pyg"], rates["graphstore"], strict=True)]
    out["ratio_pyg_over_graphstore"] = round(statistics.median(paired), 3)
    paired = [p / o for p, o in zip(rates["pyg"], rates["graphstore_prefetch"], strict=True)]
    out["ratio_pyg_over_graphstore_prefetch"] = round(statistics.median(paired), 3)
    out["pyg_in_memory"] = run_in_memory(g, seeds, args)
    return out


def training_nodes(g):
    import torch

    mask = g.ndata["train_mask"][torch.arange(g.num_nodes())].numpy().astype(bool)
    return torch.from_numpy(np.flatnonzero(mask))


def main(argv=None) -> dict:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.num_threads)
    from graphstore.client import DistGraph, exit_client, initialize
    from graphstore.launcher.local_servers import start_servers

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    config = ensure_partitions(
        make_anchor_graph(args.graph, args.num_nodes), "anchor", 2, workdir / "anchor", part_method="metis"
    )
    report = {
        "graph": args.graph,
        "prepare_s": round(time.perf_counter() - start, 1),
        "batch_size": args.batch_size,
        "fanouts_pyg_order": args.fanouts,
        "batches": args.batches,
        "repeats": args.repeats,
        "num_threads": args.num_threads,
    }
    modes = args.modes.split(",")
    if "standalone" in modes:
        g = DistGraph("anchor", part_config=config)
        report["num_nodes"], report["num_edges"] = g.num_nodes(), g.num_edges()
        report["standalone"] = measure_mode(g, training_nodes(g), args)
        exit_client()
    if "servers" in modes:
        with contextlib.ExitStack() as stack:
            servers = stack.enter_context(start_servers(config, 2, log_dir=workdir / "logs", timeout=180))
            cluster = {
                "servers": server_entries(servers.addresses),
                "part_config": config,
                "local_read": "on",
                "local_part_id": 0,
            }
            initialize(cluster)
            stack.callback(exit_client)
            g = DistGraph("anchor")
            report["num_nodes"], report["num_edges"] = g.num_nodes(), g.num_edges()
            report["2_servers"] = measure_mode(g, training_nodes(g), args)
    emit_report(report, args.out)
    return report


if __name__ == "__main__":
    main()
