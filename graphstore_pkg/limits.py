"""The bounds every request to a partition server is held to (:class:`RequestLimits`).

One dataclass shared by the cluster config (the ``limits`` section of the YAML), the ``graphstore
server`` flags and the server that enforces them (:mod:`graphstore.server.limits`). A request over a
limit is answered RESOURCE_EXHAUSTED (or INVALID_ARGUMENT for a malformed value) with a message that
names the limit and the value, never by running out of memory. The client splits its own large calls
below these limits, so a user meets them only with a single row or seed that exceeds one.

It lives in the root package so the config parser and the launcher use it without the server.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

# The longest barrier wait a call may ask for (a day): bounds every wait, catches unit mistakes.
MAX_BARRIER_TIMEOUT_S = 86400.0
# Row tensors have a few dimensions; beyond this, shapes are refused (the wire allows up to 8).
MAX_TENSOR_DIMS = 8


@dataclass(frozen=True)
class RequestLimits:
    """Per-request bounds of a partition server; every field has a safe default.

    Attributes:
        max_sampled_edges: edges one SampleNeighbors or InSubgraph answer may hold (seeds x fanout
            with replacement, the sum of ``min(degree, fanout)`` without); an answer takes 24 bytes per
            edge and the sampler about 100 bytes per edge at its peak.
        max_request_rows: IDs one request may carry (Pull, Push, PushGrad, Degrees, FindEdges, seeds,
            a sample's exclude_eids).
        max_request_bytes: row bytes one Pull answer, Push or PushGrad request may hold.
        max_tensor_dims: dimensions of a tensor created by Init (rows included).
        max_barrier_timeout_s: the longest ``timeout_s`` a barrier call may give, in (0, 86400].
        max_barrier_waiters: participants waiting at all barriers of the server together.
        memory_margin_mb: memory (MiB) kept free below the server's budget (the cgroup's limit and
            the host's ``MemAvailable``) when admitting a new tensor.
        auth_failure_burst: calls with a missing or wrong token one peer may make before it is refused
            for ``auth_cooldown_s`` (RESOURCE_EXHAUSTED, even with the right token).
        auth_cooldown_s: how long a peer that used up its burst is refused.
    """

    max_sampled_edges: int = 4_000_000
    max_request_rows: int = 4 * 1024 * 1024
    max_request_bytes: int = 64 * 1024 * 1024
    max_tensor_dims: int = 4
    max_barrier_timeout_s: float = MAX_BARRIER_TIMEOUT_S
    max_barrier_waiters: int = 4096
    memory_margin_mb: int = 256
    auth_failure_burst: int = 20
    auth_cooldown_s: float = 30.0

    def validate(self) -> None:
        """Check every field's range.

        Raises:
            ValueError: naming the field and its value.
        """
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            minimum = 0 if spec.name in ("memory_margin_mb",) else 1
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise ValueError(f"{spec.name} must be a number, got {value!r}")
            if value < minimum:
                raise ValueError(f"{spec.name} must be >= {minimum}, got {value}")
        if self.max_tensor_dims > MAX_TENSOR_DIMS:
            raise ValueError(f"max_tensor_dims must be at most {MAX_TENSOR_DIMS}, got {self.max_tensor_dims}")
        if self.max_barrier_timeout_s > MAX_BARRIER_TIMEOUT_S:
            raise ValueError(
                f"max_barrier_timeout_s must be in (0, {MAX_BARRIER_TIMEOUT_S:g}], "
                f"got {self.max_barrier_timeout_s}"
            )

    @property
    def memory_margin_bytes(self) -> int:
        """``memory_margin_mb`` in bytes."""
        return int(self.memory_margin_mb) * 1024 * 1024


def limit_kind(name: str) -> type:
    """``int`` or ``float``: the type of limit ``name`` (a field of :class:`RequestLimits`)."""
    spec = {spec.name: spec for spec in dataclasses.fields(RequestLimits)}[name]
    return int if spec.type in ("int", int) else float


def limit_flag(name: str) -> str:
    """The ``graphstore server`` flag of limit ``name`` (``max_sampled_edges`` -> ``--max-sampled-edges``)."""
    return "--" + name.replace("_", "-")


def limit_names() -> tuple[str, ...]:
    """The names of every limit, in declaration order."""
    return tuple(spec.name for spec in dataclasses.fields(RequestLimits))


def limits_to_flags(limits: RequestLimits) -> list[str]:
    """``graphstore server`` flags that give ``limits`` (only the values that differ from the default)."""
    default = RequestLimits()
    flags: list[str] = []
    for name in limit_names():
        value = getattr(limits, name)
        if value != getattr(default, name):
            flags += [limit_flag(name), f"{value:g}" if isinstance(value, float) else str(value)]
    return flags
