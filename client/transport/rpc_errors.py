"""A failed gRPC call, turned into the exception the in-process server raises for the same failure.

The server names the Python exception behind a refusal in its trailing metadata
(``graphstore-error``); the client raises the same built-in exception (ValueError, KeyError,
FileExistsError, PermissionError, TimeoutError, FileNotFoundError, MemoryError, OSError, and
graphstore's StaleRequestError (a replay older than the server's window), LimitExceededError /
MemoryBudgetError / StorageFullError) with the server's message, so code runs unchanged over either
transport. A server that cannot be reached, or is going away, raises
:class:`graphstore.errors.ServerUnavailableError` naming its address; anything else
raises :class:`graphstore.errors.ServerError` with the gRPC status code.
"""

from __future__ import annotations

import grpc

from graphstore.errors import (
    BarrierTimeoutError,
    LimitExceededError,
    MemoryBudgetError,
    ServerError,
    ServerUnavailableError,
    StaleRequestError,
    StorageFullError,
)
from graphstore.protos.service import ERROR_METADATA_KEY

_ERRORS_BY_NAME: dict[str, type[Exception]] = {
    "ValueError": ValueError,
    "KeyError": KeyError,
    "FileExistsError": FileExistsError,
    "FileNotFoundError": FileNotFoundError,
    "PermissionError": PermissionError,
    "TimeoutError": TimeoutError,
    "BarrierTimeoutError": BarrierTimeoutError,
    "MemoryError": MemoryError,
    "StaleRequestError": StaleRequestError,
    "LimitExceededError": LimitExceededError,
    "MemoryBudgetError": MemoryBudgetError,
    "StorageFullError": StorageFullError,
    "OSError": OSError,
}
# Server-side errors that mean "this server is going away": raised as ServerUnavailableError.
_UNAVAILABLE_KINDS = ("ConnectionAbortedError",)
# CANCELLED reaches a client that never cancels only from a server going away (calls that race with
# its shutdown), so it means unavailable too.
_UNAVAILABLE_CODES = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
)


# What gRPC says when a message exceeds its size limit (other RESOURCE_EXHAUSTED answers without a
# graphstore error kind, such as the token check's cool-down, are plain ServerErrors).
_MESSAGE_TOO_LARGE = "message larger than max"


class ResponseTooLarge(ServerError):
    """A request or answer exceeded the gRPC message limit (RESOURCE_EXHAUSTED from gRPC itself)."""


def translate_rpc_error(
    address: str, method: str, err: grpc.RpcError, attempts: int = 1, elapsed_s: float | None = None
) -> Exception:
    """The exception to raise for a failed call.

    Args:
        address: ``host:port`` of the server (named in the message).
        method: the RPC method that failed.
        err: the gRPC error.
        attempts: how many times the call was tried (reported for UNAVAILABLE / DEADLINE_EXCEEDED).
        elapsed_s: seconds spent on all attempts; None leaves the attempt count out of the message.

    Returns:
        The exception the in-process server raises for the same failure, a
        :class:`~graphstore.errors.ServerUnavailableError`, a :class:`ResponseTooLarge`, or a
        :class:`~graphstore.errors.ServerError`.
    """
    kind = ""
    for key, value in err.trailing_metadata() or ():
        if key == ERROR_METADATA_KEY:
            kind = value
    return error_for(address, method, err.code(), err.details() or "", kind, attempts, elapsed_s)


_CODES_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def status_code(number: int) -> grpc.StatusCode:
    """The gRPC status code of a status number (UNKNOWN for a number gRPC does not define)."""
    return _CODES_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)


def error_for(
    address: str,
    method: str,
    code: grpc.StatusCode,
    details: str,
    kind: str = "",
    attempts: int = 1,
    elapsed_s: float | None = None,
) -> Exception:
    """The exception to raise for a call that failed with ``code``, ``details`` and the server's error
    type name ``kind`` (empty when it named none): what :func:`translate_rpc_error` returns, for a
    failure that did not come as a ``grpc.RpcError`` (a call stream's ``CallError``)."""
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and elapsed_s is not None:
        details = f"{details} ({attempts} attempt{'s' if attempts != 1 else ''} in {elapsed_s:.1f} s)"
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and not kind and _MESSAGE_TOO_LARGE in details:
        return ResponseTooLarge(address, code.name, f"{method}: {details}")
    if kind in _UNAVAILABLE_KINDS:
        return ServerUnavailableError(address, code.name, f"{method}: {details}")
    exc_type = _ERRORS_BY_NAME.get(kind)
    if exc_type is not None:
        return exc_type(f"server {address}: {details}")
    if code in _UNAVAILABLE_CODES:
        return ServerUnavailableError(address, code.name, f"{method}: {details}")
    return ServerError(address, code.name, f"{method}: {details}")
