"""The replay window: a replay gets the first answer, a concurrent duplicate waits for the first copy,
a replay older than the window is refused by name, a failed first copy can be applied again, and the
window survives a dump and load (a restart)."""

from __future__ import annotations

import threading

import pytest

from graphstore.errors import StaleRequestError
from graphstore.server.durability.replay_window import ReplayWindow


def test_a_replay_gets_the_first_answer_and_is_not_applied_again():
    window = ReplayWindow()
    first = window.claim("c", 1)
    assert not first.replay
    window.finish(first, b"answer-1")
    again = window.claim("c", 1)
    assert again.replay and again.answer == b"answer-1"
    assert window.replays == 1
    # Another client's request 1 is another request.
    assert not window.claim("d", 1).replay


def test_a_duplicate_arriving_while_the_first_copy_runs_waits_for_its_answer():
    window = ReplayWindow()
    first = window.claim("c", 7)
    waiting = threading.Event()
    got = []

    def duplicate():
        waiting.set()
        got.append(window.claim("c", 7, timeout=30))

    thread = threading.Thread(target=duplicate)
    thread.start()
    waiting.wait(10)
    assert not got  # still waiting: the first copy has not finished
    window.finish(first, b"done")
    thread.join(10)
    assert got[0].replay and got[0].answer == b"done"


def test_a_duplicate_of_a_copy_still_running_times_out_naming_it():
    window = ReplayWindow()
    window.claim("c", 3)
    with pytest.raises(TimeoutError, match="request 3 of client 'c' is still being applied"):
        window.claim("c", 3, timeout=0.01)


def test_a_failed_first_copy_is_forgotten_so_a_retry_applies_it():
    window = ReplayWindow()
    window.abandon(window.claim("c", 1))
    assert not window.claim("c", 1).replay


def test_a_replay_older_than_the_window_is_refused_with_the_client_and_number():
    window = ReplayWindow(per_client=2)
    for seq in (1, 2, 3, 4):
        window.finish(window.claim("c", seq), b"x")
    with pytest.raises(StaleRequestError, match=r"request 2 of client 'c' is older .* not applied again"):
        window.claim("c", 2)
    assert window.claim("c", 3).replay  # still in the window
    assert len(window) == 2


def test_the_least_recently_heard_client_is_forgotten_first():
    window = ReplayWindow(max_clients=2)
    for client in ("a", "b"):
        window.finish(window.claim(client, 1), client.encode())
    window.claim("a", 1)  # a heard from again
    window.finish(window.claim("c", 1), b"c")
    assert window.claim("a", 1).replay
    assert not window.claim("b", 1).replay  # forgotten


def test_dump_and_load_keep_answers_and_floors():
    window = ReplayWindow(per_client=2)
    for seq in (1, 2, 3):
        window.finish(window.claim("c", seq), f"answer {seq}".encode())
    window.claim("c", 4)  # running: not saved
    restored = ReplayWindow(per_client=2)
    restored.load(window.dump())
    assert restored.claim("c", 3).answer == b"answer 3"
    with pytest.raises(StaleRequestError):
        restored.claim("c", 1)
    assert not restored.claim("c", 4).replay
    with pytest.raises(ValueError, match="replay window"):
        restored.load(b"{}")


def test_bad_ids_and_bounds_are_refused():
    window = ReplayWindow()
    with pytest.raises(ValueError, match="client"):
        window.claim("", 1)
    with pytest.raises(ValueError, match="seq"):
        window.claim("c", 0)
    with pytest.raises(ValueError, match="per_client"):
        ReplayWindow(per_client=0)
