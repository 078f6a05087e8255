"""Whether a benchmark turn ran on a quiet machine: a load gate before it, CPU accounting during it.

Standard library only (the driver imports it; the workers never do). A *turn* is one system's run of
one section. Before a turn the driver waits, up to a bound, for the machine to be quiet (the *gate*).
During the turn :class:`TurnMeter` counts the CPU time the whole machine spent (``/proc/stat``) and the
CPU time of the driver's own process tree (the turn's workers and every process they started, all
reaped by the end of the turn, so their time is in the driver's children's times); the difference is
what *other* processes used. A turn in which others used more than ``max_other_share`` of the machine
is invalid, and so is the pair of turns it belongs to: :func:`pair_is_valid`; ``report.summarize``
leaves such pairs out of the medians and counts them.

Two gates (``side_by_side.py --gate``):

- ``cpu`` (the default, :func:`wait_for_quiet`): the same accounting as a turn's, over the last
  ``window_s`` seconds between turns (the driver's own CPU time left out): the turn starts once other
  processes used at most ``max_other_share`` of the machine in such a window, what a valid turn
  needs. It sees the present, and nothing of the benchmark's own previous turn, so it costs about
  ``window_s`` per turn on a quiet machine.
- ``load`` (:func:`wait_for_load`): the 1-minute load average under a threshold (1.0 for 2 cores).
  The average is a decaying one that still holds the benchmark's own previous turn (1-4 runnable
  threads; under 1.0 only 20-60 s after the turn), so on a quiet machine this gate mostly waits for
  the benchmark itself: 30 turns of a 5-run comparison spent minutes in it.

Either is only a gate; validity is decided by the accounting during the turn, whichever gate ran.
``max_other_share`` at 0.05: 5% of a 2-core machine is a tenth of a core, about what the idle system's
daemons and the session's shells use; one busy thread elsewhere is 50%.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

DEFAULT_LOAD_THRESHOLD = 1.0
DEFAULT_LOAD_WAIT_S = 300.0
DEFAULT_MAX_OTHER_SHARE = 0.05
DEFAULT_GATE_WINDOW_S = 3.0
GATES = ("cpu", "load", "none")
PROC_STAT = Path("/proc/stat")
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal guest guest_nice. Busy time
# is everything but idle and iowait; guest time is already inside user (and guest_nice in nice).
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)


def machine_busy_s() -> float | None:
    """CPU seconds all cores of this machine have spent busy since boot (None without /proc/stat)."""
    try:
        with open(PROC_STAT) as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = sum(int(fields[1 + index]) for index in _BUSY_FIELDS if 1 + index < len(fields))
    return ticks / os.sysconf("SC_CLK_TCK")


def own_tree_s() -> float:
    """CPU seconds of this process and of every child it has reaped (with their reaped children)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def wait_for_load(threshold: float, max_wait_s: float, poll_s: float = 2.0) -> dict:
    """Wait until the 1-minute load average is under ``threshold``, for at most ``max_wait_s``.

    Args:
        threshold: the 1-minute load to wait for (0 or less: do not wait).
        max_wait_s: the bound; the turn starts anyway after it (the accounting then judges it).
        poll_s: seconds between readings.

    Returns:
        ``{"load_1m": reading at the end, "waited_s": seconds waited, "gate_passed": bool}``.

    Raises:
        ValueError: ``max_wait_s`` or ``poll_s`` is negative / not positive.
    """
    if max_wait_s < 0:
        raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
    if poll_s <= 0:
        raise ValueError(f"poll_s must be > 0, got {poll_s}")
    start = time.monotonic()
    load_1m = os.getloadavg()[0]
    while threshold > 0 and load_1m >= threshold and time.monotonic() - start < max_wait_s:
        time.sleep(min(poll_s, max(max_wait_s - (time.monotonic() - start), 0.01)))
        load_1m = os.getloadavg()[0]
    return {
        "load_1m": load_1m,
        "waited_s": time.monotonic() - start,
        "gate_passed": threshold <= 0 or load_1m < threshold,
    }


def other_share(machine_busy_s: float, own_s: float, wall_s: float, cores: int) -> float:
    """The share of the machine (``wall_s`` x ``cores``) busy with work other than ``own_s``.

    >>> round(other_share(machine_busy_s=1.3, own_s=1.2, wall_s=1.0, cores=2), 3)
    0.05
    """
    return max(machine_busy_s - own_s, 0.0) / max(wall_s * cores, 1e-9)


def wait_for_quiet(
    max_share: float, window_s: float, max_wait_s: float, poll_s: float = 0.5, cores: int | None = None
) -> dict:
    """Wait until other processes used at most ``max_share`` of the machine over the last ``window_s``.

    Between turns every process of the benchmark has been reaped, so the machine's busy time over a
    window, less the driver's own, is other work (:func:`other_share`). Readings every ``poll_s``; the
    window slides over them, so the wait is ``window_s`` on a quiet machine.

    Args:
        max_share: the share of the machine other processes may have used.
        window_s: the window judged, in seconds.
        max_wait_s: the bound; the turn starts anyway after it (the accounting then judges it).
        poll_s: seconds between readings.
        cores: the cores counted (default: all).

    Returns:
        ``{"kind": "cpu", "other_share": of the last window (None: no /proc/stat), "window_s",
        "waited_s", "gate_passed": bool}``.

    Raises:
        ValueError: ``window_s`` or ``poll_s`` not positive, or ``max_wait_s`` negative.
    """
    if window_s <= 0 or poll_s <= 0:
        raise ValueError(f"window_s and poll_s must be > 0, got {window_s} and {poll_s}")
    if max_wait_s < 0:
        raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
    cores = cores or os.cpu_count() or 1
    start = time.monotonic()
    if machine_busy_s() is None:  # no /proc/stat: nothing to judge by
        return {
            "kind": "cpu",
            "other_share": None,
            "window_s": window_s,
            "waited_s": 0.0,
            "gate_passed": True,
        }
    readings = [(time.perf_counter(), machine_busy_s(), own_tree_s())]
    share = None
    while True:
        time.sleep(poll_s)
        now = (time.perf_counter(), machine_busy_s(), own_tree_s())
        readings.append(now)
        while len(readings) > 2 and now[0] - readings[1][0] >= window_s:
            readings.pop(0)  # keep the oldest reading that still spans the whole window
        first = readings[0]
        if now[0] - first[0] >= window_s:
            share = other_share(now[1] - first[1], now[2] - first[2], now[0] - first[0], cores)
            if share <= max_share:
                break
        if time.monotonic() - start >= max_wait_s:
            break
    return {
        "kind": "cpu",
        "other_share": share,
        "window_s": window_s,
        "waited_s": time.monotonic() - start,
        "gate_passed": share is not None and share <= max_share,
    }


