"""``graphstore partition``: split a graph (.npz with src, dst and node/edge arrays, or a text edge list)
into partitions on disk, with METIS or at random: node and edge IDs are relabelled into contiguous
per-partition ranges, and OUT/NAME.json plus OUT/partK/ folders of memory-mappable .npy arrays are
written (see docs/partition-format.md).
"""

from __future__ import annotations

import argparse
import json
import os
import time

from graphstore.launcher.commands.arguments import add_command


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``partition`` subcommand."""
    parser = add_command(
        subparsers, "partition", "partition a graph into OUT/NAME.json + OUT/partK/", __doc__
    )
    parser.add_argument("--graph", default=None, help="input .npz or edge-list text file")
    parser.add_argument(
        "--chunks",
        default=None,
        help="a chunked graph's folder (graphstore chunk): partition it with the MPI ranks this runs on "
        "(mpirun -np K graphstore partition --chunks ...; methods metis (ParMETIS API), random, range)",
    )
    parser.add_argument("--name", default=None, help="graph name (default: the input file's stem)")
    parser.add_argument("--num-parts", type=int, required=True, help="number of partitions")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--method", default="metis", help="metis (default) or random")
    parser.add_argument(
        "--balance-ntypes",
        default=None,
        type=_name_list,
        help="node array(s) whose categories each partition gets an even share of, e.g. train_mask, or "
        "train_mask,val_mask,test_mask (comma-separated boolean masks)",
    )
    parser.add_argument("--balance-edges", action="store_true", help="also balance in-edges per partition")
    parser.add_argument(
        "--ndata-map",
        default=None,
        help="rename node arrays on the way in, e.g. x=feat,y=label (NTYPE/x=feat for one node type)",
    )
    parser.add_argument(
        "--edata-map",
        default=None,
        help="rename edge arrays on the way in, e.g. edge_attr=weight (SRC:ETYPE:DST/name=new for one type)",
    )
    parser.add_argument(
        "--feat-dtype",
        default=None,
        help="store floating feature matrices as float16 or bfloat16 (bfloat16 as uint16 bits on disk)",
    )
    parser.add_argument(
        "--num-nodes", type=int, default=None, help="node count (edge lists: default max ID + 1)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.add_argument("--json", action="store_true", help="print the statistics as one json line")
    parser.set_defaults(func=run)


def _name_list(text: str) -> list[str] | None:
    """``--balance-ntypes``: comma-separated names (None when none is given)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    return names or None


