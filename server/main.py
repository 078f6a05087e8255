"""Run one partition server process: load the partition, serve gRPC until SIGTERM or Shutdown.

``graphstore server --part-config G.json --part-id K --port P`` calls :func:`serve`. The process

1. raises glibc's malloc thresholds (:mod:`graphstore.server.malloc`),
2. loads its partition with memory-mapped arrays (optionally restores a checkpoint),
3. starts the ``graphstore.PartitionService`` and ``grpc.health.v1.Health`` services, reports
   SERVING, and prints one startup line with its address, partition and load time,
4. on SIGTERM / SIGINT or a Shutdown call: reports NOT_SERVING, stops accepting new calls, lets the
   calls in flight finish (bounded by ``grace_s``), optionally writes a checkpoint, and returns 0.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from concurrent import futures
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from graphstore.server.malloc import raise_malloc_thresholds
from graphstore.server.partition_server import PartitionServer
from graphstore.server.servicer import SERVICE_NAME, PartitionServicer

logger = logging.getLogger(__name__)


@dataclass
class ServerConfig:
    """Settings of one partition server process.

    Attributes:
        part_config: path of the partition config ``NAME.json``.
        part_id: the partition this server holds.
        host: interface to bind (``0.0.0.0`` for every interface).
        port: TCP port; 0 picks a free one (printed in the startup line).
        writable_features: load the partition's features into memory and allow writes to them.
        max_message_bytes: gRPC send/receive limit (clients split requests below it).
        num_threads: worker threads answering calls; each waiting barrier participant holds one.
        grace_s: on shutdown, how long calls in flight may take to finish.
        token: shared-token authentication (not enforced yet; another issue adds it).
        tls_cert, tls_key: TLS certificate and key paths (not enforced yet).
        restore_from: a checkpoint folder to restore after loading, before serving.
        checkpoint_on_exit: a folder to checkpoint every run-time tensor to on a clean shutdown.
    """

    part_config: str
    part_id: int
    host: str = "127.0.0.1"
    port: int = 0
    writable_features: bool = False
    max_message_bytes: int = 256 * 1024 * 1024
    num_threads: int = 32
    grace_s: float = 8.0
    token: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    restore_from: str | None = None
    checkpoint_on_exit: str | None = None

    def validate(self) -> None:
        """Check value ranges.

        Raises:
            ValueError: naming the field and its value.
        """
        if self.part_id < 0:
            raise ValueError(f"part_id must be >= 0, got {self.part_id}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")
        if self.num_threads < 2:
            raise ValueError(f"num_threads must be >= 2, got {self.num_threads}")
        if self.max_message_bytes < 1024 * 1024:
            raise ValueError(f"max_message_bytes must be >= 1 MiB, got {self.max_message_bytes}")
        if not 0 <= self.grace_s <= 60:
            raise ValueError(f"grace_s must be in [0, 60], got {self.grace_s}")


def format_address(host: str, port: int) -> str:
    """``host:port``, with brackets around an IPv6 host."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


class RunningServer:
    """A started partition server inside this process (what :func:`serve` runs; tests may use it).

    Attributes:
        partition: the :class:`PartitionServer` answering the calls.
        address: ``host:port`` it listens on.
        load_time_s: seconds spent loading the partition.
    """

    def __init__(self, config: ServerConfig) -> None:
        from graphstore.partition import load_partition

        config.validate()
        self.config = config
        self._stop_requested = threading.Event()
        started = time.monotonic()
        data = load_partition(config.part_config, config.part_id)
        self.partition = PartitionServer(data, writable_features=config.writable_features)
        if config.restore_from:
            names, rows = self.partition.restore(config.restore_from)
            logger.info("restored %s (%d rows) from %s", names, rows, config.restore_from)
        self.load_time_s = time.monotonic() - started

        options = [
            ("grpc.max_send_message_length", config.max_message_bytes),
            ("grpc.max_receive_message_length", config.max_message_bytes),
            ("grpc.so_reuseport", 0),  # two servers must never share a port
        ]
        self._grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=config.num_threads, thread_name_prefix="graphstore-rpc"),
            options=options,
        )
        self._servicer = PartitionServicer(self.partition, on_shutdown=self.request_stop)
        self._grpc.add_generic_rpc_handlers((self._servicer.generic_handler(),))
        self._health = health.HealthServicer(
            experimental_non_blocking=True,
            experimental_thread_pool=futures.ThreadPoolExecutor(max_workers=1),
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._grpc)
        bind = format_address(config.host, config.port)
        try:
            port = self._grpc.add_insecure_port(bind)
        except RuntimeError as exc:
            raise OSError(f"port: cannot listen on {bind}: {exc}") from None
        if port == 0:
            raise OSError(f"port: cannot listen on {bind}")
        self.address = format_address(config.host, port)
        self.partition.address = self.address
        self._grpc.start()
        for service in ("", SERVICE_NAME):
            self._health.set(service, health_pb2.HealthCheckResponse.SERVING)

    def request_stop(self) -> None:
        """Ask :meth:`wait` to return (thread- and signal-safe)."""
        self._stop_requested.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop is requested; True if it was."""
        return self._stop_requested.wait(timeout)

    def stop(self) -> None:
        """Report NOT_SERVING, stop accepting, finish calls in flight (bounded), checkpoint if asked."""
        self._health.enter_graceful_shutdown()
        stopped = self._grpc.stop(self.config.grace_s)
        # New calls are refused from here on, so no barrier can fill up any more: release its waiters.
        self.partition.close()
        # Once the calls in flight are answered, cancel what is left (health Watch streams) at once.
        self._servicer.wait_idle(self.config.grace_s)
        self._grpc.stop(0)
        stopped.wait(self.config.grace_s + 1.0)
        if self.config.checkpoint_on_exit:
            files, rows = self.partition.checkpoint(self.config.checkpoint_on_exit)
            logger.info("checkpointed %d rows to %s on exit", rows, self.config.checkpoint_on_exit)


def serve(config: ServerConfig) -> int:
    """Run a partition server until SIGTERM, SIGINT or a Shutdown call.

    Prints one line to stdout once serving, e.g.
    ``graphstore server: serving partition 0 of cora at 127.0.0.1:50051 (loaded in 0.12 s)``.

    Returns:
        0 after a clean shutdown.

    Raises:
        FileNotFoundError, ValueError: a bad partition config or part id.
        OSError: the address cannot be bound.
    """
    raise_malloc_thresholds()
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    in_main_thread = threading.current_thread() is threading.main_thread()
    if in_main_thread:
        # Only the main thread may take the stop signals: a signal landing on one of gRPC's threads
        # interrupts its system calls and can break connections with calls in flight. Threads
        # started from here on (gRPC's, the RPC workers) inherit the blocked mask; a signal that
        # arrives while loading stays pending until the handlers below are in place.
        signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    try:
        running = RunningServer(config)
    except BaseException:
        if in_main_thread:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
        raise
    previous = {}
    if in_main_thread:
        for sig in stop_signals:
            previous[sig] = signal.signal(sig, lambda signum, frame: running.request_stop())
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
    try:
        graph_name = running.partition.partition.graph_name
        print(
            f"graphstore server: serving partition {config.part_id} of {graph_name} at {running.address} "
            f"(loaded in {running.load_time_s:.2f} s)",
            flush=True,
        )
        logger.info("partition %d ready, %d threads", config.part_id, config.num_threads)
        while not running.wait(0.5):  # short waits keep the main thread responsive to signals
            pass
        logger.info("shutting down partition %d", config.part_id)
        running.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    logger.info("partition %d stopped", config.part_id)
    return 0
