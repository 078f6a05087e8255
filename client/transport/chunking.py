"""Requests split into chunks below the message limit, several chunks of one call in flight together.

Pulls, pushes and degree queries know their answer's size in advance and are split by rows
(:func:`split_rows`, :func:`run_chunks`). Edge queries (all neighbors, in-subgraphs) do not: they
are sized from an estimate, and a chunk whose answer still comes back too large (over the message
limit, or over the server's ``max_sampled_edges``) is halved and asked again
(:func:`query_edges_in_chunks`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphstore.client.transport.channel import ServerChannel
from graphstore.client.transport.rpc_errors import ResponseTooLarge
from graphstore.errors import LimitExceededError, MemoryBudgetError
from graphstore.protos.edges_wire import CarriedRows, read_edges_answer

# Chunks of one pull or push in flight at once.
MAX_CHUNKS_IN_FLIGHT = 4


def split_rows(n: int, per_chunk: int) -> list[slice]:
    """Slices of ``range(n)`` of at most ``per_chunk`` rows (at least one row each; one empty slice
    for ``n == 0``)."""
    per_chunk = max(1, per_chunk)
    return [slice(lo, min(lo + per_chunk, n)) for lo in range(0, n, per_chunk)] or [slice(0, 0)]


def run_chunks(channel: ServerChannel, requests: Sequence[tuple[str, Any]]) -> list[Any]:
    """Run ``(method, request)`` calls with at most ``MAX_CHUNKS_IN_FLIGHT`` in flight; results in order.

    Raises:
        Exception: the first failed call's translated error.
    """
    if len(requests) == 1:
        return [channel.call(*requests[0])]
    results: list[Any] = [None] * len(requests)
    pending: list[tuple[int, Callable[[], Any]]] = []
    for i, (method, request) in enumerate(requests):
        pending.append((i, channel.call_future(method, request)))
        if len(pending) >= MAX_CHUNKS_IN_FLIGHT:
            j, wait = pending.pop(0)
            results[j] = wait()
    for j, wait in pending:
        results[j] = wait()
    return results


def query_edges_in_chunks(
    channel: ServerChannel,
    ids: np.ndarray,
    per_chunk: int,
    make_request: Callable[[np.ndarray, int], tuple[str, Any]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[CarriedRows]]:
    """Run edge queries over chunks of ``ids``; a chunk whose answer is too large is halved.

    Args:
        channel: the server's channel.
        ids: the IDs to ask about.
        per_chunk: IDs per chunk at first.
        make_request: ``(chunk of ids, chunk index) -> (method, request)``; a halved chunk ``i`` becomes
            chunks ``2i`` and ``2i + 1``.

    Returns:
        ``(src, dst, eid, carried rows)`` of every chunk's answer, in chunk order (the edge arrays are
        read-only views of the received answers when there is one chunk).

    Raises:
        ValueError: the answer for a single ID exceeds the message limit.
    """
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    carried: list[CarriedRows] = []
    stack = [(sl.start, sl.stop, i) for i, sl in enumerate(split_rows(len(ids), per_chunk))][::-1]
    while stack:
        lo, hi, index = stack.pop()
        try:
            response = channel.call(*make_request(ids[lo:hi], index))
        except (ResponseTooLarge, LimitExceededError) as exc:
            if isinstance(exc, MemoryBudgetError):
                raise
            if hi - lo <= 1:
                if isinstance(exc, LimitExceededError):
                    raise
                raise ValueError(
                    f"the answer for ID {int(ids[lo])} exceeds the message limit of "
                    f"{channel.policy.max_message_bytes} bytes"
                ) from None
            mid = (lo + hi) // 2
            stack += [(mid, hi, index * 2 + 1), (lo, mid, index * 2)]
            continue
        src, dst, eid, rows = read_edges_answer(response)
        parts.append((src, dst, eid))
        carried += rows
    if len(parts) == 1:
        return (*parts[0], carried)
    src, dst, eid = (np.concatenate(arrays) for arrays in zip(*parts, strict=True))
    return src, dst, eid, carried