@dataclass(frozen=True)
class TurnAccount:
    """The CPU accounting of one turn.

    Attributes:
        wall_s: the turn's wall time.
        machine_busy_s: CPU seconds the whole machine was busy (all cores).
        own_s: CPU seconds of the driver's process tree (the turn's processes).
        background_s: CPU seconds of the harness's own background load (the contention variant).
        other_s: ``machine_busy_s - own_s - background_s`` (never below 0): what other processes used.
        other_share: ``other_s`` over the machine's capacity in the turn (``wall_s`` × cores).
        cores: the cores counted.
        valid: ``other_share <= max_other_share`` (True where /proc/stat cannot be read: unknown).
        max_other_share: the limit applied.
    """

    wall_s: float
    machine_busy_s: float | None
    own_s: float
    background_s: float
    other_s: float | None
    other_share: float | None
    cores: int
    valid: bool
    max_other_share: float

    def to_json(self) -> dict:
        return asdict(self)


class TurnMeter:
    """Measures one turn: ``with TurnMeter(0.05) as meter: run(); meter.account``.

    Every process of the turn must have been reaped (waited for) when the ``with`` block ends, so
    that its CPU time is in the driver's children's times; one still running counts as *other*.

    Raises:
        ValueError: ``max_other_share`` outside [0, 1].
    """

    def __init__(
        self,
        max_other_share: float = DEFAULT_MAX_OTHER_SHARE,
        cores: int | None = None,
        background_pids: list[int] | None = None,
    ) -> None:
        if not 0.0 <= max_other_share <= 1.0:
            raise ValueError(f"max_other_share must be within [0, 1], got {max_other_share}")
        self.max_other_share = max_other_share
        self.cores = cores or os.cpu_count() or 1
        self.background_pids = list(background_pids or [])
        self.account: TurnAccount | None = None

    def _background_s(self) -> float:
        return sum(process_cpu_s(pid) for pid in self.background_pids)

    def __enter__(self) -> TurnMeter:
        self._wall = time.perf_counter()
        self._busy = machine_busy_s()
        self._own = own_tree_s()
        self._background = self._background_s()
        return self

    def __exit__(self, *exc) -> None:
        wall_s = time.perf_counter() - self._wall
        busy_end = machine_busy_s()
        own_s = own_tree_s() - self._own
        background_s = self._background_s() - self._background
        if self._busy is None or busy_end is None:
            self.account = TurnAccount(
                wall_s, None, own_s, background_s, None, None, self.cores, True, self.max_other_share
            )
            return
        busy_s = busy_end - self._busy
        other_s = max(busy_s - own_s - background_s, 0.0)
        share = other_share(busy_s, own_s + background_s, wall_s, self.cores)
        self.account = TurnAccount(
            wall_s,
            busy_s,
            own_s,
            background_s,
            other_s,
            share,
            self.cores,
            share <= self.max_other_share,
            self.max_other_share,
        )


def pair_is_judged(outputs: dict) -> bool:
    """Whether every turn of a run's pair carries an account (results files before it carry none)."""
    return all(output and "account" in output.get("quiet", {}) for output in outputs.values())


def pair_is_valid(outputs: dict) -> bool:
    """Whether every turn of a run's pair (``{system: output}``) was judged quiet (unjudged: valid)."""
    for output in outputs.values():
        if output and output.get("quiet", {}).get("account", {}).get("valid") is False:
            return False
    return True


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


class BackgroundLoad:
    """The contention variant's fixed load: ``threads`` busy-looping processes, each pinned to ``cpus``.

    The harness starts it itself, so a contended table is reproducible; its CPU time is reported on its
    own and not counted as *other* work (pass :attr:`pids` to :class:`TurnMeter`).

    Raises:
        ValueError: ``threads`` negative.
    """

    def __init__(self, threads: int, cpus: set[int] | None = None) -> None:
        if threads < 0:
            raise ValueError(f"threads must be >= 0, got {threads}")
        self.threads = threads
        self.cpus = cpus
        self.pids: list[int] = []

    def start(self) -> None:
        """Fork the busy processes (each spins until :meth:`stop`)."""
        for _ in range(self.threads):
            pid = os.fork()
            if pid == 0:  # the child: pinned, then spins; never returns into the driver's code
                try:
                    if self.cpus:
                        os.sched_setaffinity(0, self.cpus)
                    while True:
                        pass
                finally:
                    os._exit(0)
            self.pids.append(pid)

    def stop(self) -> None:
        """SIGKILL and reap every busy process."""
        for pid in self.pids:
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.pids = []

    def __enter__(self) -> BackgroundLoad:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
