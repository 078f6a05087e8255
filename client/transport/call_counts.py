"""What a client sent to one server and got back: calls (round trips), request bytes and answer bytes per
method, counted where every call passes (:class:`~graphstore.client.transport.channel.ServerChannel`).

For profiles: a loader's round trips and bytes per mini-batch are the difference of two snapshots
(:func:`graphstore.client.call_counts`) divided by the batches between them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass
class MethodCounts:
    """One method's calls and bytes."""

    calls: int = 0
    request_bytes: int = 0
    answer_bytes: int = 0

    def __add__(self, other: MethodCounts) -> MethodCounts:
        return MethodCounts(
            self.calls + other.calls,
            self.request_bytes + other.request_bytes,
            self.answer_bytes + other.answer_bytes,
        )

    def __sub__(self, other: MethodCounts) -> MethodCounts:
        return MethodCounts(
            self.calls - other.calls,
            self.request_bytes - other.request_bytes,
            self.answer_bytes - other.answer_bytes,
        )


class CallCounts:
    """Per-method counters of one channel (thread-safe)."""

    def __init__(self) -> None:
        self._counts: dict[str, MethodCounts] = {}
        self._lock = threading.Lock()

    def add(self, method: str, request_bytes: int, answer_bytes: int) -> None:
        """Count one answered call."""
        with self._lock:
            counts = self._counts.get(method)
            if counts is None:
                counts = self._counts[method] = MethodCounts()
            counts.calls += 1
            counts.request_bytes += request_bytes
            counts.answer_bytes += answer_bytes

    def snapshot(self) -> dict[str, MethodCounts]:
        """A copy of the counters, by method."""
        with self._lock:
            return {
                m: MethodCounts(c.calls, c.request_bytes, c.answer_bytes) for m, c in self._counts.items()
            }


def merged(snapshots: Iterable[dict[str, MethodCounts]]) -> dict[str, MethodCounts]:
    """Several snapshots summed by method."""
    total: dict[str, MethodCounts] = {}
    for snapshot in snapshots:
        for method, counts in snapshot.items():
            total[method] = total.get(method, MethodCounts()) + counts
    return total


def size_of(message) -> int:
    """Bytes of a request or answer: its length (bytes, views) or its serialized size (messages)."""
    if isinstance(message, (bytes, bytearray, memoryview)):
        return len(message)
    return message.ByteSize()
