"""``graphstore server``: serve one graph partition (features, structure, run-time tensors) over gRPC,
in the foreground.

Example::

    graphstore server --part-config out/cora.json --part-id 0 --host 127.0.0.1 --port 50051

``--port 0`` picks a free port; the startup line printed once the server answers says which.
SIGTERM (or Ctrl-C) stops it cleanly with exit code 0.

Security (``docs/security.md``): ``--token-file`` (or the ``GRAPHSTORE_TOKEN`` environment variable;
``--token`` works too but shows the token to anyone who can list processes) makes every call but
health checks carry the token; ``--tls-cert`` / ``--tls-key`` turn TLS on, ``--tls-ca`` also requires
client certificates. Reliability (``docs/reliability.md``): ``--checkpoint-dir`` with
``--checkpoint-every-s`` / ``--checkpoint-every-updates`` writes periodic checkpoints,
``--restore-latest`` restores the newest one before serving; ``--durability wal`` (with ``--fsync``)
appends every write to a write-ahead log before answering it (``docs/server.md``). Checkpoint / Restore
calls name folders under ``--checkpoint-root`` (default: ``checkpoints/`` beside the partition config).
``--metrics-port`` serves Prometheus metrics (on loopback unless ``--metrics-host``; behind the token
when there is one). Limits (``docs/server.md``): ``--max-sampled-edges``, ``--max-request-rows``,
``--max-request-bytes``, ``--max-tensor-dims``, ``--max-barrier-timeout-s``, ``--max-barrier-waiters``,
``--memory-margin-mb``, ``--auth-failure-burst``, ``--auth-cooldown-s``.
"""

from __future__ import annotations

import argparse
import os

from graphstore.launcher.commands.arguments import add_command, dataclass_from_args
from graphstore.limits import RequestLimits, limit_flag, limit_kind, limit_names


def register(subparsers) -> None:
    """Add the ``server`` subcommand to the ``graphstore`` parser."""
    parser = add_command(subparsers, "server", "serve one partition over gRPC", __doc__)
    parser.add_argument("--part-config", required=True, help="partition config NAME.json")
    parser.add_argument("--part-id", type=int, required=True, help="the partition to serve")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default 0)")
    parser.add_argument(
        "--writable-features",
        action="store_true",
        help="load the partition's features into memory and allow pushes to them",
    )
    parser.add_argument(
        "--read-replica",
        action="store_true",
        help="serve as a read replica: the partition files' read-only data and structure only; every "
        "write, run-time tensor and checkpoint call is refused (writes go to the partition's owner)",
    )
    parser.add_argument("--num-threads", type=int, default=32, help="RPC worker threads (default 32)")
    parser.add_argument(
        "--max-message-mb", type=int, default=256, help="gRPC message size limit in MiB (default 256)"
    )
    parser.add_argument("--restore-from", default=None, help="restore this checkpoint folder before serving")
    parser.add_argument(
        "--checkpoint-on-exit", default=None, help="checkpoint run-time tensors to this folder on shutdown"
    )
    security = parser.add_argument_group("security")
    token = security.add_mutually_exclusive_group()
    token.add_argument(
        "--token-file",
        default=None,
        help="file holding the shared token every call but health checks must carry",
    )
    token.add_argument(
        "--token",
        default=None,
        help="the shared token itself (visible in the process list: prefer --token-file or GRAPHSTORE_TOKEN)",
    )
    security.add_argument(
        "--allow-short-token", action="store_true", help="accept a token shorter than 16 characters"
    )
    security.add_argument("--tls-cert", default=None, help="server certificate (PEM); turns TLS on")
    security.add_argument("--tls-key", default=None, help="server private key (PEM)")
    security.add_argument(
        "--tls-ca", default=None, help="CA bundle (PEM): require client certificates it signed (mutual TLS)"
    )
    observe = parser.add_argument_group("observability")
    observe.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus metrics on this port (0: a free one; default off)",
    )
    observe.add_argument(
        "--metrics-host", default="127.0.0.1", help="interface of the metrics endpoint (default 127.0.0.1)"
    )
    ckpt = parser.add_argument_group("periodic checkpoints")
    ckpt.add_argument("--checkpoint-dir", default=None, help="folder of periodic checkpoints (DIR/part-K)")
    ckpt.add_argument(
        "--checkpoint-every-s", type=float, default=None, help="checkpoint this often when something changed"
    )
    ckpt.add_argument(
        "--checkpoint-every-updates", type=int, default=None, help="checkpoint after this many updates"
    )
    ckpt.add_argument(
        "--checkpoint-keep", type=int, default=3, help="complete checkpoints to keep (default 3)"
    )
    ckpt.add_argument(
        "--durability",
        choices=("checkpoint", "wal"),
        default="checkpoint",
        help="checkpoint: a crash loses at most the periodic checkpoints' bound of updates; wal: every "
        "write is logged before it is answered, a crash loses none (default checkpoint)",
    )
    ckpt.add_argument(
        "--fsync",
        action="store_true",
        help="with --durability wal: sync the log before answering (survives a power loss too)",
    )
    ckpt.add_argument(
        "--restore-latest",
        action="store_true",
        help="restore the newest checkpoint under --checkpoint-dir before serving (none: start empty)",
    )
    ckpt.add_argument(
        "--checkpoint-root",
        default=None,
        help="folder that Checkpoint / Restore names live under (default: checkpoints/ beside --part-config)",
    )
    limits = parser.add_argument_group("limits (docs/server.md)")
    default = RequestLimits()
    for name in limit_names():
        limits.add_argument(
            limit_flag(name), type=limit_kind(name), default=None, help=f"default {getattr(default, name):g}"
        )
    parser.set_defaults(func=run)


def resolve_token(args: argparse.Namespace) -> str | None:
    """The token from ``--token-file``, ``--token`` or ``GRAPHSTORE_TOKEN`` (in that order), or None.

    Raises:
        FileNotFoundError: a missing token file.
        ValueError: an invalid token.
    """
    from graphstore.auth import TOKEN_ENV, read_token_file, validate_token

    allow_short = getattr(args, "allow_short_token", False)
    if args.token_file:
        return read_token_file(args.token_file, "--token-file", allow_short)
    if args.token is not None:
        return validate_token(args.token, "--token", allow_short)
    from_env = os.environ.get(TOKEN_ENV)
    if from_env:
        return validate_token(from_env, TOKEN_ENV, allow_short)
    return None


def limits_from_args(args: argparse.Namespace) -> RequestLimits:
    """The limits the flags give (the others keep their defaults)."""
    given = {name: getattr(args, name) for name in limit_names() if getattr(args, name, None) is not None}
    return RequestLimits(**given)


def run(args: argparse.Namespace) -> int:
    """Run the server until SIGTERM / SIGINT / a Shutdown call; returns the exit code."""
    from graphstore.server import ServerConfig, serve

    config = dataclass_from_args(
        ServerConfig,
        args,
        max_message_bytes=args.max_message_mb * 1024 * 1024,
        token=resolve_token(args),
        limits=limits_from_args(args),
    )
    return serve(config)
