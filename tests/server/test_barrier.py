"""Named barriers: release, reuse, idempotent participants, timeouts."""

from __future__ import annotations

import threading

import pytest

from graphstore.errors import BarrierTimeoutError
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
