"""The process supervisor with plain ``python -c`` children: prefixed output, first failure wins,
process groups torn down (grandchildren included), SIGKILL for children that ignore SIGTERM."""

from __future__ import annotations

import io
import signal
import sys
import threading

import pytest

from graphstore.launcher.supervisor import ProcessSpec, Supervisor, exit_code_of
from tests.launcher.helpers import kill_pids, pid_alive, read_pid_files, wait_for_pid_files, wait_gone

PY = sys.executable


def spec(role: str, rank: int, code: str, *args: str) -> ProcessSpec:
    return ProcessSpec(role, rank, (PY, "-c", code, *args))


# The start of a child that waits (at most a minute) until the file named by its first argument exists.
WAIT_FOR_FILE = """
import os, sys, time
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]):
    if time.monotonic() > deadline:
        sys.exit(99)
    time.sleep(0.02)
"""

# A child that starts a grandchild (which sleeps), writes both PIDs, then sleeps itself.
SPAWN_AND_SLEEP = """
import os, subprocess, sys, time
folder, name = sys.argv[1], sys.argv[2]
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(os.path.join(folder, name + "-grandchild.pid"), "w").write(str(grandchild.pid))
open(os.path.join(folder, name + ".pid"), "w").write(str(os.getpid()))
time.sleep(600)
"""


def test_output_lines_are_prefixed_with_role_and_rank():
    out, err = io.StringIO(), io.StringIO()
    with Supervisor(stdout=out, stderr=err) as sup:
        procs = [
            sup.start(
                spec("worker", 0, "import sys; print('hello'); print('two'); sys.stderr.write('oops\\n')")
            ),
            sup.start(spec("worker", 1, "import sys; sys.stdout.write('no newline at end')")),
        ]
        assert sup.wait(procs, timeout_s=30).exit_code == 0
        for proc in procs:
            proc.stderr_tail()  # drains the output readers
    stdout_lines = out.getvalue().splitlines()
    assert "[worker-0] hello" in stdout_lines and "[worker-0] two" in stdout_lines
    assert "[worker-1] no newline at end" in stdout_lines
    assert err.getvalue().splitlines() == ["[worker-0] oops"]
    assert stdout_lines.index("[worker-0] hello") < stdout_lines.index("[worker-0] two")


def test_wait_returns_first_failure_and_terminate_ends_groups(tmp_path):
    out = io.StringIO()
    sup = Supervisor(grace_period_s=5.0, stdout=out, stderr=out)
    try:
        sleeper = sup.start(spec("server", 0, SPAWN_AND_SLEEP, str(tmp_path), "sleeper"))
        wait_for_pid_files(tmp_path, 2)
        done = tmp_path / "good.done"
        good = sup.start(spec("trainer", 0, "import sys; open(sys.argv[1], 'w').close()", str(done)))
        # The bad trainer fails once the good one has finished: a success, then the failure.
        bad = sup.start(
            spec("trainer", 1, WAIT_FOR_FILE + "sys.stderr.write('boom\\n'); sys.exit(3)\n", str(done))
        )
        result = sup.wait([good, bad], timeout_s=30)
        assert result.exit_code == 3 and result.failed is bad
        assert "boom" in bad.stderr_tail()
        assert sleeper.running
        sup.terminate()
        pids = read_pid_files(tmp_path)
        assert wait_gone(pids.values()) == []
        assert sleeper.poll() == -signal.SIGTERM
    finally:
        sup.terminate(grace_period_s=0)
        kill_pids(read_pid_files(tmp_path).values())


def test_a_watched_process_failing_ends_the_wait(tmp_path):
    started = tmp_path / "trainer.started"
    with Supervisor(stdout=io.StringIO(), stderr=io.StringIO()) as sup:
        # The server fails once the trainer runs.
        server = sup.start(spec("server", 0, WAIT_FOR_FILE + "sys.exit(7)\n", str(started)))
        trainer = sup.start(
            spec(
                "trainer",
                0,
                "import sys, time; open(sys.argv[1], 'w').close(); time.sleep(600)",
                str(started),
            )
        )
        result = sup.wait([trainer], timeout_s=30)
        assert result.exit_code == 7 and result.failed is server
        # With an explicit watch list that leaves the server out, only the targets count.
        assert sup.wait([trainer], timeout_s=0.2, watch=[]).timed_out


def test_sigkill_after_grace_period_for_a_child_ignoring_sigterm(tmp_path):
    code = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
        "time.sleep(600)\n"
    )
    pid_file = tmp_path / "stubborn.pid"
    with Supervisor(grace_period_s=0.5, stdout=io.StringIO(), stderr=io.StringIO()) as sup:
        proc = sup.start(spec("server", 0, code, str(pid_file)))
        wait_for_pid_files(tmp_path, 1)
        sup.terminate()
        assert proc.poll() == -signal.SIGKILL
        assert exit_code_of(proc.poll()) == 128 + signal.SIGKILL
    assert not pid_alive(proc.pid)


def test_exit_code_of_signalled_child():
    with Supervisor(stdout=io.StringIO(), stderr=io.StringIO()) as sup:
        proc = sup.start(spec("trainer", 0, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"))
        result = sup.wait([proc], timeout_s=30)
    assert result.exit_code == 128 + signal.SIGSEGV


def test_context_manager_cleans_up_on_exception(tmp_path):
    with pytest.raises(RuntimeError, match="test failure"):
        with Supervisor(grace_period_s=5.0, stdout=io.StringIO(), stderr=io.StringIO()) as sup:
            sup.start(spec("server", 0, SPAWN_AND_SLEEP, str(tmp_path), "a"))
            sup.start(spec("server", 1, SPAWN_AND_SLEEP, str(tmp_path), "b"))
            wait_for_pid_files(tmp_path, 4)
            raise RuntimeError("test failure")
    pids = read_pid_files(tmp_path)
    try:
        assert len(pids) == 4
        assert wait_gone(pids.values()) == []
    finally:
        kill_pids(pids.values())


def test_stop_event_interrupts_wait():
    stop = threading.Event()
    with Supervisor(stdout=io.StringIO(), stderr=io.StringIO()) as sup:
        proc = sup.start(spec("trainer", 0, "import time; time.sleep(600)"))
        threading.Timer(0.2, stop.set).start()
        result = sup.wait([proc], stop=stop)
        assert result.interrupted and result.exit_code is None
        assert proc.running
    assert not proc.running


def test_stderr_tail_keeps_the_last_lines():
    code = "import sys\nfor i in range(100): sys.stderr.write(f'line {i}\\n')\nsys.exit(1)"
    with Supervisor(stdout=io.StringIO(), stderr=io.StringIO(), tail_lines=5) as sup:
        proc = sup.start(spec("server", 0, code))
        assert sup.wait([proc], timeout_s=30).exit_code == 1
        assert proc.stderr_tail().splitlines() == [f"line {i}" for i in range(95, 100)]


def test_missing_program_raises():
    with Supervisor(stdout=io.StringIO(), stderr=io.StringIO()) as sup:
        with pytest.raises(FileNotFoundError):
            sup.start(ProcessSpec("server", 0, ("/nonexistent/program",)))
    with pytest.raises(ValueError, match="grace_period_s"):
        Supervisor(grace_period_s=-1)
