"""Contracts of the client package: call policy and client configuration."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RpcPolicy:
    """Deadlines and retries for calls to partition servers.

    Attributes:
        deadline_s: per-call deadline.
        connect_timeout_s: bound on waiting for a server to report SERVING.
        max_retries: retries of a call that failed with UNAVAILABLE.
        backoff_initial_s, backoff_max_s, backoff_multiplier: exponential backoff between retries.
        max_message_bytes: gRPC message limit set on both sides.
        chunk_bytes: requests and expected responses above this are split into chunks.
    """

    deadline_s: float = 30.0
    connect_timeout_s: float = 60.0
    max_retries: int = 5
    backoff_initial_s: float = 0.1
    backoff_max_s: float = 5.0
    backoff_multiplier: float = 2.0
    max_message_bytes: int = 256 * 1024 * 1024
    chunk_bytes: int = 32 * 1024 * 1024
