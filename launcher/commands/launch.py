"""``graphstore launch``: start a cluster's servers and trainers, stream their logs, tear it all down.

    graphstore launch --config configs/local-2part.yaml [--num-trainers N] \\
        [--remote-exec 'ssh -o BatchMode=yes {host} {command}'] -- python examples/train_dist.py ARGS

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

import argparse
import ipaddress
import os
import shlex
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from graphstore.auth import TOKEN_ENV
from graphstore.config import ClusterConfig, ServerSpec, load_cluster_config, validate_remote_exec
from graphstore.errors import GraphstoreError
from graphstore.launcher.control import SERVING, UNREACHABLE, probe_health, request_shutdown
from graphstore.launcher.hosts import port_accepts_connections
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


def is_local_host(host: str) -> bool:
    """Whether ``host`` names this machine: ``localhost``, this host name, or one of its IP addresses.

    Other names are not resolved (no DNS lookups): they count as remote.
    """
    name = host.strip("[]")
    if (
        name.lower() == "localhost"
        or name == socket.gethostname()
        or name == socket.gethostname().split(".")[0]
    ):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if address.is_loopback or address.is_unspecified:
        return True
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((name, 0))
        return True
    except OSError:
        return False


def remote_argv(template: str, host: str, command: Sequence[str]) -> list[str]:
    """Fill a remote-exec template: the argument list that runs ``command`` on ``host``.

    The template is split into words like a shell would (no shell runs it). A word that is exactly
    ``{command}`` becomes the command's words, each shell-quoted (ordinary words are unchanged), so ssh,
    which hands its arguments to the remote shell, runs exactly ``command``, and tools that run their
    arguments directly (``ip netns exec``, ``docker exec``) get them as they are. Inside a longer word,
    ``{command}`` becomes the whole command line as one shell-quoted string (``sh -c "cd /x && {command}"``).
    ``{host}`` becomes ``host``.

    Args:
        template: e.g. ``ssh -o BatchMode=yes {host} {command}``.
        host: the ``exec_host`` of the target.
        command: the program and its arguments.

    Returns:
        The argument list to execute locally.

    Raises:
        ConfigError: an invalid template.
    """
    validate_remote_exec(template)
    argv: list[str] = []
    for word in shlex.split(template):
        if word == "{command}":
            argv.extend(shlex.quote(part) for part in command)
        else:
            argv.append(word.replace("{host}", host).replace("{command}", shlex.join(command)))
    return argv


def server_command(
    config: ClusterConfig,
    server: ServerSpec,
    python: str,
    *,
    restore_latest: bool = False,
    token_file: bool = False,
) -> list[str]:
    """The ``graphstore server`` command line of one server.

    The cluster's TLS files, metrics port (``metrics_port + part_id``) and periodic checkpoint settings
    become flags. The token never does: it travels in the ``GRAPHSTORE_TOKEN`` environment variable
    (:func:`server_environment`), or as ``--token-file`` (the config's ``token_file`` path, which must
    exist on the server's host too) when ``token_file`` is True.

    Args:
        config: the cluster config.
        server: the server.
        python: its interpreter.
        restore_latest: add ``--restore-latest`` (a restart).
        token_file: pass the config's token file by path.
    """
    argv = [
        python,
        "-u",
        "-m",
        "graphstore.launcher.cli",
        "server",
        "--part-config",
        config.part_config,
        "--part-id",
        str(server.part_id),
        "--host",
        server.bind_host,
        "--port",
        str(server.port),
    ]
    if token_file and config.token_file:
        argv += ["--token-file", config.token_file]
    if config.tls is not None and config.tls.cert is not None:
        argv += ["--tls-cert", config.tls.cert, "--tls-key", config.tls.key]
        if config.tls.client_auth:
            argv += ["--tls-ca", config.tls.ca]
    if config.metrics_port is not None:
        argv += ["--metrics-port", str(config.metrics_port_of(server.part_id))]
    ckpt = config.checkpoint
    if ckpt.path is not None:
        argv += ["--checkpoint-dir", ckpt.path, "--checkpoint-keep", str(ckpt.keep)]
        if ckpt.every_s is not None:
            argv += ["--checkpoint-every-s", f"{ckpt.every_s:g}"]
        if ckpt.every_updates is not None:
            argv += ["--checkpoint-every-updates", str(ckpt.every_updates)]
        if restore_latest:
            argv.append("--restore-latest")
    return [*argv, *config.server_args]


def server_environment(config: ClusterConfig) -> dict[str, str]:
    """Variables a local server gets on top of launch's environment (the token, when there is one)."""
    env = {"PYTHONUNBUFFERED": "1"}
    if config.token:
        env[TOKEN_ENV] = config.token
    return env


def trainer_environment(
    *,
    rank: int,
    local_rank: int,
    world_size: int,
    local_world_size: int,
    group_rank: int,
    master_addr: str,
    master_port: int,
    config_path: str,
) -> dict[str, str]:
    """The variables a trainer gets on top of launch's environment (torchrun's names)."""
    return {
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        "RANK": str(rank),
        "LOCAL_RANK": str(local_rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(local_world_size),
        "GROUP_RANK": str(group_rank),
        "GRAPHSTORE_CONFIG": config_path,
        "PYTHONUNBUFFERED": "1",
    }


def free_port(host: str = "") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


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


class _StopEvent(threading.Event):
    """An event that remembers which signal set it."""

    signum: int = signal.SIGTERM


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

    stop = _StopEvent()

    def request_stop(signum, _frame):
        stop.signum = signum
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with Supervisor(grace_period_s=options.grace_period_s) as supervisor:
            return Launch(options, supervisor, stop).run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def register(subparsers) -> None:
    """Add the ``launch`` subcommand."""
    parser = subparsers.add_parser(
        "launch",
        help="start the servers and trainers of a cluster config, stream their logs, tear down",
        description=__doc__.split("\n\n")[0].replace("``", ""),
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
