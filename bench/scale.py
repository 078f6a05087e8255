"""The cost of scale: partition time and peak memory per phase, and one GraphSAGE epoch taken apart.

    # partition a graph (in a fresh process) into 4 parts with METIS; the phases' time and peak RSS
    python bench/scale.py partition --graph /tmp/g.npz --num-parts 4 --out /tmp/g-parts [--feat-dtype float16]

    # one epoch on those partitions: 4 servers + 2 trainers on this machine, configs/train-large.yaml
    python bench/scale.py epoch --part-config /tmp/g-parts/g.json [--trainers 2] [--cache-remote 0.1]

Both print one json object (also written to ``--out-json``), with the machine's load average before
and after: on a shared machine the wall times grow with the load; the CPU seconds of the partition
phases and the ratios between phases are what carry over. ``docs/scale.md`` holds the measured table
and the model drawn from it. Graphs come from ``graphstore generate`` (the table's commands are in
``docs/scale.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import yaml
from common import emit_report

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = [sys.executable, "-m", "graphstore.launcher.cli"]


def machine() -> dict:
    """CPU count, memory and the 1-minute load average now."""
    with open("/proc/meminfo") as fh:
        mem = {line.split(":")[0]: int(line.split()[1]) for line in fh}
    return {
        "cpus": os.cpu_count(),
        "mem_total_gib": round(mem["MemTotal"] / 2**20, 1),
        "mem_available_gib": round(mem["MemAvailable"] / 2**20, 1),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def partition_child(graph: str, num_parts: int, out: str, feat_dtype: str | None) -> dict:
    """Partition in this process (a fresh child) and return the result's figures."""
    from graphstore.partition import partition_graph

    result = partition_graph(graph, "g", num_parts, out, feat_dtype=feat_dtype, overwrite=True)
    return {
        "num_nodes": result.num_nodes,
        "num_edges": result.num_edges,
        "edge_cut": round(result.edge_cut, 4),
        "total_s": round(result.total_seconds, 1),
        "seconds": result.timings,
        "cpu_seconds": result.cpu_timings,
        "phase_peak_rss_gib": {k: round(v / 2**30, 3) for k, v in result.phase_peak_rss_bytes.items()},
        "peak_rss_gib": round(result.peak_rss_bytes / 2**30, 3),
        "config": result.config_path,
    }


def run_partition(args: argparse.Namespace) -> dict:
    before = machine()
    command = [sys.executable, os.path.abspath(__file__), "partition-child", args.graph, str(args.num_parts)]
    command += [args.out, args.feat_dtype or ""]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"partitioning failed ({proc.returncode}): {proc.stderr[-3000:]}")
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        "benchmark": "scale-partition",
        "graph": args.graph,
        "num_parts": args.num_parts,
        "feat_dtype": args.feat_dtype,
        **figures,
        "machine_before": before,
        "machine_after": machine(),
    }


def cluster_yaml(part_config: str, servers: int, trainers: int, folder: str) -> str:
    """A cluster of ``servers`` servers on loopback (ports picked by the launcher's demo helper)."""
    from graphstore.launcher.demo import write_cluster_config

    template = os.path.join(folder, "template.yaml")
    with open(part_config) as fh:
        name = json.load(fh)["graph_name"]
    mapping = {
        "graph_name": name,
        "part_config": os.path.abspath(part_config),
        "servers": [{"host": "127.0.0.1", "port": 50200 + k, "part_id": k} for k in range(servers)],
        "trainers_per_host": trainers,
        "rpc": {"deadline_s": 300, "connect_timeout_s": 600},
        "local_read": "auto",
    }
    with open(template, "w") as fh:
        yaml.safe_dump(mapping, fh, sort_keys=False)
    from pathlib import Path

    return str(write_cluster_config(Path(template), Path(part_config), Path(folder) / "cluster.yaml"))


def launch_trainers(part_config: str, trainers: int, trainer: list[str]) -> tuple[dict, float]:
    """Run ``trainer`` (a command; ``--metrics-json PATH`` is appended) as ``trainers`` trainers beside one
    server per partition of ``part_config``, under ``graphstore launch`` on this machine.

    Returns:
        The json the trainers wrote to ``PATH``, and the seconds from launch to exit.

    Raises:
        RuntimeError: the launch failed.
    """
    with open(part_config) as fh:
        num_parts = json.load(fh)["num_parts"]
    folder = tempfile.mkdtemp(prefix="gs-bench-")
    cluster = cluster_yaml(part_config, num_parts, trainers, folder)
    metrics = os.path.join(folder, "metrics.json")
    start = time.perf_counter()
    command = [*CLI, "launch", "--config", cluster, "--", *trainer, "--metrics-json", metrics]
    proc = subprocess.run(command, cwd=REPO_ROOT, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"graphstore launch exited {proc.returncode}")
    with open(metrics) as fh:
        return json.load(fh), round(time.perf_counter() - start, 1)


def run_epoch(args: argparse.Namespace) -> dict:
    before = machine()
    with open(args.part_config) as fh:
        config = json.load(fh)
    trainer = [
        sys.executable,
        os.path.join(REPO_ROOT, "bench", "scale_epoch.py"),
        "--graph-name",
        config["graph_name"],
        "--part-config",
        os.path.abspath(args.part_config),
        "--config",
        os.path.join(REPO_ROOT, args.train_config),
        "--cache-remote",
        str(args.cache_remote),
        *(["--model", args.model] if args.model else []),
    ]
    figures, launch_s = launch_trainers(args.part_config, args.trainers, trainer)
    return {
        "benchmark": "scale-epoch",
        "part_config": args.part_config,
        "servers": config["num_parts"],
        "trainers": args.trainers,
        "train_config": args.train_config,
        **figures,
        "launch_to_exit_s": launch_s,
        "machine_before": before,
        "machine_after": machine(),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "partition-child":
        graph, num_parts, out, feat_dtype = argv[1:5]
        print(json.dumps(partition_child(graph, int(num_parts), out, feat_dtype or None)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    part = sub.add_parser("partition", help="partition a graph, time and peak RSS per phase")
    part.add_argument("--graph", required=True)
    part.add_argument("--num-parts", type=int, default=4)
    part.add_argument("--out", required=True)
    part.add_argument("--feat-dtype", default=None)
    epoch = sub.add_parser("epoch", help="one GraphSAGE epoch: sample / pull / compute, bytes, peak RSS")
    epoch.add_argument("--part-config", required=True)
    epoch.add_argument("--trainers", type=int, default=2)
    epoch.add_argument("--train-config", default="configs/train-large.yaml")
    epoch.add_argument("--cache-remote", type=float, default=0.0)
    epoch.add_argument("--model", default=None, help="sage (default) | mlp")
    for p in (part, epoch):
        p.add_argument("--out-json", default=None, help="also write the json here")
    args = parser.parse_args(argv)
    report = run_partition(args) if args.what == "partition" else run_epoch(args)
    emit_report(report, args.out_json, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
