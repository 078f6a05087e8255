"""Entry point of the ``graphstore`` command.

Each subcommand lives in its own module under ``graphstore.launcher.commands`` and exposes
``register(subparsers)``, which adds its parser and sets ``func(args) -> int``. Modules are
imported only when their command runs, so ``graphstore status`` does not pay for torch.
A :class:`~graphstore.errors.GraphstoreError` or a ValueError/FileNotFoundError raised by a
command becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# subcommand name -> module under graphstore.launcher.commands
COMMANDS = {
    "chunk": "chunk",
    "convert": "convert",
    "generate": "generate",
    "partition": "partition",
    "server": "server",
    "servers": "servers",
    "slurm": "slurm",
    "launch": "launch",
    "status": "status",
    "stop": "stop",
    "validate": "validate",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Build the argument parser; with ``only``, import just that subcommand's module."""
    parser = argparse.ArgumentParser(
        prog="graphstore", description="A distributed graph store for GNN training."
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    # ``subcommand``, not ``command``: ``launch`` keeps the trainer's command line under ``command``.
    sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND")
    sub.required = True
    for name, module in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=f"see `graphstore {name} --help`")
            continue
        try:
            mod = importlib.import_module(f"graphstore.launcher.commands.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"graphstore.launcher.commands.{module}":
                raise
            continue
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``graphstore`` command line; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if a in COMMANDS), None)
    parser = build_parser(only=command)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not hasattr(args, "func"):
        parser.error(f"command {args.subcommand!r} is not available in this build")
    from graphstore.errors import GraphstoreError

    try:
        return int(args.func(args) or 0)
    except (GraphstoreError, ValueError, FileNotFoundError, FileExistsError, PermissionError) as exc:
        print(f"graphstore {args.subcommand}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
