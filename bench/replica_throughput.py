"""Read throughput of 8 client threads against 1, 2 and 4 servers per partition (read replicas).

For each ``--replicas`` count R, starts R servers for each of the 2 partitions of Cora (the owner and
R - 1 ``--read-replica`` servers) and one client process (``local_read: off``) whose ``--threads``
threads each repeat one sampling call (``--seeds`` random seeds, fanout 10) and one feature pull
(``--rows`` random rows) for ``--seconds``. It reports, per R:

- ``calls_per_s``: sampling calls + pulls answered per second (wall clock, this machine);
- per server: the calls it answered (its Stats ``calls_*`` counters) and the CPU seconds it used
  (``/proc/PID/stat``), hence ``server_cpu_ms_per_call``, and the share of its partition's calls;
- ``client_cpu_ms_per_call`` (the client process's CPU per call);
- ``projected_calls_per_s``: what the servers could answer with a core each, ``R x calls per server
  CPU-second`` per partition, summed over the partitions (the ceiling the servers put on any number of
  clients), and its ``projected_ratio`` against R = 1;
- ``client_one_core_calls_per_s``: what this one client process could make on one core at its CPU cost
  per call (its Python work holds one interpreter lock; how much of its CPU runs outside it, in gRPC's
  threads and numpy, this does not tell).

Why a projection: on a host with fewer cores than processes (2 here), adding servers adds no cores,
so the measured wall-clock rate cannot grow; what replicas change is how the calls are split (each
server answers 1/R of them, with the same CPU cost per call) and that a Python server is one process,
at most about one core of Python work. Where the cores exist (``nproc`` >= servers + client threads),
``calls_per_s`` is the figure to read.

    python bench/replica_throughput.py --out bench/results/replica-throughput.json
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch
from common import emit_report

from graphstore.client import DistGraph, exit_client, get_context, initialize, sample_neighbors
from graphstore.client.transport import RemotePartition
from graphstore.launcher.local_servers import start_servers

REPO_ROOT = Path(__file__).resolve().parents[1]
CORA = REPO_ROOT / "datasets" / "cora.npz"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def served(address: str) -> int:
    """Read calls (Pull + SampleNeighbors) a server answered so far."""
    with RemotePartition(address) as remote:
        counters = remote.stats().counters
    return counters.get("calls_Pull", 0) + counters.get("calls_SampleNeighbors", 0)


def measure(part_config: str, replicas: int, args: argparse.Namespace, work: Path) -> dict:
    groups = [
        start_servers(
            part_config,
            2,
            () if r == 0 else ("--read-replica", "--num-threads", "16"),
            log_dir=work / f"r{replicas}-{r}",
            timeout=120,
        )
        for r in range(replicas)
    ]
    try:
        servers = [
            {"host": "127.0.0.1", "port": int(addr.rsplit(":", 1)[1]), "part_id": k}
            for group in groups
            for k, addr in enumerate(group.addresses)
        ]
        initialize(
            {
                "graph_name": "cora",
                "part_config": part_config,
                "servers": servers,
                "local_read": "off",
                "rpc": {"connect_timeout_s": 60},
            }
        )
        g = DistGraph("cora")
        feat = g.ndata["feat"]
        n = g.num_nodes()
        counts = [0] * args.threads
        stop = threading.Event()

        def worker(index: int) -> None:
            rng = np.random.default_rng(index)
            while not stop.is_set():
                sample_neighbors(g, torch.from_numpy(rng.choice(n, args.seeds, replace=False)), 10)
                feat[torch.from_numpy(rng.integers(0, n, args.rows))]
                counts[index] += 2

        addresses = [a for group in groups for a in group.addresses]
        pids = [p.pid for group in groups for p in group.procs]
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.threads)]
        for thread in threads:
            thread.start()
        time.sleep(args.warmup_s)
        calls0, served0 = sum(counts), [served(a) for a in addresses]
        cpu0, client0, wall0 = [cpu_seconds(p) for p in pids], time.process_time(), time.monotonic()
        time.sleep(args.seconds)
        calls1, served1 = sum(counts), [served(a) for a in addresses]
        cpu1, client1, wall1 = [cpu_seconds(p) for p in pids], time.process_time(), time.monotonic()
        stop.set()
        for thread in threads:
            thread.join()
        states = [get_context().partition(k) for k in range(2)]
        replica_states = [p.replica_states() for p in states if hasattr(p, "replica_states")]
        exit_client()
    finally:
        for group in groups:
            group.stop()
    calls = calls1 - calls0
    wall = wall1 - wall0
    per_server = []
    for index, address in enumerate(addresses):
        answered = served1[index] - served0[index]
        cpu = cpu1[index] - cpu0[index]
        per_server.append(
            {
                "address": address,
                "part_id": index % 2,
                "role": "owner" if index < 2 else "read_replica",
                "calls": answered,
                "cpu_s": round(cpu, 3),
                "cpu_busy": round(cpu / wall, 3),
                "server_cpu_ms_per_call": round(1000 * cpu / answered, 4) if answered else None,
            }
        )
    for entry in per_server:
        total = sum(e["calls"] for e in per_server if e["part_id"] == entry["part_id"])
        entry["share_of_partition"] = round(entry["calls"] / total, 3) if total else None
    server_cpu_per_call = sum(e["cpu_s"] for e in per_server) / max(1, sum(e["calls"] for e in per_server))
    client_cpu_per_call = (client1 - client0) / max(1, calls)
    # With a core per server: each partition answers R / (CPU per call) calls per second, the two
    # partitions together twice that.
    server_bound = 2 * replicas / server_cpu_per_call
    return {
        "replicas": replicas,
        "calls_per_s": round(calls / wall, 1),
        "client_cpu_ms_per_call": round(1000 * client_cpu_per_call, 4),
        "server_cpu_ms_per_call": round(1000 * server_cpu_per_call, 4),
        "servers": per_server,
        "max_share_of_partition": max(e["share_of_partition"] or 0 for e in per_server),
        "projected_calls_per_s": round(server_bound, 1),
        "client_one_core_calls_per_s": round(1 / client_cpu_per_call, 1),
        "replica_states": replica_states,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=64)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup-s", type=float, default=2.0)
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench-replica-throughput-"))
    part_config = work / "cora" / "cora.json"
    if not part_config.exists():
        from graphstore.launcher.cli import main as cli

        code = cli(
            [
                "partition",
                "--graph",
                str(CORA),
                "--name",
                "cora",
                "--num-parts",
                "2",
                "--out",
                str(work / "cora"),
            ]
        )
        if code:
            return code
    results = [measure(str(part_config), r, args, work) for r in args.replicas]
    base = results[0]
    for result in results:
        result["measured_ratio"] = round(result["calls_per_s"] / base["calls_per_s"], 2)
        result["projected_ratio"] = round(result["projected_calls_per_s"] / base["projected_calls_per_s"], 2)
    emit_report(
        {
            "host_cores": os.cpu_count(),
            "threads": args.threads,
            "seeds_per_sample": args.seeds,
            "rows_per_pull": args.rows,
            "seconds": args.seconds,
            "results": results,
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
