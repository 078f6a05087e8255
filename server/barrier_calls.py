"""The Barrier RPC over :meth:`PartitionServer.barrier_arrive`: answered at once, never blocking a worker.

A call arrives (or polls with its ticket) and is answered released or not; a call may be held for up to
:data:`HOLD_S` while one of the registry's few holding slots is free, so small barriers release without
a polling delay. A held call that is cancelled (the client went away) withdraws its arrival.
"""

from __future__ import annotations

import threading

from graphstore.protos import graphstore_pb2 as pb

# The longest a Barrier call is held waiting for the release before it is answered "not yet".
HOLD_S = 1.0
# Time left for the answer to travel back before the call's deadline.
_ANSWER_MARGIN_S = 0.2


def answer_barrier(server, request: pb.BarrierRequest, context) -> pb.BarrierResponse:
    """Arrive, poll or leave as ``request`` says.

    Args:
        server: the partition (``barrier_arrive`` / ``barrier_leave``).
        request: the decoded call.
        context: the call's gRPC context (its deadline bounds the hold; its end withdraws a held arrival).

    Returns:
        ``released`` and the generation (released) or the ticket to poll with.
    """
    if request.leave:
        server.barrier_leave(request.name, request.participant)
        return pb.BarrierResponse(generation=request.ticket, released=False)
    remaining = context.time_remaining()
    hold_s = HOLD_S if remaining is None else max(min(HOLD_S, remaining - _ANSWER_MARGIN_S), 0.0)
    answered = threading.Event()
    name, participant = request.name, request.participant

    def withdraw_if_unanswered() -> None:
        if not answered.is_set():
            server.barrier_leave(name, participant)

    if hold_s > 0 and not context.add_callback(withdraw_if_unanswered):
        return pb.BarrierResponse(generation=request.ticket, released=False)  # cancelled already
    released, generation = server.barrier_arrive(
        name,
        request.count,
        request.timeout_s,
        participant,
        request.ticket if request.has_ticket else None,
        hold_s,
    )
    answered.set()
    if not released and not context.is_active():
        server.barrier_leave(name, participant)  # cancelled while it arrived: nobody hears the answer
    return pb.BarrierResponse(generation=generation, released=released)
