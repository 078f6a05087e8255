"""RemoteFeatureCache: hit rate and bytes pulled per epoch, with and without the cache.

    # 4 servers + 2 trainers on this machine (the settings of configs/train-large.yaml: fanouts 10,25,
    # batch 1,024); each trainer iterates its training loader (sampling + feature pulls, no model)
    python bench/feature_cache.py --part-config /tmp/g1m-parts/g.json [--trainers 2] [--epochs 2]
        [--budgets-mib 32,128] [--warmup-batches 8] [--device cpu] [--out-json out.json]

For each setting the trainers run ``--epochs`` epochs: no cache (a cache of 0 bytes, which only
counts), the 10% of remote nodes of highest degree (``fraction=0.1``), and for each byte budget the rows
chosen by degree and by the reads of the first ``--warmup-batches`` batches (``rank_by="access"``; its
first epoch includes the warm-up). Per epoch, summed over the trainers: input rows, cache hits, remote
rows asked for, remote rows and bytes pulled (the cache's counters), and the rows the servers served
(their ``pull_rows`` counters: the network's own count, which the cache's must match). Prints one json
object (also written to ``--out-json``); ``docs/scale.md`` holds the measured table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
from common import emit_report
from scale import REPO_ROOT, launch_trainers, machine
from scale_epoch import node_loader, reduce, server_counters

from graphstore.client import node_split
from graphstore.client.dataloader import RemoteFeatureCache
from graphstore.client.training import (
    TrainConfig,
    argument_parser,
    config_from_args,
    feature_width,
    setup_trainer,
)

MIB = 1 << 20
COUNTERS = ("lookups", "hits", "remote_lookups", "rows_pulled", "bytes_pulled")


def settings(budgets_mib: list[int], warmup_batches: int) -> list[tuple[str, dict]]:
    """``(name, RemoteFeatureCache keyword arguments)`` of each measured setting."""
    out = [("none", {"max_bytes": 0}), ("degree, fraction 0.1", {"fraction": 0.1})]
    for mib in budgets_mib:
        out.append((f"degree, {mib} MiB", {"max_bytes": mib * MIB}))
        out.append(
            (
                f"access, {mib} MiB, warm-up {warmup_batches}",
                {"max_bytes": mib * MIB, "rank_by": "access", "warmup_batches": warmup_batches},
            )
        )
    return out


def pulled_rows(before: dict, after: dict) -> int:
    """Rows the servers served between two :func:`server_counters` readings."""
    return sum(after[p].get("pull_rows", 0) - before.get(p, {}).get("pull_rows", 0) for p in after)


def barrier() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


def measure_epochs(g, nodes, config: TrainConfig, rank: int, device, cache, epochs: int) -> list[dict]:
    """Iterate a training loader reading through ``cache`` for ``epochs`` epochs; per epoch the cache's
    counters and the servers' pulled rows (rank 0), summed over the trainers."""
    loader = node_loader(g, nodes, config, rank, device, (config.feat_name,), None, {config.feat_name: cache})
    rows = []
    for epoch in range(epochs):
        barrier()
        before = server_counters() if rank == 0 else {}
        barrier()
        start = time.perf_counter()
        batches = sum(1 for _ in loader)
        seconds = time.perf_counter() - start
        stats = cache.stats(reset=True)
        barrier()
        after = server_counters() if rank == 0 else {}
        totals = reduce([float(getattr(stats, name)) for name in COUNTERS] + [batches], "sum")
        counts = dict(zip(COUNTERS, (int(x) for x in totals), strict=False))
        rows.append(
            {
                "epoch": epoch + 1,
                "seconds_slowest": round(reduce([seconds], "max")[0], 2),
                "batches": int(totals[-1]),
                **counts,
                "hit_rate": round(counts["hits"] / max(counts["lookups"], 1), 4),
                "remote_hit_rate": round(counts["hits"] / max(counts["remote_lookups"], 1), 4),
                "server_rows_pulled": pulled_rows(before, after) if rank == 0 else None,
                "cached_rows_per_trainer": stats.cached_rows,
                "cached_mib_per_trainer": round(stats.cached_bytes / MIB, 1),
            }
        )
    loader.close()
    return rows


def trainer_main(argv: list[str]) -> int:
    """One trainer (run by ``graphstore launch``): every setting, rank 0 writes the json."""
    parser = argument_parser(__doc__)
    parser.add_argument("--epochs-per-setting", type=int, default=2)
    parser.add_argument("--budgets-mib", default="32,128")
    parser.add_argument("--warmup-batches", type=int, default=8)
    config = config_from_args(parser, TrainConfig, argv)
    extra = parser.parse_known_args(argv)[0]
    trainer = setup_trainer(config)
    g = trainer.graph
    nodes = node_split(g.ndata["train_mask"], g.get_partition_book(), force_even=True)
    budgets = [int(x) for x in extra.budgets_mib.split(",") if x]
    features = g.ndata[config.feat_name]
    results = []
    for name, kwargs in settings(budgets, extra.warmup_batches):
        start = time.perf_counter()
        cache = RemoteFeatureCache(g, config.feat_name, device=trainer.device, **kwargs)
        build_s = time.perf_counter() - start
        for row in measure_epochs(
            g, nodes, config, trainer.rank, trainer.device, cache, extra.epochs_per_setting
        ):
            results.append({"setting": name, "build_s": round(build_s, 2), **row})
        del cache
    if trainer.rank == 0:
        report = {
            "world_size": trainer.world_size,
            "device": str(trainer.device),
            "feat_dtype": str(features.dtype),
            "row_bytes": feature_width(features) * features.dtype.itemsize,
            "train_nodes_per_trainer": int(nodes.numel()),
            "results": results,
        }
        with open(config.metrics_json, "w") as fh:
            json.dump(report, fh, indent=1)
    barrier()
    if trainer.distributed:
        torch.distributed.destroy_process_group()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "trainer":
        return trainer_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part-config", required=True)
    parser.add_argument("--trainers", type=int, default=2)
    parser.add_argument("--train-config", default="configs/train-large.yaml")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--budgets-mib", default="32,128")
    parser.add_argument("--warmup-batches", type=int, default=8)
    parser.add_argument("--device", default="cpu", help="the trainers' device (cpu, cuda)")
    parser.add_argument("--out-json", default=None)
    args = parser.parse_args(argv)
    before = machine()
    with open(args.part_config) as fh:
        part_config = json.load(fh)
    trainer = [
        sys.executable,
        os.path.abspath(__file__),
        "trainer",
        "--graph-name",
        part_config["graph_name"],
    ]
    trainer += ["--part-config", os.path.abspath(args.part_config), "--device", args.device]
    trainer += ["--config", os.path.join(REPO_ROOT, args.train_config)]
    trainer += ["--epochs-per-setting", str(args.epochs), "--budgets-mib", args.budgets_mib]
    trainer += ["--warmup-batches", str(args.warmup_batches)]
    figures, launch_s = launch_trainers(args.part_config, args.trainers, trainer)
    report = {
        "benchmark": "feature-cache",
        "part_config": args.part_config,
        "servers": part_config["num_parts"],
        "trainers": args.trainers,
        "train_config": args.train_config,
        **figures,
        "launch_to_exit_s": launch_s,
        "machine_before": before,
        "machine_after": machine(),
    }
    emit_report(report, args.out_json, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
