"""A cluster's partition servers as supervised processes: start, wait until SERVING, restart, stop.

``graphstore launch`` runs every server of the cluster YAML through one :class:`ServerFleet` (local
ones as children, others through the remote-exec template); ``graphstore servers`` runs the servers
of one host through another (all local). Either way:

1. one ``graphstore server`` per selected entry of ``servers``, with the cluster's TLS, token,
   metrics and checkpoint settings (:mod:`graphstore.launcher.process_commands`); a local port that
   already accepts connections fails before anything starts;
2. :meth:`ServerFleet.wait_ready` polls each server's health until SERVING, bounded by the connect
   timeout; a server that exits first fails at once, with the tail of its stderr;
3. with ``restart: on-failure``, :meth:`ServerFleet.restart` starts a failed server again (with
   ``--restore-latest`` when ``checkpoint.path`` is set), at most ``max_restarts`` times per server;
4. :meth:`ServerFleet.stop` asks each server to shut down (Shutdown RPC), then ends what is left;
   :meth:`ServerFleet.teardown` ends everything after a failure.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from graphstore.auth import TOKEN_ENV
from graphstore.config import ClusterConfig, ServerSpec, format_address, split_address
from graphstore.errors import GraphstoreError
from graphstore.launcher.control import SERVING, UNREACHABLE, probe_health, request_shutdown
from graphstore.launcher.hosts import is_local_host, port_accepts_connections
from graphstore.launcher.process_commands import server_command, server_environment
from graphstore.launcher.remote_exec import remote_argv
from graphstore.launcher.stop_request import StopRequest
from graphstore.launcher.supervisor import ManagedProcess, ProcessSpec, Supervisor, exit_code_of


class LaunchError(GraphstoreError):
    """Servers (or trainers) could not be brought up; ``exit_code`` is what the command exits with."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class RunningServer:
    """One server of the fleet: its spec, its current process, and whether it runs on this host."""

    spec: ServerSpec
    process: ManagedProcess
    local: bool


