"""Benchmark of typed 2-hop sampling and loading (issue 16) next to the homogeneous loader, printed as JSON.

Two generated graphs with the same numbers of nodes and edges, each partitioned in 2 with METIS and served
by 2 partition servers on loopback, this process being the one client, co-located with partition 0
(``local_read: on``), as in ``bench/loader.py``:

- ``typed``: ``graphstore generate --schema mag --num-nodes 1940000`` (ogbn-mag's size: papers, authors,
  institutions, fields of study; 42.2M edges of 8 types with the reverses). ``DistNodeDataLoader`` over
  the training papers with ``NeighborSampler([25, 10])`` (the fanout of every edge type), batch 1,024
  papers, the papers' 128-d features pulled by the loader, and each batch's authors, institutions and
  fields of study read from ``DistHeteroEmbedding`` rows (``--emb-dim`` wide) by the training loop, as
  ``examples/train_rgcn.py`` does.
- ``homogeneous``: ``graphstore generate --num-nodes 1940000 --avg-degree E/N --feat-dim 128``, the same
  loader with ``NeighborSampler([25, 10])`` over its training nodes, 128-d features of every input node.

Both clusters stay up and the graphs take turns run by run, so that drifts in the machine's load reach
both alike. For each graph: batches/s (medians of ``--repeats`` runs of ``--batches`` batches, produced
one after the other and with ``--prefetch`` batches ahead in ``--num-workers`` threads), input nodes and
sampled edges per batch, edges/s, and the peak RSS of its servers; the peak RSS of this process; then
the typed / homogeneous ratio of batches/s (median of the paired runs' ratios; target: at least 0.7)
and of sampled edges/s.

    python bench/typed_loader.py --out typed_loader.json      # generates and partitions once (minutes)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import emit_report, ensure_partitions, parse_options, server_entries
from loader import make_loader

from graphstore.launcher.local_servers import start_servers

TARGET_RATIO = 0.7
MAG_EDGES_PER_NODE = 42_204_196 / 1_939_743  # with the reverses, at ogbn-mag's size

OPTIONS = [
    ("--num-nodes", int, 1_940_000, "nodes of both graphs"),
    ("--workdir", str, "/tmp/graphstore-bench-typed", "graphs, partitions and server logs"),
    ("--graphs", str, "typed,homogeneous", "comma-separated: typed, homogeneous"),
    ("--typed-config", str, None, "an existing partition config of the typed graph (default: made here)"),
    ("--homogeneous-config", str, None, "an existing partition config of the homogeneous graph"),
    ("--batches", int, 24, "batches per measurement"),
    ("--repeats", int, 3, None),
    ("--batch-size", int, 1024, None),
    ("--fanouts", str, "25,10", "input layer first; each applies to every edge type"),
    ("--prefetch", int, 2, None),
    ("--num-workers", int, 2, "loader background threads"),
    ("--emb-dim", int, 128, "width of the featureless types' embedding rows"),
    ("--seed", int, 0, None),
    ("--out", str, None, "also write the JSON here"),
]


def parse_args(argv=None) -> argparse.Namespace:
    return parse_options(__doc__, OPTIONS, argv)


def cli(*args: str) -> None:
    """Run a ``graphstore`` subcommand, failing loudly."""
    subprocess.run(
        [sys.executable, "-m", "graphstore.launcher.cli", *args], check=True, stdout=subprocess.DEVNULL
    )


def graph_config(kind: str, args) -> str:
    """Generate and partition one graph under ``--workdir`` once; returns its partition config."""
    given = getattr(args, f"{kind}_config")
    if given:
        return given
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    name = f"{kind}{args.num_nodes}"
    npz = workdir / f"{name}.npz"
    if not npz.exists():
        if kind == "typed":
            cli("generate", "--schema", "mag", "--num-nodes", str(args.num_nodes), "--out", str(npz))
        else:
            degree = f"{MAG_EDGES_PER_NODE:.4f}"
            cli("generate", "--num-nodes", str(args.num_nodes), "--avg-degree", degree, "--feat-dim", "128",
                "--num-classes", "64", "--out", str(npz))  # fmt: skip
    return ensure_partitions(npz, name, 2, workdir / name, balance_ntypes="train_mask")


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory (VmHWM) of a process, MB."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_loader(loader, num_batches: int, embedding) -> tuple[float, list[int], list[int]]:
    """Iterate ``num_batches`` batches, reading the embedding rows of the featureless input nodes;
    returns (seconds, input nodes per batch, sampled edges per batch)."""
    nodes, edges = [], []
    start = time.perf_counter()
    iterator = iter(loader)
    try:
        for _ in range(num_batches):
            input_nodes, _, blocks = next(iterator)
            if embedding is not None:
                embedding({t: input_nodes[t] for t in embedding})
            counted = input_nodes.values() if isinstance(input_nodes, dict) else [input_nodes]
            nodes.append(sum(int(ids.shape[0]) for ids in counted))
            edges.append(sum(block.num_edges() for block in blocks))
    finally:
        iterator.close()
    return time.perf_counter() - start, nodes, edges


class Subject:
    """One graph under test: its servers, this process's connection to them, its training items."""

    def __init__(self, kind: str, args, stack: contextlib.ExitStack):
        import torch

        from graphstore.client import DistGraph, DistHeteroEmbedding, initialize
        from graphstore.client.context import set_context
        from graphstore.types import InitSpec

        self.kind = kind
        start = time.perf_counter()
        config = graph_config(kind, args)
        prepare_s = time.perf_counter() - start
        log_dir = Path(args.workdir) / "logs" / kind
        self.servers = stack.enter_context(start_servers(config, 2, log_dir=log_dir, timeout=300))
        cluster = {
            "servers": server_entries(self.servers.addresses),
            "part_config": config,
            "local_read": "on",
            "local_part_id": 0,
        }
        # Each graph keeps its own connection: the other graph's is set aside (not closed) meanwhile.
        set_context(None)
        self.ctx = initialize(cluster)
        stack.callback(self.ctx.close)
        g = DistGraph(Path(config).stem)
        target = "paper" if kind == "typed" else None
        mask = g.nodes[target].data["train_mask"][torch.arange(g.num_nodes(target))].numpy().astype(bool)
        train = torch.from_numpy(np.flatnonzero(mask))
        self.embedding = None
        if kind == "typed":
            train = {"paper": train}
            featureless = [t for t in g.ntypes if t != "paper"]
            init = InitSpec("uniform", -0.1, 0.1, seed=args.seed)
            self.embedding = DistHeteroEmbedding(
                g, featureless, args.emb_dim, name="bench_emb", init_func=init
            )
        self.g, self.train = g, train
        self.rates: dict[str, list[float]] = {"sequential": [], "prefetch": []}
        self.nodes: list[int] = []
        self.edges: list[int] = []
        self.result = {
            "graph": kind,
            "num_nodes": g.num_nodes(),
            "num_edges": g.num_edges(),
            "edge_types": len(g.canonical_etypes),
            "train_nodes": int(sum(t.numel() for t in train.values()) if kind == "typed" else train.numel()),
            "prepare_s": round(prepare_s, 1),
        }

    def measure(self, args, label: str, prefetch: int, seed: int, num_batches: int) -> float:
        """Batches/s of one run of ``num_batches`` batches (recorded under ``label``)."""
        from graphstore.client.context import set_context

        set_context(self.ctx)
        loader = make_loader(self.g, self.train, args, prefetch, seed)
        seconds, sizes, counts = run_loader(loader, min(num_batches, len(loader)), self.embedding)
        rate = len(sizes) / seconds
        if label:
            self.rates[label].append(rate)
            self.nodes += sizes
            self.edges += counts
        return rate

    def summary(self) -> dict:
        for label, rates in self.rates.items():
            self.result[f"{label}_batches_per_s"] = round(statistics.median(rates), 2)
        self.result["input_nodes_per_batch"] = round(float(np.mean(self.nodes)))
        self.result["sampled_edges_per_batch"] = round(float(np.mean(self.edges)))
        self.result["edges_per_s_prefetch"] = round(
            self.result["prefetch_batches_per_s"] * np.mean(self.edges)
        )
        self.result["server_peak_rss_mb"] = [round(peak_rss_mb(p.pid)) for p in self.servers.procs]
        return self.result


