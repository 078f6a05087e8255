"""The gRPC ceiling of a pull: a bare grpcio unary call with a pull's request and answer sizes.

A remote pull of ``rows`` rows sends ``rows`` int64 IDs (8 bytes each) and gets ``rows`` feature
rows back. Here a server that does nothing but answer with that many bytes (grpcio's generic handler,
raw bytes, no protobuf, the answers built once) is called with the same sizes, from the same number
of client threads, with graphstore's own server and channel options and server thread count. What
one process of Python grpcio can do with such calls on this machine bounds what any Python gRPC
store can: where this ceiling is itself below the target ratio over DGL, the target for that row
is a share of the ceiling (``report.py``).

Runs in the project's venv, from graphstore's side of the client section (``worker.py``), in the
same turn and under the same core placement as the pulls; the server is a child process of the
worker (``python grpc_ceiling.py --port P --row-bytes B``), ended with it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import grpc
from processes import Children, free_ports, wait_for_log_line

from graphstore.rpc import RpcPolicy
from graphstore.server.main import grpc_server_options
from graphstore.server.server_config import ServerConfig

METHOD = "/graphstore.bench.Ceiling/Call"
ID_BYTES = 8
READY = "ceiling server ready"


class _Answers(grpc.GenericRpcHandler):
    """Answers a request of ``n * 8`` bytes with ``n * row_bytes`` bytes (built once per size)."""

    def __init__(self, row_bytes: int) -> None:
        self.row_bytes = row_bytes
        self.answers: dict[int, bytes] = {}
        self.lock = threading.Lock()

    def _answer(self, request: bytes, _context) -> bytes:
        rows = len(request) // ID_BYTES
        answer = self.answers.get(rows)
        if answer is None:
            with self.lock:
                answer = self.answers.setdefault(rows, bytes(rows * self.row_bytes))
        return answer

    def service(self, handler_call_details):
        if handler_call_details.method != METHOD:
            return None
        return grpc.unary_unary_rpc_method_handler(self._answer)  # raw bytes both ways


def serve(port: int, row_bytes: int) -> None:
    """Serve the ceiling calls on loopback ``port`` until killed."""
    config = ServerConfig(part_config="unused", part_id=0)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=config.num_threads),
        options=grpc_server_options(config.max_message_bytes),
    )
    server.add_generic_rpc_handlers((_Answers(row_bytes),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(f"{READY} (pid {os.getpid()})", flush=True)
    server.wait_for_termination()


def measure(
    channel: grpc.Channel, rows: int, threads: int, calls: int, warmup: int = 2, row_bytes: int = 400
) -> dict:
    """Rows/s of ``calls`` ceiling calls of ``rows`` rows from ``threads`` threads (after ``warmup``)."""
    call = channel.unary_unary(METHOD)
    request = bytes(rows * ID_BYTES)
    for _ in range(warmup):
        call(request)

    def shard(count: int) -> None:
        for _ in range(count):
            if len(call(request)) != rows * row_bytes:
                raise RuntimeError("the ceiling server answered a wrong size")

    start = time.perf_counter()
    if threads == 1:
        shard(calls)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(shard, [calls // threads + (k < calls % threads) for k in range(threads)]))
    seconds = time.perf_counter() - start
    return {"rows_per_s": calls * rows / seconds, "calls_per_s": calls / seconds, "calls": calls}


@contextmanager
def ceiling_server(row_bytes: int, log_dir: Path) -> Iterator[grpc.Channel]:
    """Start the ceiling server (a child process, ended on leaving); yields a channel to it.

    Raises:
        RuntimeError: the server exited before it was ready (its log in the message).
        TimeoutError: not ready within 60 s.
    """
    port = free_ports(1)[0]
    log_path = Path(log_dir) / "grpc-ceiling-server.log"
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--port",
        str(port),
        "--row-bytes",
        str(row_bytes),
    ]
    with Children() as children:
        server = children.start(command, log_path=log_path)
        wait_for_log_line(server, log_path, READY, 60.0)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=_channel_options())
        try:
            yield channel
        finally:
            channel.close()


def ceilings(
    shapes: list[tuple[int, int, int]], row_bytes: int, log_dir: Path, repeats: int = 3, warmup: int = 2
) -> dict:
    """The ceiling of each ``(rows, threads, calls)`` shape: the median of ``repeats`` measurements.

    Returns:
        ``{"ceiling/<rows>/<threads>t": {"rows_per_s", "calls_per_s", "calls", "repeats"}}``.

    Raises:
        RuntimeError, TimeoutError: as :func:`ceiling_server`.
    """
    results = {}
    with ceiling_server(row_bytes, log_dir) as channel:
        for rows, threads, calls in shapes:
            runs = [measure(channel, rows, threads, calls, warmup, row_bytes) for _ in range(repeats)]
            results[f"ceiling/{rows}/{threads}t"] = {
                "rows_per_s": statistics.median(run["rows_per_s"] for run in runs),
                "calls_per_s": statistics.median(run["calls_per_s"] for run in runs),
                "calls": runs[0]["calls"],
                "repeats": repeats,
            }
    return results


def _channel_options() -> list[tuple[str, int]]:
    from graphstore.client.transport.channel import channel_options

    return channel_options(RpcPolicy())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="The bare gRPC server of the ceiling calls.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--row-bytes", type=int, required=True, help="answer bytes per requested row")
    args = parser.parse_args(argv)
    serve(args.port, args.row_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
