"""``graphstore generate``: write a seeded synthetic graph to an ``.npz`` that ``graphstore partition``
reads. ``--schema homogeneous`` (default): power-law degrees, community structure, labels from
communities (a share ``--label-noise``, 0.1, drawn at random: the task's irreducible error, so that
accuracy stays well below 1.0 even on a dense graph), and features = class center + noise, so a GNN
beats a features-only model; arrays src,
dst, feat, label, community, train_mask, val_mask, test_mask. ``--schema mag``: papers, authors,
institutions and fields of study in ogbn-mag's proportions and relations (writes, cites,
affiliated_with, has_topic, and their rev_ reverses unless --no-reverse), paper labels that the
relations reveal far better than the paper features; typed arrays num_nodes/<ntype>,
node/<ntype>/<name>, edge/<src>:<etype>:<dst>/src|dst.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from graphstore.launcher.commands.arguments import add_command
from graphstore.partition.memory import peak_rss_bytes

SCHEMAS = ("homogeneous", "mag")
# config fields that both schemas take, each with its own default (a flag left out keeps it)
_SHARED_FIELDS = ("feat_dim", "num_classes", "homophily", "feat_signal")
# homogeneous-only flags, and why they do not apply to mag
_HOMOGENEOUS_ONLY = {
    "avg_degree": ("--avg-degree", "edge counts follow ogbn-mag's proportions"),
    "communities_per_class": ("--communities-per-class", "each class is one community"),
    "train_frac": ("--train-frac", "the split follows the paper year, as in ogbn-mag"),
    "val_frac": ("--val-frac", "the split follows the paper year, as in ogbn-mag"),
    "label_noise": ("--label-noise", "a paper's label is its class"),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``generate`` subcommand."""
    parser = add_command(subparsers, "generate", "write a seeded synthetic graph (.npz)", __doc__)
    parser.add_argument(
        "--schema", default="homogeneous", help="graph shape: homogeneous (default) or mag (ogbn-mag-like)"
    )
    parser.add_argument(
        "--num-nodes", type=int, required=True, help="number of nodes N (mag: over all types)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--feat-dim", type=int, help="feature width (default 32; mag: 128)")
    parser.add_argument("--num-classes", type=int, help="number of labels (default 10; mag: 64)")
    parser.add_argument(
        "--homophily",
        type=float,
        help="share of edges inside the destination's community (default 0.8; mag: 0.3)",
    )
    parser.add_argument(
        "--feat-signal", type=float, help="class-center length vs unit noise (default 2; mag: 2)"
    )
    parser.add_argument("--avg-degree", type=float, help="directed edges per node (default 10; not mag)")
    parser.add_argument(
        "--communities-per-class", type=int, help="communities per label (default 4; not mag)"
    )
    parser.add_argument(
        "--label-noise",
        type=float,
        help="share of nodes labelled at random, the task's irreducible error (default 0.1; 0: the easy "
        "graph of earlier versions, where a GNN on a dense graph scores ~1.0; not mag)",
    )
    parser.add_argument("--train-frac", type=float, help="fraction of training nodes (default 0.1; not mag)")
    parser.add_argument("--val-frac", type=float, help="fraction of validation nodes (default 0.1; not mag)")
    parser.add_argument(
        "--no-reverse", action="store_true", help="mag: leave out the rev_<etype> reverse relations"
    )
    parser.add_argument("--out", required=True, help="output .npz path (a folder with --num-chunks)")
    parser.add_argument(
        "--num-chunks",
        type=int,
        default=None,
        help="write the chunked input format (folder --out, docs/partition-format.md) for "
        "`mpirun -np K graphstore partition --chunks`: the graph goes through a temporary .npz beside it",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    parser.set_defaults(func=run)


def _given(args: argparse.Namespace, fields) -> dict:
    """The flags among ``fields`` that were given on the command line, by config field name."""
    return {name: getattr(args, name) for name in fields if getattr(args, name) is not None}


def _run_homogeneous(args: argparse.Namespace) -> dict:
    from graphstore.partition.generate import GeneratorConfig, write_generated_graph

    if args.no_reverse:
        raise ValueError("--no-reverse applies only to --schema mag")
    cfg = GeneratorConfig(
        num_nodes=args.num_nodes,
        seed=args.seed,
        **_given(args, _SHARED_FIELDS),
        **_given(args, _HOMOGENEOUS_ONLY),
    )
    shapes = write_generated_graph(cfg, args.out, overwrite=args.overwrite)
    return {"num_nodes": cfg.num_nodes, "num_edges": cfg.num_edges, "arrays": shapes}


def _run_mag(args: argparse.Namespace) -> dict:
    from graphstore.partition.generate_mag import MagConfig, write_mag_graph
    from graphstore.partition.typed_input import edge_key

    for name, (flag, why) in _HOMOGENEOUS_ONLY.items():
        if getattr(args, name) is not None:
            raise ValueError(f"{flag} does not apply to --schema mag ({why}); got {getattr(args, name)}")
    cfg = MagConfig(
        num_nodes=args.num_nodes, seed=args.seed, reverse=not args.no_reverse, **_given(args, _SHARED_FIELDS)
    )
    shapes = write_mag_graph(cfg, args.out, overwrite=args.overwrite)
    edges = {":".join(e): shapes[edge_key(e, "src")][0] for e in cfg.canonical_etypes()}
    return {
        "num_nodes": cfg.num_nodes,
        "num_edges": sum(edges.values()),
        "num_nodes_per_type": cfg.node_counts(),
        "num_edges_per_type": edges,
        "arrays": shapes,
    }


def run(args: argparse.Namespace) -> int:
    """Generate the graph; prints one json line of what was written.

    Raises:
        ValueError: an unknown ``--schema``, a flag that does not apply to it, or an invalid parameter.
    """
    if args.schema not in SCHEMAS:
        raise ValueError(f"--schema must be one of {', '.join(SCHEMAS)}; got {args.schema!r}")
    start = time.perf_counter()
    if args.num_chunks is not None:
        return _run_chunked(args, start)
    written = _run_mag(args) if args.schema == "mag" else _run_homogeneous(args)
    report = {
        "out": os.path.abspath(args.out),
        "schema": args.schema,
        **written,
        "arrays": {k: list(v) for k, v in written["arrays"].items()},
        "bytes": os.path.getsize(args.out),
        "seconds": round(time.perf_counter() - start, 2),
        "peak_rss_mb": round(peak_rss_bytes() / 2**20, 1),
    }
    print(json.dumps(report))
    return 0


def _run_chunked(args: argparse.Namespace, start: float) -> int:
    """``--num-chunks``: generate into a temporary .npz beside ``--out``, chunk it, remove it.

    The generator writes its .npz a chunk at a time and the chunker reads it memory-mapped a chunk at a
    time, so memory stays that of one chunk; the disk holds the graph twice until the .npz is removed.
    """
    import tempfile

    from graphstore.partition import load_graph
    from graphstore.partition.chunked import write_chunks
    from graphstore.partition.writer import check_output_folder

    if isinstance(args.num_chunks, bool) or args.num_chunks < 1:
        raise ValueError(f"--num-chunks must be >= 1, got {args.num_chunks}")
    check_output_folder(args.out, args.overwrite)
    parent = os.path.dirname(os.path.abspath(args.out)) or "."
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".generate-", suffix=".npz", dir=parent)
    os.close(fd)
    out = args.out
    try:
        args.out, args.overwrite, chunk_overwrite = tmp, True, args.overwrite
        written = _run_mag(args) if args.schema == "mag" else _run_homogeneous(args)
        name = os.path.basename(os.path.abspath(out))
        path = write_chunks(load_graph(tmp), out, args.num_chunks, name, overwrite=chunk_overwrite)
    finally:
        args.out = out
        if os.path.exists(tmp):
            os.remove(tmp)
    report = {
        "out": os.path.abspath(out),
        "metadata": os.path.abspath(path),
        "schema": args.schema,
        "num_chunks": args.num_chunks,
        **written,
        "arrays": {k: list(v) for k, v in written["arrays"].items()},
        "seconds": round(time.perf_counter() - start, 2),
        "peak_rss_mb": round(peak_rss_bytes() / 2**20, 1),
    }
    print(json.dumps(report))
    return 0
