"""Helpers of the launcher tests: processes by PID, free ports, cluster YAMLs, and ``graphstore launch`` /
``graphstore server`` subprocesses that a test always ends."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import yaml

from graphstore.launcher.hosts import free_ports  # noqa: F401 - the tests import it from here
from tests.utils.wait import wait_until

REPO = Path(__file__).resolve().parents[2]
TRAINER_SCRIPT = str(Path(__file__).resolve().parent / "trainer_script.py")
CLI = [sys.executable, "-m", "graphstore.launcher.cli"]
# Variables of a launched trainer; a run a test starts itself must not inherit them from the test's
# environment (a stray RANK or GRAPHSTORE_CONFIG would make it join the wrong cluster).
CLUSTER_VARIABLES = (
    "GRAPHSTORE_CONFIG",
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
)


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without :data:`CLUSTER_VARIABLES`, unbuffered, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in CLUSTER_VARIABLES}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def start_logged(command: list[str], log_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``command`` in its own session (so :func:`end_process_group` ends all it started), run from the
    repository root with no stdin, its stdout and stderr in ``log_path``; ``env`` None inherits ours."""
    with open(log_path, "w") as log:
        return subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(REPO),
            env=None if env is None else dict(env),
        )


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state follows the parenthesised command name, which may itself contain spaces.
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def wait_gone(pids: Iterable[int], timeout_s: float = 10.0) -> list[int]:
    """Wait until none of ``pids`` is alive; returns those still alive at the deadline."""
    pids = list(pids)
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [pid for pid in pids if pid_alive(pid)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def kill_pids(pids: Iterable[int]) -> None:
    """SIGKILL each PID that is still alive (test clean-up after a failure)."""
    for pid in pids:
        if pid_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def end_process_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """End a child started with ``start_new_session=True`` and its group: SIGTERM, then SIGKILL."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def read_pid_files(folder, pattern: str = "*.pid") -> dict[str, int]:
    """``{file stem: pid}`` of the PID files a test's children wrote into ``folder``."""
    from pathlib import Path

    pids = {}
    for path in Path(folder).glob(pattern):
        text = path.read_text().strip()
        if text:
            pids[path.stem] = int(text)
    return pids


def write_cluster(folder: Path, part_config: str, ports: list[int], **extra) -> Path:
    """A cluster YAML with one loopback server per port (partition k on ports[k])."""
    data = {
        "graph_name": "testgraph",
        "part_config": part_config,
        "servers": [{"host": "127.0.0.1", "port": port, "part_id": k} for k, port in enumerate(ports)],
        "rpc": {"connect_timeout_s": 60, "deadline_s": 30},
    }
    data.update(extra)
    path = folder / "cluster.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class LaunchRun:
    """A ``graphstore launch`` (or ``servers``) subprocess in its own session, its output in a file."""

    def __init__(
        self,
        args: list[str],
        log_path: Path,
        env: dict | None = None,
        prefix: tuple[str, ...] = (),
        subcommand: str = "launch",
    ):
        self.log_path = log_path
        self.proc = start_logged([*prefix, *CLI, subcommand, *args], log_path, env)

    def wait(self, timeout_s: float = 120.0) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"launch did not finish in {timeout_s} s; output:\n{self.output}") from None

    def send(self, signum: int = signal.SIGTERM) -> None:
        os.kill(self.proc.pid, signum)

    @property
    def output(self) -> str:
        return self.log_path.read_text()

    def child_pids(self) -> list[int]:
        """PIDs of every process launch reported starting (``... (pid N) ...``)."""
        return [int(pid) for pid in re.findall(r"\(pid (\d+)\)", self.output)]

    def close(self) -> None:
        pids = self.child_pids()
        end_process_group(self.proc)
        kill_pids(pids)


def server_command(part_config: str | Path, part_id: int, port: int | str, *extra: str) -> list[str]:
    """The ``graphstore server`` command line serving ``part_id`` of ``part_config`` on ``port``."""
    return [
        *CLI,
        "server",
        "--part-config",
        str(part_config),
        "--part-id",
        str(part_id),
        "--port",
        str(port),
        *extra,
    ]


def start_server_process(part_config: str, part_id: int, port: int, log_path: Path) -> subprocess.Popen:
    """A ``graphstore server`` subprocess (its own session) serving ``part_id`` on loopback."""
    return start_logged(server_command(part_config, part_id, port), log_path)


def wait_serving(addresses: list[str], procs: list[subprocess.Popen], timeout_s: float = 60.0) -> None:
    """Wait until every server reports SERVING; fails early when its process exits."""
    from graphstore.launcher.control import SERVING, probe_health

    deadline = time.monotonic() + timeout_s
    for address, proc in zip(addresses, procs, strict=True):
        wait_until(
            lambda address=address: probe_health(address, timeout_s=1.0) == SERVING,
            max(deadline - time.monotonic(), 0.0),
            f"server {address} to be SERVING",
            alive=proc,
            interval_s=0.05,
        )


def wait_for_pid_files(folder, count: int, timeout_s: float = 60.0, alive: subprocess.Popen | None = None):
    """Wait until ``count`` PID files exist in ``folder``; fails early when ``alive`` exits first."""

    def enough() -> dict[str, int] | None:
        pids = read_pid_files(folder) if Path(folder).is_dir() else {}
        return pids if len(pids) >= count else None

    return wait_until(enough, timeout_s, f"{count} PID files in {folder}", alive=alive, interval_s=0.05)
