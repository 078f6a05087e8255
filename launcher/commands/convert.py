"""``graphstore convert --from-dgl``: turn a partitioning DGL wrote into graphstore's format, keeping DGL's
assignment and IDs, so that partitions already paid for are served by graphstore.

Example::

    graphstore convert --from-dgl data/ogbn-products.json --out gs-parts/
    graphstore convert --from-dgl parts/g.json --out gs/ --dgl-python /opt/dgl-venv/bin/python

DGL's ``NAME.json`` and tensor files are read directly; each ``partK/graph.dgl`` is read with DGL itself
(this interpreter when DGL imports in it, else ``--dgl-python``). See
:mod:`graphstore.launcher.dgl_convert`.
"""

from __future__ import annotations

import argparse
import sys

from graphstore.launcher.commands.arguments import add_command


def register(subparsers) -> None:
    """Add the ``convert`` subcommand to the ``graphstore`` parser."""
    parser = add_command(
        subparsers, "convert", "convert a DGL partitioning into graphstore's format", __doc__
    )
    parser.add_argument("--from-dgl", required=True, metavar="NAME.json", help="DGL's partition config")
    parser.add_argument("--out", required=True, help="output folder (absent or empty unless --overwrite)")
    parser.add_argument("--name", default=None, help="graph name (default: DGL's)")
    parser.add_argument(
        "--dgl-python", default=None, help="an interpreter with DGL, to read graph.dgl (default: this one)"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty output folder")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Convert and print where the result is."""
    from graphstore.launcher.dgl_convert import convert_dgl_partitioning

    try:
        result = convert_dgl_partitioning(args.from_dgl, args.out, args.dgl_python, args.name, args.overwrite)
    except RuntimeError as exc:  # DGL needed and missing, or DGL failing to read a file
        print(f"graphstore convert: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"converted {args.from_dgl} -> {result.config_path}: {result.num_parts} partitions, "
        f"{result.num_nodes} nodes, {result.num_edges} edges",
        flush=True,
    )
    return 0
