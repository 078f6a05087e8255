"""A barrier wait over the arrive-and-poll protocol: the server answers every call at once, the client
calls again with backoff until it is released, so no server thread waits for the other participants.

The participant's ``timeout_s`` counts from its first call; a client that gives up (its timeout, an
error, Ctrl-C) withdraws its arrival, and one that goes away without a word stops being counted a few
seconds after its last call (see :mod:`graphstore.server.barrier`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from graphstore.errors import BarrierTimeoutError
from graphstore.protos import graphstore_pb2 as pb

# Delays between polls: from the first to the longest (the server's lease is several times longer).
FIRST_POLL_DELAY_S = 0.002
MAX_POLL_DELAY_S = 0.5
# After its timeout, a participant polls once more to hear the server's verdict (it counts the
# timeout from its first call, which reached it a little later than the client started counting).
_POLL_AFTER_TIMEOUT_S = 0.01
_SERVER_VERDICT_S = 1.0


def wait_at_barrier(
    call: Callable[[pb.BarrierRequest], pb.BarrierResponse],
    name: str,
    count: int,
    timeout_s: float,
    participant: str = "",
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Arrive at barrier ``name`` and poll until ``count`` participants are there.

    Args:
        call: sends one Barrier request and returns the answer (deadline and retries included).
        name: the barrier's name.
        count: participants to wait for.
        timeout_s: the longest time to wait, in seconds.
        participant: the caller's id; a fresh one when empty.
        sleep: how to wait between polls (tests pass a fake one).

    Returns:
        The generation that was released.

    Raises:
        ValueError: bad count or timeout (from the server).
        BarrierTimeoutError: not everyone arrived within ``timeout_s``.
    """
    participant = participant or f"anonymous-{uuid.uuid4().hex}"
    request = pb.BarrierRequest(
        name=name, count=int(count), timeout_s=float(timeout_s), participant=participant
    )
    started = time.monotonic()
    delay = FIRST_POLL_DELAY_S
    released = False
    try:
        while True:
            answer = call(request)
            if answer.released:
                released = True
                return answer.generation
            request.has_ticket, request.ticket = True, answer.generation
            waited = time.monotonic() - started
            if waited >= timeout_s + _SERVER_VERDICT_S:
                raise BarrierTimeoutError(
                    f"barrier {name!r}: not all {count} participants arrived within timeout_s={timeout_s}"
                )
            # The server gives the verdict once the timeout has passed: poll right after it.
            sleep(min(delay, max(timeout_s - waited, 0.0) + _POLL_AFTER_TIMEOUT_S))
            delay = min(delay * 2, MAX_POLL_DELAY_S)
    finally:
        if not released and request.has_ticket:
            _withdraw(call, request)


def _withdraw(call: Callable[[pb.BarrierRequest], pb.BarrierResponse], request: pb.BarrierRequest) -> None:
    """Tell the server this participant stopped waiting (best effort: its lease runs out anyway)."""
    request.leave = True
    try:
        call(request)
    except Exception:  # noqa: BLE001 - the participant is leaving; its lease ends the arrival anyway
        pass
