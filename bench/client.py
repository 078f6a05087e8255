"""Benchmark of the trainer client's DistTensor reads (issue 4), printed as JSON.

On the anchor graph (200k nodes, 100-d float32 features by default) partitioned in 2, with one server
process per partition on loopback, it reads ``--rows`` random feature rows (4 MB for 10,000 rows) and
reports medians over ``--repeats`` of:

(a) ``g.ndata['feat'][ids]`` with the two servers' requests in flight together vs one after the other
    (the same client, its ``run_parallel`` swapped for a sequential loop), interleaved in one run;
(b) the same concurrent read against the raw-bytes gRPC ceiling of bench/server.py (a separate process
    answering a request of the same size with a cached payload of the same size through identity
    serializers; one server, as in the server benchmark; two such servers in flight together also
    reported);
(c) with partition 0 co-located (``local_read: on``): the same mixed read (timed on its own), then the
    co-located partition's rows alone and numpy's in-process gather of such rows from the same
    memory-mapped file into a reused array, interleaved (each with its own random rows, so neither
    reads rows the other just cached).

    python bench/client.py                       # generates /tmp/g200k.npz once if missing
    python bench/client.py --graph /tmp/g200k.npz --rows 10000 --repeats 30 --out client.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from anchor import make_anchor_graph
from common import emit_report, ensure_partitions

from graphstore.launcher.local_servers import start_servers

TARGETS = {"concurrent_vs_sequential": 1.3, "vs_raw_baseline": 0.7, "local_part_vs_numpy_gather": 0.9}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--graph", default="/tmp/g200k.npz", help="anchor graph .npz (generated when missing)"
    )
    parser.add_argument("--num-nodes", type=int, default=200_000, help="nodes when generating the graph")
    parser.add_argument("--workdir", default="/tmp/graphstore-bench-client", help="partition output and logs")
    parser.add_argument("--part-method", default="metis", choices=["metis", "random"])
    parser.add_argument("--rows", type=int, default=10_000, help="rows per read")
    parser.add_argument("--repeats", type=int, default=30, help="timed reads per variant")
    parser.add_argument("--warmup", type=int, default=5, help="untimed reads per variant first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="also write the JSON here")
    return parser.parse_args(argv)


# ----- the raw-bytes baseline: bench/server.py's, reused -------------------------------------------


def load_server_bench():
    """bench/server.py as a module: its ``start_raw_server()`` and ``RawClient`` are the raw baseline."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "graphstore_bench_server", Path(__file__).resolve().with_name("server.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----- set-up --------------------------------------------------------------------------------------


def ensure_graph(args) -> Path:
    return make_anchor_graph(args.graph, args.num_nodes)


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def cluster_config(addresses: list[str], config_path: str, local_read: str) -> dict:
    servers = []
    for part_id, address in enumerate(addresses):
        host, port = address.rsplit(":", 1)
        servers.append({"host": host, "port": int(port), "part_id": part_id})
    return {"servers": servers, "part_config": config_path, "local_read": local_read, "local_part_id": 0}


# ----- measurements --------------------------------------------------------------------------------


