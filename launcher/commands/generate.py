"""``graphstore generate``: write a seeded synthetic graph to an ``.npz`` that ``graphstore partition``
reads: power-law degrees, community structure, labels from communities, and features = class center +
noise, so a GNN beats a features-only model. Output arrays: src, dst, feat, label, community,
train_mask, val_mask, test_mask.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from graphstore.launcher.commands.arguments import add_command, dataclass_from_args
from graphstore.partition.partitioner import peak_rss_bytes


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``generate`` subcommand."""
    parser = add_command(subparsers, "generate", "write a seeded synthetic graph (.npz)", __doc__)
    parser.add_argument("--num-nodes", type=int, required=True, help="number of nodes N")
    parser.add_argument("--avg-degree", type=float, default=10.0, help="directed edges per node (default 10)")
    parser.add_argument("--feat-dim", type=int, default=32, help="feature width (default 32)")
    parser.add_argument("--num-classes", type=int, default=10, help="number of labels (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--homophily", type=float, default=0.8, help="share of intra-community edges (default 0.8)"
    )
    parser.add_argument(
        "--communities-per-class", type=int, default=4, help="communities per label (default 4)"
    )
    parser.add_argument(
        "--feat-signal", type=float, default=2.0, help="class-center length vs unit noise (default 2)"
    )
    parser.add_argument(
        "--train-frac", type=float, default=0.1, help="fraction of training nodes (default 0.1)"
    )
    parser.add_argument(
        "--val-frac", type=float, default=0.1, help="fraction of validation nodes (default 0.1)"
    )
    parser.add_argument("--out", required=True, help="output .npz path")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Generate the graph; prints one json line of what was written."""
    from graphstore.partition.generate import GeneratorConfig, write_generated_graph

    cfg = dataclass_from_args(GeneratorConfig, args)
    start = time.perf_counter()
    shapes = write_generated_graph(cfg, args.out, overwrite=args.overwrite)
    report = {
        "out": os.path.abspath(args.out),
        "num_nodes": cfg.num_nodes,
        "num_edges": cfg.num_edges,
        "arrays": {k: list(v) for k, v in shapes.items()},
        "bytes": os.path.getsize(args.out),
        "seconds": round(time.perf_counter() - start, 2),
        "peak_rss_mb": round(peak_rss_bytes() / 2**20, 1),
    }
    print(json.dumps(report))
    return 0
