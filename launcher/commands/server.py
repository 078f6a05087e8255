"""``graphstore server``: run one partition server in the foreground.

Example::

    graphstore server --part-config out/cora.json --part-id 0 --host 127.0.0.1 --port 50051

``--port 0`` picks a free port; the startup line printed once the server answers says which.
SIGTERM (or Ctrl-C) stops it cleanly with exit code 0.
"""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    """Add the ``server`` subcommand to the ``graphstore`` parser."""
    parser = subparsers.add_parser(
        "server",
        help="serve one partition over gRPC",
        description="Serve one graph partition (features, structure, run-time tensors) over gRPC.",
    )
    parser.add_argument("--part-config", required=True, help="partition config NAME.json")
    parser.add_argument("--part-id", type=int, required=True, help="the partition to serve")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default 0)")
    parser.add_argument(
        "--writable-features",
        action="store_true",
        help="load the partition's features into memory and allow pushes to them",
    )
    parser.add_argument("--num-threads", type=int, default=32, help="RPC worker threads (default 32)")
    parser.add_argument(
        "--max-message-mb", type=int, default=256, help="gRPC message size limit in MiB (default 256)"
    )
    parser.add_argument("--restore-from", default=None, help="restore this checkpoint folder before serving")
    parser.add_argument(
        "--checkpoint-on-exit", default=None, help="checkpoint run-time tensors to this folder on shutdown"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the server until SIGTERM / SIGINT / a Shutdown call; returns the exit code."""
    from graphstore.server.main import ServerConfig, serve

    config = ServerConfig(
        part_config=args.part_config,
        part_id=args.part_id,
        host=args.host,
        port=args.port,
        writable_features=args.writable_features,
        num_threads=args.num_threads,
        max_message_bytes=args.max_message_mb * 1024 * 1024,
        restore_from=args.restore_from,
        checkpoint_on_exit=args.checkpoint_on_exit,
    )
    return serve(config)
