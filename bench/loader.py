"""Benchmark of distributed sampling and the mini-batch loader (issue 5), printed as JSON.

For each anchor graph (``../shared/bench/anchor_graph.py``: 200k and 1M nodes, average degree 20,
100-d float32 features), partitioned in 2 with METIS, with 2 partition servers on loopback and this
process as the one client, co-located with partition 0 (``local_read: on``), it measures (medians):

1. ``one_hop``: ``sample_neighbors`` of 1,024 random seeds, fanout 10: seeds/s.
2. ``two_layer``: the full pipeline of ``DistNodeDataLoader`` with ``NeighborSampler([25, 10])``,
   batch 1,024 training nodes, input features pulled onto the blocks: batches/s and input nodes per
   batch, produced one after the other (``prefetch=0``) and pipelined (``prefetch`` ahead in
   ``num_workers`` background threads).
3. ``overlap``: a real training step (GraphSAGE, ``--hidden`` 256, forward + backward + Adam) on each
   batch: the epoch time with prefetching (``--prefetch`` batches ahead) vs without, in paired runs
   (same batches, back to back), and the share of the loader's own time (the loader alone,
   sequential) that prefetching hides behind the model: ``(without - with) / alone``, target 0.7.
   The model's step time per batch is reported beside the loader's (``compute_to_fetch``): hiding a
   fetch needs a step at least as long. The step runs with CPU-count-minus-loader-threads torch
   threads (DGL's advice for trainers beside sampler workers; two OpenMP threads plus a loader thread
   on two cores slow each other down). Prefetching can only hide the loader's time behind spare CPU:
   on a machine whose cores other work already keeps busy, nothing is hidden.
4. ``with_remote_feature_cache``: 2. and 3. again with ``--cache-fraction`` of the other partition's
   nodes' features held by the trainer (``RemoteFeatureCache``, highest out-degree first).

DGL's figures come from ``make bench-dgl`` (``bench/dgl/side_by_side.py``), which runs DGL beside
graphstore in the same command.

    python bench/loader.py                               # both graphs (generated / partitioned once)
    python bench/loader.py --graphs 200k --out loader.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np
from anchor import make_anchor_graph
from common import emit_report, ensure_partitions, parse_options, server_entries

from graphstore.launcher.local_servers import start_servers
from graphstore.rpc import RpcPolicy

GRAPH_SIZES = {"200k": 200_000, "1m": 1_000_000}
HIDDEN_TARGET = 0.7


# (flag, type, default, help) of every option, in --help order.
OPTIONS = [
    ("--graphs", str, "200k,1m", "comma-separated: 200k, 1m"),
    ("--graph-200k", str, "/tmp/g200k.npz", "200k anchor graph (made when missing)"),
    ("--graph-1m", str, "/tmp/g1m.npz", "1M anchor graph (made when missing)"),
    ("--workdir", str, "/tmp/graphstore-bench-loader", "partitions and server logs"),
    ("--one-hop-repeats", int, 50, None),
    ("--batches", int, 16, "batches per two-layer measurement"),
    ("--overlap-batches", int, 18, "training steps per overlap epoch"),
    ("--overlap-repeats", int, 7, "paired epochs with / without prefetch"),
    ("--batch-size", int, 1024, None),
    ("--fanouts", str, "25,10", None),
    ("--prefetch", int, 2, None),
    ("--num-workers", int, 2, "loader background threads"),
    ("--chunk-mb", float, None, "client RPC chunk size (MiB) for pulls (default: the client's)"),
    (
        "--cache-fraction",
        float,
        1.0,
        "also measure with this share of the remote nodes' features cached (0: skip)",
    ),
    ("--overlap-workers", int, 1, "loader threads in the overlap runs"),
    (
        "--overlap-torch-threads",
        int,
        0,
        "torch threads of the training step (0: CPU count minus loader threads, DGL's advice)",
    ),
    ("--hidden", int, 256, None),
    (
        "--background-nice",
        int,
        None,
        "nice increment of the loader and RPC threads (default: the client's, see graphstore.priority)",
    ),
    ("--torch-threads", int, 0, "torch intra-op threads for the model (0: torch's default)"),
    ("--seed", int, 0, None),
    ("--out", str, None, "also write the JSON here"),
]


def parse_args(argv=None) -> argparse.Namespace:
    return parse_options(__doc__, OPTIONS, argv)


# ----- graph files and servers -------------------------------------------------------------------------


def ensure_graph(path: str, num_nodes: int) -> str:
    """The anchor graph .npz at ``path``, generated with the shared script when missing."""
    return str(make_anchor_graph(path, num_nodes))


# ----- measurements ------------------------------------------------------------------------------------


def one_hop(g, rng, repeats: int) -> dict:
    from graphstore.client.sampling import sample_neighbors

    num_nodes = g.num_nodes()
    seed_sets = [rng.choice(num_nodes, 1024, replace=False) for _ in range(repeats + 5)]
    for seeds in seed_sets[:5]:
        sample_neighbors(g, seeds, 10)
    times, edges = [], []
    for seeds in seed_sets[5:]:
        start = time.perf_counter()
        frontier = sample_neighbors(g, seeds, 10)
        times.append(time.perf_counter() - start)
        edges.append(frontier.num_edges())
    median = statistics.median(times)
    return {
        "seeds": 1024,
        "fanout": 10,
        "median_ms": round(median * 1e3, 3),
        "seeds_per_s": round(1024 / median),
        "edges_per_call": round(float(np.mean(edges))),
        "repeats": repeats,
    }


def make_loader(g, train, args, prefetch: int, seed: int, num_workers: int | None = None, caches=None):
    from graphstore.client.dataloader import DistNodeDataLoader
    from graphstore.client.samplers import NeighborSampler

    fanouts = [int(f) for f in args.fanouts.split(",")]
    return DistNodeDataLoader(
        g,
        train,
        NeighborSampler(fanouts),
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
        load_features=("feat",),
        load_labels="label",
        prefetch=prefetch,
        num_workers=num_workers or args.num_workers,
        seed=seed,
        cache_remote_features=caches or 0.0,
    )


def run_loader(loader, num_batches: int, step=None) -> tuple[float, list[int], float]:
    """Iterate ``num_batches`` batches (calling ``step`` on each); returns (seconds, input sizes, wait s)."""
    sizes = []
    waited = 0.0
    start = time.perf_counter()
    iterator = iter(loader)
    try:
        for _ in range(num_batches):
            before = time.perf_counter()
            input_nodes, output_nodes, blocks = next(iterator)
            waited += time.perf_counter() - before
            sizes.append(int(input_nodes.shape[0]))
            if step is not None:
                step(blocks)
    finally:
        iterator.close()
    return time.perf_counter() - start, sizes, waited


def two_layer(g, train, args, caches=None) -> dict:
    result = {"batch_size": args.batch_size, "fanouts": args.fanouts, "batches": args.batches}
    # warm-up (page cache, connections, allocator)
    run_loader(make_loader(g, train, args, 0, args.seed, caches=caches), 3)
    for label, prefetch in (("sequential", 0), ("prefetch", args.prefetch)):
        rates, all_sizes = [], []
        for repeat in range(3):
            loader = make_loader(g, train, args, prefetch, args.seed + repeat, caches=caches)
            seconds, sizes, _ = run_loader(loader, min(args.batches, len(loader)))
            rates.append(len(sizes) / seconds)
            all_sizes += sizes
        result[f"{label}_batches_per_s"] = round(statistics.median(rates), 2)
        result["input_nodes_per_batch"] = round(float(np.mean(all_sizes)))
    result["prefetch"] = args.prefetch
    result["num_workers"] = args.num_workers
    return result


def overlap(g, train, args, caches=None) -> dict:
    import torch

    threads_before = torch.get_num_threads()
    threads = args.overlap_torch_threads or max(1, (os.cpu_count() or 2) - args.overlap_workers)
    torch.set_num_threads(threads)
    try:
        result = _overlap(g, train, args, caches)
    finally:
        torch.set_num_threads(threads_before)
    result["torch_threads"] = threads
    result["loader_threads"] = args.overlap_workers
    return result


def _overlap(g, train, args, caches) -> dict:
    import torch
    import torch.nn.functional as F

    from graphstore.client.nn import GraphSAGE

    torch.manual_seed(args.seed)
    num_classes = int(g.ndata["label"][torch.arange(g.num_nodes())].max()) + 1
    model = GraphSAGE(g.ndata["feat"].shape[1], args.hidden, num_classes, n_layers=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)

    def step(blocks):
        logits = model(blocks, blocks[0].srcdata["feat"])
        loss = F.cross_entropy(logits, blocks[-1].dstdata["label"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    batches = min(args.overlap_batches, len(make_loader(g, train, args, 0, args.seed, caches=caches)))
    workers = args.overlap_workers

    def loader_for(prefetch: int, seed: int):
        return make_loader(g, train, args, prefetch, seed, num_workers=workers, caches=caches)

    run_loader(loader_for(0, args.seed), 2, step)  # warm-up
    # Paired runs (same batches, back to back) so that drifts in machine load cancel in the differences.
    loader_alone, without, with_prefetch, waits, hidden = [], [], [], [], []
    for repeat in range(args.overlap_repeats):
        seed = args.seed + 100 + repeat
        alone_s = run_loader(loader_for(0, seed), batches)[0]
        without_s = run_loader(loader_for(0, seed), batches, step)[0]
        with_s, _, waited = run_loader(loader_for(args.prefetch, seed), batches, step)
        loader_alone.append(alone_s)
        without.append(without_s)
        with_prefetch.append(with_s)
        waits.append(waited)
        hidden.append((without_s - with_s) / alone_s)
    hidden_median = statistics.median(hidden)
    step_s = statistics.median(w - a for w, a in zip(without, loader_alone, strict=True)) / batches
    fetch_s = statistics.median(loader_alone) / batches
    return {
        "model": f"GraphSAGE(in={g.ndata['feat'].shape[1]}, hidden={args.hidden}, out={num_classes}), Adam",
        "batches_per_epoch": batches,
        "repeats": args.overlap_repeats,
        "prefetch": args.prefetch,
        "model_step_s_per_batch": round(step_s, 4),
        "loader_s_per_batch": round(fetch_s, 4),
        "compute_to_fetch": round(step_s / fetch_s, 2),
        "loader_alone_s": round(statistics.median(loader_alone), 3),
        "epoch_without_prefetch_s": round(statistics.median(without), 3),
        "epoch_with_prefetch_s": round(statistics.median(with_prefetch), 3),
        "speedup": round(statistics.median(w / p for w, p in zip(without, with_prefetch, strict=True)), 3),
        "hidden_fraction_of_loader_time": round(hidden_median, 3),
        "hidden_fraction_per_repeat": [round(h, 3) for h in hidden],
        "loader_wait_with_prefetch_s": round(statistics.median(waits), 3),
        "target_hidden_fraction": HIDDEN_TARGET,
        "meets_target": bool(hidden_median >= HIDDEN_TARGET),
    }


def cached(g, train, args) -> dict:
    """The two-layer pipeline and the overlap with a RemoteFeatureCache of ``--cache-fraction``."""
    from graphstore.client.dataloader import RemoteFeatureCache

    start = time.perf_counter()
    cache = RemoteFeatureCache(g, "feat", args.cache_fraction)
    build_s = time.perf_counter() - start
    caches = {"feat": cache}
    result = {
        "fraction_of_remote_nodes": args.cache_fraction,
        "cached_rows": int(cache.node_ids.size),
        "cache_mb": round(cache.nbytes / 1e6, 1),
        "build_s": round(build_s, 2),
        "two_layer": two_layer(g, train, args, caches),
    }
    result["hit_rate"] = round(cache.hit_rate, 3)
    result["overlap"] = overlap(g, train, args, caches)
    return result


def bench_graph(label: str, npz: str, args) -> dict:
    import torch

    from graphstore.client.api import exit_client, initialize
    from graphstore.client.dist_graph import DistGraph

    workdir = Path(args.workdir)
    name = f"anchor{label}"
    start = time.perf_counter()
    config = ensure_partitions(
        ensure_graph(npz, GRAPH_SIZES[label]), name, 2, workdir / f"{name}-2parts", part_method="metis"
    )
    prepare_s = time.perf_counter() - start
    with start_servers(config, 2, log_dir=workdir / "logs" / label, timeout=120) as servers:
        cluster = {
            "servers": server_entries(servers.addresses),
            "part_config": config,
            "local_read": "on",
            "local_part_id": 0,
        }
        if args.background_nice is not None:
            cluster["background_nice"] = args.background_nice
        if args.chunk_mb:
            cluster["rpc"] = {"chunk_bytes": int(args.chunk_mb * 1024 * 1024)}
        ctx = initialize(cluster)
        try:
            g = DistGraph(name)
            rng = np.random.default_rng(args.seed)
            mask = g.ndata["train_mask"][torch.arange(g.num_nodes())].numpy().astype(bool)
            train = torch.from_numpy(np.flatnonzero(mask))
            result = {
                "graph": label,
                "num_nodes": g.num_nodes(),
                "num_edges": g.num_edges(),
                "train_nodes": int(train.shape[0]),
                "colocated_partition": ctx.local_part_id,
                "prepare_s": round(prepare_s, 1),
                "one_hop": one_hop(g, rng, args.one_hop_repeats),
                "two_layer": two_layer(g, train, args),
                "overlap": overlap(g, train, args),
            }
            if args.cache_fraction > 0:
                result["with_remote_feature_cache"] = cached(g, train, args)
        finally:
            exit_client()
    return result


def main(argv=None) -> dict:
    args = parse_args(argv)
    import torch

    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    paths = {"200k": args.graph_200k, "1m": args.graph_1m}
    labels = [s.strip() for s in args.graphs.split(",") if s.strip()]
    for label in labels:
        if label not in GRAPH_SIZES:
            raise SystemExit(f"--graphs: unknown graph {label!r}; choose from {sorted(GRAPH_SIZES)}")
    report = {
        "benchmark": "loader",
        "setting": {
            "partitions": 2,
            "servers": 2,
            "client": "one process, co-located with partition 0 (local_read: on)",
            "cpu_count": os.cpu_count(),
            "torch_threads_default": torch.get_num_threads(),
            "chunk_mb": args.chunk_mb or RpcPolicy().chunk_bytes / 2**20,
        },
        "results": [bench_graph(label, paths[label], args) for label in labels],
    }
    emit_report(report, args.out)
    return report


if __name__ == "__main__":
    main()
