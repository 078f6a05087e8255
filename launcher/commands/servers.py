"""``graphstore servers``: run, in the foreground, every server that a cluster YAML puts on this host.

    graphstore servers --config cluster.yaml                    # the servers whose exec_host is this machine
    graphstore servers --config cluster.yaml --hostname node-3  # ... whose exec_host is node-3 (or node-3.*)
    graphstore servers --config cluster.yaml --host-index 1     # ... of the 2nd host the config names
    graphstore servers --config cluster.yaml --dry-run          # print their commands, start nothing

For trainers started by another tool (torchrun, Slurm's srun, a Kubernetes Job): each host runs
this once, the trainers find the same YAML through ``GRAPHSTORE_CONFIG``. Each server is started with
the config's port, bind address, TLS, token, metrics and checkpoint settings, exactly as ``graphstore
launch`` would start it; the command prints ``serving partitions ...`` once all are SERVING (bounded
by ``rpc.connect_timeout_s``). With ``restart: on-failure`` a server that fails is started again
(from its latest checkpoint when ``checkpoint.path`` is set); ``--restore-latest`` starts them
from it in the first place (a container or pod that restarts runs this command again). SIGTERM or
SIGINT stops every server and exits 0; so does ``graphstore stop --config cluster.yaml`` (the servers
exit, then this command). A server that fails for good stops the others and the command exits with
its code. The servers end with this process even when it is killed with SIGKILL (Linux).

Without ``--hostname`` / ``--host-index``, "this machine" is its host names and addresses, and
under Slurm its node name (``SLURMD_NODENAME``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from graphstore.launcher.commands.arguments import add_command


def run(args: argparse.Namespace) -> int:
    """Entry point of ``graphstore servers``."""
    from graphstore.config import load_cluster_config
    from graphstore.launcher.hosts import servers_of_host
    from graphstore.launcher.process_commands import server_command
    from graphstore.launcher.server_fleet import LaunchError, ServerFleet
    from graphstore.launcher.stop_request import StopRequest, stop_on_signals
    from graphstore.launcher.supervisor import Supervisor

    if args.grace_period < 0:
        raise ValueError(f"--grace-period must be >= 0, got {args.grace_period}")
    config = load_cluster_config(args.config, check_files=not args.dry_run)
    slurm_node = os.environ.get("SLURMD_NODENAME")
    selected = servers_of_host(
        config.all_servers,
        hostname=args.hostname,
        host_index=args.host_index,
        aliases=(slurm_node,) if slurm_node else (),
    )
    if args.dry_run:
        for server in selected:
            print(
                shlex.join(server_command(config, server, sys.executable, restore_latest=args.restore_latest))
            )
        return 0
    connect_timeout = config.rpc.connect_timeout_s if args.connect_timeout is None else args.connect_timeout
    if connect_timeout <= 0:
        raise ValueError(f"--connect-timeout must be > 0, got {connect_timeout}")

    with stop_on_signals(StopRequest()) as stop:
        with Supervisor(grace_period_s=args.grace_period, name="servers") as supervisor:
            fleet = ServerFleet(
                config,
                selected,
                supervisor,
                stop,
                remote_exec=config.remote_exec,
                connect_timeout_s=connect_timeout,
                grace_period_s=args.grace_period,
                local_only=True,
            )
            try:
                return _serve(fleet, supervisor, stop, args.restore_latest)
            except LaunchError as exc:
                supervisor.log(f"error: {exc}")
                fleet.teardown()
                return exc.exit_code


def _serve(fleet, supervisor, stop, restore_latest: bool) -> int:
    """Start the fleet, report it serving, and keep it up until it is stopped; returns the exit code."""
    fleet.start(restore_latest=restore_latest)
    if fleet.wait_ready():
        parts = ", ".join(str(server.spec.part_id) for server in fleet.running)
        graph = fleet.config.graph_name or "the graph"
        supervisor.log(
            f"serving partitions {parts} of {graph} on this host; SIGTERM or "
            f"`graphstore stop --config {fleet.config.path}` stops them"
        )
        while True:
            processes = fleet.processes
            result = supervisor.wait(processes, stop=stop, watch=processes)
            if result.interrupted:
                break
            if result.exit_code == 0:
                supervisor.log("every server has stopped")
                return 0
            if not fleet.should_restart(result.failed):
                failed = fleet.find(result.failed)
                supervisor.log(
                    f"server-{failed.spec.part_id} (pid {failed.process.pid}) exited with code "
                    f"{result.exit_code}: stopping the others"
                )
                fleet.teardown()
                return result.exit_code
            if not fleet.restart(result.failed, result.exit_code):
                break
    supervisor.log("stop requested: stopping the servers")
    supervisor.terminate(fleet.processes)
    return 0


def register(subparsers) -> None:
    """Add the ``servers`` subcommand."""
    parser = add_command(
        subparsers,
        "servers",
        "run every server a cluster YAML puts on this host (for torchrun, Slurm, Kubernetes)",
        __doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", required=True, help="cluster YAML (the one the trainers read)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--hostname",
        default=None,
        help="run the servers whose exec_host is NAME or starts with NAME. (default: this machine's)",
    )
    which.add_argument(
        "--host-index",
        type=int,
        default=None,
        help="run the servers of the K-th distinct exec_host of the config, from 0 (e.g. $SLURM_NODEID)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=None,
        help="seconds to wait for the servers to be SERVING (default: the config's rpc.connect_timeout_s)",
    )
    parser.add_argument(
        "--grace-period",
        type=float,
        default=10.0,
        help="seconds between SIGTERM and SIGKILL when stopping (default 10)",
    )
    parser.add_argument(
        "--restore-latest",
        action="store_true",
        help="start each server from its newest checkpoint under the config's checkpoint.path "
        "(none yet: empty); for a container or pod that restarts",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the selected servers' commands and start nothing"
    )
    parser.set_defaults(func=run)
