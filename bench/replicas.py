"""Read replicas under a kill: a 2-partition GraphSAGE + DistEmbedding job loses one server mid-epoch.

``graphstore launch`` runs Cora partitioned in 2 with ``--replicas`` servers per partition (the owner and
its read replicas), ``durability: wal`` and ``restart: on-failure``, and 2 trainers. Each trainer trains a
2-layer GraphSAGE on the features concatenated with a 16-d ``DistEmbedding`` row (SparseAdagrad; the
dense weights with Adam under DDP), sampling with seeded calls so that every run with the same seed
draws the same blocks, reads every partition over RPC (``local_read: off``), and times every call it
makes: ``sample`` (one ``sample_neighbors`` round, both partitions), ``feat`` and ``label`` (read-only
partition data: spread over the replicas), ``emb`` (embedding rows: the owner), ``step`` (the sparse
optimizer step: pushes to the owner) and ``ack`` (a push-add of 1 to each seed's row of a counter
tensor, tallied by the trainer). At a random step of epoch ``--kill-epoch`` this script SIGKILLs one
server (``--kill replica``: a random read replica; ``owner``: a random partition's owner; launch
restarts it from its checkpoint and write-ahead log). It reports per run:

- the job's exit code and test accuracy, and the accuracy of an unkilled run with the same seed;
- acknowledged writes lost / applied twice: the counter's rows against the trainers' tallies, and the
  largest difference of the final embedding from the unkilled run's (0.0: every Adagrad step once);
- the longest call of each kind (the stall), its median, and which server was killed when.

    python bench/replicas.py --runs 5 --replicas 2 --kill replica --out bench/results/replicas-2.json
    python bench/replicas.py --runs 5 --replicas 1 --kill owner --out bench/results/replicas-1.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CORA = REPO_ROOT / "datasets" / "cora.npz"
EMB_DIM = 16
FANOUTS = (10, 5)
KINDS = ("sample", "feat", "label", "emb", "step", "ack")


# --------------------------------------------------------------------------------------------------
# The trainer (run by graphstore launch)
# --------------------------------------------------------------------------------------------------


def trainer_main(args: argparse.Namespace) -> int:
    """One trainer: train, time every call, tally the acknowledged adds, evaluate, write its figures."""
    from datetime import timedelta

    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from graphstore.client import (
        NID,
        DistEmbedding,
        DistGraph,
        DistTensor,
        GraphSAGE,
        SparseAdagrad,
        exit_client,
        get_context,
        initialize,
        node_split,
        sample_neighbors,
        to_block,
    )
    from graphstore.types import InitSpec

    out = Path(args.trainer_out)
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    initialize()
    g = DistGraph("cora")
    n = g.num_nodes()
    test_mask = g.ndata["test_mask"][torch.arange(n)].bool()
    train_nodes = node_split(~test_mask, g.get_partition_book())
    test_nodes = node_split(test_mask, g.get_partition_book())
    feat, labels = g.ndata["feat"], g.ndata["label"]
    emb = DistEmbedding(
        n, EMB_DIM, name="bench_emb", init_func=InitSpec("uniform", -0.1, 0.1, seed=args.seed)
    )
    acks = DistTensor((n, 1), torch.float32, name="bench_acks", init_func=InitSpec("zeros"))
    tally = np.zeros(n, np.float64)
    num_classes = int(labels[torch.arange(n)].max()) + 1
    model = torch.nn.parallel.DistributedDataParallel(
        GraphSAGE(feat.shape[1] + EMB_DIM, 32, num_classes, n_layers=len(FANOUTS))
    )
    dense = torch.optim.Adam(model.parameters(), lr=0.01)
    sparse = SparseAdagrad([emb], lr=0.05)
    calls: dict[str, list[float]] = {kind: [] for kind in KINDS}
    slow: list[dict] = []  # the calls over 0.1 s: kind, start (wall clock), seconds

    def timed(kind: str, call, *call_args, **call_kwargs):
        wall, started = time.time(), time.perf_counter()
        result = call(*call_args, **call_kwargs)
        seconds = time.perf_counter() - started
        calls[kind].append(seconds)
        if seconds > 0.1:
            slow.append({"kind": kind, "start": wall, "seconds": round(seconds, 4)})
        return result

    def blocks_of(seeds: torch.Tensor, key: tuple[int, ...]):
        nodes, blocks = seeds, []
        for layer, fanout in enumerate(reversed(FANOUTS)):
            random_seed = int(np.random.SeedSequence([args.seed, *key, layer]).generate_state(1)[0] >> 1)
            frontier = timed("sample", sample_neighbors, g, nodes, fanout, random_seed=random_seed)
            block = to_block(frontier, nodes)
            nodes = block.srcdata[NID]
            blocks.insert(0, block)
        return nodes, blocks

    def forward(seeds: torch.Tensor, key: tuple[int, ...]):
        inputs, blocks = blocks_of(seeds, key)
        x = torch.cat([timed("feat", feat.__getitem__, inputs).float(), timed("emb", emb, inputs)], dim=1)
        return model(blocks, x)

    counts = torch.tensor([(len(train_nodes) + args.batch_size - 1) // args.batch_size])
    dist.all_reduce(counts, op=dist.ReduceOp.MIN)  # every rank takes the same number of steps
    steps_per_epoch = int(counts)
    done = 0
    started = time.perf_counter()
    for epoch in range(args.epochs):
        order = torch.from_numpy(
            np.random.default_rng([args.seed, rank, epoch]).permutation(len(train_nodes))
        )
        for step in range(steps_per_epoch):
            seeds = train_nodes[order[step * args.batch_size : (step + 1) * args.batch_size]]
            logits = forward(seeds, (epoch, rank, step))
            loss = F.cross_entropy(logits, timed("label", labels.__getitem__, seeds).long())
            dense.zero_grad()
            loss.backward()
            dense.step()
            timed("step", sparse.step)
            timed("ack", acks.write, seeds, torch.ones(len(seeds), 1), op="add")
            np.add.at(tally, seeds.numpy(), 1.0)
            done += 1
            (out / f"progress-{rank}").write_text(f"{epoch} {step} {steps_per_epoch}")
    train_s = time.perf_counter() - started

    model.eval()
    correct = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        for step in range(0, len(test_nodes), 256):
            seeds = test_nodes[step : step + 256]
            logits = forward(seeds, (args.epochs, rank, step))  # a key no training batch uses
            correct[0] += float((logits.argmax(dim=1) == labels[seeds].long()).sum())
            correct[1] += len(seeds)
    dist.all_reduce(correct)
    tallies = torch.from_numpy(tally)
    dist.all_reduce(tallies)
    dist.barrier()
    result = {
        "rank": rank,
        "steps": done,
        "train_s": train_s,
        "calls": {
            kind: {
                "count": len(times),
                "p50_s": float(np.median(times)) if times else None,
                "max_s": max(times) if times else None,
            }
            for kind, times in calls.items()
        },
        "slow_calls": slow,
        "test_acc": float(correct[0] / correct[1]),
    }
    if rank == 0:
        everything = torch.arange(n)
        served = acks[everything].numpy()[:, 0].astype(np.float64)
        expected = tallies.numpy()
        result["acks_expected"] = float(expected.sum())
        result["acks_lost"] = float(np.clip(expected - served, 0, None).sum())
        result["acks_doubled"] = float(np.clip(served - expected, 0, None).sum())
        np.save(out / "emb.npy", emb.weight[everything].numpy())
        partitions = [get_context().partition(part) for part in range(2)]
        result["replica_states"] = [p.replica_states() for p in partitions if hasattr(p, "replica_states")]
    (out / f"result-{rank}.json").write_text(json.dumps(result))
    dist.barrier()
    exit_client()
    dist.destroy_process_group()
    return 0


# --------------------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------------------


def prepare(work: Path) -> Path:
    """Partition Cora in 2 under ``work`` (once); returns the partition config."""
    part_config = work / "cora" / "cora.json"
    if not part_config.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "graphstore.launcher.cli",
                "partition",
                "--graph",
                str(CORA),
                "--name",
                "cora",
            ]
            + ["--num-parts", "2", "--out", str(work / "cora")],
            check=True,
            capture_output=True,
        )
    return part_config


def write_cluster(path: Path, part_config: Path, replicas: int, ckpt: Path) -> None:
    from graphstore.launcher.hosts import free_ports

    ports = free_ports(2 * replicas + 1)
    servers = [
        {"host": "127.0.0.1", "port": ports[r * 2 + k], "part_id": k}
        for r in range(replicas)
        for k in range(2)
    ]
    import yaml

    path.write_text(
        yaml.safe_dump(
            {
                "graph_name": "cora",
                "part_config": str(part_config),
                "servers": servers,
                "trainers_per_host": 2,
                "master_port": ports[-1],
                "local_read": "off",
                "restart": "on-failure",
                "max_restarts": 3,
                "checkpoint": {"path": str(ckpt), "every_s": 5, "durability": "wal"},
                "rpc": {"deadline_s": 10, "max_retries": 40, "backoff_initial_s": 0.05, "backoff_max_s": 0.5},
            },
            sort_keys=False,
        )
    )


def progress(out: Path) -> tuple[int, int, int] | None:
    """``(epoch, step, steps_per_epoch)`` of the slowest trainer, or None before both started."""
    found = []
    for rank in range(2):
        path = out / f"progress-{rank}"
        try:
            found.append(tuple(int(v) for v in path.read_text().split()))
        except (FileNotFoundError, ValueError):
            return None
    return min(found) if len(found) == 2 and all(len(f) == 3 for f in found) else None


def one_run(
    args: argparse.Namespace, part_config: Path, work: Path, kill: str | None, rng: random.Random
) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"run-{kill or 'none'}-", dir=work))
    cluster = folder / "cluster.yaml"
    write_cluster(cluster, part_config, args.replicas, folder / "ckpt")
    out = folder / "out"
    out.mkdir()
    log = (folder / "launch.log").open("w+")
    command = [sys.executable, "-m", "graphstore.launcher.cli", "launch", "--config", str(cluster), "--"]
    command += [sys.executable, str(Path(__file__).resolve()), "--trainer-out", str(out)]
    command += ["--seed", str(args.seed), "--epochs", str(args.epochs), "--batch-size", str(args.batch_size)]
    started = time.monotonic()
    proc = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, start_new_session=True
    )
    killed = None
    try:
        if kill is not None:
            part = rng.randrange(2)
            replica = 0 if kill == "owner" else rng.randrange(1, args.replicas)
            name = f"server-{part}" + (f".r{replica}" if replica else "")
            at_step = None
            while proc.poll() is None and time.monotonic() - started < args.timeout_s:
                now = progress(out)
                if now is not None:
                    epoch, step, per_epoch = now
                    if at_step is None:
                        at_step = rng.randrange(per_epoch)
                    if (epoch, step) >= (args.kill_epoch, at_step):
                        break
                time.sleep(0.02)
            log.flush()
            text = Path(log.name).read_text()
            pid = int(re.search(rf"started {re.escape(name)} locally \(pid (\d+)\)", text).group(1))
            os.kill(pid, signal.SIGKILL)
            killed = {
                "server": name,
                "pid": pid,
                "epoch": args.kill_epoch,
                "step": at_step,
                "at": time.time(),
            }
        code = proc.wait(timeout=max(1.0, args.timeout_s - (time.monotonic() - started)))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = Path(log.name).read_text()
    results = [
        json.loads((out / f"result-{r}.json").read_text())
        for r in range(2)
        if (out / f"result-{r}.json").exists()
    ]
    run = {"exit_code": code, "killed": killed, "wall_s": round(time.monotonic() - started, 1)}
    run["restarts"] = re.findall(r"event=server_restart [^\n]*", text)
    if len(results) == 2:
        first = next(r for r in results if r["rank"] == 0)
        run["test_acc"] = first["test_acc"]
        run["acks_expected"] = first["acks_expected"]
        run["acks_lost"] = first["acks_lost"]
        run["acks_doubled"] = first["acks_doubled"]
        run["calls"] = {
            kind: {
                "max_s": round(max(r["calls"][kind]["max_s"] for r in results), 4),
                "p50_s": round(max(r["calls"][kind]["p50_s"] for r in results), 4),
                "count": sum(r["calls"][kind]["count"] for r in results),
            }
            for kind in KINDS
        }
        reads = ("sample", "feat", "label")
        run["longest_read_only_call_s"] = max(run["calls"][k]["max_s"] for k in reads)
        run["longest_call_s"] = max(run["calls"][k]["max_s"] for k in KINDS)
        run["slow_calls"] = sorted(
            (c for r in results for c in r["slow_calls"]), key=lambda c: -c["seconds"]
        )[:8]
        if killed:
            for call in run["slow_calls"]:
                call["after_kill_s"] = round(call["start"] - killed["at"], 3)
        run["replica_states"] = first.get("replica_states")
        run["emb_path"] = str(out / "emb.npy")
    else:
        run["log_tail"] = text[-3000:]
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainer-out", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=5, help="killed runs (default 5)")
    parser.add_argument("--replicas", type=int, default=2, help="servers per partition (default 2)")
    parser.add_argument("--kill", choices=("replica", "owner"), default="replica")
    parser.add_argument("--kill-epoch", type=int, default=1, help="the epoch a server dies in (default 1)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout-s", type=float, default=600.0, help="bound on one job")
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.trainer_out:
        return trainer_main(args)
    if args.kill == "replica" and args.replicas < 2:
        parser.error("--kill replica needs --replicas 2 or more")
    import numpy as np
    from common import emit_report

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench-replicas-"))
    work.mkdir(parents=True, exist_ok=True)
    part_config = prepare(work)
    rng = random.Random(args.seed)
    reference = one_run(args, part_config, work, None, rng)
    runs = [one_run(args, part_config, work, args.kill, rng) for _ in range(args.runs)]
    ref_emb = np.load(reference["emb_path"]) if "emb_path" in reference else None
    for run in runs:
        if ref_emb is not None and "emb_path" in run:
            run["emb_max_abs_diff_vs_unkilled"] = float(np.abs(np.load(run["emb_path"]) - ref_emb).max())
        if "test_acc" in run and "test_acc" in reference:
            run["acc_diff_points"] = round(100 * (run["test_acc"] - reference["test_acc"]), 2)
    killed_runs = [r for r in runs if "calls" in r]
    report = {
        "replicas_per_partition": args.replicas,
        "kill": args.kill,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "seed": args.seed,
        "unkilled": reference,
        "runs": runs,
        "summary": {
            "exit_codes": [r["exit_code"] for r in runs],
            "unkilled_test_acc": reference.get("test_acc"),
            "test_acc": [r.get("test_acc") for r in runs],
            "max_acc_diff_points": max((abs(r.get("acc_diff_points", 1e9)) for r in runs), default=None),
            "acks_lost": sum(r.get("acks_lost", 0) for r in killed_runs),
            "acks_doubled": sum(r.get("acks_doubled", 0) for r in killed_runs),
            "emb_max_abs_diff_vs_unkilled": max(
                (r.get("emb_max_abs_diff_vs_unkilled", float("nan")) for r in runs), default=None
            ),
            "unkilled_longest_call_s": reference.get("longest_call_s"),
            "longest_read_only_call_s": [r.get("longest_read_only_call_s") for r in runs],
            "longest_emb_call_s": [r.get("calls", {}).get("emb", {}).get("max_s") for r in runs],
            "longest_call_s": [r.get("longest_call_s") for r in runs],
        },
    }
    emit_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
