"""Child processes of the side-by-side benchmark: started in their own sessions, always ended.

Standard library only: the driver (graphstore's venv) and both workers (graphstore's and DGL's
venvs) import it. Every process the benchmark starts goes through :class:`Children`, whose
``stop()`` runs on success, on error and on SIGTERM / SIGHUP (see :func:`exit_on_signals`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

DEFAULT_GRACE_S = 10.0
SHM = "/dev/shm"


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies (Linux ``PR_SET_PDEATHSIG``)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def exit_on_signals() -> None:
    """Turn SIGTERM and SIGHUP into ``SystemExit`` so that ``finally`` blocks stop the children."""

    def handler(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on the loopback interface right now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def popen_in_session(
    command: list[str], env: dict | None, out, die_with_parent: bool = False
) -> subprocess.Popen:
    """``command`` in a new session (its own process group), stdout and stderr to ``out``."""
    return subprocess.Popen(
        command,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_die_with_parent if die_with_parent else None,
    )


def end_group(proc: subprocess.Popen, grace_s: float = DEFAULT_GRACE_S) -> None:
    """SIGTERM to the process group of ``proc`` (its own session), SIGKILL after ``grace_s``."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(5)


class Children:
    """Processes started in their own sessions; ``stop()`` (or leaving the ``with``) ends them all.

    Each child also gets SIGKILL if this process dies without stopping it (a crash in native code).
    """

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start(
        self, command: list[str], *, env: dict | None = None, log_path: Path | None = None
    ) -> subprocess.Popen:
        """Start ``command`` with its stdout and stderr in ``log_path`` (discarded when None)."""
        out = open(log_path, "w") if log_path is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            proc = popen_in_session(command, env, out, die_with_parent=True)
        finally:
            if log_path is not None:
                out.close()
        self.procs.append(proc)
        self.logs.append(log_path)
        return proc

    def wait_all(self, timeout_s: float) -> list[int]:
        """Wait for every child to exit; returns their exit codes.

        Raises:
            TimeoutError: a child still running after ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        for proc in self.procs:
            remaining = deadline - time.monotonic()
            try:
                proc.wait(max(remaining, 0.01))
            except subprocess.TimeoutExpired as exc:
                raise TimeoutError(f"{proc.args[:4]} still running after {timeout_s:.0f} s") from exc
        return [proc.returncode for proc in self.procs]

    def stop(self, grace_s: float = DEFAULT_GRACE_S) -> None:
        """End every child still running (SIGTERM to its group, SIGKILL after ``grace_s``)."""
        for proc in reversed(self.procs):
            end_group(proc, grace_s)

    def __enter__(self) -> Children:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def wait_for_log_line(proc: subprocess.Popen, log_path: Path, text: str, timeout_s: float) -> None:
    """Poll ``log_path`` until it contains ``text``.

    Raises:
        RuntimeError: the process exited first (with the log's tail).
        TimeoutError: no such line within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        content = log_path.read_text(errors="replace") if log_path.exists() else ""
        if text in content:
            return
        if proc.poll() is not None:
            raise RuntimeError(
                f"{proc.args[:4]} exited {proc.returncode} before {text!r}:\n{content[-3000:]}"
            )
        time.sleep(0.1)
    raise TimeoutError(f"no {text!r} in {log_path} after {timeout_s:.0f} s")


def dgl_shared_memory_files(graph_name: str) -> set[str]:
    """The ``/dev/shm`` files DGL names after the graph (its structure) or ``*-kvdata-`` (its tensors)."""
    return {name for name in os.listdir(SHM) if name.startswith(graph_name) or name.endswith("-kvdata-")}


def remove_shared_memory(names: set[str]) -> None:
    """Remove these ``/dev/shm`` files (what a DGL server killed before its own clean-up leaves)."""
    for name in names:
        Path(SHM, name).unlink(missing_ok=True)


def run_measured(command: list[str], *, env: dict | None, log_path: Path, timeout_s: float) -> dict:
    """Run ``command`` to its end in its own session; returns exit code, wall time and peak RSS.

    The peak RSS is the child's own maximum resident set (``wait4``'s ``ru_maxrss``), in bytes.

    Raises:
        TimeoutError: still running after ``timeout_s`` (its process group is ended first).
    """
    with open(log_path, "w") as out:
        start = time.perf_counter()
        proc = popen_in_session(command, env, out)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{command[:4]} still running after {timeout_s:.0f} s; log {log_path}")
                time.sleep(0.05)
        except BaseException:
            end_group(proc)
            raise
        wall_s = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    return {"returncode": proc.returncode, "wall_s": wall_s, "peak_rss_bytes": usage.ru_maxrss * 1024}
