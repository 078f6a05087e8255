"""Benchmark one partition server on loopback: pull bandwidth, sampling rate, memory.

For each benchmark graph (``../shared/bench/anchor_graph.py``: 200k and 1M nodes, average degree 20,
100-d float32 features), partitioned in 2, it starts one ``graphstore server`` process for partition 0
and measures, in one run with the measurements interleaved so that machine noise hits all alike:

- Pull of 1,000 and 10,000 random rows of ``feat`` through ``RemotePartition`` (MB/s), next to
  (a) the raw-bytes ceiling of grpcio: a server in another process answering a call of the same
  size with a cached payload, identity serializers on both sides; and (b) the in-process gather of
  the same rows from the memory-mapped partition (numpy fancy indexing);
- SampleNeighbors of 1,024 seeds, fanout 10 (seeds/s);
- the server's anonymous RSS (RssAnon, which excludes mapped files) after touching every feature row
  and every node's neighbors once, against the partition's size on disk.

Targets (issue 3): 10,000-row pulls >= 0.7x the raw baseline; RssAnon <= 0.2x partition size on disk
+ 300 MB. DGL's pulls are measured beside graphstore's by ``make bench-dgl`` (``bench/dgl/side_by_side.py``).

    python bench/server.py                       # 200k and 1M nodes, JSON to stdout
    python bench/server.py --sizes 200000 --repeats 20 --out bench-server.json

Graphs and partitions are cached in ``--work-dir`` (default /tmp/graphstore-bench). The raw baseline
is reusable from other benchmarks: ``start_raw_server()`` and ``RawClient``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent import futures
from pathlib import Path

import numpy as np
from anchor import make_anchor_graph
from common import emit_report, ensure_partitions

REPO_ROOT = Path(__file__).resolve().parents[1]
_STARTUP_RE = re.compile(r" at (\S+) \(loaded in ([0-9.]+) s\)")
RAW_SERVICE = "graphstore.bench.Raw"


# ----------------------------------------------------------------------------------------------
# The raw-bytes baseline: a grpcio server in another process, identity serializers, cached payload
# ----------------------------------------------------------------------------------------------


def _raw_server_main(port: int) -> None:
    """Serve ``/graphstore.bench.Raw/Get``: the request's first 8 bytes are the answer's length."""
    import grpc

    from graphstore.malloc import raise_malloc_thresholds

    raise_malloc_thresholds()
    payloads: dict[int, bytes] = {}

    def get(request: bytes, context) -> bytes:
        size = int.from_bytes(request[:8], "little")
        if size not in payloads:
            payloads[size] = bytes(size)
        return payloads[size]

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        options=[("grpc.max_send_message_length", 1 << 30), ("grpc.max_receive_message_length", 1 << 30)],
    )
    handler = grpc.unary_unary_rpc_method_handler(get)  # no serializers: bytes in, bytes out
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(RAW_SERVICE, {"Get": handler}),))
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(f"raw server at 127.0.0.1:{bound}", flush=True)
    server.wait_for_termination()


def start_raw_server() -> tuple[subprocess.Popen, str]:
    """Start the raw-bytes baseline server in a new process; returns ``(process, address)``."""
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--raw-server"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    line = proc.stdout.readline()
    match = re.search(r"at (\S+)", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"raw baseline server did not start: {line!r}")
    return proc, match.group(1)


class RawClient:
    """Calls the raw baseline: ``get(nbytes, request_bytes)`` returns ``nbytes`` bytes."""

    def __init__(self, address: str) -> None:
        import grpc

        from graphstore.malloc import raise_malloc_thresholds

        raise_malloc_thresholds()
        self._channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 1 << 30)])
        self._call = self._channel.unary_unary(f"/{RAW_SERVICE}/Get")

    def get(self, nbytes: int, request_bytes: int = 8) -> bytes:
        """One call answering ``nbytes`` bytes; the request carries ``request_bytes`` bytes."""
        return self._call(nbytes.to_bytes(8, "little") + bytes(max(request_bytes - 8, 0)), timeout=60)

    def close(self) -> None:
        self._channel.close()


# ----------------------------------------------------------------------------------------------
# Graphs, partitions and the server under test
# ----------------------------------------------------------------------------------------------


def anchor_partitions(num_nodes: int, work_dir: Path, method: str, graph: str | None) -> str:
    """Generate (if missing) the anchor graph and its 2-way partition; returns the config path."""
    name = f"anchor{num_nodes // 1000}k"
    npz = make_anchor_graph(Path(graph) if graph else work_dir / f"{name}.npz", num_nodes)
    return ensure_partitions(npz, name, 2, work_dir / f"{name}-{method}-2", part_method=method)


def start_server(config: str, part_id: int) -> tuple[subprocess.Popen, str, float]:
    """Start ``graphstore server`` for one partition on a free port.

    Returns:
        ``(process, address, load seconds)``.
    """
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "graphstore.launcher.cli",
            "--log-level",
            "WARNING",
            "server",
            "--part-config",
            config,
            "--part-id",
            str(part_id),
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    line = proc.stdout.readline()
    match = _STARTUP_RE.search(line)
    if not match:
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, match.group(1), float(match.group(2))


def rss_anon_bytes(pid: int) -> tuple[int, int]:
    """``(RssAnon, VmRSS)`` of a process in bytes."""
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("RssAnon", "VmRSS"):
                values[key] = int(rest.split()[0]) * 1024
    return values["RssAnon"], values["VmRSS"]


def folder_bytes(path: Path) -> int:
    """Total size of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# ----------------------------------------------------------------------------------------------
