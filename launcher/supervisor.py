"""A supervisor for a group of child processes: the process management under ``graphstore launch``.

Each child runs in its own session (``start_new_session=True``), so it and every process it
starts share one process group that can be signalled as a whole. Every line a child writes is
copied to the supervisor's stdout / stderr prefixed with its label (``[server-0] ...``,
``[trainer-1] ...``), and the last lines of its stderr are kept for error messages.

:meth:`Supervisor.wait` returns when a set of processes has finished successfully or when any
supervised process fails; :meth:`Supervisor.terminate` ends every process group it started
(SIGTERM, then SIGKILL after a grace period). Used as a context manager, a supervisor never
leaves a child behind, whatever exception ends the block.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TextIO

from graphstore.launcher.stop_request import StopRequest


@dataclass(frozen=True)
class ProcessSpec:
    """What to run and how to label it.

    Attributes:
        role: ``"server"``, ``"trainer"``, ... (the label's first part).
        rank: the process's index within its role.
        argv: the program and its arguments (no shell).
        env: the child's complete environment; None inherits the supervisor's.
        cwd: working directory; None inherits.
        end_with_parent: on Linux, the child gets SIGTERM when the supervisor dies, even by SIGKILL
            (``PR_SET_PDEATHSIG``): what ``graphstore servers`` uses so that a batch system killing it
            leaves no server behind.
        suffix: appended to the label (``.r1`` for a partition's read replica 1).
    """

    role: str
    rank: int
    argv: tuple[str, ...]
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    end_with_parent: bool = False
    suffix: str = ""

    @property
    def label(self) -> str:
        return f"{self.role}-{self.rank}{self.suffix}"


def _end_with_parent_hook():
    """A ``preexec_fn`` asking Linux to send the child SIGTERM when its parent dies (None elsewhere).

    libc is loaded here, in the parent: the forked child only calls ``prctl``.
    """
    if sys.platform != "linux":
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)

    return hook


def exit_code_of(returncode: int) -> int:
    """A shell-style exit code: a child killed by signal N (``returncode == -N``) gives ``128 + N``."""
    return 128 - returncode if returncode < 0 else returncode


class ManagedProcess:
    """A started child: its spec, ``Popen`` handle and the tail of its stderr."""

    def __init__(self, spec: ProcessSpec, popen: subprocess.Popen, tail_lines: int):
        self.spec = spec
        self.popen = popen
        self.started_at = time.monotonic()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self._readers: list[threading.Thread] = []
        self._group_ended = False

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        """The return code (``-N`` when killed by signal N), or None while it runs."""
        return self.popen.poll()

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def stderr_tail(self, wait_s: float = 1.0) -> str:
        """The last lines the process wrote to stderr (after its output is drained when it has exited)."""
        if self.popen.poll() is not None:
            for reader in self._readers:
                reader.join(timeout=wait_s)
        return "".join(self._stderr_tail)

    def __repr__(self) -> str:
        return f"ManagedProcess({self.label}, pid={self.pid}, returncode={self.popen.poll()})"


@dataclass(frozen=True)
class WaitResult:
    """How :meth:`Supervisor.wait` ended.

    Attributes:
        exit_code: 0 when every target exited 0; else the failed process's exit code
            (``128 + N`` when killed by signal N); None when the wait timed out or was stopped.
        failed: the first process that exited non-zero, if any.
        interrupted: the ``stop`` event was set.
    """

    exit_code: int | None
    failed: ManagedProcess | None = None
    interrupted: bool = False

    @property
    def timed_out(self) -> bool:
        return self.exit_code is None and not self.interrupted


class Supervisor:
    """Starts, watches and ends a group of labelled child processes.

    Args:
        grace_period_s: how long :meth:`terminate` waits after SIGTERM before SIGKILL.
        stdout, stderr: where prefixed output lines go (default: this process's streams).
        tail_lines: how many stderr lines to keep per process.
        name: the prefix of the supervisor's own lines (``[launch] ...``).
    """

    def __init__(
        self,
        grace_period_s: float = 10.0,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        tail_lines: int = 40,
        name: str = "launch",
    ):
        if grace_period_s < 0:
            raise ValueError(f"grace_period_s must be >= 0, got {grace_period_s}")
        self.grace_period_s = grace_period_s
        self.name = name
        self._stdout = stdout
        self._stderr = stderr
        self._tail_lines = tail_lines
        self._write_lock = threading.Lock()
        self._processes: list[ManagedProcess] = []

    @property
    def processes(self) -> list[ManagedProcess]:
        """Every process started so far, in start order."""
        return list(self._processes)

    def start(self, spec: ProcessSpec) -> ManagedProcess:
        """Start ``spec`` in a new session and begin copying its output.

        Returns:
            The running process.

        Raises:
            FileNotFoundError / PermissionError: the program cannot be executed.
        """
        popen = subprocess.Popen(
            list(spec.argv),
            env=dict(spec.env) if spec.env is not None else None,
            cwd=spec.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_end_with_parent_hook() if spec.end_with_parent else None,
        )
        process = ManagedProcess(spec, popen, self._tail_lines)
        self._processes.append(process)
        for stream, is_stderr in ((popen.stdout, False), (popen.stderr, True)):
            reader = threading.Thread(
                target=self._copy_lines,
                args=(process, stream, is_stderr),
                name=f"output-{spec.label}-{'err' if is_stderr else 'out'}",
                daemon=True,
            )
            reader.start()
            process._readers.append(reader)
        return process

    def log(self, message: str) -> None:
        """Write one ``[NAME] ...`` line to stderr, in step with the children's output."""
        self._write(f"[{self.name}] {message}\n", to_stderr=True)

    def _write(self, text: str, to_stderr: bool) -> None:
        target = (self._stderr or sys.stderr) if to_stderr else (self._stdout or sys.stdout)
        with self._write_lock:
            try:
                target.write(text)
                target.flush()
            except (OSError, ValueError):
                pass  # our own output is gone (closed pipe); keep supervising.

    def _copy_lines(self, process: ManagedProcess, stream: IO[bytes], is_stderr: bool) -> None:
        prefix = f"[{process.label}] "
        with stream:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", errors="replace")
                if not line.endswith("\n"):
                    line += "\n"
                if is_stderr:
                    process._stderr_tail.append(line)
                self._write(prefix + line, to_stderr=is_stderr)

    def wait(
        self,
        targets: Sequence[ManagedProcess],
        timeout_s: float | None = None,
        watch: Iterable[ManagedProcess] | None = None,
        stop: threading.Event | StopRequest | None = None,
        poll_interval_s: float = 0.05,
    ) -> WaitResult:
        """Wait until every target has exited 0, or until any watched process exits non-zero.

        Args:
            targets: the processes that must finish.
            timeout_s: give up after this long (None: no bound).
            watch: processes whose failure also ends the wait (default: every supervised process).
                A watched process that exits 0 before the targets finish does not end the wait.
            stop: ends the wait early when set (a :class:`StopRequest` when a signal handler sets it).
            poll_interval_s: how often exit states are checked.

        Returns:
            A :class:`WaitResult`; ``exit_code`` None on timeout.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        watched = list(self._processes if watch is None else watch)
        watched += [target for target in targets if target not in watched]
        while True:
            for process in watched:
                code = process.poll()
                if code is not None and code != 0:
                    return WaitResult(exit_code_of(code), process)
            if all(target.poll() == 0 for target in targets):
                return WaitResult(0)
            if deadline is not None and time.monotonic() >= deadline:
                return WaitResult(None)
            if stop is not None:
                if stop.wait(poll_interval_s):
                    return WaitResult(None, interrupted=True)
            else:
                time.sleep(poll_interval_s)

    def signal_group(self, process: ManagedProcess, signum: int) -> None:
        """Send ``signum`` to the process's whole group (it and its descendants that stayed in it)."""
        try:
            os.killpg(process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def terminate(
        self, processes: Sequence[ManagedProcess] | None = None, grace_period_s: float | None = None
    ) -> None:
        """End processes and their groups: SIGTERM, wait up to the grace period, then SIGKILL.

        Groups whose leader already exited are signalled too, so descendants left in them end.
        Returns after every leader has been reaped and its output drained.

        Args:
            processes: which ones (default: all started).
            grace_period_s: override of the supervisor's grace period.
        """
        # A group ended once is not signalled again: its number may since belong to someone else.
        targets = [p for p in (self._processes if processes is None else processes) if not p._group_ended]
        grace = self.grace_period_s if grace_period_s is None else grace_period_s
        for process in targets:
            self.signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(p.running for p in targets) and time.monotonic() < deadline:
            time.sleep(0.02)
        for process in targets:
            if process.running:
                self.log(
                    f"{process.label} (pid {process.pid}) did not exit within {grace:g} s of SIGTERM: SIGKILL"
                )
            self.signal_group(process, signal.SIGKILL)
        for process in targets:
            process.popen.wait()
            process._group_ended = True
            for reader in process._readers:
                reader.join(timeout=2.0)

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc_info) -> None:
        self.terminate()
