"""``graphstore validate``: check a partitioned graph on disk the way a server checks it before serving.

Example::

    graphstore validate out/cora.json            # every partition
    graphstore validate out/cora.json --part-id 1

Each partition's files must exist and hold the bytes their headers promise; the structure arrays must
have the lengths and dtypes the partition config gives, each ``indptr`` must start at 0, never decrease
and end at its neighbor array's length, and node and edge IDs must lie in the graph's ranges. A problem
is one line naming the file and what is wrong (exit code 2); a valid partition prints one ``ok`` line.
"""

from __future__ import annotations

import argparse

from graphstore.launcher.commands.arguments import add_command


def register(subparsers) -> None:
    """Add the ``validate`` subcommand to the ``graphstore`` parser."""
    parser = add_command(subparsers, "validate", "check a partitioned graph's files and arrays", __doc__)
    parser.add_argument("part_config", help="the partition config NAME.json")
    parser.add_argument("--part-id", type=int, default=None, help="check only this partition (default: all)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate the partitions; raises the first problem (printed as one line by the CLI)."""
    from graphstore.partition import read_config
    from graphstore.partition.validate import load_validated_partition

    config = read_config(args.part_config)
    parts = range(int(config["num_parts"])) if args.part_id is None else [args.part_id]
    for part_id in parts:
        data = load_validated_partition(args.part_config, part_id)
        print(
            f"ok: partition {part_id} of {data.graph_name}: {data.num_local_nodes} nodes, "
            f"{data.num_local_edges} edges, {len(data.node_feats)} node and {len(data.edge_feats)} edge "
            "features",
            flush=True,
        )
    return 0