class ServerFleet:
    """Some servers of a cluster config as supervised processes.

    Args:
        config: the cluster config (TLS, token, checkpoint and restart settings).
        servers: which of its servers this fleet runs.
        supervisor: starts and ends the processes.
        stop: set (by a signal handler) to end waiting early.
        remote_exec: the template starting a server on another host.
        python: the interpreter running local servers.
        connect_timeout_s: bound on waiting for the servers to report SERVING.
        grace_period_s: SIGTERM -> SIGKILL delay when stopping.
        local_only: start every server here (``graphstore servers``), whatever its ``exec_host``, as
            children that end when this process dies, even by SIGKILL.
    """

    def __init__(
        self,
        config: ClusterConfig,
        servers: Sequence[ServerSpec],
        supervisor: Supervisor,
        stop: StopRequest,
        *,
        remote_exec: str,
        python: str = sys.executable,
        connect_timeout_s: float = 60.0,
        grace_period_s: float = 10.0,
        local_only: bool = False,
    ):
        self.config = config
        self.specs = tuple(servers)
        self.supervisor = supervisor
        self.stop_event = stop
        self.remote_exec = remote_exec
        self.python = python
        self.connect_timeout_s = connect_timeout_s
        self.grace_period_s = grace_period_s
        self.local_only = local_only
        self.running: list[RunningServer] = []
        self.security = config.channel_security()
        self.restarts: dict[tuple[int, int], int] = {}  # (part_id, replica) -> restarts so far

    @property
    def processes(self) -> list[ManagedProcess]:
        """The current process of each server."""
        return [server.process for server in self.running]

    def start(self, restore_latest: bool = False) -> None:
        """Start every server of the fleet.

        Args:
            restore_latest: each server first restores its newest periodic checkpoint, when the
                config has ``checkpoint.path`` (a container or pod that restarts).

        Raises:
            LaunchError: a local server's port is already taken.
        """
        for spec in self.specs:
            local = self.local_only or is_local_host(spec.exec_host)
            if local and port_accepts_connections(*split_address(self._local_address(spec))):
                raise LaunchError(
                    f"{spec.name}: {spec.address} is already in use by another process "
                    f"(stop it, e.g. `graphstore stop --config {self.config.path}`, or change the port)"
                )
            process = self._start_process(spec, local, restore_latest=restore_latest)
            self.running.append(RunningServer(spec, process, local))

    def _start_process(self, spec: ServerSpec, local: bool, restore_latest: bool = False) -> ManagedProcess:
        env = dict(os.environ, **server_environment(self.config))
        if local:
            argv = server_command(self.config, spec, self.python, restore_latest=restore_latest)
            shown = argv
        else:
            python = self.config.remote_python or self.python
            command = server_command(
                self.config, spec, python, restore_latest=restore_latest, token_file=True
            )
            shown_command = command
            if self.config.token and not self.config.token_file:
                # No file to point at: the token rides in the remote command's environment.
                command = ["env", f"{TOKEN_ENV}={self.config.token}", *command]
                shown_command = ["env", f"{TOKEN_ENV}=***", *shown_command]
            argv = remote_argv(self.remote_exec, spec.exec_host, command)
            shown = remote_argv(self.remote_exec, spec.exec_host, shown_command)
            env = dict(os.environ, PYTHONUNBUFFERED="1")
        process = self.supervisor.start(
            ProcessSpec(
                "server",
                spec.part_id,
                tuple(argv),
                env=env,
                end_with_parent=self.local_only,
                suffix=spec.name.removeprefix(f"server-{spec.part_id}"),
            )
        )
        where = "locally" if local else f"on {spec.exec_host}"
        self.supervisor.log(
            f"started {spec.name} {where} (pid {process.pid}) for {spec.address}: {shlex.join(shown)}"
        )
        return process

    def find(self, process: ManagedProcess | None) -> RunningServer | None:
        """The server whose current process is ``process``, or None."""
        return next((server for server in self.running if server.process is process), None)

    def should_restart(self, process: ManagedProcess | None) -> bool:
        """Whether a failed process is a server that ``restart: on-failure`` lets the fleet start again."""
        server = self.find(process)
        if server is None or self.config.restart != "on-failure":
            return False
        used = self.restarts.get((server.spec.part_id, server.spec.replica), 0)
        if used >= self.config.max_restarts:
            self.supervisor.log(
                f"event=restart_limit part_id={server.spec.part_id} restarts={used} "
                f"max_restarts={self.config.max_restarts}: not restarting {server.spec.name}"
            )
            return False
        return True

    def restart(self, process: ManagedProcess, exit_code: int) -> bool:
        """Start a failed server again and wait until it serves; False when interrupted.

        Raises:
            LaunchError: it did not come back within the connect timeout and the restart budget.
        """
        server = self.find(process)
        if server is None:
            raise ValueError(f"process {process!r} is not a server of this fleet")
        spec = server.spec
        # The dead server's group (anything it left behind) ends now; its number is not reused later.
        self.supervisor.terminate([process], grace_period_s=0)
        while True:
            count = self.restarts.get((spec.part_id, spec.replica), 0) + 1
            self.restarts[(spec.part_id, spec.replica)] = count
            restore = self.config.checkpoint.path is not None and not spec.is_read_replica
            replica = f" replica={spec.replica}" if spec.replica else ""
            self.supervisor.log(
                f"event=server_restart part_id={spec.part_id}{replica} old_pid={process.pid} "
                f"exit_code={exit_code} "
                f"restart={count}/{self.config.max_restarts} "
                f"restore={'latest_checkpoint' if restore else 'none'}"
            )
            if not restore and not spec.is_read_replica:
                self.supervisor.log(
                    f"{spec.name} restarts without checkpoint.path: its run-time tensors are lost"
                )
            process = self._start_process(spec, server.local, restore_latest=restore)
            server.process = process
            try:
                return self.wait_ready([server])
            except LaunchError as exc:
                if count >= self.config.max_restarts:
                    raise LaunchError(
                        f"{spec.name} could not be restarted ({count} restarts): {exc}",
                        exit_code=exc.exit_code,
                    ) from None
                self.supervisor.log(f"{spec.name} failed to come back: {exc}")
                self.supervisor.terminate([process], grace_period_s=0)
                exit_code = exit_code_of(process.poll() if process.poll() is not None else 1)

    def wait_ready(self, servers: list[RunningServer] | None = None) -> bool:
        """Poll health until every server (default: all) is SERVING; False when interrupted.

        Raises:
            LaunchError: a server exited, or the connect timeout passed.
        """
        timeout = self.connect_timeout_s
        deadline = time.monotonic() + timeout
        pending = list(self.running if servers is None else servers)
        started = time.monotonic()
        last_health: dict[str, str] = {}
        while pending:
            if self.stop_event.is_set():
                return False
            for server in list(pending):
                spec, process = server.spec, server.process
                code = process.poll()
                if code is not None:
                    tail = process.stderr_tail().rstrip() or "(no output on stderr)"
                    raise LaunchError(
                        f"{spec.name} exited with code {exit_code_of(code)} before serving; "
                        f"its last stderr lines:\n{tail}",
                        exit_code=exit_code_of(code) or 1,
                    )
                remaining = deadline - time.monotonic()
                health = probe_health(
                    self._local_address(spec) if server.local else spec.address,
                    timeout_s=max(0.05, min(1.0, remaining)),
                    security=self.security,
                )
                last_health[spec.name] = health
                if health == SERVING:
                    pending.remove(server)
                    self.supervisor.log(
                        f"{spec.name} at {spec.address} is SERVING "
                        f"({time.monotonic() - started:.1f} s after start)"
                    )
            if pending and time.monotonic() >= deadline:
                states = ", ".join(
                    f"{p.spec.name} {p.spec.address}: {last_health.get(p.spec.name, UNREACHABLE)}"
                    for p in pending
                )
                raise LaunchError(f"servers not SERVING within connect_timeout_s = {timeout:g} s ({states})")
            if pending:
                self.stop_event.wait(0.1)
        return True

    def _local_address(self, spec: ServerSpec) -> str:
        """Where this host reaches a server it runs: its address, or loopback when ``graphstore servers``
        runs it bound to every interface (a pod's own DNS name may not resolve before it is ready)."""
        if self.local_only and spec.bind_host in ("0.0.0.0", "::"):
            return format_address("127.0.0.1" if spec.bind_host == "0.0.0.0" else "::1", spec.port)
        return spec.address

    def stop(self) -> None:
        """Shutdown RPC to each server, wait for them to exit, then end whatever is left."""
        for server in self.running:
            if server.process.running:
                address = self._local_address(server.spec) if server.local else server.spec.address
                try:
                    request_shutdown(address, timeout_s=5.0, security=self.security)
                except RuntimeError as exc:
                    self.supervisor.log(f"{exc}; using SIGTERM")
        self.supervisor.wait(self.processes, timeout_s=self.grace_period_s, watch=())
        self.supervisor.terminate(self.processes, grace_period_s=self.grace_period_s)

    def teardown(self) -> None:
        """End every server after a failure: :meth:`shutdown_remote`, then SIGTERM / SIGKILL to every
        server's process group."""
        self.shutdown_remote()
        self.supervisor.terminate(self.processes, grace_period_s=self.grace_period_s)

    def shutdown_remote(self) -> None:
        """Shutdown RPC to the servers started on other hosts (ending the local ssh client would not
        end them)."""
        for server in self.running:
            if not server.local:
                try:
                    request_shutdown(server.spec.address, timeout_s=2.0, security=self.security)
                except RuntimeError:
                    pass
