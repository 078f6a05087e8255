"""The gRPC ceiling of a small call: a bare grpcio unary call with the call's request and answer sizes.

A server that does nothing but answer (grpcio's generic handler, raw bytes, no protobuf, each answer
built once per size and cached) is called with a request of ``request_bytes`` bytes whose first 8 bytes
say how long the answer must be (:func:`ceiling_request`, :func:`answer_length`), from a number of client
threads, with graphstore's own server and channel options and server thread count. What one process
of Python grpcio can do with such calls on this machine is the ceiling the project compares its small
calls with (issue 37: each at >= 0.8x its ceiling, ``report.py``):

- a remote pull of ``rows`` rows: ``rows`` int64 IDs up (8 bytes each), ``rows`` feature rows down
  (:func:`pull_ceiling_call`);
- the 1-hop sample: the mean request and answer bytes of graphstore's own remote ``SampleNeighbors``
  calls in the same turn (``graphstore.client.call_counts()`` around the workload,
  :func:`one_hop_call_sizes`).

Runs in the project's venv, from graphstore's side of the client section (``worker.py``), in the same
turn and under the same core placement as the calls it bounds; the server is a child process of the
worker (``python grpc_ceiling.py --port P``), ended with it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from processes import Children, free_ports, wait_for_log_line

from graphstore.rpc import RpcPolicy
from graphstore.server.main import grpc_server_options
from graphstore.server.server_config import ServerConfig

METHOD = "/graphstore.bench.Ceiling/Call"
ID_BYTES = 8
# The request's first bytes: the answer's length, a little-endian unsigned 64-bit integer.
_HEADER = struct.Struct("<Q")
HEADER_BYTES = _HEADER.size
READY = "ceiling server ready"


def ceiling_request(request_bytes: int, answer_bytes: int) -> bytes:
    """A ceiling call's request: ``request_bytes`` bytes, the first 8 saying ``answer_bytes``.

    Raises:
        ValueError: ``request_bytes`` under 8 (no room for the answer's length) or ``answer_bytes`` < 0.
    """
    if request_bytes < HEADER_BYTES:
        raise ValueError(f"request_bytes must be >= {HEADER_BYTES}, got {request_bytes}")
    if answer_bytes < 0:
        raise ValueError(f"answer_bytes must be >= 0, got {answer_bytes}")
    return _HEADER.pack(answer_bytes) + bytes(request_bytes - HEADER_BYTES)


def answer_length(request: bytes) -> int:
    """The answer length a ceiling request asks for (its first 8 bytes).

    Raises:
        ValueError: a request shorter than 8 bytes.
    """
    if len(request) < HEADER_BYTES:
        raise ValueError(f"a ceiling request holds at least {HEADER_BYTES} bytes, got {len(request)}")
    return _HEADER.unpack_from(request)[0]


@dataclass(frozen=True)
class CeilingCall:
    """One ceiling measurement: ``calls`` calls of these sizes from ``threads`` threads.

    Attributes:
        key: the results entry (``ceiling/<rows>/<threads>t``, ``ceiling/sample/1hop``).
    """

    key: str
    request_bytes: int
    answer_bytes: int
    threads: int
    calls: int


def pull_ceiling_call(rows: int, threads: int, calls: int, row_bytes: int) -> CeilingCall:
    """The ceiling call of a remote pull of ``rows`` rows of ``row_bytes`` bytes from ``threads`` threads."""
    return CeilingCall(f"ceiling/{rows}/{threads}t", rows * ID_BYTES, rows * row_bytes, threads, calls)


def one_hop_call_sizes(wire: dict, samples: int, method: str = "SampleNeighbors") -> dict | None:
    """The mean sizes of the remote ``method`` calls of ``samples`` 1-hop samples, from call counts.

    Args:
        wire: ``{method: {"calls", "request_bytes", "answer_bytes"}}``, the difference of
            ``graphstore.client.call_counts()`` around the samples.
        samples: the samples made between the two snapshots.

    Returns:
        ``{"request_bytes", "answer_bytes", "calls_per_sample"}`` (mean bytes per call, rounded), or
        None where no such call was made (every seed co-located).

    Raises:
        ValueError: ``samples`` not positive.
    """
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    counts = wire.get(method) or {}
    calls = counts.get("calls", 0)
    if calls < 1:
        return None
    return {
        "request_bytes": max(round(counts["request_bytes"] / calls), HEADER_BYTES),
        "answer_bytes": round(counts["answer_bytes"] / calls),
        "calls_per_sample": calls / samples,
    }


class _Answers(grpc.GenericRpcHandler):
    """Answers each request with as many zero bytes as its first 8 bytes say (built once per length)."""

    def __init__(self) -> None:
        self.answers: dict[int, bytes] = {}
        self.lock = threading.Lock()

    def _answer(self, request: bytes, _context) -> bytes:
        length = answer_length(request)
        answer = self.answers.get(length)
        if answer is None:
            with self.lock:
                answer = self.answers.setdefault(length, bytes(length))
        return answer

    def service(self, handler_call_details):
        if handler_call_details.method != METHOD:
            return None
        return grpc.unary_unary_rpc_method_handler(self._answer)  # raw bytes both ways


def serve(port: int) -> None:
    """Serve the ceiling calls on loopback ``port`` until killed."""
    config = ServerConfig(part_config="unused", part_id=0)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=config.num_threads),
        options=grpc_server_options(config.max_message_bytes),
    )
    server.add_generic_rpc_handlers((_Answers(),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(f"{READY} (pid {os.getpid()})", flush=True)
    server.wait_for_termination()


def measure(channel: grpc.Channel, call: CeilingCall, warmup: int = 2) -> dict:
    """``call.calls`` ceiling calls from ``call.threads`` threads, after ``warmup`` untimed ones.

    Returns:
        ``{"calls_per_s"`` (all threads together), ``"call_ms"`` (the median call's time), ``"calls"}``.

    Raises:
        RuntimeError: an answer of the wrong length.
    """
    stub = channel.unary_unary(METHOD)
    request = ceiling_request(call.request_bytes, call.answer_bytes)
    for _ in range(warmup):
        stub(request)

    def shard(count: int) -> list[float]:
        times = []
        for _ in range(count):
            start = time.perf_counter()
            answer = stub(request)
            times.append(time.perf_counter() - start)
            if len(answer) != call.answer_bytes:
                raise RuntimeError(f"ceiling answer of {len(answer)} bytes, not {call.answer_bytes}")
        return times

    threads = call.threads
    start = time.perf_counter()
    if threads == 1:
        times = shard(call.calls)
    else:
        counts = [call.calls // threads + (k < call.calls % threads) for k in range(threads)]
        with ThreadPoolExecutor(threads) as pool:
            times = [t for shard_times in pool.map(shard, counts) for t in shard_times]
    seconds = time.perf_counter() - start
    median_ms = statistics.median(times) * 1e3
    return {"calls_per_s": call.calls / seconds, "call_ms": median_ms, "calls": call.calls}


@contextmanager
def ceiling_server(log_dir: Path) -> Iterator[grpc.Channel]:
    """Start the ceiling server (a child process, ended on leaving); yields a channel to it.

    Raises:
        RuntimeError: the server exited before it was ready (its log in the message).
        TimeoutError: not ready within 60 s.
    """
    port = free_ports(1)[0]
    log_path = Path(log_dir) / "grpc-ceiling-server.log"
    command = [sys.executable, str(Path(__file__).resolve()), "--port", str(port)]
    with Children() as children:
        server = children.start(command, log_path=log_path)
        wait_for_log_line(server, log_path, READY, 60.0)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=_channel_options())
        try:
            yield channel
        finally:
            channel.close()


def ceilings(calls: list[CeilingCall], log_dir: Path, repeats: int = 3, warmup: int = 2) -> dict:
    """Each ceiling call measured ``repeats`` times; the medians of the measurements.

    Returns:
        ``{call.key: {"calls_per_s", "call_ms", "request_bytes", "answer_bytes", "threads", "calls",
        "repeats"}}``.

    Raises:
        RuntimeError, TimeoutError: as :func:`ceiling_server`.
    """
    results = {}
    with ceiling_server(log_dir) as channel:
        for call in calls:
            runs = [measure(channel, call, warmup) for _ in range(repeats)]
            results[call.key] = {
                "calls_per_s": statistics.median(run["calls_per_s"] for run in runs),
                "call_ms": statistics.median(run["call_ms"] for run in runs),
                "request_bytes": call.request_bytes,
                "answer_bytes": call.answer_bytes,
                "threads": call.threads,
                "calls": call.calls,
                "repeats": repeats,
            }
    return results


def _channel_options() -> list[tuple[str, int]]:
    from graphstore.client.transport.channel import channel_options

    return channel_options(RpcPolicy())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="The bare gRPC server of the ceiling calls.")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    serve(args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
