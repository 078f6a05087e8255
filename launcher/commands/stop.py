"""``graphstore stop``: shut a cluster's servers down through their Shutdown RPC.

    graphstore stop --config configs/local-2part.yaml [--timeout 5] [--no-wait]

Each server is asked to shut down; by default the command then waits (bounded by ``--timeout``)
until none of them answers any more, so their ports are free when it returns. Exit code 0 when
every server is down (or was not running), 1 otherwise.
"""

from __future__ import annotations

import argparse
import time

from graphstore.launcher.commands.arguments import add_command


def run(args: argparse.Namespace) -> int:
    """Entry point of ``graphstore stop``."""
    if args.timeout <= 0:
        raise ValueError(f"--timeout must be > 0, got {args.timeout}")
    from graphstore.config import load_cluster_config
    from graphstore.launcher.control import UNREACHABLE, probe_health, request_shutdown

    config = load_cluster_config(args.config, check_files=False)
    security = config.channel_security()  # Shutdown carries the token when the servers have one
    failed = False
    asked = []
    for server in config.all_servers:
        label = f"server {server.part_id}" + (f" replica {server.replica}" if server.replica else "")
        try:
            outcome = request_shutdown(server.address, timeout_s=args.timeout, security=security)
        except RuntimeError as exc:
            print(f"{label} {server.address}: {exc}")
            failed = True
            continue
        print(f"{label} {server.address}: {outcome}")
        if outcome == "stopping":
            asked.append(server)
    if args.wait:
        deadline = time.monotonic() + args.timeout
        for server in asked:
            while True:
                remaining = deadline - time.monotonic()
                health = probe_health(
                    server.address, timeout_s=max(0.05, min(0.5, remaining)), security=security
                )
                if health == UNREACHABLE:
                    break
                if remaining <= 0:
                    print(
                        f"server {server.part_id} {server.address}: still answering after {args.timeout:g} s"
                    )
                    failed = True
                    break
                time.sleep(0.05)
    return 1 if failed else 0


def register(subparsers) -> None:
    """Add the ``stop`` subcommand."""
    parser = add_command(subparsers, "stop", "shut the servers of a cluster config down", __doc__)
    parser.add_argument("--config", required=True, help="cluster YAML")
    parser.add_argument("--timeout", type=float, default=5.0, help="deadline in seconds (default 5)")
    parser.add_argument(
        "--no-wait", dest="wait", action="store_false", help="return once asked, without waiting for the exit"
    )
    parser.set_defaults(func=run)
