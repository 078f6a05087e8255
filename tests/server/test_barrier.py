"""Named barriers: release, reuse, idempotent participants, timeouts, the arrive-and-poll protocol."""

from __future__ import annotations

import threading

import pytest

from graphstore.errors import BarrierTimeoutError, LimitExceededError
from graphstore.server.barrier import BarrierRegistry
from tests.utils.barriers import barrier_has_waiters
from tests.utils.wait import wait_until


def _run(registry, name, count, participants, timeout=5.0):
    results, threads = {}, []
    for p in participants:
        t = threading.Thread(
            target=lambda p=p: results.__setitem__(p, registry.wait(name, count, timeout, p))
        )
        threads.append(t)
        t.start()
    for t in threads:
        t.join(10)
    return results


def test_barrier_releases_all_and_is_reusable():
    registry = BarrierRegistry()
    assert _run(registry, "epoch", 3, ["a", "b", "c"]) == {"a": 0, "b": 0, "c": 0}
    assert _run(registry, "epoch", 3, ["a", "b", "c"]) == {"a": 1, "b": 1, "c": 1}
    assert registry.wait("solo", 1, 1.0) == 0


def test_a_retried_participant_counts_once():
    registry = BarrierRegistry()
    results = {}
    t = threading.Thread(target=lambda: results.__setitem__("a", registry.wait("b", 2, 5.0, "a")))
    t.start()
    with pytest.raises(BarrierTimeoutError, match="1 of 2"):
        registry.wait("b", 2, 0.2, "a")  # the same participant again: still one arrival
    assert registry.wait("b", 2, 5.0, "z") == 0
    t.join(5)
    assert results == {"a": 0}


def test_timeout_leaves_the_barrier_clean():
    registry = BarrierRegistry()
    with pytest.raises(
        TimeoutError, match="barrier 'x': only 1 of 2 participants arrived within timeout_s=0.1"
    ):
        registry.wait("x", 2, 0.1)
    assert _run(registry, "x", 2, ["p", "q"]) == {"p": 0, "q": 0}


def test_bad_arguments():
    registry = BarrierRegistry()
    with pytest.raises(ValueError, match="count"):
        registry.wait("x", 0, 1.0)
    with pytest.raises(ValueError, match="timeout_s"):
        registry.wait("x", 1, 0.0)
    with pytest.raises(ValueError, match="timeout_s"):
        registry.wait("x", 1, float("nan"))
    with pytest.raises(ValueError, match="name"):
        registry.wait("", 1, 1.0)
    timed_out = []

    def first() -> None:
        try:
            registry.wait("y", 2, 0.5, "a")
        except BarrierTimeoutError:
            timed_out.append(True)

    t = threading.Thread(target=first)
    t.start()
    wait_until(lambda: barrier_has_waiters(registry.wait, "y"), 30, "participant a at barrier y")
    with pytest.raises(ValueError, match="waiting for 2 participants, this call says 3"):
        registry.wait("y", 3, 1.0, "b")
    t.join(5)
    assert timed_out == [True]


def test_the_waiter_probe_neither_waits_nor_counts():
    registry = BarrierRegistry()
    assert not barrier_has_waiters(registry.wait, "z"), "nobody there"
    results = {}
    t = threading.Thread(target=lambda: results.__setitem__("a", registry.wait("z", 2, 30.0, "a")))
    t.start()
    wait_until(lambda: barrier_has_waiters(registry.wait, "z"), 30, "participant a at barrier z")
    assert barrier_has_waiters(registry.wait, "z") and t.is_alive(), "a probe releases no one"
    registry.wait("z", 2, 30.0, "b")
    t.join(30)
    assert not t.is_alive() and "a" in results, "the second participant released the first"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_arrive_answers_at_once_and_polls_see_the_release():
    registry = BarrierRegistry()
    assert registry.arrive("e", 2, 10.0, "a") == (False, 0)
    assert registry.arrive("e", 2, 10.0, "a", ticket=0) == (False, 0)  # a poll counts once
    assert registry.waiting() == 1
    assert registry.arrive("e", 2, 10.0, "b") == (True, 0)
    assert registry.arrive("e", 2, 10.0, "a", ticket=0) == (True, 0)  # released since its last call
    assert registry.waiting() == 0
    assert registry.arrive("e", 2, 10.0, "a") == (False, 1)  # the next generation


def test_a_participant_that_stops_polling_or_leaves_is_not_counted():
    clock = FakeClock()
    registry = BarrierRegistry(lease_s=3.0, clock=clock)
    assert registry.arrive("e", 2, 60.0, "gone") == (False, 0)
    clock.now += 3.5  # its client went away: no call within the lease
    assert registry.arrive("e", 2, 60.0, "b") == (False, 0)
    assert registry.waiting() == 1
    registry.leave("e", "b")  # gave up (cancelled)
    assert registry.waiting() == 0
    assert registry.arrive("e", 2, 60.0, "c") == (False, 0)
    assert registry.arrive("e", 2, 60.0, "d") == (True, 0)


def test_a_poll_after_the_timeout_gets_the_timeout_and_leaves():
    clock = FakeClock()
    registry = BarrierRegistry(clock=clock)
    registry.arrive("t", 3, 1.0, "a")
    registry.arrive("t", 3, 5.0, "b")
    clock.now += 1.5
    with pytest.raises(BarrierTimeoutError, match="only 2 of 3 participants arrived within timeout_s=1.0"):
        registry.arrive("t", 3, 1.0, "a", ticket=0)
    assert registry.waiting() == 1


def test_held_calls_release_at_once_and_the_waiter_limit_holds():
    registry = BarrierRegistry(max_waiters=3, max_holders=1)
    results = {}
    held = threading.Thread(
        target=lambda: results.__setitem__("a", registry.arrive("h", 2, 10.0, "a", hold_s=10))
    )
    held.start()
    wait_until(lambda: registry.waiting() >= 1, 30, "participant a held at barrier h")
    assert registry.arrive("h", 2, 10.0, "b", hold_s=10) == (True, 0)
    held.join(5)
    assert results == {"a": (True, 0)}
    for p in ("x", "y", "z"):
        registry.arrive("full", 10, 10.0, p)
    with pytest.raises(LimitExceededError, match="max_barrier_waiters=3"):
        registry.arrive("full", 10, 10.0, "w")


def test_participant_is_required_and_timeout_bounded():
    registry = BarrierRegistry()
    with pytest.raises(ValueError, match="participant"):
        registry.arrive("x", 2, 1.0, "")
    with pytest.raises(ValueError, match="timeout_s"):
        registry.arrive("x", 2, 1e300, "a")
