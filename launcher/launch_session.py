"""One run of ``graphstore launch``: bring a cluster's servers and trainers up, watch them, tear down.

1. One ``graphstore server`` per partition: a local process when the server's ``exec_host`` is this
   machine (localhost, a loopback or local IP address, this host name), else started through the
   remote-exec template (``{host}`` -> ``exec_host``, ``{command}`` -> the command).
2. Waits, bounded by ``rpc.connect_timeout_s``, until every server's health check says SERVING; a
   server that exits before that fails the launch at once, with the tail of its stderr.
3. Starts ``trainers_per_host`` trainers on each trainer host with torchrun's variables
   (``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
   ``GROUP_RANK``), ``GRAPHSTORE_CONFIG`` (the config's absolute path) and ``PYTHONUNBUFFERED=1``.
4. When every trainer exits 0, shuts the servers down (Shutdown RPC, then SIGTERM) and exits 0. When any
   process exits non-zero, ends all others (SIGTERM, then SIGKILL after ``--grace-period``) and exits with
   that code. SIGINT / SIGTERM to launch end everything too (exit code 128 + signal number).
5. With ``restart: on-failure``, a server that exits non-zero while the trainers run is started again
   (with ``--restore-latest`` when ``checkpoint.path`` is set, so it restores its newest periodic
   checkpoint), at most ``max_restarts`` times per server; the trainers' calls retry with backoff
   until it serves again (see ``docs/reliability.md``).

The cluster config's ``token`` / ``token_file``, ``tls``, ``metrics_port`` and ``checkpoint`` are passed
to every server (the token through the ``GRAPHSTORE_TOKEN`` environment variable of local servers, so it
never shows in a process list), and launch's own health probes and Shutdown calls use them too.

Every output line of every process is prefixed with its role and rank (``[server-0]``, ``[trainer-1]``);
launch's own lines start with ``[launch]``.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass

from graphstore.config import ClusterConfig
from graphstore.launcher.hosts import free_port, is_local_host
from graphstore.launcher.process_commands import trainer_environment
from graphstore.launcher.remote_exec import remote_argv
from graphstore.launcher.server_fleet import LaunchError, ServerFleet
from graphstore.launcher.stop_request import StopRequest
from graphstore.launcher.supervisor import ManagedProcess, ProcessSpec, Supervisor

DEFAULT_MASTER_PORT = 29500


@dataclass(frozen=True)
class LaunchOptions:
    """Everything one launch needs.

    Attributes:
        config: the validated cluster config.
        command: the trainer command (program and arguments).
        trainers_per_host: trainer processes per trainer host.
        remote_exec: the template starting processes on other hosts.
        grace_period_s: SIGTERM -> SIGKILL delay when tearing down.
        connect_timeout_s: bound on waiting for the servers to report SERVING.
        python: the interpreter running local servers.
    """

    config: ClusterConfig
    command: tuple[str, ...]
    trainers_per_host: int
    remote_exec: str
    grace_period_s: float = 10.0
    connect_timeout_s: float = 60.0
    python: str = sys.executable


class Launch:
    """One run of ``graphstore launch`` over a :class:`Supervisor`.

    Args:
        options: what to run.
        supervisor: starts and ends the processes (launch never leaves one behind: the caller
            uses the supervisor as a context manager).
        stop: set (by a signal handler) to end the launch early.
    """

    def __init__(self, options: LaunchOptions, supervisor: Supervisor, stop: StopRequest):
        self.options = options
        self.config = options.config
        self.supervisor = supervisor
        self.stop = stop
        self.servers = ServerFleet(
            self.config,
            self.config.all_servers,
            supervisor,
            stop,
            remote_exec=options.remote_exec,
            python=options.python,
            connect_timeout_s=options.connect_timeout_s,
            grace_period_s=options.grace_period_s,
        )
        self.trainers: list[ManagedProcess] = []

    def run(self) -> int:
        """Bring the cluster up, run the trainers, tear down; returns launch's exit code."""
        try:
            self.servers.start()
            if not self.servers.wait_ready():
                return self.interrupted_code()
            self.start_trainers()
            while True:
                watched = self.servers.processes + self.trainers
                result = self.supervisor.wait(self.trainers, stop=self.stop, watch=watched)
                if result.exit_code in (0, None) or not self.servers.should_restart(result.failed):
                    break
                if not self.servers.restart(result.failed, result.exit_code):
                    return self.interrupted_code()
        except LaunchError as exc:
            self.supervisor.log(f"error: {exc}")
            self.teardown()
            return exc.exit_code
        if result.interrupted:
            return self.interrupted_code()
        if result.exit_code != 0:
            failed = result.failed
            self.supervisor.log(
                f"{failed.label} (pid {failed.pid}) exited with code {result.exit_code}: stopping the rest"
            )
            self.teardown()
            return result.exit_code
        self.supervisor.log(f"all {len(self.trainers)} trainers finished: stopping the servers")
        self.servers.stop()
        return 0

    def interrupted_code(self) -> int:
        signum = self.stop.signum or signal.SIGTERM
        self.supervisor.log(f"received {signal.Signals(signum).name}: stopping every process")
        self.teardown()
        return 128 + signum

    def teardown(self) -> None:
        """End everything after a failure: remote servers get a Shutdown RPC first, then every process
        group (servers and trainers) gets SIGTERM / SIGKILL."""
        self.servers.shutdown_remote()
        self.supervisor.terminate(grace_period_s=self.options.grace_period_s)

    # --- trainers ------------------------------------------------------------------------------

    def start_trainers(self) -> None:
        hosts = self.config.trainer_hosts
        per_host = self.options.trainers_per_host
        world_size = per_host * len(hosts)
        local_hosts = [is_local_host(host) for host in hosts]
        if all(local_hosts):
            master_addr = "127.0.0.1"
        else:
            master_addr = hosts[0]
        if self.config.master_port is not None:
            master_port = self.config.master_port
        elif local_hosts[0]:
            master_port = free_port()
        else:
            master_port = DEFAULT_MASTER_PORT
        for group_rank, host in enumerate(hosts):
            for local_rank in range(per_host):
                rank = group_rank * per_host + local_rank
                extra = trainer_environment(
                    rank=rank,
                    local_rank=local_rank,
                    world_size=world_size,
                    local_world_size=per_host,
                    group_rank=group_rank,
                    master_addr=master_addr,
                    master_port=master_port,
                    config_path=self.config.path,
                )
                if local_hosts[group_rank]:
                    spec = ProcessSpec(
                        "trainer", rank, tuple(self.options.command), env=dict(os.environ, **extra)
                    )
                    where = "locally"
                else:
                    command = [
                        "env",
                        *(f"{key}={value}" for key, value in extra.items()),
                        *self.options.command,
                    ]
                    argv = remote_argv(self.options.remote_exec, host, command)
                    spec = ProcessSpec("trainer", rank, tuple(argv), env=dict(os.environ))
                    where = f"on {host}"
                process = self.supervisor.start(spec)
                self.trainers.append(process)
                self.supervisor.log(f"started trainer-{rank} {where} (pid {process.pid})")
        self.supervisor.log(
            f"started {world_size} trainers: MASTER_ADDR={master_addr} MASTER_PORT={master_port}"
        )
