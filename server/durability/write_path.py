"""The path every mutating request takes on a server: replay window, write gate, durability.

:class:`WritePath` wraps the servicer's handlers of Push, PushGrad, Init, Delete, Checkpoint and Restore
(the thin hook is :meth:`PartitionServicer._bind <graphstore.server.servicer.PartitionServicer>`):

1. A request with a request ID claims it in the
   :class:`~graphstore.server.durability.replay_window.ReplayWindow`; a replay gets the first answer
   back (once that answer is durable, see 4) and nothing is applied.
2. The request is applied under the *write gate*: shared among writes (exclusive among them in
   ``wal`` mode, so that the log's order is the order of application), exclusive for a checkpoint's
   snapshot (:meth:`WritePath.snapshot`): a checkpoint holds exactly the writes applied before it,
   and the replay window saved with it holds exactly their answers.
3. Still under the gate, the durability policy records the write (:mod:`~graphstore.server.durability.modes`:
   nothing; the update count of the periodic checkpointer; or a record appended to the write-ahead log).
4. The answer leaves once the policy says it may: at once; once the periodic checkpoints' loss bound
   allows it; or once the log record is synced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from graphstore.server.durability.modes import NO_DURABILITY, Durability
from graphstore.server.durability.replay_window import ReplayWindow
from graphstore.server.locks import ReadWriteLock


def is_update(method: str, response: Any) -> bool:
    """Whether an answered request changed the server's tensors (what periodic checkpoints count)."""
    if method == "Init":
        return bool(response.created)
    if method == "Delete":
        return bool(response.deleted)
    return method in ("Push", "PushGrad", "Restore")


def encode(response: Any) -> bytes:
    """A response message's bytes (pre-serialized answers pass through)."""
    return response if isinstance(response, bytes) else response.SerializeToString()


@dataclass(frozen=True)
class Snapshot:
    """What a checkpoint taken under the exclusive gate saves besides the tensors.

    Attributes:
        window: the replay window's bytes (:meth:`ReplayWindow.dump`).
        wal_segment: the first write-ahead log segment the checkpoint does not hold (None: no log).
    """

    window: bytes
    wal_segment: int | None


class WritePath:
    """Exactly-once application and durability of mutating requests (see the module docstring).

    Args:
        window: the replay window (default: a new one with the default bounds).
        durability: when an applied write may be answered (default: at once).
    """

    def __init__(self, window: ReplayWindow | None = None, durability: Durability = NO_DURABILITY) -> None:
        self.window = window or ReplayWindow()
        self.durability = durability
        self._gate = ReadWriteLock()
        self._serialize_writes = durability.ordered

    @contextmanager
    def _writing(self) -> Iterator[None]:
        with self._gate.write() if self._serialize_writes else self._gate.read():
            yield

    def run(
        self,
        method: str,
        request: Any,
        raw: bytes,
        apply: Callable[[], Any],
        time_remaining: float | None = None,
    ) -> bytes:
        """Apply one mutating request exactly once and return its encoded answer.

        Args:
            method: the RPC method.
            request: the decoded request (its ``request_id`` is read when set).
            raw: the request's bytes (what the write-ahead log keeps).
            apply: applies the request and returns the response message.
            time_remaining: seconds left before the caller's deadline (bounds every wait here).

        Raises:
            Exception: what ``apply`` raised (nothing was changed, a retry applies the request);
            graphstore.errors.StaleRequestError: a replay older than the window;
            TimeoutError: a replay whose first copy is still running after ``time_remaining``;
            ConnectionAbortedError: the write was applied but could not be made durable in time (the
            client retries; its replay gets the answer once it is durable).
        """
        request_id = request.request_id if request.HasField("request_id") else None
        claim = None
        if request_id is not None and request_id.client:
            claim = self.window.claim(request_id.client, request_id.seq, time_remaining)
            if claim.replay:
                self.durability.wait(claim.token, time_remaining)
                return claim.answer
        with self._writing():
            try:
                self.durability.admit()
                response = apply()
            except BaseException:
                if claim is not None:
                    self.window.abandon(claim)
                raise
            answer = encode(response)
            client = request_id.client if claim is not None else ""
            seq = request_id.seq if claim is not None else 0
            token = self.durability.record(method, client, seq, raw, answer, is_update(method, response))
            if claim is not None:
                self.window.finish(claim, answer, token)
        self.durability.wait(token, time_remaining)
        return answer

    @contextmanager
    def snapshot(self) -> Iterator[Snapshot]:
        """Hold every write back while a checkpoint is taken (exclusive gate); yields what the
        checkpoint saves besides the tensors. Call :meth:`snapshot_saved` once it is complete."""
        with self._gate.write():
            yield Snapshot(self.window.dump(), self.durability.snapshot_started())

    def snapshot_saved(self, snapshot: Snapshot) -> None:
        """A checkpoint taken at ``snapshot`` is complete (it may now drop the log it holds)."""
        self.durability.snapshot_saved(snapshot.wal_segment)

    @property
    def replays(self) -> int:
        """Replays answered from the window so far."""
        return self.window.replays