def main(argv=None) -> dict:
    import torch

    args = parse_args(argv)
    kinds = [k.strip() for k in args.graphs.split(",") if k.strip()]
    for kind in kinds:
        if kind not in ("typed", "homogeneous"):
            raise SystemExit(f"--graphs: unknown graph {kind!r}; choose from typed, homogeneous")
    with contextlib.ExitStack() as stack, torch.no_grad():
        subjects = [Subject(kind, args, stack) for kind in kinds]
        for subject in subjects:
            subject.measure(args, "", 0, args.seed, 3)  # warm-up: page cache, connections, allocator
        # The graphs take turns, run by run, so that drifts in the machine's load reach both alike.
        paired: dict[str, list[float]] = {"sequential": [], "prefetch": []}
        for repeat in range(args.repeats):
            for label, prefetch in (("sequential", 0), ("prefetch", args.prefetch)):
                rates = [
                    s.measure(args, label, prefetch, args.seed + 1 + repeat, args.batches) for s in subjects
                ]
                if len(rates) == 2:
                    paired[label].append(rates[0] / rates[1])
        results = [s.summary() for s in subjects]
    report = {
        "benchmark": "typed_loader",
        "setting": {
            "partitions": 2,
            "servers": 2,
            "client": "one process, co-located with partition 0 (local_read: on)",
            "cpu_count": os.cpu_count(),
            "batch_size": args.batch_size,
            "fanouts": args.fanouts,
            "num_workers": args.num_workers,
            "prefetch": args.prefetch,
            "emb_dim": args.emb_dim,
            "client_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        },
        "results": results,
    }
    if kinds == ["typed", "homogeneous"]:
        ratios = {label: round(statistics.median(values), 3) for label, values in paired.items()}
        typed, homogeneous = results
        report["typed_vs_homogeneous"] = {
            "batches_per_s_ratio": ratios,
            "paired_ratios": {label: [round(v, 3) for v in values] for label, values in paired.items()},
            "edges_per_s_ratio": round(
                typed["edges_per_s_prefetch"] / homogeneous["edges_per_s_prefetch"], 3
            ),
            "target": TARGET_RATIO,
            "meets_target": min(ratios.values()) >= TARGET_RATIO,
        }
    emit_report(report, args.out)
    return report


if __name__ == "__main__":
    main()