def format_stats(stats: dict) -> str:
    """The human-readable statistics table printed after partitioning."""
    lines = [
        f"graph: {stats['num_nodes']:,} nodes, {stats['num_edges']:,} edges -> "
        f"{stats['num_parts']} partitions "
        f"({stats['part_method']})",
        f"edge cut: {stats['edge_cut'] * 100:.2f}% of directed edges cross partitions",
        f"{'part':>4} {'nodes':>12} {'edges':>14} {'train nodes':>12}",
    ]
    train = stats.get("part_train_nodes") or []
    for k in range(stats["num_parts"]):
        train_k = f"{train[k]:,}" if train else "-"
        lines.append(f"{k:>4} {stats['part_nodes'][k]:>12,} {stats['part_edges'][k]:>14,} {train_k:>12}")
    lines.append(
        f"time: {stats['total_seconds']:.1f}s (assignment {stats['assign_seconds']:.1f}s); "
        f"peak RSS {stats['peak_rss_bytes'] / 2**30:.2f} GiB"
    )
    type_nodes = stats.get("part_type_nodes") or {}
    if len(type_nodes) > 1:
        lines.append("nodes per type and partition:")
        for ntype, counts in type_nodes.items():
            lines.append(f"  {ntype:>16} " + " ".join(f"{c:>12,}" for c in counts))
    if stats.get("timings"):
        lines.append("steps: " + ", ".join(f"{k} {v:.1f}s" for k, v in stats["timings"].items()))
    if stats.get("phase_peak_rss_bytes"):
        peaks = stats["phase_peak_rss_bytes"].items()
        lines.append("peak RSS per step: " + ", ".join(f"{k} {v / 2**30:.2f} GiB" for k, v in peaks))
    lines.append(f"config: {stats['config_path']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Partition the graph and print its statistics."""
    if (args.graph is None) == (args.chunks is None):
        raise ValueError("give exactly one of --graph FILE and --chunks FOLDER")
    if args.chunks is not None:
        return run_parallel(args)
    from graphstore.partition import load_graph, partition_graph
    from graphstore.partition.input_adapters import parse_name_map
    from graphstore.partition.writer import check_output_folder

    name = args.name or os.path.splitext(os.path.basename(args.graph))[0]
    ndata_map = parse_name_map(args.ndata_map, "--ndata-map")
    edata_map = parse_name_map(args.edata_map, "--edata-map")
    check_output_folder(args.out, args.overwrite)
    start = time.perf_counter()
    graph = load_graph(args.graph, num_nodes=args.num_nodes)
    load_seconds = time.perf_counter() - start
    result = partition_graph(
        graph,
        name,
        args.num_parts,
        args.out,
        part_method=args.method,
        balance_ntypes=args.balance_ntypes,
        balance_edges=args.balance_edges,
        feat_dtype=args.feat_dtype,
        seed=args.seed,
        overwrite=args.overwrite,
        ndata_map=ndata_map,
        edata_map=edata_map,
    )
    stats = result.stats()
    stats["timings"] = {"load": round(load_seconds, 3), **stats["timings"]}
    stats["total_seconds"] += load_seconds
    print(json.dumps(stats) if args.json else format_stats(stats))
    return 0


def run_parallel(args: argparse.Namespace) -> int:
    """``--chunks``: the parallel pipeline over the MPI ranks (rank 0 prints the statistics)."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ValueError(
            f"--chunks needs mpi4py and an MPI library (deploy/system-packages.sh): {exc}"
        ) from None
    from graphstore.partition.chunked import read_metadata
    from graphstore.partition.parallel import ParallelJob, partition_chunks

    for flag in ("ndata_map", "edata_map", "feat_dtype", "num_nodes"):
        if getattr(args, flag) is not None:
            raise ValueError(f"--{flag.replace('_', '-')} does not apply to --chunks")
    name = args.name or read_metadata(args.chunks).graph_name
    job = ParallelJob(
        chunks=args.chunks,
        graph_name=name,
        num_parts=args.num_parts,
        out_path=args.out,
        part_method=args.method,
        balance_ntypes=args.balance_ntypes,
        balance_edges=args.balance_edges,
        seed=args.seed,
        overwrite=args.overwrite,
    )
    stats = partition_chunks(job)
    if MPI.COMM_WORLD.rank == 0:
        print(json.dumps(stats) if args.json else format_parallel_stats(stats), flush=True)
    return 0


def format_parallel_stats(stats: dict) -> str:
    """The human-readable summary of a parallel run: the serial table plus one line per rank."""
    lines = [
        f"graph: {stats['num_nodes']:,} nodes, {stats['num_edges']:,} edges -> "
        f"{stats['num_parts']} partitions "
        f"({stats['part_method']}, {stats['num_ranks']} ranks)",
        f"edge cut: {stats['edge_cut'] * 100:.2f}% of directed edges cross partitions",
        "nodes per partition: " + ", ".join(f"{n:,}" for n in stats["part_nodes"]),
        "edges per partition: " + ", ".join(f"{n:,}" for n in stats["part_edges"]),
        f"time: {stats['total_seconds']:.1f}s; "
        f"peak RSS {stats['peak_rss_bytes'] / 2**30:.2f} GiB (largest rank), "
        f"{stats['total_peak_rss_bytes'] / 2**30:.2f} GiB (all ranks)",
    ]
    for r in stats["ranks"]:
        phases = ", ".join(
            f"{k} {v:.1f}s/{r['peak_rss_bytes'][k] / 2**30:.2f}GiB" for k, v in r["seconds"].items()
        )
        lines.append(f"rank {r['rank']} ({r['host']}): {phases}")
    lines.append(f"config: {stats['config_path']}")
    return "\n".join(lines)
