"""``RemotePartition``: one partition server reached over gRPC, with the same API as the in-process one.

:class:`RemotePartition` implements :class:`graphstore.types.PartitionAPI`, so client code
runs unchanged against a :class:`~graphstore.server.partition_server.PartitionServer` in-process
(standalone mode, co-located reads) or a server process. Its calls go through a
:class:`~graphstore.client.transport.channel.ServerChannel` (deadlines, retries with backoff, TLS and
token, keepalive, the server's errors raised as the in-process server's exceptions), and:

- pulls and pushes are split by rows so that no request or answer exceeds ``RpcPolicy.chunk_bytes``;
  the chunks of one call are in flight together (:mod:`~graphstore.client.transport.chunking`);
- pulls use the codec's zero-copy decoder: the rows of a single-chunk pull are a read-only view of
  the received bytes (callers copy them where they assemble their output); concurrent single-chunk
  pulls of one tensor share requests (:mod:`~graphstore.client.transport.pull_coalescer`);
- every mutating request (one per chunk) carries a request ID given once, when it is built
  (:mod:`~graphstore.client.transport.request_ids`): its retries send the same ID, and the server
  applies it at most once. :meth:`RemotePartition.prepare_push_grad` returns a gradient push whose
  IDs are fixed, to be sent again after a failure (what an optimizer step's retry does).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphstore import dtypes
from graphstore.auth import NO_SECURITY, ChannelSecurity
from graphstore.client.transport.call_counts import MethodCounts
from graphstore.client.transport.channel import ServerChannel
from graphstore.client.transport.chunking import query_edges_in_chunks, run_chunks, split_rows
from graphstore.client.transport.pull_coalescer import PullCoalescers
from graphstore.client.transport.remote_admin import RemoteAdminCalls
from graphstore.client.transport.request_ids import RequestIds
from graphstore.client.transport.rpc_errors import ResponseTooLarge
from graphstore.client.transport.sample_requests import (
    DEGREE_MARGIN,
    EDGE_ANSWER_BYTES,
    SampleSpec,
)
from graphstore.client.transport.write_batch import PreparedWrite
from graphstore.client.transport.write_requests import (
    init_request,
    push_grad_request,
    push_request,
)
from graphstore.errors import LimitExceededError, MemoryBudgetError
from graphstore.ids import as_id_array
from graphstore.malloc import raise_malloc_thresholds
from graphstore.protos import codec, pull_wire
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.edges_wire import CarriedRows, read_edges_answer
from graphstore.rpc import RpcPolicy
from graphstore.types import (
    InitSpec,
    OptimizerConfig,
    PartitionMetadata,
    ServerStats,
    TensorScheme,
)


class RemotePartition(RemoteAdminCalls):
    """A partition server reached over gRPC (implements ``PartitionAPI``).

    Args:
        address: ``host:port`` of the server.
        part_id: the partition expected there; checked against the server's answer at
            :meth:`wait_ready` / :meth:`metadata`. None: learned from the server on first use.
        policy: deadlines, retries, message limit and chunk size.
        security: TLS material and the shared token (default: plain channel, no token).
        client_id: the client ID of this process's request IDs (None: a new one).

    Raises:
        ValueError: a malformed address; unreadable TLS files.
        FileNotFoundError: missing TLS files.
    """

    def __init__(
        self,
        address: str,
        part_id: int | None = None,
        policy: RpcPolicy = RpcPolicy(),
        security: ChannelSecurity | None = None,
        client_id: str | None = None,
    ) -> None:
        if not address or ":" not in address:
            raise ValueError(f"address must be 'host:port', got {address!r}")
        self.address = address
        self.policy = policy
        self.security = security or NO_SECURITY
        self._expected_part_id = part_id
        self._part_id = part_id
        self._schemes: dict[str, TensorScheme] = {}
        self._avg_degree: float | None = None
        self._lock = threading.Lock()
        self._ids = RequestIds(client_id)
        self._coalescers = PullCoalescers(self._pull_one)
        raise_malloc_thresholds()
        self._channel = ServerChannel(address, policy, self.security)
        self.max_call_time_s = self._channel.max_call_time_s

    # -- plumbing --------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"RemotePartition({self.address!r}, part_id={self._part_id})"

    def __enter__(self) -> RemotePartition:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel (calls after this fail)."""
        self._channel.close()

    @property
    def part_id(self) -> int:
        """The partition this server holds (asks the server the first time when not given)."""
        if self._part_id is None:
            self.metadata()
        return self._part_id

    def _call(self, method: str, request: Any, timeout: float | None = None) -> Any:
        return self._channel.call(method, request, timeout)

    def _run_by_rows(
        self, num_rows: int, row_bytes: int, make_request: Callable[[slice], tuple[str, Any]]
    ) -> list[Any]:
        """One request per chunk of ``chunk_bytes // row_bytes`` rows, all run; answers in row order."""
        chunks = split_rows(num_rows, self.policy.chunk_bytes // row_bytes)
        return run_chunks(self._channel, [make_request(sl) for sl in chunks])

    def _write_by_rows(
        self, method: str, num_rows: int, row_bytes: int, make_request: Callable[[slice], Any]
    ) -> Callable[[], int]:
        """The requests of a write split by rows, each with its request ID; returns the function that
        sends them all (again, with the same IDs, when called again) and gives the newest version."""
        chunks = split_rows(num_rows, self.policy.chunk_bytes // row_bytes)
        return PreparedWrite(self._channel, [(method, self._ids.stamp(make_request(sl))) for sl in chunks])

    # -- readiness and metadata ------------------------------------------------------------------

    def health(self, timeout: float = 5.0) -> str:
        """The server's health status name (``"SERVING"``, ``"NOT_SERVING"``, ...).

        Raises:
            ServerUnavailableError: no answer within ``timeout``.
        """
        return self._channel.health(timeout)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the server reports SERVING.

        Args:
            timeout: seconds to wait; defaults to ``policy.connect_timeout_s``.

        Raises:
            ServerUnavailableError: not SERVING within ``timeout``.
            ValueError: the server holds another partition than ``part_id``.
        """
        self._channel.wait_serving(self.policy.connect_timeout_s if timeout is None else timeout)
        self.metadata()

    def metadata(self) -> PartitionMetadata:
        """The graph's name, ID ranges and this server's tensor schemes.

        Raises:
            ValueError: the server holds another partition than the ``part_id`` given.
        """
        meta = codec.read_metadata(self._call("Metadata", pb.MetadataRequest()))
        if self._expected_part_id is not None and meta.part_id != self._expected_part_id:
            raise ValueError(
                f"part_id: server {self.address} holds partition {meta.part_id}, "
                f"expected {self._expected_part_id}"
            )
        self._part_id = meta.part_id
        self._avg_degree = meta.num_edges / max(meta.num_nodes, 1)
        with self._lock:
            self._schemes = {s.name: s for s in meta.tensors}
        return meta

    def call_counts(self) -> dict[str, MethodCounts]:
        """Calls, request bytes and answer bytes per method this client sent to the server."""
        return self._channel.counts.snapshot()

    def stats(self) -> ServerStats:
        """The server's uptime, memory and counters."""
        return codec.read_stats(self._call("Stats", pb.StatsRequest()))

    def tensor_scheme(self, name: str) -> TensorScheme:
        """The scheme of one tensor (cached; refreshed from the server when unknown).

        Raises:
            KeyError: no tensor of this name on the server.
        """
        scheme = self._scheme(name)
        if scheme is None:
            raise KeyError(f"server {self.address}: no tensor named {name!r} on partition {self._part_id}")
        return scheme

    def _scheme(self, name: str) -> TensorScheme | None:
        scheme = self._schemes.get(name)
        if scheme is None:
            self.list_tensors()
            scheme = self._schemes.get(name)
        return scheme

    # -- named tensors ---------------------------------------------------------------------------

    def list_tensors(self) -> list[TensorScheme]:
        """Schemes of every tensor on the server, sorted by name."""
        schemes = [codec.read_scheme(s) for s in self._call("List", pb.ListRequest()).tensors]
        with self._lock:
            self._schemes = {s.name: s for s in schemes}
        return schemes

    def list_tensors_started(self) -> Callable[[], list[TensorScheme]]:
        """:meth:`list_tensors`, sent now: returns the function that waits for the schemes."""
        answer = self._channel.start_call("List", pb.ListRequest())

        def result() -> list[TensorScheme]:
            schemes = [codec.read_scheme(s) for s in answer().tensors]
            with self._lock:
                self._schemes = {s.name: s for s in schemes}
            return schemes

        return result

    def pull(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows of ``name`` for global ``ids`` (owned by this partition), in request order.

        A pull larger than ``policy.chunk_bytes`` is split into concurrent chunks; smaller ones may share
        a request with other threads' (:class:`PullCoalescers`). The result is in storage form
        (bfloat16 as uint16); a single-chunk result is a read-only view of the received bytes.

        Raises:
            KeyError: unknown tensor.
            ValueError: an ID not owned by this partition.
            ServerUnavailableError: the server did not answer.
        """
        ids = as_id_array(ids, "ids", one_dim=True)
        scheme = self._scheme(name)
        if scheme is None:  # let the server produce its KeyError
            return self._pull_one(name, ids)
        row_shape = tuple(scheme.shape[1:])
        storage = dtypes.info(scheme.dtype).storage
        row_bytes = storage.itemsize * int(np.prod(row_shape, dtype=np.int64))
        chunks = split_rows(len(ids), self.policy.chunk_bytes // max(row_bytes, 8))
        if len(chunks) == 1:
            return self._coalescers.pull(name, ids, row_bytes)
        requests = [("Pull", pull_wire.pull_request(name, ids[sl])) for sl in chunks]
        answers = run_chunks(self._channel, requests)
        out = np.empty((len(ids), *row_shape), dtype=storage)
        for sl, raw in zip(chunks, answers, strict=True):
            rows, _ = pull_wire.decode_pull_response(raw, ((sl.stop - sl.start, *row_shape), scheme.dtype))
            out[sl] = rows
        return out

    def pull_started(self, name: str, ids: np.ndarray) -> Callable[[], np.ndarray]:
        """:meth:`pull`, sent now: returns the function that waits for the rows. A pull of one chunk goes
        out at once (over a free call stream, else as a unary call in flight), so the caller reads other
        partitions meanwhile; a larger one runs when the function is called.

        Raises:
            ValueError: IDs that are not a 1-d integer array (at once).
        """
        ids = as_id_array(ids, "ids", one_dim=True)
        scheme = self._schemes.get(name)
        if scheme is None:
            return lambda: self.pull(name, ids)
        row_shape = tuple(scheme.shape[1:])
        row_bytes = dtypes.info(scheme.dtype).storage.itemsize * int(np.prod(row_shape, dtype=np.int64))
        if len(ids) * row_bytes > self.policy.chunk_bytes:
            return lambda: self.pull(name, ids)
        answer = self._channel.start_call("Pull", pull_wire.pull_request(name, ids))
        expected = ((len(ids), *row_shape), scheme.dtype)
        return lambda: pull_wire.decode_pull_response(answer(), expected)[0]

    def _pull_one(self, name: str, ids: np.ndarray) -> np.ndarray:
        scheme = self._schemes.get(name)
        expected = None if scheme is None else ((len(ids), *scheme.shape[1:]), scheme.dtype)
        answer = self._call("Pull", pull_wire.pull_request(name, ids))
        return pull_wire.decode_pull_response(answer, expected)[0]

    def push(self, name: str, ids: np.ndarray, rows: np.ndarray, op: str = "assign") -> int:
        """Assign (``"assign"``) or add (``"add"``) rows of ``name`` for global ``ids``.

        Each request is atomic on the server; a push above ``policy.chunk_bytes`` is split by rows
        into several requests (each atomic).

        Returns:
            The tensor's version after the last chunk.

        Raises:
            KeyError: unknown tensor.
            PermissionError: a read-only tensor.
            ValueError: bad op, IDs, dtype or shape.
        """
        ids = as_id_array(ids, "ids", one_dim=True)
        rows = np.asarray(rows)
        wire_op = codec.op_to_wire(op)
        if rows.ndim < 1 or rows.shape[0] != len(ids):
            raise ValueError(f"rows: shape {list(rows.shape)} does not have one row per ID ({len(ids)} IDs)")
        scheme = self._scheme(name)
        dtype = (
            "bfloat16"
            if scheme is not None and scheme.dtype == "bfloat16" and rows.dtype == np.uint16
            else None
        )

        send = self._write_by_rows(
            "Push",
            len(ids),
            max(rows[:1].nbytes, 1) + 8,
            lambda sl: push_request(name, wire_op, ids[sl], rows[sl], dtype),
        )
        return send()

    def init_tensor(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype: str,
        policy: str,
        persistent: bool = False,
        init: InitSpec = InitSpec(),
        owner: str = "",
    ) -> tuple[bool, TensorScheme]:
        """Create ``name`` on this server or attach to an identical tensor.

        Returns:
            ``(created, scheme)``.

        Raises:
            ValueError: bad arguments.
            FileExistsError: ``name`` exists with another scheme.
            MemoryError: the server has no room for the rows.
        """
        request = self._ids.stamp(init_request(name, shape, dtype, policy, persistent, init, owner))
        response = self._call("Init", request)
        scheme = codec.read_scheme(response.scheme)
        with self._lock:
            self._schemes[name] = scheme
        return response.created, scheme

    def delete_tensor(self, name: str) -> bool:
        """Delete a run-time tensor; False when it did not exist.

        Raises:
            PermissionError: a partition tensor.
        """
        deleted = self._call("Delete", self._ids.stamp(pb.DeleteRequest(name=name))).deleted
        with self._lock:
            self._schemes.pop(name, None)
        return deleted

    # -- structure -------------------------------------------------------------------------------

    def _average_degree(self) -> float:
        if self._avg_degree is None:
            self.metadata()
        return float(self._avg_degree or 1.0)

    def _query_edges(
        self,
        ids: np.ndarray,
        answer_bytes_per_id: float,
        make_request: Callable[[np.ndarray, int], tuple[str, Any]],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[CarriedRows]]:
        """Edge queries over chunks of ``ids`` sized from the expected answer (see
        :func:`~graphstore.client.transport.chunking.query_edges_in_chunks`)."""
        per_chunk = max(1, int(self.policy.chunk_bytes // max(answer_bytes_per_id, 8.0)))
        return query_edges_in_chunks(self._channel, ids, per_chunk, make_request)

    def _query_edges_of(
        self, method: str, request_type: type, ids_field: str, ids: np.ndarray, answer_bytes_per_id: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[CarriedRows]]:
        """:meth:`_query_edges` for a request that carries nothing but the IDs (in ``ids_field``)."""

        def make_request(chunk: np.ndarray, index: int) -> tuple[str, Any]:
            request = request_type()
            codec.write_ids(getattr(request, ids_field), chunk)
            return method, request

        return self._query_edges(ids, answer_bytes_per_id, make_request)

    def sample_neighbors(
        self,
        seeds: np.ndarray,
        fanout: int | Sequence[int],
        edge_dir: str = "in",
        replace: bool = False,
        prob: str | Sequence[str | None] | None = None,
        random_seed: int | None = None,
        exclude_eids: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sampled edges ``(src, dst, eid)`` (homogeneous global IDs) around seeds owned by this
        partition; ``fanout`` and ``prob`` may give one value per edge type; ``exclude_eids`` are never
        drawn.

        Raises:
            ValueError: bad seeds, fanout, edge_dir or prob.
            KeyError: unknown prob tensor.
        """
        exclude = None if exclude_eids is None else as_id_array(exclude_eids, "exclude_eids", one_dim=True)
        spec = SampleSpec(fanout, edge_dir, replace, prob, random_seed, exclude)
        return self.sample_with_rows(seeds, spec)[:3]

    def sample_with_rows(
        self, seeds: np.ndarray, spec: SampleSpec
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[CarriedRows]]:
        """:meth:`sample_neighbors` with the arguments of ``spec``, and the node rows its answer carries
        (``spec.with_rows`` for the seeds and sampled neighbors this partition owns, ``with_seed_rows``
        for the seeds): ``(src, dst, eid, carried rows)``. A server that carries none (an older one)
        answers with the edges only.

        Raises:
            ValueError: bad seeds, fanout, edge_dir or prob; a carried tensor that is not a node tensor.
            KeyError: unknown prob or carried tensor.
        """
        seeds = as_id_array(seeds, "seeds", one_dim=True)
        codec.edge_dir_to_wire(spec.edge_dir)  # a bad edge_dir fails before anything is sent
        per_seed = spec.answer_bytes_per_seed(self._average_degree())
        return self._query_edges(
            seeds, per_seed, lambda chunk, i: ("SampleNeighbors", spec.request(chunk, i))
        )

    def sample_started(
        self, seeds: np.ndarray, spec: SampleSpec
    ) -> Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray, list[CarriedRows]]]:
        """:meth:`sample_with_rows`, sent now: returns the function that waits for its answer. A sample of
        one chunk goes out at once; a larger one runs when the function is called."""
        seeds = as_id_array(seeds, "seeds", one_dim=True)
        per_seed = spec.answer_bytes_per_seed(self._average_degree())
        if len(seeds) * per_seed > self.policy.chunk_bytes:
            return lambda: self.sample_with_rows(seeds, spec)
        answer = self._channel.start_call(*spec.chunk_request(seeds, 0))

        def result() -> tuple[np.ndarray, np.ndarray, np.ndarray, list[CarriedRows]]:
            try:
                return read_edges_answer(answer())
            except (ResponseTooLarge, LimitExceededError) as exc:
                if isinstance(exc, MemoryBudgetError):
                    raise
                return self.sample_with_rows(seeds, spec)  # in chunks sized to fit

        return result

    def find_edges(self, eids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` of edges owned by this partition.

        Raises:
            ValueError: an edge not owned here.
        """
        eids = as_id_array(eids, "eids", one_dim=True)
        src, dst, _, _ = self._query_edges_of(
            "FindEdges", pb.FindEdgesRequest, "eids", eids, EDGE_ANSWER_BYTES
        )
        return src, dst

    def in_subgraph(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All in-edges ``(src, dst, eid)`` of ``nodes`` owned by this partition.

        Raises:
            ValueError: a node not owned here.
        """
        nodes = as_id_array(nodes, "nodes", one_dim=True)
        per_node = EDGE_ANSWER_BYTES * self._average_degree() * DEGREE_MARGIN
        return self._query_edges_of("InSubgraph", pb.InSubgraphRequest, "nodes", nodes, per_node)[:3]

    def degrees(self, nids: np.ndarray, edge_dir: str = "in", etype: int | None = None) -> np.ndarray:
        """In- or out-degrees (int64) of nodes owned by this partition, over every edge type or over
        the edge type with ID ``etype``.

        Raises:
            ValueError: a node not owned here, a bad ``edge_dir`` or edge type ID.
        """
        nids = as_id_array(nids, "nids", one_dim=True)
        wire_dir = codec.edge_dir_to_wire(edge_dir)

        def make_request(sl: slice) -> tuple[str, Any]:
            request = pb.DegreesRequest(edge_dir=wire_dir)
            if etype is not None:
                request.has_etype = True
                request.etype = int(etype)
            codec.write_ids(request.nids, nids[sl])
            return "Degrees", request

        # An ID in the request and a degree in the answer: 8 bytes each.
        results = [
            codec.read_ids(r.degrees, "degrees") for r in self._run_by_rows(len(nids), 16, make_request)
        ]
        return results[0] if len(results) == 1 else np.concatenate(results)

    # -- optimizer, barrier, checkpoints, shutdown -----------------------------------------------

    def push_grad(self, name: str, ids: np.ndarray, grads: np.ndarray, optimizer: OptimizerConfig) -> int:
        """Apply one sparse optimizer step on the server to rows ``ids`` (unique) with float32 ``grads``.

        Returns:
            The tensor's version after the last chunk.

        Raises:
            KeyError: unknown tensor.
            PermissionError: a read-only tensor.
            ValueError: bad IDs, grads, optimizer kind or hyper-parameters.
        """
        return self.prepare_push_grad(name, ids, grads, optimizer)()

    def prepare_push_grad(
        self, name: str, ids: np.ndarray, grads: np.ndarray, optimizer: OptimizerConfig
    ) -> Callable[[], int]:
        """:meth:`push_grad` with its request IDs fixed: each call of the function returned sends the
        same requests, so calling it again after a failure completes the step without applying any part
        of it twice.

        Raises:
            ValueError: bad IDs or grads (at once, nothing sent).
        """
        ids = as_id_array(ids, "ids", one_dim=True)
        grads = np.asarray(grads)
        if grads.dtype != np.float32:
            raise ValueError(f"grads must be float32, got {grads.dtype}")
        if grads.ndim != 2 or grads.shape[0] != len(ids):
            raise ValueError(f"grads: shape {list(grads.shape)} must be [len(ids)={len(ids)}, dim]")

        return self._write_by_rows(
            "PushGrad",
            len(ids),
            max(grads[:1].nbytes + 8, 1),
            lambda sl: push_grad_request(name, ids[sl], grads[sl], optimizer),
        )