# Measurements
# ----------------------------------------------------------------------------------------------


def _median_rate(samples: list[float], amount: float) -> float:
    return amount / statistics.median(samples)


def bench_graph(num_nodes: int, args: argparse.Namespace, raw: RawClient) -> dict:
    """Every measurement on one graph."""
    from graphstore.client.transport import RemotePartition
    from graphstore.partition import load_partition

    config = anchor_partitions(num_nodes, Path(args.work_dir), args.part_method, args.graph.get(num_nodes))
    proc, address, load_s = start_server(config, 0)
    try:
        client = RemotePartition(address, 0)
        client.wait_ready(60)
        meta = client.metadata()
        lo, hi = meta.node_bounds[0], meta.node_bounds[1]
        local = load_partition(config, 0)
        feat = np.asarray(local.node_feats["_N"]["feat"])
        row_bytes = feat.shape[1] * feat.itemsize
        rng = np.random.default_rng(0)
        result: dict = {"num_nodes": num_nodes, "part_nodes": hi - lo, "server_load_s": round(load_s, 3)}

        _ = feat[: hi - lo].sum()  # page the features in for the in-process gather
        for num_rows in (1000, 10_000):
            nbytes = num_rows * row_bytes
            pull_t, raw_t, raw_req_t, gather_t = [], [], [], []
            for rep in range(args.repeats + 3):
                ids = rng.integers(lo, hi, num_rows)
                t0 = time.perf_counter()
                rows = client.pull("feat", ids)
                t1 = time.perf_counter()
                raw.get(nbytes)
                t2 = time.perf_counter()
                raw.get(nbytes, request_bytes=8 * num_rows)
                t3 = time.perf_counter()
                gathered = feat[ids - lo]
                t4 = time.perf_counter()
                if rep < 3:
                    assert np.array_equal(rows, gathered), "pulled rows differ from the partition's"
                    continue  # warm-up
                pull_t.append(t1 - t0)
                raw_t.append(t2 - t1)
                raw_req_t.append(t3 - t2)
                gather_t.append(t4 - t3)
            pull = _median_rate(pull_t, nbytes) / 1e6
            base = _median_rate(raw_t, nbytes) / 1e6
            result[f"pull_{num_rows}"] = {
                "bytes": nbytes,
                "pull_MBps": round(pull, 1),
                "raw_baseline_MBps": round(base, 1),
                "raw_baseline_with_id_request_MBps": round(_median_rate(raw_req_t, nbytes) / 1e6, 1),
                "inprocess_gather_MBps": round(_median_rate(gather_t, nbytes) / 1e6, 1),
                "pull_over_raw": round(pull / base, 3),
                # Each repetition times both back to back: the median of those ratios cancels load drift.
                "pull_over_raw_paired_median": round(
                    statistics.median(r / p for r, p in zip(raw_t, pull_t, strict=True)), 3
                ),
                "pull_median_ms": round(statistics.median(pull_t) * 1e3, 3),
            }

        sample_t = []
        for _ in range(args.repeats + 3):
            seeds = rng.integers(lo, hi, 1024)
            t0 = time.perf_counter()
            src, dst, eid = client.sample_neighbors(seeds, 10)
            sample_t.append(time.perf_counter() - t0)
        result["sample_1024_fanout10"] = {
            "seeds_per_s": round(_median_rate(sample_t[3:], 1024)),
            "median_ms": round(statistics.median(sample_t[3:]) * 1e3, 3),
            "edges_last_call": int(len(eid)),
        }

        # Touch every row of every tensor and every node's neighbors once, then read RssAnon.
        all_ids = np.arange(lo, hi)
        for scheme in client.list_tensors():
            if scheme.policy == "node":
                for start in range(0, len(all_ids), 50_000):
                    client.pull(scheme.name, all_ids[start : start + 50_000])
        for start in range(0, len(all_ids), 20_000):
            client.sample_neighbors(all_ids[start : start + 20_000], -1)
        rss_anon, rss = rss_anon_bytes(proc.pid)
        disk = folder_bytes(Path(config).parent / "part0")
        limit = 0.2 * disk + 300e6
        result["memory"] = {
            "partition_on_disk_MB": round(disk / 1e6, 1),
            "server_rss_anon_MB": round(rss_anon / 1e6, 1),
            "server_vm_rss_MB": round(rss / 1e6, 1),
            "rss_anon_limit_MB": round(limit / 1e6, 1),
            "rss_anon_over_disk": round(rss_anon / disk, 3),
        }
        p10k = result["pull_10000"]
        result["targets"] = {
            "pull_10k_ge_0.7x_raw": p10k["pull_over_raw_paired_median"] >= 0.7,
            "rss_anon_le_0.2x_disk_plus_300MB": rss_anon <= limit,
        }
        client.shutdown()
        client.close()
        proc.wait(15)
        result["server_exit_code"] = proc.returncode
        return result
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[200_000, 1_000_000], help="graph sizes (nodes)"
    )
    parser.add_argument("--repeats", type=int, default=50, help="measured repeats per figure (median)")
    parser.add_argument("--work-dir", default="/tmp/graphstore-bench", help="cache of graphs and partitions")
    parser.add_argument("--part-method", default="random", choices=["random", "metis"])
    parser.add_argument(
        "--graph",
        action="append",
        default=[],
        metavar="NODES=PATH",
        help="use an existing anchor graph .npz for a size, e.g. 200000=/tmp/g200k.npz",
    )
    parser.add_argument("--out", default=None, help="also write the JSON here")
    parser.add_argument("--raw-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.raw_server:
        _raw_server_main(0)
        return 0
    args.graph = {int(k): v for k, v in (g.split("=", 1) for g in args.graph)}
    Path(args.work_dir).mkdir(parents=True, exist_ok=True)
    from graphstore.malloc import raise_malloc_thresholds

    raise_malloc_thresholds()
    raw_proc, raw_address = start_raw_server()
    raw = RawClient(raw_address)
    try:
        report = {
            "benchmark": "server",
            "host_cpus": os.cpu_count(),
            "loadavg_at_start": os.getloadavg()[0],
            "repeats": args.repeats,
            "part_method": args.part_method,
            "graphs": [bench_graph(n, args, raw) for n in args.sizes],
        }
    finally:
        raw.close()
        raw_proc.kill()
        raw_proc.wait(5)
    emit_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
