"""The gRPC face of a partition: decode the request, call :class:`PartitionServer`, encode the answer.

Nothing here knows about storage or sampling. The one place that turns Python exceptions into
gRPC status codes is :func:`status_for`; every handler runs inside the wrapper that
:meth:`PartitionServicer._bind` builds, so a bad request of any kind gets a status whose message
names the argument and value, and the server keeps serving.

Handlers receive the raw request bytes and parse them themselves, so that a truncated or garbage
request is answered with INVALID_ARGUMENT (grpcio would answer a failing deserializer with a bare
INTERNAL). Pull answers come from :func:`graphstore.protos.pull_wire.pull_response_buffer`: the rows are
gathered straight into the answer's bytes. The error's Python type also travels in the trailing
metadata (``graphstore-error``) so :class:`graphstore.client.transport.RemotePartition` raises the same
exception type as the in-process server does.

Two optional hooks serve the reliability features: ``metrics`` (a
:class:`~graphstore.server.metrics.ServerMetrics`: per-call counts and latencies, per-tensor bytes)
and ``write_path`` (:class:`~graphstore.server.durability.write_path.WritePath`: every mutating request goes
through it, which answers replays of a request ID with the first answer, orders the writes with the
checkpoints and makes them durable before they are answered).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import grpc
import numpy as np
from google.protobuf.message import DecodeError

from graphstore import dtypes
from graphstore.errors import BarrierTimeoutError, LimitExceededError, StaleRequestError, StorageFullError
from graphstore.limits import RequestLimits
from graphstore.protos import call_wire, codec, pull_wire
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.edges_wire import EdgesAnswer
from graphstore.protos.service import ERROR_METADATA_KEY, MUTATING_METHODS, SERVICE_NAME
from graphstore.server.barrier_calls import answer_barrier
from graphstore.server.call_stream import CallStreams
from graphstore.server.carried_rows import rows_to_carry
from graphstore.server.durability.checkpoint_root import NamedCheckpoints
from graphstore.server.durability.write_path import WritePath
from graphstore.server.in_flight import CountingHandler, InFlightCalls
from graphstore.server.limits import RequestGuard
from graphstore.types import InitSpec, OptimizerConfig

if TYPE_CHECKING:
    from graphstore.server.metrics import ServerMetrics

logger = logging.getLogger(__name__)

# Python exception types -> (gRPC status, the name the client maps back). Order matters: the OSError
# subclasses (FileExistsError, FileNotFoundError, PermissionError, TimeoutError) come first.
_STATUS_TABLE: tuple[tuple[tuple[type[BaseException], ...], grpc.StatusCode, str], ...] = (
    ((BarrierTimeoutError,), grpc.StatusCode.DEADLINE_EXCEEDED, "BarrierTimeoutError"),
    ((StaleRequestError,), grpc.StatusCode.FAILED_PRECONDITION, "StaleRequestError"),
    ((LimitExceededError,), grpc.StatusCode.RESOURCE_EXHAUSTED, ""),  # the class's own name
    ((StorageFullError,), grpc.StatusCode.RESOURCE_EXHAUSTED, "StorageFullError"),
    ((TimeoutError,), grpc.StatusCode.DEADLINE_EXCEEDED, "TimeoutError"),
    ((FileExistsError,), grpc.StatusCode.ALREADY_EXISTS, "FileExistsError"),
    ((FileNotFoundError,), grpc.StatusCode.NOT_FOUND, "FileNotFoundError"),
    ((PermissionError,), grpc.StatusCode.FAILED_PRECONDITION, "PermissionError"),
    ((ConnectionAbortedError,), grpc.StatusCode.UNAVAILABLE, "ConnectionAbortedError"),
    ((KeyError,), grpc.StatusCode.NOT_FOUND, "KeyError"),
    ((ValueError, TypeError, OverflowError, IndexError), grpc.StatusCode.INVALID_ARGUMENT, "ValueError"),
    ((MemoryError,), grpc.StatusCode.RESOURCE_EXHAUSTED, "MemoryError"),
    ((OSError,), grpc.StatusCode.FAILED_PRECONDITION, "OSError"),
)


# Call streams a servicer holds open at once when not told otherwise (each holds a worker thread).
DEFAULT_MAX_CALL_STREAMS = 8


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str, str]:
    """Map an exception raised by a partition call to ``(status code, message, error type name)``.

    Anything not in the table is INTERNAL (and is logged with its traceback by the caller).
    """
    message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    for exc_types, code, name in _STATUS_TABLE:
        if isinstance(exc, exc_types):
            return code, str(message), name or type(exc).__name__
    return grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {message}", "InternalError"


def _finite(value: float, arg: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{arg} must be finite, got {value}")
    return value


_INIT_KINDS = {
    pb.Initializer.ZEROS: "zeros",
    pb.Initializer.UNIFORM: "uniform",
    pb.Initializer.NORMAL: "normal",
    pb.Initializer.CONSTANT: "constant",
    pb.Initializer.PUSHED: "pushed",
}


def _identity(data: bytes) -> bytes:
    return data


def _serialize(response: Any) -> bytes:
    """Serialize a response message; pre-serialized answers (fast-path pulls) pass through."""
    return response if isinstance(response, bytes) else response.SerializeToString()


class PartitionServicer:
    """Handlers of ``graphstore.PartitionService`` over a :class:`PartitionServer`.

    Args:
        server: the partition (any object implementing ``PartitionAPI``).
        on_shutdown: called (once per Shutdown RPC) after the Shutdown answer is produced; the
            process owner stops the gRPC server from it.
        metrics: where to count calls, latencies and tensor bytes (None: not counted).
        write_path: the path of the mutating requests (default: a replay window, answers at once).
        limits: the bounds each request is checked against (:mod:`graphstore.server.limits`).
        max_call_streams: the most ``Call`` streams open at once (:mod:`graphstore.server.call_stream`).
    """

    def __init__(
        self,
        server,
        on_shutdown: Callable[[], None] | None = None,
        metrics: ServerMetrics | None = None,
        write_path: WritePath | None = None,
        limits: RequestLimits | None = None,
        max_call_streams: int = DEFAULT_MAX_CALL_STREAMS,
    ) -> None:
        self._server = server
        self._guard = RequestGuard(limits if limits is not None else RequestLimits(), server)
        self._on_shutdown = on_shutdown
        self._metrics = metrics
        self._calls: Counter[str] = Counter()  # calls answered per method (Stats: calls_METHOD)
        self._calls_lock = threading.Lock()
        self.write_path = write_path or WritePath()
        self._in_flight = InFlightCalls()
        self.call_streams = CallStreams(self.answer, self.refusal, self._in_flight, max_call_streams)
        self._methods: dict[str, tuple[type, Callable[[Any, grpc.ServicerContext], Any]]] = {
            "Metadata": (pb.MetadataRequest, self._metadata),
            "Pull": (pb.PullRequest, self._pull),
            "Push": (pb.PushRequest, self._push),
            "Init": (pb.InitRequest, self._init),
            "Delete": (pb.DeleteRequest, self._delete),
            "List": (pb.ListRequest, self._list),
            "SampleNeighbors": (pb.SampleRequest, self._sample),
            "FindEdges": (pb.FindEdgesRequest, self._find_edges),
            "InSubgraph": (pb.InSubgraphRequest, self._in_subgraph),
            "Degrees": (pb.DegreesRequest, self._degrees),
            "PushGrad": (pb.PushGradRequest, self._push_grad),
            "Barrier": (pb.BarrierRequest, self._barrier),
            "Checkpoint": (pb.CheckpointRequest, self._checkpoint),
            "Restore": (pb.RestoreRequest, self._restore),
            "Shutdown": (pb.ShutdownRequest, self._shutdown),
            "Stats": (pb.StatsRequest, self._stats),
        }

    def generic_handler(self) -> grpc.GenericRpcHandler:
        """The handler to register with ``grpc.Server.add_generic_rpc_handlers``."""
        handlers = {
            f"/{SERVICE_NAME}/{method}": grpc.unary_unary_rpc_method_handler(
                self._bind(method),
                request_deserializer=_identity,
                response_serializer=_serialize,
            )
            for method in self._methods
        }
        handlers[f"/{SERVICE_NAME}/Call"] = self.call_streams.method_handler()
        return CountingHandler(handlers, self._in_flight)

    def wait_idle(self, timeout: float, settle: float = 0.1) -> bool:
        """Wait until no call of this service is in flight and none was accepted for ``settle`` seconds
        (calls grpc accepted just before shutdown reach the handler a moment later); True if that
        happened within ``timeout``.

        Used on shutdown: once the unary calls have finished, long-lived streams (health Watch)
        need not hold the process for the rest of the grace period.
        """
        return self._in_flight.wait_quiet(timeout, settle)

    def apply_logged(self, method: str, raw: bytes) -> None:
        """Apply a request from the write-ahead log again (a restarting server), past the write path.

        Raises:
            ValueError, KeyError, ...: what the handler raises.
        """
        request_type, handler = self._methods[method]
        handler(request_type.FromString(raw), None)

    def answer(self, method: str, raw, context) -> Any:
        """One call of ``method``: its raw request parsed, run (mutating ones through the write path) and
        answered; what the unary calls and the call stream's messages both go through.

        Returns:
            The response message, or its bytes.

        Raises:
            ValueError: a request that does not parse; whatever the handler raises.
        """
        started = time.perf_counter()
        code = "OK"
        try:
            request_type, handler = self._methods[method]
            try:
                request = request_type.FromString(raw)
            except DecodeError as exc:
                raise ValueError(
                    f"request: {len(raw)} bytes are not a valid {request_type.__name__}: {exc}"
                ) from None
            if method in MUTATING_METHODS:
                return self.write_path.run(
                    method, request, bytes(raw), lambda: handler(request, context), context.time_remaining()
                )
            return handler(request, context)
        except Exception as exc:
            code = status_for(exc)[0].name
            raise
        finally:
            self._record(method, code, time.perf_counter() - started)

    def _record(self, method: str, code: str, seconds: float) -> None:
        """Count one answered call: the Stats counters and, when kept, the metrics."""
        with self._calls_lock:
            self._calls[method] += 1
        if self._metrics is not None:
            self._metrics.rpc_done(method, code, seconds)

    def _bind(self, method: str) -> Callable[[bytes, grpc.ServicerContext], Any]:
        def run(raw: bytes, context: grpc.ServicerContext) -> Any:
            try:
                return self.answer(method, raw, context)
            except Exception as exc:  # noqa: BLE001 - the one place that maps exceptions to statuses
                code, message, name = self.refusal(method, exc)
                context.set_trailing_metadata(((ERROR_METADATA_KEY, name),))
                context.abort(code, f"{method}: {message}")

        return run

    @staticmethod
    def refusal(method: str, exc: BaseException) -> tuple[grpc.StatusCode, str, str]:
        """The status of a failed call (:func:`status_for`), logged: with its traceback when INTERNAL."""
        code, message, name = status_for(exc)
        if code == grpc.StatusCode.INTERNAL:
            logger.error("%s failed", method, exc_info=exc)
        else:
            logger.debug("%s: %s: %s", method, code.name, message)
        return code, message, name

    # -- handlers: decode, call, encode ----------------------------------------------------------

    def _metadata(self, request: pb.MetadataRequest, context) -> pb.MetadataResponse:
        response = pb.MetadataResponse()
        codec.write_metadata(response, self._server.metadata())
        return response

    def _stats(self, request: pb.StatsRequest, context) -> pb.StatsResponse:
        response = pb.StatsResponse()
        codec.write_stats(response, self._server.stats())
        response.counters["replayed_writes"] = self.write_path.replays
        with self._calls_lock:
            for method, count in self._calls.items():
                response.counters[f"calls_{method}"] = count
        return response

    def _pull(self, request: pb.PullRequest, context) -> bytes:
        scheme = self._server.tensor_scheme(request.name)
        ids = codec.read_ids(request.ids, "ids")
        answer_field = getattr(context, "answer_field", 0)
        if answer_field:
            context.framed = True
        with self._guard.pull(scheme, len(ids), dtypes.info(scheme.dtype).storage.itemsize):
            return self._pull_rows(request.name, scheme, ids, answer_field)

    def _pull_rows(self, name: str, scheme, ids: np.ndarray, answer_field: int = 0) -> bytes:
        """The pull answer's bytes: a ``PullResponse``, or with ``answer_field`` the ``CallResponse``
        carrying it (the rows gathered in place either way where the interpreter allows)."""
        target = pull_wire.pull_response_buffer((len(ids), *scheme.shape[1:]), scheme.dtype, answer_field)
        if target is not None:
            # Gather the rows straight into the answer's bytes: no copy of the payload.
            answer, rows = target
            self._server.pull_into(name, ids, rows)
            if self._metrics is not None:
                self._metrics.tensor_io(name, "pull", rows.nbytes)
            return answer
        rows = self._server.pull(name, ids)
        if self._metrics is not None:
            self._metrics.tensor_io(name, "pull", rows.nbytes)
        answer = pull_wire.encode_pull_response(rows, scheme.dtype)
        return call_wire.call_answer("Pull", answer) if answer_field else answer

    def _push(self, request: pb.PushRequest, context) -> pb.PushResponse:
        scheme = self._server.tensor_scheme(request.name)
        ids = codec.read_ids(request.ids, "ids")
        rows, dtype = codec.read_tensor(request.rows, "rows")
        self._guard.row_bytes(len(ids), rows.shape[1:], rows.itemsize, f"tensor {request.name!r}")
        if dtype != scheme.dtype:
            raise ValueError(
                f"rows: dtype {dtype} does not match tensor {request.name!r} of dtype {scheme.dtype}"
            )
        version = self._server.push(request.name, ids, rows, codec.op_from_wire(request.op))
        if self._metrics is not None:
            self._metrics.tensor_io(request.name, "push", rows.nbytes)
        return pb.PushResponse(version=version)

    def _init(self, request: pb.InitRequest, context) -> pb.InitResponse:
        kind = _INIT_KINDS.get(request.init.kind)
        if kind is None:
            raise ValueError(f"init.kind: unsupported initializer enum value {request.init.kind}")
        init = InitSpec(
            kind=kind,
            a=_finite(request.init.a, "init.a"),
            b=_finite(request.init.b, "init.b"),
            seed=request.init.seed,
        )
        self._guard.shape(request.shape)
        created, scheme = self._server.init_tensor(
            request.name,
            tuple(request.shape),
            codec.dtype_from_wire(request.dtype),
            codec.policy_from_wire(request.policy, request.type),
            request.persistent,
            init,
            request.owner,
        )
        response = pb.InitResponse(created=created)
        codec.write_scheme(response.scheme, scheme)
        return response

    def _delete(self, request: pb.DeleteRequest, context) -> pb.DeleteResponse:
        deleted = self._server.delete_tensor(request.name)
        if deleted:
            if self._metrics is not None:
                self._metrics.forget_tensor(request.name)
        return pb.DeleteResponse(deleted=deleted)

    def _list(self, request: pb.ListRequest, context) -> pb.ListResponse:
        response = pb.ListResponse()
        for scheme in self._server.list_tensors():
            codec.write_scheme(response.tensors.add(), scheme)
        return response

    @staticmethod
    def _edges(
        src: np.ndarray, dst: np.ndarray, eid: np.ndarray | None, context, carried: list | None = None
    ) -> bytes:
        """The edges answer being built in place (``protos/edges_wire.py``), inside its call stream field
        when answered on a stream; the caller gathers the carried rows into its targets."""
        field = getattr(context, "answer_field", 0)
        answer = EdgesAnswer(src, dst, eid, carried or (), field)
        if field:
            context.framed = True
        return answer

    def _sample(self, request: pb.SampleRequest, context) -> bytes:
        seeds = codec.read_ids(request.seeds, "seeds")
        edge_dir = codec.edge_dir_from_wire(request.edge_dir)
        fanout = list(request.fanouts) if request.fanouts else int(request.fanout)
        exclude_eids = (
            codec.read_ids(request.exclude_eids, "exclude_eids") if request.HasField("exclude_eids") else None
        )
        with (
            self._guard.sample(seeds, fanout, edge_dir, request.replace, exclude_eids),
            ExitStack() as reservations,
        ):
            src, dst, eid = self._server.sample_neighbors(
                seeds,
                fanout,
                edge_dir,
                request.replace,
                list(request.probs) if request.probs else (request.prob or None),
                request.random_seed if request.has_random_seed else None,
                exclude_eids,
            )
            carried = []
            if request.with_rows or request.with_seed_rows:
                carried = rows_to_carry(
                    self._server,
                    self._guard,
                    self._server.book,
                    list(request.with_rows),
                    list(request.with_seed_rows),
                    seeds,
                    src if edge_dir == "in" else dst,
                    reservations,
                )
            answer = self._edges(src, dst, eid, context, carried)
            for rows, target in zip(carried, answer.targets, strict=True):
                self._server.pull_into(rows.name, rows.ids, target)
                if self._metrics is not None:
                    self._metrics.tensor_io(rows.name, "pull", target.nbytes)
            return answer.serialized()

    def _find_edges(self, request: pb.FindEdgesRequest, context) -> bytes:
        eids = codec.read_ids(request.eids, "eids")
        with self._guard.rows(len(eids), "eids"):
            src, dst = self._server.find_edges(eids)
            return self._edges(src, dst, eids, context).serialized()

    def _in_subgraph(self, request: pb.InSubgraphRequest, context) -> bytes:
        nodes = codec.read_ids(request.nodes, "nodes")
        with self._guard.in_subgraph(nodes):
            src, dst, eid = self._server.in_subgraph(nodes)
            return self._edges(src, dst, eid, context).serialized()

    def _degrees(self, request: pb.DegreesRequest, context) -> pb.DegreesResponse:
        nids = codec.read_ids(request.nids, "nids")
        with self._guard.rows(len(nids), "nids"):
            degrees = self._server.degrees(
                nids, codec.edge_dir_from_wire(request.edge_dir), request.etype if request.has_etype else None
            )
            response = pb.DegreesResponse()
            codec.write_ids(response.degrees, degrees)
        return response

    def _push_grad(self, request: pb.PushGradRequest, context) -> pb.PushGradResponse:
        ids = codec.read_ids(request.ids, "ids")
        grads, _ = codec.read_tensor(request.grads, "grads", dtype="float32", ndim=2)
        self._guard.row_bytes(len(ids), grads.shape[1:], grads.itemsize, f"tensor {request.name!r}")
        opt = request.optimizer
        config = OptimizerConfig(kind=opt.kind, lr=opt.lr, eps=opt.eps, beta1=opt.beta1, beta2=opt.beta2)
        version = self._server.push_grad(request.name, ids, grads, config)
        if self._metrics is not None:
            self._metrics.tensor_io(request.name, "push_grad", grads.nbytes)
        return pb.PushGradResponse(version=version)

    def _barrier(self, request: pb.BarrierRequest, context) -> pb.BarrierResponse:
        self._guard.barrier_timeout(request.timeout_s)  # as sent, before anything bounds it
        return answer_barrier(self._server, request, context)

    def _checkpoint(self, request: pb.CheckpointRequest, context) -> pb.CheckpointResponse:
        names = list(request.names) or None
        checkpoints = NamedCheckpoints(self._server.checkpoint_root, self._server)
        if request.phase == pb.COMMIT:
            checkpoints.commit(request.path, request.save_id, names or [])
            return pb.CheckpointResponse()
        if request.phase == pb.ABORT:
            checkpoints.abort(request.path, request.save_id)
            return pb.CheckpointResponse()
        files, rows = checkpoints.checkpoint(request.path, names, save_id=request.save_id or None)
        response = pb.CheckpointResponse(rows=rows)
        response.files[:] = files
        return response

    def _restore(self, request: pb.RestoreRequest, context) -> pb.RestoreResponse:
        checkpoints = NamedCheckpoints(self._server.checkpoint_root, self._server)
        names, rows = checkpoints.restore(request.path, list(request.names) or None)
        response = pb.RestoreResponse(rows=rows)
        response.names[:] = names
        return response

    def _shutdown(self, request: pb.ShutdownRequest, context) -> pb.ShutdownResponse:
        if self._on_shutdown is not None:
            # Stop from another thread: the answer must leave before the server stops accepting.
            context.add_callback(self._on_shutdown)
        return pb.ShutdownResponse()
