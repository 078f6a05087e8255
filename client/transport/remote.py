"""``RemotePartition``: one partition server reached over gRPC, with the same API as the in-process one.

:class:`RemotePartition` implements :class:`graphstore.types.PartitionAPI`, so client code
runs unchanged against a :class:`~graphstore.server.partition_server.PartitionServer` in-process
(standalone mode, co-located reads) or a server process. It adds what a network needs:

- a deadline on every call (``RpcPolicy.deadline_s``) and retries with exponential backoff when the
  server is UNAVAILABLE (restarting, not yet listening); a server that stays unreachable raises
  :class:`graphstore.errors.ServerUnavailableError` naming its address. A call never takes longer
  than :attr:`RemotePartition.max_call_time_s` (the deadline plus the retry backoffs) in all;
- optional TLS and a shared token (:class:`graphstore.auth.ChannelSecurity`): the token rides
  in every call's metadata; a refused token raises :class:`graphstore.errors.ServerError` with code
  UNAUTHENTICATED or PERMISSION_DENIED;
- keepalive pings while calls are in flight, so a connection across a cut link is noticed and
  replaced (the call fails with ServerUnavailableError; later calls reconnect by themselves), and a
  reconnect backoff capped at ``RpcPolicy.backoff_max_s``, so a restarted server is found quickly;
- the server's errors come back as the exceptions the in-process server raises (ValueError,
  KeyError, FileExistsError, PermissionError, TimeoutError, FileNotFoundError, MemoryError), with
  the server's message;
- chunking: pulls and pushes are split by rows so that no request or answer exceeds
  ``RpcPolicy.chunk_bytes``; the chunks of one call are in flight together;
- pulls use the codec's zero-copy decoder: the rows of a single-chunk pull are a read-only view of
  the received bytes (callers copy them where they assemble their output).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from graphstore import dtypes
from graphstore.auth import NO_SECURITY, ChannelSecurity
from graphstore.errors import BarrierTimeoutError, ServerError, ServerUnavailableError
from graphstore.ids import as_id_array
from graphstore.malloc import raise_malloc_thresholds
from graphstore.protos import codec, pull_wire
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.service import ERROR_METADATA_KEY, SERVICE_NAME
from graphstore.rpc import RpcPolicy
from graphstore.types import (
    InitSpec,
    OptimizerConfig,
    PartitionMetadata,
    ServerStats,
    TensorScheme,
)

# Chunks of one pull or push in flight at once.
_MAX_CHUNKS_IN_FLIGHT = 4
# Answers whose size is not known in advance (all neighbors, in-subgraphs) are sized from the average
# degree times this margin; a chunk that still comes back too large is split in half and retried.
_DEGREE_MARGIN = 4.0
# Checkpoints and restores move whole tensors; they get at least this deadline.
_BULK_DEADLINE_S = 600.0

_ERRORS_BY_NAME: dict[str, type[Exception]] = {
    "ValueError": ValueError,
    "KeyError": KeyError,
    "FileExistsError": FileExistsError,
    "FileNotFoundError": FileNotFoundError,
    "PermissionError": PermissionError,
    "TimeoutError": TimeoutError,
    "BarrierTimeoutError": BarrierTimeoutError,
    "MemoryError": MemoryError,
}
# Server-side errors that mean "this server is going away": raised as ServerUnavailableError.
_UNAVAILABLE_KINDS = ("ConnectionAbortedError",)

_INIT_KIND_TO_WIRE = {
    "zeros": pb.Initializer.ZEROS,
    "uniform": pb.Initializer.UNIFORM,
    "normal": pb.Initializer.NORMAL,
    "constant": pb.Initializer.CONSTANT,
    "pushed": pb.Initializer.PUSHED,
}

_RESPONSES: dict[str, Any] = {
    "Metadata": pb.MetadataResponse,
    "Pull": None,  # raw bytes, decoded by pull_wire.decode_pull_response
    "Push": pb.PushResponse,
    "Init": pb.InitResponse,
    "Delete": pb.DeleteResponse,
    "List": pb.ListResponse,
    "SampleNeighbors": pb.EdgesResponse,
    "FindEdges": pb.EdgesResponse,
    "InSubgraph": pb.EdgesResponse,
    "Degrees": pb.DegreesResponse,
    "PushGrad": pb.PushGradResponse,
    "Barrier": pb.BarrierResponse,
    "Checkpoint": pb.CheckpointResponse,
    "Restore": pb.RestoreResponse,
    "Shutdown": pb.ShutdownResponse,
    "Stats": pb.StatsResponse,
}


class _ResponseTooLarge(ServerError):
    """A request or answer exceeded the gRPC message limit (RESOURCE_EXHAUSTED from gRPC itself)."""


# Keepalive while calls are in flight: a ping unanswered for this long closes the connection.
_KEEPALIVE_TIME_MS = 5_000
_KEEPALIVE_TIMEOUT_MS = 5_000


def retry_backoff_total(policy: RpcPolicy) -> float:
    """Seconds a call may spend sleeping between its retries (the sum of the backoff delays)."""
    total, delay = 0.0, policy.backoff_initial_s
    for _ in range(policy.max_retries):
        total += delay
        delay = min(delay * policy.backoff_multiplier, policy.backoff_max_s)
    return total


def channel_options(policy: RpcPolicy) -> list[tuple[str, int]]:
    """Channel arguments of a client: message limits, keepalive, reconnect backoff."""
    initial_ms = max(int(policy.backoff_initial_s * 1000), 20)
    return [
        ("grpc.max_send_message_length", policy.max_message_bytes),
        ("grpc.max_receive_message_length", policy.max_message_bytes),
        ("grpc.keepalive_time_ms", _KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", _KEEPALIVE_TIMEOUT_MS),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.initial_reconnect_backoff_ms", initial_ms),
        ("grpc.min_reconnect_backoff_ms", initial_ms),
        ("grpc.max_reconnect_backoff_ms", max(int(policy.backoff_max_s * 1000), initial_ms)),
    ]


def _split(n: int, per_chunk: int) -> list[slice]:
    per_chunk = max(1, per_chunk)
    return [slice(lo, min(lo + per_chunk, n)) for lo in range(0, n, per_chunk)] or [slice(0, 0)]


class RemotePartition:
    """A partition server reached over gRPC (implements ``PartitionAPI``).

    Args:
        address: ``host:port`` of the server.
        part_id: the partition expected there; checked against the server's answer at
            :meth:`wait_ready` / :meth:`metadata`. None: learned from the server on first use.
        policy: deadlines, retries, message limit and chunk size.
        security: TLS material and the shared token (default: plain channel, no token).

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
    ) -> None:
        if not address or ":" not in address:
            raise ValueError(f"address must be 'host:port', got {address!r}")
        self.address = address
        self.policy = policy
        self.security = security or NO_SECURITY
        self._metadata = self.security.metadata
        self.max_call_time_s = policy.deadline_s + retry_backoff_total(policy)
        self._expected_part_id = part_id
        self._part_id = part_id
        self._schemes: dict[str, TensorScheme] = {}
        self._avg_degree: float | None = None
        self._lock = threading.Lock()
        raise_malloc_thresholds()
        self._channel = self.security.channel(address, channel_options(policy))
        self._calls = {
            method: self._channel.unary_unary(
                f"/{SERVICE_NAME}/{method}",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response.FromString if response is not None else None,
            )
            for method, response in _RESPONSES.items()
        }
        self._health = health_pb2_grpc.HealthStub(self._channel)

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

    def _translate(
        self, method: str, err: grpc.RpcError, attempts: int = 1, elapsed_s: float | None = None
    ) -> Exception:
        code = err.code()
        details = err.details() or ""
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and elapsed_s is not None:
            details = f"{details} ({attempts} attempt{'s' if attempts != 1 else ''} in {elapsed_s:.1f} s)"
        kind = ""
        for key, value in err.trailing_metadata() or ():
            if key == ERROR_METADATA_KEY:
                kind = value
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED and not kind:
            return _ResponseTooLarge(self.address, code.name, f"{method}: {details}")
        if kind in _UNAVAILABLE_KINDS:
            return ServerUnavailableError(self.address, code.name, f"{method}: {details}")
        exc_type = _ERRORS_BY_NAME.get(kind)
        if exc_type is not None:
            return exc_type(f"server {self.address}: {details}")
        # CANCELLED reaches a client that never cancels only from a server going away (calls that
        # race with its shutdown), so it means unavailable too.
        if code in (
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.DEADLINE_EXCEEDED,
            grpc.StatusCode.CANCELLED,
        ):
            return ServerUnavailableError(self.address, code.name, f"{method}: {details}")
        return ServerError(self.address, code.name, f"{method}: {details}")

    def _call(
        self, method: str, request: Any, timeout: float | None = None, started: float | None = None
    ) -> Any:
        """One unary call with deadline and UNAVAILABLE retries; errors translated.

        The whole call, retries included, ends within ``timeout`` (default ``policy.deadline_s``) plus
        the backoff delays after ``started`` (default: now).
        """
        deadline = timeout if timeout is not None else self.policy.deadline_s
        started = time.monotonic() if started is None else started
        give_up_at = started + deadline + retry_backoff_total(self.policy)
        delay = self.policy.backoff_initial_s
        stub = self._calls[method]
        attempts = 0
        while True:
            attempts += 1
            remaining = give_up_at - time.monotonic()
            try:
                return stub(request, timeout=max(min(deadline, remaining), 0.001), metadata=self._metadata)
            except grpc.RpcError as err:
                retry = (
                    err.code() == grpc.StatusCode.UNAVAILABLE
                    and attempts <= self.policy.max_retries
                    and time.monotonic() + delay < give_up_at
                )
                if retry:
                    time.sleep(delay)
                    delay = min(delay * self.policy.backoff_multiplier, self.policy.backoff_max_s)
                    continue
                raise self._translate(method, err, attempts, time.monotonic() - started) from None

    def _call_future(self, method: str, request: Any) -> Callable[[], Any]:
        """Start a call; returns a function that waits for it (retrying UNAVAILABLE synchronously)."""
        started = time.monotonic()
        future = self._calls[method].future(request, timeout=self.policy.deadline_s, metadata=self._metadata)

        def result() -> Any:
            try:
                return future.result()
            except grpc.RpcError as err:
                if err.code() == grpc.StatusCode.UNAVAILABLE:
                    return self._call(method, request, started=started)
                raise self._translate(method, err, 1, time.monotonic() - started) from None

        return result

    def _run_chunks(self, requests: Sequence[tuple[str, Any]]) -> list[Any]:
        """Run calls with at most ``_MAX_CHUNKS_IN_FLIGHT`` in flight; results in order."""
        if len(requests) == 1:
            return [self._call(*requests[0])]
        results: list[Any] = [None] * len(requests)
        pending: list[tuple[int, Callable[[], Any]]] = []
        for i, (method, request) in enumerate(requests):
            pending.append((i, self._call_future(method, request)))
            if len(pending) >= _MAX_CHUNKS_IN_FLIGHT:
                j, wait = pending.pop(0)
                results[j] = wait()
        for j, wait in pending:
            results[j] = wait()
        return results

    # -- readiness and metadata ------------------------------------------------------------------

    def health(self, timeout: float = 5.0) -> str:
        """The server's health status name (``"SERVING"``, ``"NOT_SERVING"``, ...).

        Raises:
            ServerUnavailableError: no answer within ``timeout``.
        """
        try:
            response = self._health.Check(
                health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=timeout, metadata=self._metadata
            )
        except grpc.RpcError as err:
            raise ServerUnavailableError(self.address, err.code().name, err.details() or "") from None
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the server reports SERVING.

        Args:
            timeout: seconds to wait; defaults to ``policy.connect_timeout_s``.

        Raises:
            ServerUnavailableError: not SERVING within ``timeout``.
            ValueError: the server holds another partition than ``part_id``.
        """
        timeout = self.policy.connect_timeout_s if timeout is None else timeout
        end = time.monotonic() + timeout
        last = "no answer"
        while True:
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise ServerUnavailableError(
                    self.address, "UNAVAILABLE", f"not SERVING within {timeout} s ({last})"
                )
            try:
                response = self._health.Check(
                    health_pb2.HealthCheckRequest(service=SERVICE_NAME),
                    timeout=min(remaining, 2.0),
                    wait_for_ready=True,
                    metadata=self._metadata,
                )
                if response.status == health_pb2.HealthCheckResponse.SERVING:
                    break
                last = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
            except grpc.RpcError as err:
                last = f"{err.code().name}: {err.details()}"
            time.sleep(min(0.05, max(end - time.monotonic(), 0)))
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

    def pull(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows of ``name`` for global ``ids`` (owned by this partition), in request order.

        A pull larger than ``policy.chunk_bytes`` is split into concurrent chunks. The result is in
        storage form (bfloat16 as uint16); a single-chunk result is a read-only view of the
        received bytes.

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
        per_chunk = max(1, self.policy.chunk_bytes // max(row_bytes, 8))
        chunks = _split(len(ids), per_chunk)
        if len(chunks) == 1:
            return self._pull_one(name, ids)
        requests = []
        for sl in chunks:
            request = pb.PullRequest(name=name)
            codec.write_ids(request.ids, ids[sl])
            requests.append(("Pull", request))
        out = np.empty((len(ids), *row_shape), dtype=storage)
        for sl, raw in zip(chunks, self._run_chunks(requests), strict=True):
            rows, _ = pull_wire.decode_pull_response(raw)
            out[sl] = rows
        return out

    def _pull_one(self, name: str, ids: np.ndarray) -> np.ndarray:
        request = pb.PullRequest(name=name)
        codec.write_ids(request.ids, ids)
        rows, _ = pull_wire.decode_pull_response(self._call("Pull", request))
        return rows

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
        row_bytes = max(rows[:1].nbytes, 1) + 8
        requests = []
        for sl in _split(len(ids), self.policy.chunk_bytes // row_bytes):
            request = pb.PushRequest(name=name, op=wire_op)
            codec.write_ids(request.ids, ids[sl])
            codec.write_tensor(request.rows, rows[sl], dtype)
            requests.append(("Push", request))
        return max(r.version for r in self._run_chunks(requests))

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
        if init.kind not in _INIT_KIND_TO_WIRE:
            raise ValueError(f"init.kind must be one of {sorted(_INIT_KIND_TO_WIRE)}, got {init.kind!r}")
        request = pb.InitRequest(
            name=name,
            dtype=codec.dtype_to_wire(dtype),
            policy=codec.policy_to_wire(policy),
            persistent=persistent,
            owner=owner,
        )
        request.shape[:] = [int(d) for d in shape]
        request.init.kind = _INIT_KIND_TO_WIRE[init.kind]
        request.init.a = init.a
        request.init.b = init.b
        request.init.seed = init.seed
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
        deleted = self._call("Delete", pb.DeleteRequest(name=name)).deleted
        with self._lock:
            self._schemes.pop(name, None)
        return deleted

    # -- structure -------------------------------------------------------------------------------

    def _ids_per_chunk(self, answer_bytes_per_id: float) -> int:
        return max(1, int(self.policy.chunk_bytes // max(answer_bytes_per_id, 8.0)))

    def _average_degree(self) -> float:
        if self._avg_degree is None:
            self.metadata()
        return float(self._avg_degree or 1.0)

    def _edges_chunked(
        self, ids: np.ndarray, per_chunk: int, make_request: Callable[[np.ndarray, int], tuple[str, Any]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Run edge queries over chunks of ``ids``; a chunk whose answer is too large is halved."""
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        stack = [(sl.start, sl.stop, i) for i, sl in enumerate(_split(len(ids), per_chunk))][::-1]
        while stack:
            lo, hi, index = stack.pop()
            try:
                response = self._call(*make_request(ids[lo:hi], index))
            except _ResponseTooLarge:
                if hi - lo <= 1:
                    raise ValueError(
                        f"the answer for ID {int(ids[lo])} exceeds the message limit of "
                        f"{self.policy.max_message_bytes} bytes"
                    ) from None
                mid = (lo + hi) // 2
                stack += [(mid, hi, index * 2 + 1), (lo, mid, index * 2)]
                continue
            src = codec.read_ids(response.src, "src")
            dst = codec.read_ids(response.dst, "dst")
            eid = codec.read_ids(response.eid, "eid") if response.eid.shape else np.empty(0, np.int64)
            parts.append((src, dst, eid))
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate(arrays) for arrays in zip(*parts, strict=True))  # type: ignore[return-value]

    def sample_neighbors(
        self,
        seeds: np.ndarray,
        fanout: int,
        edge_dir: str = "in",
        replace: bool = False,
        prob: str | None = None,
        random_seed: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sampled edges ``(src, dst, eid)`` (global IDs) around seeds owned by this partition.

        Raises:
            ValueError: bad seeds, fanout, edge_dir or prob.
            KeyError: unknown prob tensor.
        """
        seeds = as_id_array(seeds, "seeds", one_dim=True)
        wire_dir = codec.edge_dir_to_wire(edge_dir)
        per_seed = 24.0 * (fanout if fanout >= 0 else self._average_degree() * _DEGREE_MARGIN)

        def make_request(chunk: np.ndarray, index: int) -> tuple[str, Any]:
            request = pb.SampleRequest(
                fanout=int(fanout), edge_dir=wire_dir, replace=replace, prob=prob or ""
            )
            codec.write_ids(request.seeds, chunk)
            if random_seed is not None:
                request.has_random_seed = True
                request.random_seed = int(random_seed) + index  # chunks draw different, reproducible streams
            return "SampleNeighbors", request

        return self._edges_chunked(seeds, self._ids_per_chunk(per_seed), make_request)

    def find_edges(self, eids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` of edges owned by this partition.

        Raises:
            ValueError: an edge not owned here.
        """
        eids = as_id_array(eids, "eids", one_dim=True)

        def make_request(chunk: np.ndarray, index: int) -> tuple[str, Any]:
            request = pb.FindEdgesRequest()
            codec.write_ids(request.eids, chunk)
            return "FindEdges", request

        src, dst, _ = self._edges_chunked(eids, self._ids_per_chunk(24.0), make_request)
        return src, dst

    def in_subgraph(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All in-edges ``(src, dst, eid)`` of ``nodes`` owned by this partition.

        Raises:
            ValueError: a node not owned here.
        """
        nodes = as_id_array(nodes, "nodes", one_dim=True)

        def make_request(chunk: np.ndarray, index: int) -> tuple[str, Any]:
            request = pb.InSubgraphRequest()
            codec.write_ids(request.nodes, chunk)
            return "InSubgraph", request

        per_node = 24.0 * self._average_degree() * _DEGREE_MARGIN
        return self._edges_chunked(nodes, self._ids_per_chunk(per_node), make_request)

    def degrees(self, nids: np.ndarray, edge_dir: str = "in") -> np.ndarray:
        """In- or out-degrees (int64) of nodes owned by this partition.

        Raises:
            ValueError: a node not owned here, or a bad ``edge_dir``.
        """
        nids = as_id_array(nids, "nids", one_dim=True)
        wire_dir = codec.edge_dir_to_wire(edge_dir)
        requests = []
        for sl in _split(len(nids), self.policy.chunk_bytes // 16):
            request = pb.DegreesRequest(edge_dir=wire_dir)
            codec.write_ids(request.nids, nids[sl])
            requests.append(("Degrees", request))
        results = [codec.read_ids(r.degrees, "degrees") for r in self._run_chunks(requests)]
        return results[0] if len(results) == 1 else np.concatenate(results)

    # -- optimizer, barrier, checkpoints, shutdown -----------------------------------------------

    def push_grad(self, name: str, ids: np.ndarray, grads: np.ndarray, optimizer: OptimizerConfig) -> int:
        """Apply one sparse optimizer step on the server to rows ``ids`` (unique) with float32 ``grads``.

        Raises:
            KeyError: unknown tensor.
            PermissionError: a read-only tensor.
            ValueError: bad IDs, grads, optimizer kind or hyper-parameters.
        """
        ids = as_id_array(ids, "ids", one_dim=True)
        grads = np.asarray(grads)
        if grads.dtype != np.float32:
            raise ValueError(f"grads must be float32, got {grads.dtype}")
        if grads.ndim != 2 or grads.shape[0] != len(ids):
            raise ValueError(f"grads: shape {list(grads.shape)} must be [len(ids)={len(ids)}, dim]")
        row_bytes = grads[:1].nbytes + 8
        requests = []
        for sl in _split(len(ids), self.policy.chunk_bytes // max(row_bytes, 1)):
            request = pb.PushGradRequest(name=name)
            codec.write_ids(request.ids, ids[sl])
            codec.write_tensor(request.grads, grads[sl], "float32")
            request.optimizer.kind = optimizer.kind
            request.optimizer.lr = optimizer.lr
            request.optimizer.eps = optimizer.eps
            request.optimizer.beta1 = optimizer.beta1
            request.optimizer.beta2 = optimizer.beta2
            requests.append(("PushGrad", request))
        return max(r.version for r in self._run_chunks(requests))

    def barrier(self, name: str, count: int, timeout_s: float, participant: str = "") -> int:
        """Block until ``count`` participants reached barrier ``name`` on this server.

        Raises:
            ValueError: bad count or timeout.
            TimeoutError: (BarrierTimeoutError) not everyone arrived within ``timeout_s``.
            ServerUnavailableError: the server did not answer.
        """
        request = pb.BarrierRequest(
            name=name, count=int(count), timeout_s=float(timeout_s), participant=participant
        )
        # The server bounds the wait; the call's deadline leaves room for the answer to come back.
        return self._call("Barrier", request, timeout=float(timeout_s) + self.policy.deadline_s).generation

    def checkpoint(self, path: str, names: list[str] | None = None) -> tuple[list[str], int]:
        """Write tensors (all run-time tensors by default) under ``path`` on the server's host.

        Returns:
            ``(files written, rows written)``.
        """
        request = pb.CheckpointRequest(path=path)
        request.names[:] = list(names or [])
        response = self._call("Checkpoint", request, timeout=max(self.policy.deadline_s, _BULK_DEADLINE_S))
        return list(response.files), response.rows

    def restore(self, path: str, names: list[str] | None = None) -> tuple[list[str], int]:
        """Restore tensors from a checkpoint folder on the server's host.

        Returns:
            ``(restored names, rows restored)``.

        Raises:
            FileNotFoundError: missing folder or tensor.
            ValueError: another graph's checkpoint or a scheme mismatch.
        """
        request = pb.RestoreRequest(path=path)
        request.names[:] = list(names or [])
        response = self._call("Restore", request, timeout=max(self.policy.deadline_s, _BULK_DEADLINE_S))
        self.list_tensors()
        return list(response.names), response.rows

    def shutdown(self) -> None:
        """Ask the server to stop (it finishes the calls in flight, then exits).

        Raises:
            ServerUnavailableError: the server could not be reached.
        """
        self._call("Shutdown", pb.ShutdownRequest())
