"""Chaos soak: a long mixed workload under ``graphstore launch`` while servers are killed and restarted.

``graphstore launch`` runs 2 servers with ``restart: on-failure`` and periodic checkpoints, and
``--procs`` client processes (as its trainers) that make mixed calls (pull, push-add, sample,
push-grad) without pause until told to stop. Every ``--kill-every-s`` seconds this script SIGKILLs
one server (alternating); launch restarts it from its newest checkpoint, and the clients' calls
retry with backoff until it serves again. It reports:

- calls made, errors (calls that failed even after their retries: 0 expected), p50 / p99 / max latency;
- for each kill, the recovery time: from the kill until every client has completed a call again;
- the restarts launch reported, and each server's anonymous RSS over time (Stats).

    python bench/soak.py                                   # 4 clients, 120 s, a kill every 20 s
    python bench/soak.py --duration-s 600 --procs 8 --out soak.json

The graph is generated (``--num-nodes``) and METIS-partitioned in 2 under ``--work-dir``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import emit_report
from load import KINDS, prepare_graph, run_ops  # the same mixed calls as bench/load.py

REPO_ROOT = Path(__file__).resolve().parents[1]

RIDE_OUT_RPC = {"deadline_s": 10, "max_retries": 30, "backoff_initial_s": 0.05, "backoff_max_s": 1.0}


def client_main(args: argparse.Namespace) -> int:
    """One soak client (a launch trainer): mixed calls in batches of 20 until the stop file appears."""
    from graphstore.client.api import exit_client, initialize
    from graphstore.partition import load_partition

    rank = int(os.environ.get("RANK", "0"))
    out = Path(args.client_out)
    ctx = initialize()
    partitions = [ctx.partition(k) for k in range(ctx.num_parts)]
    end = time.monotonic() + 120
    while not all({"load_adds", "load_emb"} <= {s.name for s in p.list_tensors()} for p in partitions):
        if time.monotonic() > end:
            raise SystemExit("the soak tensors never appeared")
        time.sleep(0.1)  # the parent creates them once the servers serve
    parts = [load_partition(ctx.part_config, k) for k in range(ctx.num_parts)]
    rng = np.random.default_rng([args.seed, rank])
    tally = np.zeros(ctx.num_rows("node"), np.float64)
    latency: list[float] = []
    completions: list[float] = []  # wall time of each completed batch
    errors: list[str] = []
    stop = out / "stop"
    while not stop.exists():
        result = run_ops(partitions, parts, rng, 20, tally)
        errors += result["errors"]
        for kind in KINDS:
            latency += result["latency_ms"][kind]
        completions.append(time.time())
    exit_client()
    (out / f"client-{rank}.json").write_text(
        json.dumps({"rank": rank, "latency_ms": latency, "completions": completions, "errors": errors})
    )
    return 0


def parent_main(args: argparse.Namespace) -> dict:
    import yaml

    from graphstore.client.transport import RemotePartition
    from graphstore.launcher.hosts import free_ports
    from graphstore.types import InitSpec

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    part_config = prepare_graph(args, work)
    run_dir = Path(tempfile.mkdtemp(prefix="soak-", dir=work))
    ports = free_ports(2)
    config = run_dir / "soak.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "graph_name": "loadgraph",
                "part_config": part_config,
                "servers": [{"host": "127.0.0.1", "port": p, "part_id": k} for k, p in enumerate(ports)],
                "trainers_per_host": args.procs,
                "restart": "on-failure",
                "max_restarts": 1000,
                "checkpoint": {"path": str(run_dir / "ckpt"), "every_s": args.checkpoint_every_s},
                "rpc": RIDE_OUT_RPC,
                "local_read": "off",
            }
        )
    )
    log_path = run_dir / "launch.log"
    log = open(log_path, "w")
    launch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "graphstore.launcher.cli",
            "--log-level",
            "WARNING",
            "launch",
            "--config",
            str(config),
        ]
        + [
            "--",
            sys.executable,
            __file__,
            "--client",
            "--client-out",
            str(run_dir),
            "--seed",
            str(args.seed),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO_ROOT,
        start_new_session=True,
    )
    kills: list[dict] = []
    rss: list[dict] = []
    try:
        _wait_for(lambda: "trainers: MASTER_ADDR" in log_path.read_text(), launch)
        remotes = [RemotePartition(f"127.0.0.1:{p}", k) for k, p in enumerate(ports)]
        num_nodes = remotes[0].metadata().num_nodes
        for remote in remotes:
            remote.init_tensor("load_adds", (num_nodes, 1), "float32", "node")
            remote.init_tensor(
                "load_emb", (num_nodes, 16), "float32", "node", init=InitSpec("uniform", -1, 1)
            )
        started = time.monotonic()
        next_kill = started + args.kill_every_s
        victim = 0
        while time.monotonic() - started < args.duration_s:
            if launch.poll() is not None:
                raise RuntimeError(f"launch ended early:\n{log_path.read_text()[-3000:]}")
            sample = {"t": round(time.monotonic() - started, 1), "rss_anon_mb": []}
            for remote in remotes:
                try:
                    sample["rss_anon_mb"].append(round(remote.stats().rss_anon_bytes / 2**20, 2))
                except Exception:  # noqa: BLE001 - a server being restarted
                    sample["rss_anon_mb"].append(None)
            rss.append(sample)
            if time.monotonic() >= next_kill:
                pid = _server_pid(log_path.read_text(), victim)
                os.kill(pid, signal.SIGKILL)
                kills.append(
                    {
                        "server": victim,
                        "pid": pid,
                        "at": time.time(),
                        "t": round(time.monotonic() - started, 1),
                    }
                )
                victim = 1 - victim
                next_kill += args.kill_every_s
            time.sleep(1.0)
        (run_dir / "stop").write_text("")
        code = launch.wait(timeout=300)
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGTERM)
            launch.wait(60)
        log.close()
    output = log_path.read_text()
    clients = [json.loads(p.read_text()) for p in sorted(run_dir.glob("client-*.json"))]
    latency = [v for c in clients for v in c["latency_ms"]]
    errors = [e for c in clients for e in c["errors"]]
    recoveries = []
    for kill in kills:
        after = [min((t for t in c["completions"] if t > kill["at"]), default=None) for c in clients]
        recoveries.append(None if None in after else round(max(after) - kill["at"], 2))
    return {
        "procs": args.procs,
        "duration_s": args.duration_s,
        "launch_exit_code": code,
        "calls": len(latency),
        "calls_per_s": round(len(latency) / args.duration_s, 1),
        "errors": len(errors),
        "error_examples": errors[:5],
        "latency_ms": {
            "p50": round(float(np.percentile(latency, 50)), 2) if latency else None,
            "p99": round(float(np.percentile(latency, 99)), 2) if latency else None,
            "max": round(max(latency), 2) if latency else None,
        },
        "kills": [{"server": k["server"], "t": k["t"]} for k in kills],
        "restarts_reported": len(re.findall(r"event=server_restart ", output)),
        "restores_reported": len(re.findall(r"event=restored ", output)),
        "recovery_s": recoveries,
        "rss": rss[:: max(1, len(rss) // 30)],
        "run_dir": str(run_dir),
    }


def _server_pid(output: str, part_id: int) -> int:
    pids = re.findall(rf"started server-{part_id} locally \(pid (\d+)\)", output)
    if not pids:
        raise RuntimeError(f"launch has not reported server-{part_id}'s pid")
    return int(pids[-1])


def _wait_for(condition, proc, timeout_s: float = 180) -> None:
    end = time.monotonic() + timeout_s
    while not condition():
        if proc.poll() is not None or time.monotonic() > end:
            raise RuntimeError("launch did not start its trainers")
        time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", type=int, default=4, help="client processes (launch trainers)")
    parser.add_argument("--duration-s", type=float, default=120.0)
    parser.add_argument("--kill-every-s", type=float, default=20.0)
    parser.add_argument("--checkpoint-every-s", type=float, default=2.0)
    parser.add_argument("--num-nodes", type=int, default=20000)
    parser.add_argument("--graph", default=None, help="an .npz graph instead of a generated one")
    parser.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "graphstore-soak"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client-out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        return client_main(args)
    report = parent_main(args)
    emit_report(report, args.out, indent=1)
    return 0 if report["errors"] == 0 and report["launch_exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
