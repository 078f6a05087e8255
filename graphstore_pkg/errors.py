"""The project's error types, for callers that must branch on the cause.

Everything else raises built-in exceptions (ValueError, KeyError, IndexError, TypeError,
PermissionError) whose message names the argument and the value.
"""

from __future__ import annotations

from collections.abc import Callable


class GraphstoreError(Exception):
    """Base class of graphstore's own errors."""


class ConfigError(GraphstoreError, ValueError):
    """A configuration file or partition config is invalid; the message names the field."""


class ServerError(GraphstoreError):
    """A partition server failed a call or could not be reached.

    Attributes:
        server: the server's address (``host:port``) or partition label.
        code: the gRPC status code name (``"UNAVAILABLE"``, ``"DEADLINE_EXCEEDED"``, ...).
        details: the server's message.
    """

    def __init__(self, server: str, code: str, details: str):
        super().__init__(f"server {server}: {code}: {details}")
        self.server = server
        self.code = code
        self.details = details


class ServerUnavailableError(ServerError):
    """The server did not answer within the deadline (UNAVAILABLE or DEADLINE_EXCEEDED)."""


class StaleRequestError(GraphstoreError):
    """A replayed mutating request older than the server's replay window (FAILED_PRECONDITION).

    The server no longer remembers whether that request was applied, so it refuses it rather than risk
    applying it twice; the message names the client and the request's sequence number.
    """


class IncompleteWriteError(ServerUnavailableError):
    """A write spread over several servers that some did not apply: they could not be reached (after
    every retry) or the answer was lost. The parts that were applied are never applied again.

    Attributes:
        failed: ``{server address: the error it gave}``: the servers that may not have applied their part.
        applied: addresses of the servers that applied theirs.
    """

    def __init__(
        self,
        what: str,
        failed: dict[str, ServerError],
        applied: list[str],
        resend: Callable[[], None] | None = None,
    ):
        names = "; ".join(f"{address} ({error.details})" for address, error in failed.items())
        done = ", ".join(sorted(applied)) or "none"
        code = next(iter(failed.values())).code if failed else "UNAVAILABLE"
        super().__init__(", ".join(failed), code, f"{what}: not applied on {names}; applied on {done}")
        self.failed = dict(failed)
        self.applied = list(applied)
        self._resend = resend

    def retry(self) -> None:
        """Send the parts the servers in :attr:`failed` did not apply again, with their request IDs (a
        server that had applied a part answers with its first answer): once this returns, the whole
        write is applied everywhere, each part once.

        Raises:
            IncompleteWriteError: some servers still did not answer (call ``retry`` on it later).
            RuntimeError: nothing to send again.
        """
        if self._resend is None:
            raise RuntimeError("this write cannot be sent again")
        self._resend()


class BarrierTimeoutError(GraphstoreError, TimeoutError):
    """A barrier did not gather its participants before its timeout."""


class IdTypeError(TypeError, ValueError):
    """IDs that are not integers.

    Both a TypeError (what the DGL-style client API raises for a wrongly typed argument) and a
    ValueError (what the partition interface raises for a bad argument, INVALID_ARGUMENT on the
    wire), so callers of either layer catch it as they already do.
    """


class LimitExceededError(GraphstoreError):
    """A request exceeds one of the server's limits (RESOURCE_EXHAUSTED on the wire).

    The message names the limit and the value; the client splits its own large calls below the
    limits, so this reaches a user only for a single row or seed that exceeds one, or for a server
    out of its memory budget.

    Attributes:
        limit: the limit's name (``max_sampled_edges``, ``memory_budget``...), when known.
    """

    def __init__(self, message: str, limit: str = "") -> None:
        super().__init__(message)
        self.limit = limit


class StorageFullError(GraphstoreError, OSError):
    """The file system a server writes to is full (ENOSPC / EDQUOT; RESOURCE_EXHAUSTED on the wire)."""


class MemoryBudgetError(LimitExceededError, MemoryError):
    """A new tensor does not fit the server's memory budget (the cgroup limit and the host's free
    memory, minus a margin); the message gives the figures."""
