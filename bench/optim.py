"""Benchmark of the distributed sparse optimizers (issue 6), printed as JSON.

On the anchor graph (200k nodes; also the 1M-node one with ``--big``) partitioned in 2, with one server
process per partition on loopback, 1 and 2 trainer processes (a gloo group) train a ``[num_nodes, 64]``
DistEmbedding: every step reads 1,024 random rows (``emb(ids)``), backpropagates a loss, and calls
``SparseAdagrad.step()``. Reported, medians over ``--repeats`` timed runs of ``--steps`` steps:

- ``steps_per_s`` per trainer (the whole step: read + backward + optimizer step) and ``opt_steps_per_s``
  (the optimizer step alone);
- the step's time split, ms per step: ``read`` (the pull), ``backward``, and inside ``step()``:
  ``gather`` (grads from the trace, local duplicate sum, the existence check), ``exchange`` (size exchange
  + all_to_all), ``merge`` (the owner's de-duplication), ``push`` (the PushGrad RPCs, server update
  included), ``sync`` (waiting for the other trainers' pushes);
- ``server_update_ms``: the server's row update alone (``SparseOptimizerState.apply`` in-process on a
  partition-sized table with the unique ids one push carries), so ``push - server_update`` is the RPC cost.

With one trainer the step runs both with a 1-rank gloo group (the exchange path) and without a group.
DGL's SparseAdagrad on the same kind of step is measured beside graphstore by ``make bench-dgl``
(``bench/dgl/side_by_side.py``, workloads ``adagrad/*``).

    python bench/optim.py                                  # 200k graph, generated once when missing
    python bench/optim.py --big --out optim.json           # also the 1M-row embedding
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from anchor import make_anchor_graph
from common import emit_report, ensure_partitions, server_entries

PHASES = ("gather", "exchange", "merge", "push", "sync")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--graph", default="/tmp/g200k.npz", help="200k anchor graph .npz (made when missing)"
    )
    parser.add_argument(
        "--big-graph", default="/tmp/g1m.npz", help="1M anchor graph .npz (made when missing)"
    )
    parser.add_argument("--big", action="store_true", help="also run the 1M-row embedding (1M-node graph)")
    parser.add_argument("--workdir", default="/tmp/graphstore-bench-optim", help="partitions and logs")
    parser.add_argument("--part-method", default="random", choices=["metis", "random"])
    parser.add_argument("--parts", type=int, default=2)
    parser.add_argument("--trainers", default="1,2", help="comma-separated trainer counts")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--batch", type=int, default=1024, help="ids read per step per trainer")
    parser.add_argument("--steps", type=int, default=60, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs (medians reported)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    parser.add_argument(
        "--kinds", default="adagrad,rowwise_adagrad,adam", help="optimizers (1 trainer, 200k)"
    )
    parser.add_argument("--out", default=None, help="also write the JSON here")
    return parser.parse_args(argv)


# ----- set-up -----------------------------------------------------------------------------------


def ensure_graph(path: str, num_nodes: int) -> Path:
    return make_anchor_graph(path, num_nodes)


# ----- one trainer process ----------------------------------------------------------------------


def trainer(rank, world_size, init_file, cluster, job, results) -> None:
    """Run one benchmark job in a trainer process; puts ``(rank, result or error text)`` on ``results``."""
    import traceback

    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world_size)
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        if job["group"]:
            timeout = datetime.timedelta(seconds=120)
            dist.init_process_group(
                "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size, timeout=timeout
            )
        try:
            results.put((rank, run_job(rank, world_size, cluster, job)))
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - reported to the parent
        results.put((rank, traceback.format_exc()))


def run_job(rank, world_size, cluster, job) -> dict:
    import torch
    import torch.distributed as dist

    from graphstore.client.api import exit_client, initialize
    from graphstore.client.dist_embedding import DistEmbedding
    from graphstore.client.optim import SparseAdagrad, SparseAdam, StepTimings
    from graphstore.types import InitSpec

    def barrier():
        if dist.is_initialized():
            dist.barrier()

    initialize(cluster)
    try:
        num_rows, dim = job["rows"], job["dim"]
        name = job["name"]
        if rank == 0:
            emb = DistEmbedding(num_rows, dim, name=name, init_func=InitSpec("uniform", -0.01, 0.01, seed=1))
        barrier()
        if rank != 0:
            emb = DistEmbedding(num_rows, dim, name=name)
        kind = job["kind"]
        if kind == "adam":
            opt = SparseAdam([emb], lr=0.01)
        else:
            opt = SparseAdagrad([emb], lr=0.01, rowwise=kind == "rowwise_adagrad")
        rng = np.random.default_rng([7, rank])

        def one_step(clock):
            ids = torch.from_numpy(rng.integers(0, num_rows, job["batch"]))
            t0 = time.perf_counter()
            rows = emb(ids)
            t1 = time.perf_counter()
            (rows * rows).sum().backward()
            t2 = time.perf_counter()
            opt.step()
            t3 = time.perf_counter()
            clock["read"] += t1 - t0
            clock["backward"] += t2 - t1
            clock["step"] += t3 - t2

        for _ in range(job["warmup"]):
            one_step({"read": 0.0, "backward": 0.0, "step": 0.0})
        runs = []
        for _ in range(job["repeats"]):
            barrier()
            opt.timings = StepTimings()
            clock = {"read": 0.0, "backward": 0.0, "step": 0.0}
            start = time.perf_counter()
            for _ in range(job["steps"]):
                one_step(clock)
            elapsed = time.perf_counter() - start
            t = opt.timings
            steps = job["steps"]
            runs.append(
                {
                    "steps_per_s": steps / elapsed,
                    "opt_steps_per_s": steps / clock["step"],
                    "read": 1e3 * clock["read"] / steps,
                    "backward": 1e3 * clock["backward"] / steps,
                    **{phase: 1e3 * getattr(t, f"{phase}_s") / steps for phase in PHASES},
                    "rows_pushed_per_step": t.rows_pushed / steps,
                }
            )
        barrier()
        return {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    finally:
        exit_client()


def run_trainers(world_size: int, cluster: dict, job: dict, workdir: Path) -> list[dict]:
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    init_file = workdir / f"pg-{time.monotonic_ns()}"
    procs = [ctx.Process(target=trainer, args=(r, world_size, str(init_file), cluster, job, results))
             for r in range(world_size)]  # fmt: skip
    out: dict[int, dict] = {}
    try:
        for p in procs:
            p.start()
        for _ in range(world_size):
            rank, value = results.get(timeout=900)
            if isinstance(value, str):
                raise RuntimeError(f"trainer {rank} failed:\n{value}")
            out[rank] = value
        for p in procs:
            p.join(timeout=30)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
    return [out[r] for r in range(world_size)]


# ----- the server's update alone ----------------------------------------------------------------


def server_update_ms(num_rows: int, dim: int, ids_per_push: int, kind: str, repeats: int = 200) -> float:
    """Median time of one ``SparseOptimizerState.apply`` on a partition-sized table (in-process)."""
    from graphstore.server.optimizer import SparseOptimizerState
    from graphstore.types import OptimizerConfig

    rng = np.random.default_rng(0)
    rows = rng.uniform(-0.01, 0.01, (num_rows, dim)).astype(np.float32)
    state = SparseOptimizerState()
    config = OptimizerConfig(kind=kind, lr=0.01, eps=1e-10 if kind != "adam" else 1e-8)
    times = []
    for _ in range(repeats):
        ids = np.unique(rng.integers(0, num_rows, ids_per_push))
        grads = rng.standard_normal((ids.size, dim)).astype(np.float32)
        start = time.perf_counter()
        state.apply("bench", rows, ids, grads, config)
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


# ----- driver -----------------------------------------------------------------------------------


def bench_graph(label: str, graph: Path, args, kinds: list[str], trainer_counts: list[int]) -> list[dict]:
    from graphstore.launcher.local_servers import start_servers

    config = ensure_partitions(
        graph,
        f"bench{label}",
        args.parts,
        Path(args.workdir) / f"{label}-{args.parts}-{args.part_method}",
        part_method=args.part_method,
    )
    with open(config) as f:
        num_rows = int(json.load(f)["num_nodes"])
    workdir = Path(args.workdir)
    out = []
    with start_servers(config, args.parts, log_dir=workdir / f"logs-{label}", timeout=300) as group:
        servers = server_entries(group.addresses)
        cluster = {
            "graph_name": f"bench{label}",
            "part_config": config,
            "servers": servers,
            "local_read": "off",
        }
        variants = [(1, kind, True) for kind in kinds] + [(1, kinds[0], False)]
        variants += [(t, kinds[0], True) for t in trainer_counts if t > 1]
        for index, (world_size, kind, group_on) in enumerate(variants):
            job = {
                "name": f"bench_emb_{label}_{index}",
                "rows": num_rows,
                "dim": args.dim,
                "kind": kind,
                "group": group_on,
                "batch": args.batch,
                "steps": args.steps,
                "repeats": args.repeats,
                "warmup": args.warmup,
            }
            per_rank = run_trainers(world_size, cluster, job, workdir)
            merged = {key: round(statistics.median(r[key] for r in per_rank), 4) for key in per_rank[0]}
            # One push carries an owner's unique rows of one partition (owners of several partitions split).
            ids_per_push = int(merged["rows_pushed_per_step"] / max(1, args.parts // world_size))
            update = server_update_ms(num_rows // args.parts, args.dim, ids_per_push, kind)
            entry = {
                "embedding_rows": num_rows,
                "dim": args.dim,
                "batch": args.batch,
                "trainers": world_size,
                "process_group": group_on,
                "kind": kind,
                **{k: merged[k] for k in ("steps_per_s", "opt_steps_per_s", "rows_pushed_per_step")},
                "split_ms": {k: merged[k] for k in ("read", "backward", *PHASES)},
                "server_update_ms": round(update, 4),
                "per_rank_steps_per_s": [round(r["steps_per_s"], 2) for r in per_rank],
            }
            print(json.dumps(entry), file=sys.stderr, flush=True)
            out.append(entry)
    return out


def run(args) -> dict:
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    trainer_counts = sorted({int(t) for t in args.trainers.split(",")})
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    results = bench_graph("200k", ensure_graph(args.graph, 200_000), args, kinds, trainer_counts)
    if args.big:
        results += bench_graph("1m", ensure_graph(args.big_graph, 1_000_000), args, kinds[:1], trainer_counts)
    return {
        "benchmark": "sparse optimizer step (issue 6)",
        "setup": {
            "servers": args.parts,
            "part_method": args.part_method,
            "dim": args.dim,
            "ids_per_step": args.batch,
            "steps": args.steps,
            "repeats": args.repeats,
            "cpu_count": os.cpu_count(),
        },
        "results": results,
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    emit_report(run(args), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