def timed(fn, repeats: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def interleaved(fns: dict, repeats: int, warmup: int) -> dict[str, list[float]]:
    """Time several variants in alternation so that drift affects all alike; the order rotates every
    repeat, so no variant always runs right after another (whose reads may have warmed the caches)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    names = list(fns)
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - start)
    return times


def mb_s(nbytes: int, seconds: list[float]) -> float:
    return round(nbytes / statistics.median(seconds) / 1e6, 1)


def id_sets(rng: np.random.Generator, high: int, rows: int, count: int, low: int = 0) -> list[np.ndarray]:
    return [rng.integers(low, high, rows).astype(np.int64) for _ in range(count)]


def cycling(fn, sets: list[np.ndarray]):
    state = {"i": 0}

    def call():
        ids = sets[state["i"] % len(sets)]
        state["i"] += 1
        return fn(ids)

    return call


def run(args) -> dict:
    import torch

    from graphstore.client import api
    from graphstore.client.dist_graph import DistGraph
    from graphstore.malloc import raise_malloc_thresholds

    raise_malloc_thresholds()
    torch.set_num_threads(1)
    graph_path = ensure_graph(args)
    config_path = ensure_partitions(
        graph_path,
        "bench",
        2,
        Path(args.workdir) / f"{graph_path.stem}-2parts-{args.part_method}",
        part_method=args.part_method,
    )
    servers = start_servers(config_path, 2, log_dir=Path(args.workdir) / "logs", timeout=120)
    addresses = servers.addresses
    raw_procs = []
    rng = np.random.default_rng(args.seed)
    try:
        ctx = api.initialize(cluster_config(addresses, config_path, "off"))
        feat = DistGraph("bench").ndata["feat"]
        num_nodes, row_bytes = feat.shape[0], feat.shape[1] * 4
        nbytes = args.rows * row_bytes
        sets = id_sets(rng, num_nodes, args.rows, 8)
        from graphstore.partition import load_partition

        table = np.concatenate([load_partition(config_path, p).node_feats["_N"]["feat"] for p in range(2)])
        for ids in sets[:2]:  # the client returns what the partition files hold
            assert np.array_equal(feat[ids].numpy(), table[ids])

        parallel = ctx.run_parallel
        sequential_runner = lambda calls: [call() for call in calls]

        def read_sequential(ids):
            ctx.run_parallel = sequential_runner
            try:
                return feat[ids]
            finally:
                ctx.run_parallel = parallel

        # (b) the raw-bytes ceiling, same request and answer sizes: one server, and two in flight together
        server_bench = load_server_bench()
        raws = [server_bench.start_raw_server() for _ in range(3)]
        raw_procs.extend(proc for proc, _ in raws)
        raw_clients = [server_bench.RawClient(address) for _, address in raws]
        pool = ThreadPoolExecutor(max_workers=1)

        def raw_single(_ids):
            return raw_clients[0].get(nbytes, request_bytes=8 * args.rows)

        def raw_pair(_ids):
            other = pool.submit(raw_clients[2].get, nbytes // 2, 4 * args.rows)
            return raw_clients[1].get(nbytes // 2, request_bytes=4 * args.rows), other.result()

        times = interleaved(
            {
                "concurrent": cycling(lambda ids: feat[ids], sets),
                "sequential": cycling(read_sequential, sets),
                "raw_1_server": cycling(raw_single, sets),
                "raw_2_servers": cycling(raw_pair, sets),
            },
            args.repeats,
            args.warmup,
        )
        pool.shutdown()
        for raw_client in raw_clients:
            raw_client.close()
        remote = {name: mb_s(nbytes, t) for name, t in times.items()}
        api.exit_client()

        # (c) partition 0 co-located: its read-only rows come from the mapped files, not its server
        ctx = api.initialize(cluster_config(addresses, config_path, "on"))
        assert ctx.local_part_id == 0
        feat = DistGraph("bench").ndata["feat"]
        part0_end = int(ctx.book.node_bounds[1])
        # Each variant reads its own random rows (drawn alike): a gather of rows another variant has
        # just read would find them in the CPU caches.
        local_sets = id_sets(rng, part0_end, args.rows, 8)
        gather_sets = id_sets(rng, part0_end, args.rows, 8)
        local_array = ctx.local_partition_data.node_feats["_N"]["feat"]
        gather_out = np.empty((args.rows, feat.shape[1]), dtype=np.float32)
        for ids in sets[:2]:
            assert np.array_equal(feat[ids].numpy(), table[ids])
        # The mixed read on its own: its RPC keeps the server (and the client's gRPC threads) busy for
        # a moment after it returns, which would slow whichever in-process read came next.
        mixed_times = timed(cycling(lambda ids: feat[ids], sets), args.repeats, args.warmup)
        local_times = interleaved(
            {
                "colocated_local_part_only": cycling(lambda ids: feat[ids], local_sets),
                # mode="clip": numpy's fastest take (the default "raise" gathers into a temporary and
                # copies it back); the IDs are in range, so nothing is clipped.
                "inprocess_numpy_gather": cycling(
                    lambda ids: np.take(local_array, ids, axis=0, out=gather_out, mode="clip"), gather_sets
                ),
            },
            args.repeats,
            args.warmup,
        )
        colocated = {"colocated_mixed": mb_s(nbytes, mixed_times)}
        colocated.update({name: mb_s(nbytes, t) for name, t in local_times.items()})
        api.exit_client()
    finally:
        api.exit_client()
        stop(raw_procs)
        servers.stop()

    ratios = {
        "a_concurrent_vs_sequential": round(remote["concurrent"] / remote["sequential"], 2),
        "b_vs_raw_1_server": round(remote["concurrent"] / remote["raw_1_server"], 2),
        "b_vs_raw_2_servers": round(remote["concurrent"] / remote["raw_2_servers"], 2),
        "c_colocated_vs_rpc": round(colocated["colocated_mixed"] / remote["concurrent"], 2),
        "c_local_part_vs_numpy_gather": round(
            colocated["colocated_local_part_only"] / colocated["inprocess_numpy_gather"], 2
        ),
    }
    return {
        "benchmark": "client",
        "graph": str(graph_path),
        "num_nodes": int(num_nodes),
        "feat_dim": int(row_bytes // 4),
        "partitions": 2,
        "part_method": args.part_method,
        "rows_per_read": args.rows,
        "bytes_per_read": nbytes,
        "repeats": args.repeats,
        "statistic": "median",
        "mb_per_s": {**remote, **colocated},
        "ratios": ratios,
        "targets": TARGETS,
        "meets_targets": {
            "a": ratios["a_concurrent_vs_sequential"] >= TARGETS["concurrent_vs_sequential"],
            "b": ratios["b_vs_raw_1_server"] >= TARGETS["vs_raw_baseline"],
            "c": ratios["c_local_part_vs_numpy_gather"] >= TARGETS["local_part_vs_numpy_gather"],
        },
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    emit_report(run(args), args.out)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
