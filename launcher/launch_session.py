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
import shlex
import signal
import sys
import threading
import time
from dataclasses import dataclass

from graphstore.auth import TOKEN_ENV
from graphstore.config import ClusterConfig, ServerSpec
from graphstore.errors import GraphstoreError
from graphstore.launcher.control import SERVING, UNREACHABLE, probe_health, request_shutdown
from graphstore.launcher.hosts import free_port, is_local_host, port_accepts_connections
from graphstore.launcher.process_commands import server_command, server_environment, trainer_environment
from graphstore.launcher.remote_exec import remote_argv
from graphstore.launcher.supervisor import ManagedProcess, ProcessSpec, Supervisor, exit_code_of

DEFAULT_MASTER_PORT = 29500


class LaunchError(GraphstoreError):
    """The cluster could not be brought up; ``exit_code`` is what launch exits with."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


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

    def __init__(self, options: LaunchOptions, supervisor: Supervisor, stop: threading.Event):
        self.options = options
        self.config = options.config
        self.supervisor = supervisor
        self.stop = stop
        self.servers: list[tuple[ServerSpec, ManagedProcess, bool]] = []  # (spec, process, is_local)
        self.trainers: list[ManagedProcess] = []
        self.security = self.config.channel_security()
        self.restarts: dict[int, int] = {}  # part_id -> restarts so far

    def run(self) -> int:
        """Bring the cluster up, run the trainers, tear down; returns launch's exit code."""
        try:
            self.start_servers()
            if not self.wait_servers_ready():
                return self.interrupted_code()
            self.start_trainers()
            while True:
                watched = [process for _, process, _ in self.servers] + self.trainers
                result = self.supervisor.wait(self.trainers, stop=self.stop, watch=watched)
                if result.exit_code in (0, None) or not self.should_restart(result.failed):
                    break
                if not self.restart_server(result.failed, result.exit_code):
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
        self.stop_servers()
        return 0

    def interrupted_code(self) -> int:
        signum = getattr(self.stop, "signum", signal.SIGTERM)
        self.supervisor.log(f"received {signal.Signals(signum).name}: stopping every process")
        self.teardown()
        return 128 + signum

    # --- servers -------------------------------------------------------------------------------

    def start_servers(self) -> None:
        for server in self.config.servers:
            local = is_local_host(server.exec_host)
            if local and port_accepts_connections(server.host, server.port):
                raise LaunchError(
                    f"servers[{server.part_id}]: {server.address} is already in use by another process "
                    f"(stop it, e.g. `graphstore stop --config {self.config.path}`, or change the port)"
                )
            self.servers.append((server, self.start_server(server, local), local))

    def start_server(self, server: ServerSpec, local: bool, restore_latest: bool = False) -> ManagedProcess:
        """Start one server process (locally or through the remote-exec template)."""
        env = dict(os.environ, **server_environment(self.config))
        if local:
            argv = server_command(self.config, server, self.options.python, restore_latest=restore_latest)
            shown = argv
        else:
            python = self.config.remote_python or self.options.python
            command = server_command(
                self.config, server, python, restore_latest=restore_latest, token_file=True
            )
            shown_command = command
            if self.config.token and not self.config.token_file:
                # No file to point at: the token rides in the remote command's environment.
                command = ["env", f"{TOKEN_ENV}={self.config.token}", *command]
                shown_command = ["env", f"{TOKEN_ENV}=***", *shown_command]
            argv = remote_argv(self.options.remote_exec, server.exec_host, command)
            shown = remote_argv(self.options.remote_exec, server.exec_host, shown_command)
            env = dict(os.environ, PYTHONUNBUFFERED="1")
        process = self.supervisor.start(ProcessSpec("server", server.part_id, tuple(argv), env=env))
        where = "locally" if local else f"on {server.exec_host}"
        self.supervisor.log(
            f"started server-{server.part_id} {where} (pid {process.pid}) "
            f"for {server.address}: {shlex.join(shown)}"
        )
        return process

    def should_restart(self, process: ManagedProcess | None) -> bool:
        """Whether a failed process is a server that ``restart: on-failure`` lets launch start again."""
        if process is None or self.config.restart != "on-failure":
            return False
        for server, current, _ in self.servers:
            if current is process:
                used = self.restarts.get(server.part_id, 0)
                if used >= self.config.max_restarts:
                    self.supervisor.log(
                        f"event=restart_limit part_id={server.part_id} restarts={used} "
                        f"max_restarts={self.config.max_restarts}: not restarting server-{server.part_id}"
                    )
                    return False
                return True
        return False

    def restart_server(self, process: ManagedProcess, exit_code: int) -> bool:
        """Start a failed server again and wait until it serves; False when launch was interrupted.

        Raises:
            LaunchError: it did not come back within the connect timeout and the restart budget.
        """
        index = next(i for i, (_, current, _) in enumerate(self.servers) if current is process)
        server, _, local = self.servers[index]
        # The dead server's group (anything it left behind) ends now; its number is not reused later.
        self.supervisor.terminate([process], grace_period_s=0)
        while True:
            count = self.restarts.get(server.part_id, 0) + 1
            self.restarts[server.part_id] = count
            restore = self.config.checkpoint.path is not None
            self.supervisor.log(
                f"event=server_restart part_id={server.part_id} old_pid={process.pid} exit_code={exit_code} "
                f"restart={count}/{self.config.max_restarts} "
                f"restore={'latest_checkpoint' if restore else 'none'}"
            )
            if not restore:
                self.supervisor.log(
                    f"server-{server.part_id} restarts without checkpoint.path: its run-time tensors are lost"
                )
            process = self.start_server(server, local, restore_latest=restore)
            self.servers[index] = (server, process, local)
            try:
                return self.wait_servers_ready([self.servers[index]])
            except LaunchError as exc:
                if count >= self.config.max_restarts:
                    raise LaunchError(
                        f"server-{server.part_id} could not be restarted ({count} restarts): {exc}",
                        exit_code=exc.exit_code,
                    ) from None
                self.supervisor.log(f"server-{server.part_id} failed to come back: {exc}")
                self.supervisor.terminate([process], grace_period_s=0)
                exit_code = exit_code_of(process.poll() if process.poll() is not None else 1)

    def wait_servers_ready(
        self, servers: list[tuple[ServerSpec, ManagedProcess, bool]] | None = None
    ) -> bool:
        """Poll health until every server (default: all) is SERVING; False when interrupted.

        Raises:
            LaunchError: a server exited, or the connect timeout passed.
        """
        timeout = self.options.connect_timeout_s
        deadline = time.monotonic() + timeout
        pending = list(self.servers if servers is None else servers)
        started = time.monotonic()
        last_health: dict[int, str] = {}
        while pending:
            if self.stop.is_set():
                return False
            for entry in list(pending):
                server, process, _ = entry
                code = process.poll()
                if code is not None:
                    tail = process.stderr_tail().rstrip() or "(no output on stderr)"
                    raise LaunchError(
                        f"server-{server.part_id} exited with code {exit_code_of(code)} before serving; "
                        f"its last stderr lines:\n{tail}",
                        exit_code=exit_code_of(code) or 1,
                    )
                remaining = deadline - time.monotonic()
                health = probe_health(
                    server.address, timeout_s=max(0.05, min(1.0, remaining)), security=self.security
                )
                last_health[server.part_id] = health
                if health == SERVING:
                    pending.remove(entry)
                    self.supervisor.log(
                        f"server-{server.part_id} at {server.address} is SERVING "
                        f"({time.monotonic() - started:.1f} s after start)"
                    )
            if pending and time.monotonic() >= deadline:
                states = ", ".join(
                    f"server-{s.part_id} {s.address}: {last_health.get(s.part_id, UNREACHABLE)}"
                    for s, _, _ in pending
                )
                raise LaunchError(f"servers not SERVING within connect_timeout_s = {timeout:g} s ({states})")
            if pending:
                self.stop.wait(0.1)
        return True

    def stop_servers(self) -> None:
        """Shutdown RPC to each server, wait for them to exit, then end whatever is left."""
        for server, process, _ in self.servers:
            if process.running:
                try:
                    request_shutdown(server.address, timeout_s=5.0, security=self.security)
                except RuntimeError as exc:
                    self.supervisor.log(f"{exc}; using SIGTERM")
        processes = [process for _, process, _ in self.servers]
        self.supervisor.wait(processes, timeout_s=self.options.grace_period_s, watch=())
        self.supervisor.terminate(grace_period_s=self.options.grace_period_s)

    def teardown(self) -> None:
        """End everything after a failure: remote servers get a Shutdown RPC first (ending the
        local ssh client would not end them), then every process group gets SIGTERM / SIGKILL."""
        for server, _, local in self.servers:
            if not local:
                try:
                    request_shutdown(server.address, timeout_s=2.0, security=self.security)
                except RuntimeError:
                    pass
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
