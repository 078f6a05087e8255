"""Start partition server processes on free ports of this host, and always end them.

For notebooks, tests and benchmarks that want a real cluster without a cluster file::

    from graphstore.launcher.local_servers import start_servers

    with start_servers(config_path, num_parts=2) as group:
        client = RemotePartition(group.addresses[0], 0)
        ...
    # every server got SIGTERM (then SIGKILL if needed), also when the block raised

Or as a pytest fixture::

    @pytest.fixture
    def servers(tmp_path):
        group = start_servers(config_path, 2, log_dir=tmp_path)
        yield group
        group.stop()

Each server runs ``python -m graphstore.launcher.cli server --port 0 ...``; its address comes from
its startup line, and ``start_servers`` returns once every server reports SERVING through the
health service. Each child's stdout and stderr go to files (``group.log_paths``) whose tail is
included in the error when a server fails to start.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from graphstore.protos.service import SERVICE_NAME

_STARTUP_RE = re.compile(r"graphstore server: serving partition (\d+) of .* at (\S+) \(loaded in")


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


@dataclass
class ServerGroup:
    """Running server processes, one per partition, in partition order.

    Attributes:
        addresses: ``host:port`` of each server (index = partition id).
        procs: the ``subprocess.Popen`` objects.
        log_paths: ``(stdout file, stderr file)`` of each server.
    """

    procs: list[subprocess.Popen] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)
    log_paths: list[tuple[Path, Path]] = field(default_factory=list)

    def __enter__(self) -> ServerGroup:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stderr(self, index: int) -> str:
        """The tail of server ``index``'s stderr."""
        return _tail(self.log_paths[index][1])

    def stop(self, timeout: float = 10.0) -> list[int | None]:
        """SIGTERM every server, wait up to ``timeout`` s, SIGKILL the rest; returns the exit codes."""
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        end = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(end - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(5)
        return [proc.returncode for proc in self.procs]


def launch_server(
    part_config: str,
    part_id: int,
    log_dir: Path,
    extra_args: tuple[str, ...] | list[str] = (),
    host: str = "127.0.0.1",
) -> tuple[subprocess.Popen, Path, Path]:
    """Start one server process on a free port, without waiting for it.

    Returns:
        ``(process, stdout file, stderr file)``.
    """
    out_path = log_dir / f"server-{part_id}-{os.getpid()}-{time.monotonic_ns()}.out"
    err_path = out_path.with_suffix(".err")
    cmd = [
        sys.executable,
        "-m",
        "graphstore.launcher.cli",
        "server",
        "--part-config",
        str(part_config),
        "--part-id",
        str(part_id),
        "--host",
        host,
        "--port",
        "0",
        *extra_args,
    ]
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True)
    return proc, out_path, err_path


def wait_serving(address: str, timeout: float) -> None:
    """Block until the server at ``address`` reports SERVING.

    Raises:
        TimeoutError: not SERVING within ``timeout``.
    """
    end = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < end:
            try:
                reply = stub.Check(
                    health_pb2.HealthCheckRequest(service=SERVICE_NAME),
                    timeout=max(min(1.0, end - time.monotonic()), 0.01),
                    wait_for_ready=True,
                )
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.05)
    raise TimeoutError(f"server at {address} did not report SERVING within {timeout} s")


def start_servers(
    part_config: str,
    num_parts: int,
    extra_args: tuple[str, ...] | list[str] = (),
    *,
    log_dir: str | os.PathLike | None = None,
    timeout: float = 60.0,
    host: str = "127.0.0.1",
) -> ServerGroup:
    """Start one server per partition and wait until all are SERVING.

    Args:
        part_config: the partition config ``NAME.json``.
        num_parts: servers to start (partitions ``0 .. num_parts-1``).
        extra_args: extra ``graphstore server`` arguments (e.g. ``("--writable-features",)``).
        log_dir: where the children's stdout/stderr files go (a temporary folder by default).
        timeout: bound on the whole start-up.
        host: interface to bind.

    Returns:
        The :class:`ServerGroup`; stop it (or use it as a context manager).

    Raises:
        RuntimeError: a server exited or did not come up in time; every started server is stopped
            and the message includes its stderr.
    """
    folder = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="graphstore-servers-"))
    folder.mkdir(parents=True, exist_ok=True)
    group = ServerGroup()
    try:
        for part_id in range(num_parts):
            proc, out_path, err_path = launch_server(part_config, part_id, folder, extra_args, host)
            group.procs.append(proc)
            group.log_paths.append((out_path, err_path))
            group.addresses.append("")
        end = time.monotonic() + timeout
        for index, proc in enumerate(group.procs):
            out_path, err_path = group.log_paths[index]
            while True:
                match = _STARTUP_RE.search(_tail(out_path))
                if match:
                    group.addresses[index] = match.group(2)
                    break
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"server {index} exited with code {proc.returncode} before serving; "
                        f"stderr:\n{_tail(err_path)}"
                    )
                if time.monotonic() > end:
                    raise RuntimeError(
                        f"server {index} did not start within {timeout} s; stderr:\n{_tail(err_path)}"
                    )
                time.sleep(0.02)
            try:
                wait_serving(group.addresses[index], max(end - time.monotonic(), 0.1))
            except TimeoutError as exc:
                raise RuntimeError(f"{exc}; stderr:\n{_tail(err_path)}") from None
    except BaseException:
        group.stop()
        raise
    return group
