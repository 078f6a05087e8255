"""Load benchmark: many client processes × mixed RPCs against 2 partition servers on loopback.

Each of ``--procs`` client processes (separate Python processes, each with its own channels) runs a
random mix of calls, each to one server: pull of 64 feature rows (40 %, checked against the
partition files), push-add of 1.0 to 16 rows of a counter tensor (25 %), sampling 10 in-neighbors of
32 seeds (20 %, checked: every edge ends at a seed), and a sparse Adagrad push-grad of 16 rows (15 %).
It reports:

- errors (must be 0) and whether every add is accounted for exactly (the counter rows on the servers
  equal the sum of what every client added, compared in full after the run);
- p50 / p99 latency per call kind, and calls per second, in the main phase (``--procs × --ops``);
- each server's anonymous RSS (RssAnon, from its Stats call; excludes the mapped partition files) after
  a warm-up of ``--warmup-requests`` calls and then after every phase, until ``--rss-requests`` calls
  in all: the growth from the first reading to the last must stay within 5 % (no leak).

Workers stay up across phases (so phases measure calls, not process start-up) and wait for the
parent's go signal before each phase.

    python bench/load.py                                  # 16 procs × 2,000 calls; RSS 10k -> 100k+
    python bench/load.py --procs 4 --ops 300 --warmup-requests 0 --rss-requests 0   # what the test runs
    python bench/load.py --graph /tmp/g200k.npz --out load.json

The graph is generated (``--num-nodes``, average degree 10, 32-d features) unless ``--graph`` names an
``.npz`` (e.g. the anchor graph), then METIS-partitioned in 2 under ``--work-dir``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import emit_report, ensure_partitions

from graphstore.launcher.local_servers import start_servers

REPO_ROOT = Path(__file__).resolve().parents[1]

KINDS = ("pull", "push_add", "sample", "push_grad")
MIX = (0.40, 0.25, 0.20, 0.15)
PULL_ROWS, ADD_ROWS, SAMPLE_SEEDS, FANOUT, GRAD_ROWS, EMB_DIM = 64, 16, 32, 10, 16, 16
COUNTER, EMBEDDING = "load_adds", "load_emb"


# ----------------------------------------------------------------------------------------------
# worker
# ----------------------------------------------------------------------------------------------


def run_ops(partitions, parts, rng: np.random.Generator, count: int, tally: np.ndarray) -> dict:
    """Run ``count`` mixed calls; returns ``{"latency_ms": {kind: [...]}, "errors": [...], "seconds"}``.

    Args:
        partitions: a ``RemotePartition`` per partition.
        parts: the memory-mapped ``PartitionData`` per partition (expected features, ID ranges).
        rng: the worker's random stream.
        count: calls to make.
        tally: float64 [num_nodes]: adds made by this worker, updated in place.
    """
    from graphstore.types import OptimizerConfig

    adagrad = OptimizerConfig("adagrad", lr=0.01)
    latency: dict[str, list[float]] = {kind: [] for kind in KINDS}
    errors: list[str] = []
    kinds = rng.choice(len(KINDS), size=count, p=MIX)
    targets = rng.integers(0, len(partitions), size=count)
    num_nodes = int(parts[0].book.node_bounds[-1])
    started = time.perf_counter()
    for kind_index, k in zip(kinds, targets, strict=True):
        kind, part, remote = KINDS[kind_index], parts[k], partitions[k]
        lo, hi = int(part.node_start), int(part.node_end)
        t0 = time.perf_counter()
        try:
            if kind == "pull":
                ids = rng.integers(lo, hi, PULL_ROWS)
                rows = remote.pull("feat", ids)
                if not np.array_equal(rows, part.node_feats["_N"]["feat"][ids - lo]):
                    raise AssertionError(f"pulled rows of partition {k} differ from its files")
            elif kind == "push_add":
                ids = rng.integers(lo, hi, ADD_ROWS)
                remote.push(COUNTER, ids, np.ones((ADD_ROWS, 1), np.float32), "add")
                np.add.at(tally, ids, 1.0)  # counted once acknowledged
            elif kind == "sample":
                seeds = rng.integers(lo, hi, SAMPLE_SEEDS)
                src, dst, _ = remote.sample_neighbors(seeds, FANOUT)
                if not (np.isin(dst, seeds).all() and ((src >= 0) & (src < num_nodes)).all()):
                    raise AssertionError(f"partition {k} sampled edges that do not end at the seeds")
            else:
                ids = rng.choice(np.arange(lo, hi), size=min(GRAD_ROWS, hi - lo), replace=False)
                grads = np.full((len(ids), EMB_DIM), 0.01, np.float32)
                remote.push_grad(EMBEDDING, ids, grads, adagrad)
        except Exception as exc:  # noqa: BLE001 - every failure is a reported error
            errors.append(f"{kind} on partition {k}: {type(exc).__name__}: {exc}"[:300])
            continue
        latency[kind].append((time.perf_counter() - t0) * 1000.0)
    return {"latency_ms": latency, "errors": errors, "seconds": time.perf_counter() - started}


def worker_main(args: argparse.Namespace) -> int:
    """One client process: connect, then per phase wait for ``go-P``, run its calls, write ``result-P-W``."""
    from graphstore.client.transport import RemotePartition
    from graphstore.partition import load_partition
    from graphstore.rpc import RpcPolicy

    work = Path(args.worker_dir)
    addresses = args.addresses.split(",")
    parts = [load_partition(args.part_config, k) for k in range(len(addresses))]
    policy = RpcPolicy(deadline_s=60)
    partitions = [RemotePartition(a, k, policy) for k, a in enumerate(addresses)]
    for remote in partitions:
        remote.metadata()
    (work / f"ready-{args.worker}").write_text("")
    rng = np.random.default_rng([args.seed, args.worker])
    num_nodes = int(parts[0].book.node_bounds[-1])
    for phase, count in enumerate(int(c) for c in args.phases.split(",")):
        go = work / f"go-{phase}"
        end = time.monotonic() + 600
        while not go.exists():
            if time.monotonic() > end:
                return 1
            time.sleep(0.01)
        tally = np.zeros(num_nodes, np.float64)
        result = run_ops(partitions, parts, rng, count, tally)
        np.save(work / f"tally-{phase}-{args.worker}.npy", tally)
        (work / f"result-{phase}-{args.worker}.json").write_text(json.dumps(result))
    for remote in partitions:
        remote.close()
    return 0


# ----------------------------------------------------------------------------------------------
# parent
# ----------------------------------------------------------------------------------------------


def prepare_graph(args: argparse.Namespace, work: Path) -> str:
    """Partition the graph in 2 (once under ``work``, see :func:`common.ensure_partitions`); returns the
    partition config path. Without ``--graph``, the generated graph is written under ``work`` first."""
    if args.graph:
        graph = Path(args.graph)
    else:
        graph = work / f"gen{args.num_nodes}.npz"
        if not graph.exists():
            command = [sys.executable, "-m", "graphstore.launcher.cli", "generate", "--out", str(graph)]
            command += ["--num-nodes", str(args.num_nodes), "--avg-degree", "10", "--feat-dim", "32"]
            command += ["--seed", "1"]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return ensure_partitions(graph, "loadgraph", 2, work / f"{graph.stem}-2parts")


def percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def phases_for(args: argparse.Namespace) -> list[int]:
    """Calls per worker in each phase: warm-up (if any), main, then more main-sized phases until the
    total reaches ``--rss-requests``."""
    phases = []
    total = 0
    if args.warmup_requests > 0:
        phases.append(math.ceil(args.warmup_requests / args.procs))
        total += phases[-1] * args.procs
    phases.append(args.ops)
    total += args.ops * args.procs
    while total < args.rss_requests:
        phases.append(args.ops)
        total += args.ops * args.procs
    return phases


def parent_main(args: argparse.Namespace) -> dict:
    from graphstore.client.transport import RemotePartition
    from graphstore.types import InitSpec

    work_root = Path(args.work_dir)
    work_root.mkdir(parents=True, exist_ok=True)
    part_config = prepare_graph(args, work_root)
    run_dir = Path(tempfile.mkdtemp(prefix="load-", dir=work_root))
    servers = start_servers(part_config, 2, log_dir=run_dir, timeout=120)
    addresses = servers.addresses
    workers: list[subprocess.Popen] = []
    try:
        remotes = [RemotePartition(a, k) for k, a in enumerate(addresses)]
        meta = remotes[0].metadata()
        num_nodes = meta.num_nodes
        for remote in remotes:
            remote.init_tensor(COUNTER, (num_nodes, 1), "float32", "node")
            remote.init_tensor(
                EMBEDDING, (num_nodes, EMB_DIM), "float32", "node", init=InitSpec("uniform", -1, 1)
            )
        phases = phases_for(args)
        main_phase = 1 if args.warmup_requests > 0 else 0
        for w in range(args.procs):
            log = open(run_dir / f"worker-{w}.log", "w")
            workers.append(
                subprocess.Popen(
                    [sys.executable, __file__, "--worker", str(w), "--worker-dir", str(run_dir)]
                    + ["--addresses", ",".join(addresses), "--part-config", part_config]
                    + ["--phases", ",".join(map(str, phases)), "--seed", str(args.seed)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=REPO_ROOT,
                )
            )
            log.close()
        _wait_files(run_dir, "ready", args.procs, workers)
        rss: list[dict] = []
        total_requests = 0
        latency: dict[str, list[float]] = {kind: [] for kind in KINDS}
        errors: list[str] = []
        tally = np.zeros(num_nodes, np.float64)
        main_seconds = 0.0
        for phase, count in enumerate(phases):
            (run_dir / f"go-{phase}").write_text("")
            _wait_files(run_dir, f"result-{phase}", args.procs, workers)
            seconds = []
            for w in range(args.procs):
                result = json.loads((run_dir / f"result-{phase}-{w}.json").read_text())
                errors += result["errors"]
                seconds.append(result["seconds"])
                tally += np.load(run_dir / f"tally-{phase}-{w}.npy")
                if phase == main_phase:
                    for kind in KINDS:
                        latency[kind] += result["latency_ms"][kind]
            if phase == main_phase:
                main_seconds = max(seconds)
            total_requests += count * args.procs
            rss.append(
                {
                    "after_requests": total_requests,
                    "rss_anon_mb": [round(r.stats().rss_anon_bytes / 2**20, 2) for r in remotes],
                }
            )
        for worker in workers:
            worker.wait(60)
        counters = np.concatenate(
            [
                r.pull(COUNTER, np.arange(meta.node_bounds[k], meta.node_bounds[k + 1]))[:, 0]
                for k, r in enumerate(remotes)
            ]
        )
        adds_exact = bool(np.array_equal(counters.astype(np.float64), tally))
        for remote in remotes:
            remote.close()
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(10)
        servers.stop()
    first = rss[main_phase - 1] if main_phase else rss[0]
    last = rss[-1]
    growth = [
        round(100.0 * (after - before) / before, 2) if before and len(rss) > 1 else None
        for before, after in zip(first["rss_anon_mb"], last["rss_anon_mb"], strict=True)
    ]
    report = {
        "procs": args.procs,
        "ops_per_proc": args.ops,
        "num_nodes": int(num_nodes),
        "phases": phases,
        "total_requests": total_requests,
        "errors": len(errors),
        "error_examples": errors[:5],
        "adds_total": int(tally.sum()),
        "adds_exact": adds_exact,
        "main_phase": {
            "requests": args.procs * args.ops,
            "seconds": round(main_seconds, 3),
            "requests_per_s": round(args.procs * args.ops / main_seconds, 1) if main_seconds else None,
            "latency_ms": {
                kind: {
                    "count": len(values),
                    "p50": round(percentile(values, 50), 3) if values else None,
                    "p99": round(percentile(values, 99), 3) if values else None,
                }
                for kind, values in latency.items()
            },
        },
        "rss": rss,
        "rss_reference_requests": first["after_requests"],
        "rss_growth_pct": growth,
        "rss_within_5pct": all(g is not None and g <= 5.0 for g in growth) if len(rss) > 1 else None,
    }
    if not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return report


def _wait_files(
    folder: Path, prefix: str, count: int, workers: list[subprocess.Popen], timeout_s: float = 900
) -> None:
    end = time.monotonic() + timeout_s
    while len(list(folder.glob(f"{prefix}-*"))) < count:
        failed = [w for w in workers if w.poll() not in (None, 0)]
        if failed:
            logs = "\n".join((folder / f"worker-{i}.log").read_text()[-1500:] for i in range(len(workers)))
            raise RuntimeError(f"a load worker failed (exit {failed[0].returncode}):\n{logs}")
        if time.monotonic() > end:
            raise RuntimeError(f"workers did not write {prefix} files within {timeout_s} s")
        time.sleep(0.02)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", type=int, default=16, help="client processes (default 16)")
    parser.add_argument("--ops", type=int, default=2000, help="calls per process in the main phase")
    parser.add_argument(
        "--warmup-requests", type=int, default=10000, help="calls before the first RSS reading"
    )
    parser.add_argument("--rss-requests", type=int, default=100000, help="run phases until this many calls")
    parser.add_argument("--num-nodes", type=int, default=20000, help="nodes of the generated graph")
    parser.add_argument("--graph", default=None, help="an .npz graph instead of a generated one")
    parser.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "graphstore-load"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the run folder (logs)")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    # worker mode (started by the parent)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--addresses", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--part-config", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--phases", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        return worker_main(args)
    if args.procs < 1 or args.ops < 1:
        raise SystemExit(f"--procs and --ops must be >= 1, got {args.procs}, {args.ops}")
    report = parent_main(args)
    emit_report(report, args.out, indent=1)
    ok = report["errors"] == 0 and report["adds_exact"] and report["rss_within_5pct"] is not False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
