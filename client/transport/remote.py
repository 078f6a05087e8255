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
from graphstore.client.transport.barrier_poll import wait_at_barrier
from graphstore.client.transport.channel import ServerChannel
from graphstore.client.transport.chunking import query_edges_in_chunks, run_chunks, split_rows
from graphstore.client.transport.pull_coalescer import PullCoalescers
from graphstore.client.transport.request_ids import RequestIds
from graphstore.client.transport.write_requests import (
    checkpoint_request,
    init_request,
    push_grad_request,
    push_request,
)
from graphstore.ids import as_id_array
from graphstore.malloc import raise_malloc_thresholds
from graphstore.protos import codec, pull_wire
from graphstore.protos import graphstore_pb2 as pb
from graphstore.rpc import RpcPolicy
from graphstore.types import (
    InitSpec,
    OptimizerConfig,
    PartitionMetadata,
    ServerStats,
    TensorScheme,
)

# Answers whose size is not known in advance (all neighbors, in-subgraphs) are sized from the average
# degree times this margin; a chunk that still comes back too large is split in half and retried.
_DEGREE_MARGIN = 4.0
# Bytes an edge takes in an answer: its source, destination and edge ID (int64 each).
_EDGE_ANSWER_BYTES = 24.0
# Checkpoints and restores move whole tensors; they get at least this deadline.
_BULK_DEADLINE_S = 600.0


class RemotePartition:
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
        requests = [(method, self._ids.stamp(make_request(sl))) for sl in chunks]

        def send() -> int:
            return max(r.version for r in run_chunks(self._channel, requests))

        return send

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
            rows, _ = pull_wire.decode_pull_response(raw)
            out[sl] = rows
        return out

    def _pull_one(self, name: str, ids: np.ndarray) -> np.ndarray:
        rows, _ = pull_wire.decode_pull_response(self._call("Pull", pull_wire.pull_request(name, ids)))
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
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Edge queries over chunks of ``ids`` sized from the expected answer (see
        :func:`~graphstore.client.transport.chunking.query_edges_in_chunks`)."""
        per_chunk = max(1, int(self.policy.chunk_bytes // max(answer_bytes_per_id, 8.0)))
        return query_edges_in_chunks(self._channel, ids, per_chunk, make_request)

    def _query_edges_of(
        self, method: str, request_type: type, ids_field: str, ids: np.ndarray, answer_bytes_per_id: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
        seeds = as_id_array(seeds, "seeds", one_dim=True)
        exclude = None if exclude_eids is None else as_id_array(exclude_eids, "exclude_eids", one_dim=True)
        wire_dir = codec.edge_dir_to_wire(edge_dir)
        fanouts = [int(fanout)] if isinstance(fanout, (int, np.integer)) else [int(f) for f in fanout]
        budget = sum(f if f >= 0 else self._average_degree() * _DEGREE_MARGIN for f in fanouts)
        per_seed = _EDGE_ANSWER_BYTES * budget

        def make_request(chunk: np.ndarray, index: int) -> tuple[str, Any]:
            request = pb.SampleRequest(edge_dir=wire_dir, replace=replace)
            if isinstance(fanout, (int, np.integer)):
                request.fanout = int(fanout)
            else:
                request.fanouts[:] = fanouts
            if isinstance(prob, str):
                request.prob = prob
            elif prob:
                request.probs[:] = [p or "" for p in prob]
            codec.write_ids(request.seeds, chunk)
            if exclude is not None:
                codec.write_ids(request.exclude_eids, exclude)
            if random_seed is not None:
                request.has_random_seed = True
                request.random_seed = int(random_seed) + index  # chunks draw different, reproducible streams
            return "SampleNeighbors", request

        return self._query_edges(seeds, per_seed, make_request)

    def find_edges(self, eids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` of edges owned by this partition.

        Raises:
            ValueError: an edge not owned here.
        """
        eids = as_id_array(eids, "eids", one_dim=True)
        src, dst, _ = self._query_edges_of("FindEdges", pb.FindEdgesRequest, "eids", eids, _EDGE_ANSWER_BYTES)
        return src, dst

    def in_subgraph(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All in-edges ``(src, dst, eid)`` of ``nodes`` owned by this partition.

        Raises:
            ValueError: a node not owned here.
        """
        nodes = as_id_array(nodes, "nodes", one_dim=True)
        per_node = _EDGE_ANSWER_BYTES * self._average_degree() * _DEGREE_MARGIN
        return self._query_edges_of("InSubgraph", pb.InSubgraphRequest, "nodes", nodes, per_node)

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

    def barrier(self, name: str, count: int, timeout_s: float, participant: str = "") -> int:
        """Wait until ``count`` participants reached barrier ``name`` on this server (polling: no server
        thread waits, see :mod:`~graphstore.client.transport.barrier_poll`).

        Raises:
            ValueError: bad count or timeout.
            TimeoutError: (BarrierTimeoutError) not everyone arrived within ``timeout_s``.
            ServerUnavailableError: the server did not answer.
        """
        return wait_at_barrier(
            lambda request: self._call("Barrier", request), name, count, timeout_s, participant
        )

    def checkpoint(
        self, path: str, names: list[str] | None = None, save_id: str | None = None
    ) -> tuple[list[str], int]:
        """Write tensors (all run-time tensors by default) under ``path`` on the server's host: straight
        into ``path``, or as this server's part of the cluster-wide save ``save_id`` (then
        :meth:`commit_checkpoint` or :meth:`abort_checkpoint`; ``server/durability/checkpoint_set.py``).

        Returns:
            ``(files written, rows written)``.
        """
        return self._checkpoint_phase(path, names, save_id, "write")

    def commit_checkpoint(self, path: str, save_id: str, names: list[str]) -> None:
        """Make the save ``save_id`` (every server wrote its part) the checkpoint of ``names`` at ``path``.

        Raises:
            FileNotFoundError: this server's part of the save is not there.
        """
        self._checkpoint_phase(path, names, save_id, "commit")

    def abort_checkpoint(self, path: str, save_id: str) -> None:
        """Remove the files of the unfinished save ``save_id`` under ``path``."""
        self._checkpoint_phase(path, None, save_id, "abort")

    def _checkpoint_phase(
        self, path: str, names: list[str] | None, save_id: str | None, phase: str
    ) -> tuple[list[str], int]:
        request = self._ids.stamp(checkpoint_request(path, names, save_id, phase))
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
        request = self._ids.stamp(pb.RestoreRequest(path=path))
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
