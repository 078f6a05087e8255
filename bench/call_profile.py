"""Where a small call's time goes: client and server CPU microseconds per call, and wall time, of a remote
pull of 1,000 rows and of a 1-hop sample of 1,024 seeds.

Two partition servers run as processes (``graphstore server``), the client is this process, co-located
with partition 0 (``local_read: on``). Per workload it makes ``--calls`` calls, ``--repeats`` times, and
reports the medians of: this process's CPU time per call (``getrusage``), the remote server's CPU time per
call (``/proc/PID/stat``), and wall time per call. CPU time per call counts the work of each side and
moves far less than wall time when other work shares the machine, so two versions of the code can be
compared on a busy machine (run each from its own checkout; the script uses the public client API
only). The machine's load average is recorded with the figures.

    python bench/call_profile.py --part-config /tmp/bench/parts/bench.json --out profile.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import graphstore
from graphstore.client import DistGraph, exit_client, initialize, sample_neighbors
from graphstore.launcher.local_servers import start_servers

_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def per_call(work, inputs: list, server_pid: int, calls: int, warmup: int = 20) -> dict:
    """Client CPU, server CPU and wall microseconds per call of ``work`` over ``inputs`` (cycled)."""
    for item in inputs[:warmup]:
        work(item)
    client, server, wall = own_cpu_s(), process_cpu_s(server_pid), time.perf_counter()
    for k in range(calls):
        work(inputs[k % len(inputs)])
    wall = time.perf_counter() - wall
    return {
        "client_us": (own_cpu_s() - client) / calls * 1e6,
        "server_us": (process_cpu_s(server_pid) - server) / calls * 1e6,
        "wall_us": wall / calls * 1e6,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--part-config", required=True, help="a 2-partition homogeneous graph with 'feat'")
    parser.add_argument("--graph-name", default="bench")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--log-dir", default="/tmp/graphstore-call-profile")
    parser.add_argument("--out", help="write the figures here as JSON")
    args = parser.parse_args(argv)
    config = json.loads(Path(args.part_config).read_text())
    low, high = config["node_map"]["_N"][1]
    num_nodes = config["node_map"]["_N"][-1][1]
    rng = np.random.default_rng(0)
    pulls = [rng.integers(low, high, 1000) for _ in range(200)]
    seed_sets = [rng.choice(num_nodes, 1024, replace=False) for _ in range(200)]
    Path(args.log_dir).mkdir(parents=True, exist_ok=True)
    with start_servers(args.part_config, 2, log_dir=args.log_dir, timeout=300) as group:
        ports = [int(address.rsplit(":", 1)[1]) for address in group.addresses]
        initialize(
            {
                "graph_name": args.graph_name,
                "part_config": args.part_config,
                "servers": [{"host": "127.0.0.1", "port": p, "part_id": k} for k, p in enumerate(ports)],
                "local_read": "on",
                "local_part_id": 0,
            }
        )
        try:
            g = DistGraph(args.graph_name)
            feat = g.ndata["feat"]
            workloads = {
                "pull/remote/1000": (lambda ids: feat[ids], pulls),
                "sample/1hop": (lambda seeds: sample_neighbors(g, seeds, 10), seed_sets),
            }
            runs = {name: [] for name in workloads}
            for _ in range(args.repeats):  # the workloads alternate, so drift hits them alike
                for name, (work, inputs) in workloads.items():
                    runs[name].append(per_call(work, inputs, group.procs[1].pid, args.calls))
        finally:
            exit_client()
    figures = {
        name: {key: statistics.median(run[key] for run in measured) for key in measured[0]}
        for name, measured in runs.items()
    }
    package = Path(graphstore.__file__).resolve().parent  # the checkout whose code ran
    commit = subprocess.run(["git", "-C", str(package), "rev-parse", "HEAD"], capture_output=True, text=True)
    report = {
        "commit": commit.stdout.strip(),
        "loadavg": os.getloadavg(),
        "calls": args.calls,
        "repeats": args.repeats,
        **figures,
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
