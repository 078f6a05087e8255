"""Writes to several servers at once, each with its request IDs fixed: the parts that failed ambiguously
(the server could not be reached, or its answer was lost) can be sent again without any part being
applied twice.

An optimizer step is one: one gradient push per (embedding, server). When some servers applied their
part and another did not answer, :meth:`WriteBatch.run` raises
:class:`~graphstore.errors.IncompleteWriteError` naming the servers that did not apply, and its
``retry()`` sends their parts again with the same request IDs, completing the step.

One server's part is a :class:`PreparedWrite`: its requests built once, so every send carries the same
request IDs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphstore.client.transport.channel import ServerChannel
from graphstore.client.transport.chunking import run_chunks
from graphstore.errors import IncompleteWriteError, ServerUnavailableError


class WriteBatch:
    """Parts of one write, each sent by a function that re-sends the same requests when called again.

    Args:
        what: names the write in errors (``"sparse optimizer step"``).
        run_parallel: runs a list of functions concurrently and returns their results in order.
    """

    def __init__(self, what: str, run_parallel: Callable[[list[Callable[[], Any]]], list[Any]]) -> None:
        self.what = what
        self._run_parallel = run_parallel
        self._parts: list[tuple[str, Callable[[], Any]]] = []
        self._done: list[bool] = []

    def add(self, server: str, send: Callable[[], Any]) -> None:
        """Add a part: ``send`` writes it to ``server`` (an address, named in errors); a ``send`` with a
        ``start()`` (that sends and returns the function waiting for the answer) goes out with the others
        without a thread."""
        self._parts.append((server, send))
        self._done.append(False)

    def __len__(self) -> int:
        return len(self._parts)

    def run(self) -> None:
        """Send every part not applied yet, concurrently.

        Raises:
            IncompleteWriteError: a server did not answer (after its own retries); the others' parts are
                applied; ``retry()`` on the error sends the missing parts again.
            Exception: a server refused its part (a bad request: ValueError, KeyError, ...).
        """
        pending = [i for i, done in enumerate(self._done) if not done]
        if all(hasattr(self._parts[i][1], "start") for i in pending):
            # Every part can be sent without a thread: all go out, then every answer is read.
            waits = [_outcome(self._parts[i][1].start) for i in pending]
            outcomes = [_outcome(value) if ok else (ok, value) for ok, value in waits]
        else:
            outcomes = self._run_parallel([lambda i=i: _outcome(self._parts[i][1]) for i in pending])
        failed: dict[str, ServerUnavailableError] = {}
        refused: BaseException | None = None
        for index, (ok, value) in zip(pending, outcomes, strict=True):
            if ok:
                self._done[index] = True
            elif isinstance(value, ServerUnavailableError):
                failed.setdefault(self._parts[index][0], value)
            elif refused is None:
                refused = value
        if refused is not None:
            raise refused
        if failed:
            applied = sorted(
                {s for (s, _), done in zip(self._parts, self._done, strict=True) if done} - set(failed)
            )
            raise IncompleteWriteError(self.what, failed, applied, resend=self.run)


def _outcome(send: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        return True, send()
    except Exception as exc:  # noqa: BLE001 - sorted by the caller
        return False, exc


class PreparedWrite:
    """The requests of one write, their request IDs fixed: calling it sends them all (again, with the same
    IDs, when called again) and gives the tensor's newest version; :meth:`start` sends a one-request write
    without waiting (over a free call stream), for writes to several servers at once."""

    def __init__(self, channel: ServerChannel, requests: list[tuple[str, Any]]) -> None:
        self._channel = channel
        self._requests = requests

    def __call__(self) -> int:
        return max(r.version for r in run_chunks(self._channel, self._requests))

    def start(self) -> Callable[[], int]:
        """Send now; returns the function that waits for the version (a larger write is sent then)."""
        if len(self._requests) > 1:
            return self
        answer = self._channel.start_call(*self._requests[0])
        return lambda: answer().version
