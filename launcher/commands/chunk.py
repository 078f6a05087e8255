"""``graphstore chunk``: convert a graph (.npz, typed .npz or edge list) into the chunked input format
(metadata.json plus per-type edge and array chunks as .npy, docs/partition-format.md) that
``mpirun -np K graphstore partition --chunks`` reads. The input is memory-mapped and written a chunk at
a time.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from graphstore.launcher.commands.arguments import add_command


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``chunk`` subcommand."""
    parser = add_command(subparsers, "chunk", "convert a graph into the chunked input format", __doc__)
    parser.add_argument("--graph", required=True, help="input .npz or edge-list text file")
    parser.add_argument("--num-chunks", type=int, required=True, help="chunks per type and array")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--name", default=None, help="graph name (default: the input file's stem)")
    parser.add_argument("--num-nodes", type=int, default=None, help="node count (edge lists)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the chunks and print one json line (metadata path, counts, time, peak RSS)."""
    from graphstore.partition import load_graph
    from graphstore.partition.chunked import write_chunks
    from graphstore.partition.memory import peak_rss_bytes
    from graphstore.partition.writer import check_output_folder

    check_output_folder(args.out, args.overwrite)
    start = time.perf_counter()
    graph = load_graph(args.graph, num_nodes=args.num_nodes)
    name = args.name or os.path.splitext(os.path.basename(args.graph))[0]
    path = write_chunks(graph, args.out, args.num_chunks, name, overwrite=args.overwrite)
    print(
        json.dumps(
            {
                "metadata": path,
                "num_nodes": graph.num_nodes,
                "num_edges": graph.num_edges,
                "num_chunks": args.num_chunks,
                "seconds": round(time.perf_counter() - start, 3),
                "peak_rss_bytes": peak_rss_bytes(),
            }
        )
    )
    return 0
