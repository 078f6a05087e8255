"""The same graph partitioned serially and by K MPI ranks: edge cut, balance, time, peak RSS per rank.

    python bench/parallel_partition.py --graph g1m.npz --num-parts 4 --ranks 2 4 --workdir /tmp/pp \\
        [--balance-ntypes train_mask] [--mem-limit-gib 4] [--out bench/results/parallel_partition.json]

Steps: ``graphstore chunk`` (K chunks), the serial ``graphstore partition --graph`` and, for each rank
count, ``mpirun -np K graphstore partition --chunks`` (each rank optionally in its own memory cgroup
capped at ``--mem-limit-gib``, through ``systemd-run --scope -p MemoryMax=`` where systemd runs, else a
cgroup v2 folder made here), each validated with ``graphstore validate``. Prints one json object: per
run the edge cut, the cut ratio to the serial one, nodes per partition and their largest deviation from
an even share per balance category, wall time, and peak RSS per rank and in total.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
CLI = [sys.executable, "-m", "graphstore.launcher.cli", "--log-level", "WARNING"]


def _run(cmd: list[str], timeout: float, log: str | None = None) -> tuple[str, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if log:
        with open(log, "w") as fh:
            fh.write(err)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err[-2000:]}")
    return out, time.perf_counter() - start


def _balance(config_path: str, graph_path: str, masks: list[str]) -> dict:
    """Largest relative deviation from an even share, per category (all nodes, each mask)."""
    from graphstore.partition import load_partition

    config = json.load(open(config_path))
    parts = [load_partition(config_path, k) for k in range(config["num_parts"])]
    out = {}
    sizes = np.array([p.num_local_nodes for p in parts], dtype=np.float64)
    out["nodes"] = float(np.abs(sizes / sizes.mean() - 1).max())
    for name in masks:
        counts = np.array([int(np.asarray(p.node_feats["_N"][name]).sum()) for p in parts], dtype=np.float64)
        out[name] = float(np.abs(counts / counts.mean() - 1).max())
    return out


NETNS = ("gsA", "gsB")
NETNS_IPS = ("10.99.0.1", "10.99.0.2")


def setup_netns(workdir: str) -> str:
    """Two network namespaces joined by a veth pair (10.99.0.1 / 10.99.0.2), and an Open MPI launch
    agent that starts the ORTE daemon of "host" 10.99.0.x inside its namespace. Returns the agent."""
    a, b = NETNS
    cmds = [
        ["ip", "netns", "add", a],
        ["ip", "netns", "add", b],
        ["ip", "link", "add", "gsvA", "type", "veth", "peer", "name", "gsvB"],
        ["ip", "link", "set", "gsvA", "netns", a],
        ["ip", "link", "set", "gsvB", "netns", b],
        ["ip", "-n", a, "addr", "add", f"{NETNS_IPS[0]}/24", "dev", "gsvA"],
        ["ip", "-n", b, "addr", "add", f"{NETNS_IPS[1]}/24", "dev", "gsvB"],
        ["ip", "-n", a, "link", "set", "gsvA", "up"],
        ["ip", "-n", b, "link", "set", "gsvB", "up"],
        ["ip", "-n", a, "link", "set", "lo", "up"],
        ["ip", "-n", b, "link", "set", "lo", "up"],
    ]
    teardown_netns()
    for cmd in cmds:
        subprocess.run(cmd, check=True)
    agent = os.path.join(workdir, "netns_agent.sh")
    with open(agent, "w") as fh:
        fh.write(
            "#!/bin/sh\n# Open MPI rsh agent: host 10.99.0.1 is namespace gsA, 10.99.0.2 gsB\n"
            "host=$1; shift\n"
            f"case $host in {NETNS_IPS[0]}) ns={a};; {NETNS_IPS[1]}) ns={b};; *) exit 1;; esac\n"
            'exec ip netns exec $ns sh -c "$*"\n'
        )
    os.chmod(agent, 0o755)
    return agent


def teardown_netns() -> None:
    """Remove the namespaces (their veth pair goes with them)."""
    for ns in NETNS:
        subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL, check=False)


def _mpirun_prefix(ranks: int, mem_gib: float | None, workdir: str, agent: str | None = None) -> list[str]:
    base = ["mpirun", "--oversubscribe", "-np", str(ranks)]
    if agent:
        # mpirun in the first namespace, half the ranks on each "host", TCP between them (no shared memory)
        per = -(-ranks // 2)
        base = [
            "ip",
            "netns",
            "exec",
            NETNS[0],
            *base,
            "-H",
            f"{NETNS_IPS[0]}:{per},{NETNS_IPS[1]}:{per}",
            "--mca",
            "plm_rsh_agent",
            agent,
            "--mca",
            "btl",
            "tcp,self",
            "--mca",
            "btl_tcp_if_include",
            "10.99.0.0/24",
            "--mca",
            "oob_tcp_if_include",
            "10.99.0.0/24",
            "-x",
            "OMPI_ALLOW_RUN_AS_ROOT",
            "-x",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
            "-x",
            "PATH",
        ]
    if not mem_gib:
        return base
    wrapper = os.path.join(workdir, "in_cgroup.sh")
    limit = int(mem_gib * 2**30)
    with open(wrapper, "w") as fh:
        fh.write(
            "#!/bin/sh\n"
            "# each rank in its own memory cgroup (v1 memory controller, else v2), then exec the rank\n"
            "# (under `ip netns exec`, /sys is remounted: mount the v1 memory hierarchy again there)\n"
            "if [ ! -d /sys/fs/cgroup/memory ] && [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then\n"
            "  mkdir -p /run/gs-cgmem && mount -t cgroup -o memory none /run/gs-cgmem 2>/dev/null\n"
            "  [ -f /run/gs-cgmem/memory.limit_in_bytes ] || { echo 'no memory cgroup' >&2; exit 3; }\n"
            "  root=/run/gs-cgmem\n"
            "else root=/sys/fs/cgroup/memory; fi\n"
            "if [ -f $root/memory.limit_in_bytes ]; then\n"
            "  cg=$root/graphstore-rank-$$; mkdir -p $cg\n"
            f"  echo {limit} > $cg/memory.limit_in_bytes; echo $$ > $cg/tasks\n"
            f"  echo /sys/fs/cgroup/memory/${{cg##*/}} >> {workdir}/cgroups.txt\n"
            "else\n"
            "  cg=/sys/fs/cgroup/graphstore-rank-$$; mkdir -p $cg\n"
            f"  echo {limit} > $cg/memory.max; echo 0 > $cg/memory.swap.max 2>/dev/null\n"
            "  echo $$ > $cg/cgroup.procs\n"
            f"  echo $cg >> {workdir}/cgroups.txt\n"
            "fi\n"
            'exec "$@"\n'
        )
    os.chmod(wrapper, 0o755)
    return [*base, wrapper]


def _remove_cgroups(workdir: str) -> list[str]:
    """Remove the (now empty) cgroups the wrapper made; returns their paths."""
    listing = os.path.join(workdir, "cgroups.txt")
    if not os.path.exists(listing):
        return []
    paths = [p.strip() for p in open(listing) if p.strip()]
    for path in paths:
        for _ in range(50):
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
    os.remove(listing)
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", required=True)
    parser.add_argument("--num-parts", type=int, default=4)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--balance-ntypes", default="train_mask")
    parser.add_argument("--mem-limit-gib", type=float, default=None)
    parser.add_argument("--skip-serial", action="store_true")
    parser.add_argument(
        "--netns", action="store_true", help="ranks in two network namespaces (TCP only, no shared memory)"
    )
    parser.add_argument("--timeout", type=float, default=3000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    masks = [m for m in (args.balance_ntypes or "").split(",") if m]
    balance = ["--balance-ntypes", args.balance_ntypes] if masks else []
    report: dict = {"graph": args.graph, "num_parts": args.num_parts, "runs": {}}
    chunks = os.path.join(args.workdir, "chunks")
    if not os.path.isdir(chunks):
        out, secs = _run(
            [*CLI, "chunk", "--graph", args.graph, "--num-chunks", str(max(args.ranks)), "--out", chunks],
            args.timeout,
        )
        report["chunk"] = {**json.loads(out.strip().splitlines()[-1]), "wall_seconds": round(secs, 1)}
    if not args.skip_serial:
        dest = os.path.join(args.workdir, "serial")
        shutil.rmtree(dest, ignore_errors=True)
        out, secs = _run(
            [
                *CLI,
                "partition",
                "--graph",
                args.graph,
                "--num-parts",
                str(args.num_parts),
                "--out",
                dest,
                "--name",
                "g",
                "--json",
                *balance,
            ],
            args.timeout,
        )
        stats = json.loads(out.strip().splitlines()[-1])
        _run([*CLI, "validate", os.path.join(dest, "g.json")], args.timeout)
        report["runs"]["serial"] = {
            "edge_cut": stats["edge_cut"],
            "part_nodes": stats["part_nodes"],
            "balance_max_dev": _balance(os.path.join(dest, "g.json"), args.graph, masks),
            "wall_seconds": round(secs, 1),
            "peak_rss_gib": round(stats["peak_rss_bytes"] / 2**30, 3),
        }
        print(json.dumps({"serial": report["runs"]["serial"]}), file=sys.stderr, flush=True)
    agent = setup_netns(args.workdir) if args.netns else None
    if agent:
        atexit.register(teardown_netns)
    for ranks in args.ranks:
        dest = os.path.join(args.workdir, f"ranks{ranks}")
        shutil.rmtree(dest, ignore_errors=True)
        cmd = [
            *_mpirun_prefix(ranks, args.mem_limit_gib, args.workdir, agent),
            *CLI[:-2],
            "--log-level",
            "INFO",
            "partition",
            "--chunks",
            chunks,
            "--num-parts",
            str(args.num_parts),
            "--out",
            dest,
            "--name",
            "g",
            "--json",
            *balance,
        ]
        try:
            out, secs = _run(cmd, args.timeout, os.path.join(args.workdir, f"ranks{ranks}.log"))
        finally:
            _remove_cgroups(args.workdir)
        stats = json.loads(out.strip().splitlines()[-1])
        _run([*CLI, "validate", os.path.join(dest, "g.json")], args.timeout)
        run = {
            "ranks": ranks,
            "mem_limit_gib_per_rank": args.mem_limit_gib,
            "netns_per_rank": [r["netns"] for r in stats["ranks"]],
            "edge_cut": stats["edge_cut"],
            "part_nodes": stats["part_nodes"],
            "balance_max_dev": _balance(os.path.join(dest, "g.json"), args.graph, masks),
            "wall_seconds": round(secs, 1),
            "peak_rss_gib_per_rank": [round(r["run_peak_rss_bytes"] / 2**30, 3) for r in stats["ranks"]],
            "peak_rss_gib_total": round(stats["total_peak_rss_bytes"] / 2**30, 3),
            "phase_seconds_rank0": stats["ranks"][0]["seconds"],
            "phase_peak_gib_rank0": {
                k: round(v / 2**30, 3) for k, v in stats["ranks"][0]["peak_rss_bytes"].items()
            },
        }
        if "serial" in report["runs"]:
            run["cut_ratio_to_serial"] = round(stats["edge_cut"] / report["runs"]["serial"]["edge_cut"], 4)
        report["runs"][f"ranks{ranks}"] = run
        print(json.dumps({f"ranks{ranks}": run}), file=sys.stderr, flush=True)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
