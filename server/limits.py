"""Checks of each request against the server's :class:`~graphstore.limits.RequestLimits`, made before
the work that could exhaust memory starts.

The servicer calls one :class:`RequestGuard` method per request kind. A request over a limit raises
:class:`~graphstore.errors.LimitExceededError` (RESOURCE_EXHAUSTED on the wire) naming the limit, its
value and the request's figure; a malformed value (a shape whose element count overflows, too many
dimensions) raises ValueError (INVALID_ARGUMENT).

Each limit bounds one request; requests answered at the same time add up. So a request whose working
memory is large (a big pull or sample: at least :data:`ADMIT_FROM_BYTES`) also reserves it from the
server's memory budget (:class:`~graphstore.server.memory_budget.MemoryBudget`) while it runs: the
methods that check such requests return a context manager the handler runs in, and a request the
budget cannot hold now is refused RESOURCE_EXHAUSTED with the figures instead of running the server
out of memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext

import numpy as np

from graphstore.errors import LimitExceededError
from graphstore.limits import RequestLimits
from graphstore.sampling_rules import per_etype_fanouts
from graphstore.types import TensorScheme

# Elements of one tensor beyond this overflow int64 byte counts (2**63 / 16-byte items, rounded).
_MAX_ELEMENTS = 2**59
# Requests whose working memory is at least this large reserve it from the memory budget (smaller ones,
# such as pulls of up to 8 MiB of rows, skip reading the memory figures).
ADMIT_FROM_BYTES = 16 * 1024 * 1024
# Peak bytes per sampled edge: the sampler's index arrays (about 100) plus the answer's three ID arrays
# and their encoding (48).
BYTES_PER_EDGE = 160
# Peak bytes per ID of a FindEdges / Degrees request (IDs, local IDs, the result arrays).
BYTES_PER_ID = 48


def planned_edges(degrees: np.ndarray, fanout: int, replace: bool) -> int:
    """The most edges a neighbor sample can return: the sum of the degrees for ``fanout == -1``,
    ``fanout`` per seed that has an edge with replacement, ``min(degree, fanout)`` per seed without.

    Args:
        degrees: the seeds' degrees in the sampled direction.
        fanout: edges per seed (-1: all).
        replace: with replacement.
    """
    degrees = np.asarray(degrees, dtype=np.int64)
    if fanout < 0:
        return int(degrees.sum())
    if replace:
        return int(np.count_nonzero(degrees)) * int(fanout)
    return int(np.minimum(degrees, fanout).sum())


class RequestGuard:
    """The limit checks of one server.

    Args:
        limits: the bounds (validated).
        server: the partition (for degrees, tensor schemes and its memory budget, ``store.memory``).
    """

    def __init__(self, limits: RequestLimits, server) -> None:
        limits.validate()
        self.limits = limits
        self._server = server
        self._memory = server.store.memory

    def _refuse(self, limit: str, message: str) -> LimitExceededError:
        return LimitExceededError(f"{message} exceeds the limit {limit}={getattr(self.limits, limit)}", limit)

    def _working_memory(self, nbytes: int, what: str) -> AbstractContextManager:
        """A reservation of ``nbytes`` from the memory budget while the request runs (none when small).

        Raises:
            MemoryBudgetError: the budget cannot hold it now.
        """
        if nbytes < ADMIT_FROM_BYTES:
            return nullcontext()
        return self._memory.admit(nbytes, what)

    def _check_rows(self, count: int, arg: str) -> None:
        if count > self.limits.max_request_rows:
            raise self._refuse("max_request_rows", f"{arg}: {count} IDs")

    def rows(self, count: int, arg: str) -> AbstractContextManager:
        """IDs one request carries; returns the reservation of its working memory.

        Raises:
            LimitExceededError: more than ``max_request_rows``.
            MemoryBudgetError: the memory budget cannot hold the request now.
        """
        self._check_rows(count, arg)
        return self._working_memory(count * BYTES_PER_ID, f"a request for {count} {arg}")

    def row_bytes(self, num_rows: int, row_shape: Sequence[int], itemsize: int, arg: str) -> int:
        """IDs and row bytes of one Pull answer, Push or PushGrad request; returns the row bytes.

        Raises:
            LimitExceededError: more than ``max_request_rows`` IDs or ``max_request_bytes`` bytes.
        """
        self._check_rows(num_rows, arg)
        nbytes = int(num_rows) * int(np.prod(row_shape, dtype=object)) * int(itemsize)
        if nbytes > self.limits.max_request_bytes:
            raise self._refuse(
                "max_request_bytes",
                f"{arg}: {num_rows} rows of shape {list(row_shape)} ({nbytes} bytes)",
            )
        return nbytes

    def pull(self, scheme: TensorScheme, num_ids: int, itemsize: int) -> AbstractContextManager:
        """A pull of ``num_ids`` rows of a tensor (``itemsize``: bytes per stored element); returns the
        reservation of its answer (twice the rows: the answer and gRPC's copy of it)."""
        nbytes = self.row_bytes(num_ids, scheme.shape[1:], itemsize, f"tensor {scheme.name!r}")
        return self._working_memory(2 * nbytes, f"a pull of {num_ids} rows of {scheme.name!r}")

    def _edges(self, edges: int, message: str) -> AbstractContextManager:
        if edges > self.limits.max_sampled_edges:
            raise self._refuse("max_sampled_edges", message)
        return self._working_memory(edges * BYTES_PER_EDGE, f"an answer of up to {edges} edges")

    def sample(
        self,
        seeds: np.ndarray,
        fanout: int | Sequence[int],
        edge_dir: str,
        replace: bool,
        exclude_eids: np.ndarray | None = None,
    ) -> AbstractContextManager:
        """A neighbor sample: its seed count, the edge IDs it excludes and the most edges it can
        return; returns the reservation of its working memory. ``fanout`` is one value for every edge
        type or one per edge type.

        Raises:
            LimitExceededError: too many seeds or excluded edge IDs, or more than ``max_sampled_edges``
                edges.
            MemoryBudgetError: the memory budget cannot hold the sample now.
            ValueError: a fanout below -1 or a list of the wrong length, a bad seed or edge_dir (from
                the degree lookup).
        """
        self._check_rows(len(seeds), "seeds")
        if exclude_eids is not None:
            self._check_rows(len(exclude_eids), "exclude_eids")
        num_etypes = len(self._server.partition.schema.canonical_etypes)
        fanouts = per_etype_fanouts(fanout, num_etypes)
        if not any(fanouts) or len(seeds) == 0:
            return nullcontext()
        if num_etypes == 1:
            edges = planned_edges(self._server.degrees(seeds, edge_dir), fanouts[0], replace)
        else:
            edges = sum(
                planned_edges(self._server.degrees(seeds, edge_dir, e), f, replace)
                for e, f in enumerate(fanouts)
                if f != 0
            )
        shown = fanouts[0] if num_etypes == 1 else fanouts
        return self._edges(
            edges, f"{len(seeds)} seeds x fanout {shown} (replace={replace}) can return {edges} edges, which"
        )

    def in_subgraph(self, nodes: np.ndarray) -> AbstractContextManager:
        """An in-subgraph query: its node count and the in-edges it returns (see :meth:`sample`)."""
        self._check_rows(len(nodes), "nodes")
        edges = planned_edges(self._server.degrees(nodes, "in"), -1, False)
        return self._edges(edges, f"{len(nodes)} nodes have {edges} in-edges, which")

    def shape(self, shape: Sequence[int]) -> None:
        """The global shape of a tensor to create.

        Raises:
            ValueError: more than ``max_tensor_dims`` dimensions, or an element count that overflows.
        """
        if len(shape) > self.limits.max_tensor_dims:
            raise ValueError(
                f"shape: {len(shape)} dimensions {list(shape)} exceed the limit "
                f"max_tensor_dims={self.limits.max_tensor_dims}"
            )
        elements = int(np.prod([max(int(d), 0) for d in shape], dtype=object)) if shape else 0
        if elements > _MAX_ELEMENTS:
            raise ValueError(f"shape: {list(shape)} has {elements} elements, more than {_MAX_ELEMENTS}")

    def barrier_timeout(self, timeout_s: float) -> None:
        """A barrier's ``timeout_s``, checked as sent (before anything clamps it).

        Raises:
            ValueError: not a number in (0, ``max_barrier_timeout_s``].
        """
        limit = self.limits.max_barrier_timeout_s
        if not 0 < timeout_s <= limit:  # NaN fails too
            raise ValueError(
                f"timeout_s must be in (0, {limit:g}] (limit max_barrier_timeout_s), got {timeout_s}"
            )
