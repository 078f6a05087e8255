"""``graphstore launch``: start a cluster's servers and trainers, stream their logs, tear it all down.

    graphstore launch --config configs/local-2part.yaml [--num-trainers N] \\
        [--remote-exec 'ssh -o BatchMode=yes {host} {command}'] -- python examples/train_dist.py ARGS

What a launch does, step by step, is in :mod:`graphstore.launcher.launch_session`; this module reads
the arguments and the cluster config and handles SIGINT / SIGTERM.
"""

from __future__ import annotations

import argparse

from graphstore.config import load_cluster_config, validate_remote_exec
from graphstore.launcher.commands.arguments import add_command
from graphstore.launcher.launch_session import Launch, LaunchOptions
from graphstore.launcher.stop_request import StopRequest, stop_on_signals
from graphstore.launcher.supervisor import Supervisor


def run(args: argparse.Namespace) -> int:
    """Entry point of ``graphstore launch``."""
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ValueError(
            "launch: no trainer command given (usage: graphstore launch --config C -- python script.py)"
        )
    config = load_cluster_config(args.config)
    if args.num_trainers is not None and args.num_trainers < 1:
        raise ValueError(f"--num-trainers must be >= 1, got {args.num_trainers}")
    if args.grace_period < 0:
        raise ValueError(f"--grace-period must be >= 0, got {args.grace_period}")
    remote_exec = (
        config.remote_exec
        if args.remote_exec is None
        else validate_remote_exec(args.remote_exec, "--remote-exec")
    )
    connect_timeout = config.rpc.connect_timeout_s if args.connect_timeout is None else args.connect_timeout
    if connect_timeout <= 0:
        raise ValueError(f"--connect-timeout must be > 0, got {connect_timeout}")
    options = LaunchOptions(
        config=config,
        command=tuple(command),
        trainers_per_host=config.trainers_per_host if args.num_trainers is None else args.num_trainers,
        remote_exec=remote_exec,
        grace_period_s=args.grace_period,
        connect_timeout_s=connect_timeout,
    )

    with (
        stop_on_signals(StopRequest()) as stop,
        Supervisor(grace_period_s=options.grace_period_s) as supervisor,
    ):
        return Launch(options, supervisor, stop).run()


def register(subparsers) -> None:
    """Add the ``launch`` subcommand."""
    parser = add_command(
        subparsers,
        "launch",
        "start the servers and trainers of a cluster config, stream their logs, tear down",
        __doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example: graphstore launch --config configs/local-2part.yaml -- "
        "python examples/train_dist.py --graph-name cora --part-config data/cora/cora.json",
    )
    parser.add_argument("--config", required=True, help="cluster YAML (servers, trainers, rpc policy)")
    parser.add_argument(
        "--num-trainers",
        type=int,
        default=None,
        help="trainer processes per trainer host (default: the config's trainers_per_host)",
    )
    parser.add_argument(
        "--remote-exec",
        default=None,
        help="template starting a process on another host, with {host} and {command} "
        "(default: the config's remote_exec, else 'ssh -o BatchMode=yes {host} {command}')",
    )
    parser.add_argument(
        "--grace-period",
        type=float,
        default=10.0,
        help="seconds between SIGTERM and SIGKILL on teardown (default 10)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=None,
        help="seconds to wait for every server to be SERVING (default: the config's rpc.connect_timeout_s)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the trainer command")
    parser.set_defaults(func=run)
