"""The project's error types, for callers that must branch on the cause.

Everything else raises built-in exceptions (ValueError, KeyError, IndexError, TypeError,
PermissionError) whose message names the argument and the value.
"""

from __future__ import annotations


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
