"""Helpers of the reliability tests: server processes on chosen ports (so a restarted server comes back
where its clients dial), a self-signed CA made with the ``openssl`` command, cluster YAMLs, and
checks that processes are gone."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from graphstore.launcher.local_servers import wait_serving
from tests.launcher.helpers import (  # noqa: F401
    CLI,
    REPO,
    end_process_group,
    free_ports,
    pid_alive,
    server_command,
    start_logged,
    wait_gone,
)

_STARTUP_RE = re.compile(r"serving partition (\d+) of \S+ at (\S+) \(loaded in")


@dataclass
class ServerProc:
    """One ``graphstore server`` process started by a test."""

    part_id: int
    port: int
    args: tuple[str, ...]
    log_dir: Path
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    generation: int = 0
    env: dict[str, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""


def start_server(
    part_config: str,
    part_id: int,
    port: int,
    log_dir: Path,
    args: tuple[str, ...] | list[str] = (),
    env: dict[str, str] | None = None,
) -> ServerProc:
    """Start ``graphstore server`` on ``port`` (output to a log file), without waiting for it."""
    server = ServerProc(part_id, port, tuple(args), Path(log_dir), env=dict(env or {}))
    restart(server, part_config)
    return server


def restart(server: ServerProc, part_config: str, extra: tuple[str, ...] = ()) -> ServerProc:
    """(Re)start the server process with its arguments plus ``extra``."""
    server.generation += 1
    server.log_path = server.log_dir / f"server-{server.part_id}-gen{server.generation}.log"
    cmd = server_command(
        part_config, server.part_id, server.port, "--host", "127.0.0.1", *server.args, *extra
    )
    server.proc = start_logged(cmd, server.log_path, dict(os.environ, **server.env))
    return server


def wait_started(server: ServerProc, timeout_s: float = 60.0, security=None) -> None:
    """Block until the server printed its startup line and reports SERVING.

    Raises:
        RuntimeError: it exited first or did not come up in time (the message has its log).
    """
    end = time.monotonic() + timeout_s
    while not _STARTUP_RE.search(server.log()):
        if server.proc.poll() is not None:
            raise RuntimeError(
                f"server {server.part_id} exited with {server.proc.returncode}:\n{server.log()}"
            )
        if time.monotonic() > end:
            raise RuntimeError(f"server {server.part_id} did not start in {timeout_s} s:\n{server.log()}")
        time.sleep(0.02)
    if security is None:
        wait_serving(server.address, max(end - time.monotonic(), 1.0))
    else:
        from graphstore.launcher.control import SERVING, probe_health

        while probe_health(server.address, 1.0, security=security) != SERVING:
            if time.monotonic() > end:
                raise RuntimeError(f"server {server.part_id} not SERVING over TLS:\n{server.log()}")
            time.sleep(0.05)


def progress(out: Path, ranks: int = 2) -> int:
    """The fewest steps any trainer of ``train_script.py`` (writing into ``out``) has reported done."""
    done = []
    for rank in range(ranks):
        path = out / f"progress-{rank}"
        done.append(int(path.read_text() or 0) if path.exists() else 0)
    return min(done)


def start_with_tensors(part_config: str, servers: list, log_dir: Path, args: list[str], policy):
    """Start the server of partition 0 with ``args`` and create, through a RemotePartition with
    ``policy``, the run-time tensors ``seq`` (one float per node, zeros) and ``emb`` (two per node,
    ones). Returns ``(server, client, IDs of the nodes it owns)``."""
    import numpy as np

    from graphstore.client.transport import RemotePartition
    from graphstore.types import InitSpec

    (port,) = free_ports(1)
    server = start_server(part_config, 0, port, log_dir, args)
    servers.append(server)
    wait_started(server)
    client = RemotePartition(server.address, 0, policy)
    meta = client.metadata()
    owned = np.arange(meta.node_bounds[0], meta.node_bounds[1])
    client.init_tensor("seq", (meta.num_nodes, 1), "float32", "node")
    client.init_tensor("emb", (meta.num_nodes, 2), "float32", "node", init=InitSpec("constant", 1.0))
    return server, client, owned


def kill9(server: ServerProc) -> None:
    """SIGKILL the server (a crash: no shutdown, no final checkpoint) and reap it."""
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait(10)


def stop_all(servers: list[ServerProc]) -> None:
    """End every server process and its group (test clean-up; also after failures)."""
    for server in servers:
        if server.proc is not None:
            end_process_group(server.proc)


def run_cli(*args: str, timeout_s: float = 60.0, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``graphstore ARGS`` and capture its output."""
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO,
        env=dict(os.environ, **(env or {})),
    )


def free_port_run(count: int, host: str = "127.0.0.1") -> int:
    """The first of ``count`` consecutive TCP ports nothing listens on (``metrics_port + k``)."""
    import socket

    for _ in range(200):
        (base,) = free_ports(1, host)
        if base + count > 65535:
            continue
        sockets = []
        try:
            for port in range(base, base + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports found")


def write_yaml(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def cluster_dict(part_config: str, ports: list[int], **extra) -> dict:
    """A cluster YAML's content with one loopback server per port."""
    data = {
        "graph_name": "testgraph",
        "part_config": str(part_config),
        "servers": [{"host": "127.0.0.1", "port": port, "part_id": k} for k, port in enumerate(ports)],
        "rpc": {"connect_timeout_s": 60, "deadline_s": 20},
    }
    data.update(extra)
    return data


@dataclass(frozen=True)
class Certs:
    """A throw-away CA and a certificate for 127.0.0.1 / localhost signed by it (PEM paths)."""

    ca: str
    cert: str
    key: str
    other_ca: str


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(folder: Path) -> Certs:
    """Generate a self-signed CA, a server/client certificate for ``127.0.0.1`` and ``localhost``
    signed by it, and an unrelated second CA, with the ``openssl`` command line (EC P-256 keys)."""
    folder.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for name in ("ca", "other-ca"):
        _openssl(
            "req", "-x509", *ec, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
            "-subj", f"/CN=graphstore test {name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=folder,
        )  # fmt: skip
    _openssl(
        "req", *ec, "-keyout", "node.key", "-out", "node.csr", "-subj", "/CN=graphstore-node", cwd=folder
    )
    (folder / "ext.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
        "basicConstraints=CA:FALSE\n"
    )
    _openssl(
        "x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "node.pem", "-days", "2", "-extfile", "ext.cnf",
        cwd=folder,
    )  # fmt: skip
    return Certs(
        ca=str(folder / "ca.pem"),
        cert=str(folder / "node.pem"),
        key=str(folder / "node.key"),
        other_ca=str(folder / "other-ca.pem"),
    )


def openssl_available() -> bool:
    return shutil.which("openssl") is not None
