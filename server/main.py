"""Run one partition server process: load the partition, serve gRPC until SIGTERM or Shutdown.

``graphstore server --part-config G.json --part-id K --port P`` calls :func:`serve`. The process

1. raises glibc's malloc thresholds (:mod:`graphstore.malloc`),
2. loads its partition with memory-mapped arrays and validates it (:mod:`graphstore.partition.validate`:
   one line naming a bad file, no traceback; optionally restores a checkpoint: a given folder,
   or the newest periodic checkpoint of this partition with ``restore_latest``),
3. starts the ``graphstore.PartitionService`` and ``grpc.health.v1.Health`` services (TLS and the
   shared-token check when configured, :mod:`graphstore.auth`), the Prometheus metrics
   endpoint and the periodic checkpointer when asked, reports SERVING, and prints one startup line
   with its address, partition and load time,
4. on SIGTERM / SIGINT or a Shutdown call: reports NOT_SERVING, stops accepting new calls, lets the
   calls in flight finish (bounded by ``grace_s``), writes a last periodic checkpoint and/or the
   exit checkpoint when configured, and returns 0 (1 when a last checkpoint failed: the log line
   ``event=final_checkpoint_failed`` says what was not saved).

Mutating requests go through the write path (:mod:`~graphstore.server.durability.durable_state`): replays of a
request ID get the first answer, and with a checkpoint folder the answers wait for durability
(``durability``: ``checkpoint`` or ``wal``, see ``docs/server.md``).

Events (start, restore, stop) are logged as one ``event=NAME key=value ...`` line each.
"""

from __future__ import annotations

import ipaddress
import logging
import signal
import threading
import time
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from graphstore.auth import TokenAuthInterceptor, server_credentials
from graphstore.auth_limiter import AuthFailureLimiter
from graphstore.config import format_address
from graphstore.malloc import raise_malloc_thresholds
from graphstore.protos.service import SERVICE_NAME
from graphstore.server.durability.durable_state import DurableState
from graphstore.server.durability.periodic_checkpoint import PeriodicCheckpointer
from graphstore.server.durability.periodic_restore import restore_latest
from graphstore.server.metrics import ServerMetrics, log_event
from graphstore.server.partition_server import PartitionServer
from graphstore.server.server_config import ServerConfig
from graphstore.server.servicer import PartitionServicer

logger = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (not resolved otherwise)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def grpc_server_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """Channel arguments of a partition server: message limits, one owner per port, keepalive.

    Keepalive pings (every 60 s, 20 s to answer) close connections of clients that vanished without
    closing them (a host that died, a cut network), so their resources do not pile up; clients may
    ping every 5 s while calls are in flight (how they notice a cut link, see RemotePartition).
    """
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.so_reuseport", 0),  # two servers must never share a port
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
        ("grpc.http2.max_ping_strikes", 0),
    ]


class RunningServer:
    """A started partition server inside this process (what :func:`serve` runs; tests may use it).

    Attributes:
        partition: the :class:`PartitionServer` answering the calls.
        address: ``host:port`` it listens on.
        load_time_s: seconds spent loading the partition.
    """

    def __init__(self, config: ServerConfig) -> None:
        from graphstore.partition.validate import load_validated_partition

        config.validate()
        self.config = config
        self._stop_requested = threading.Event()
        self._stop_signalled = False
        started = time.monotonic()
        data = load_validated_partition(config.part_config, config.part_id)
        self.partition = PartitionServer(
            data,
            writable_features=config.writable_features,
            read_only_view=config.read_replica,
            limits=config.limits,
            checkpoint_root=config.checkpoint_root,
            barrier_holders=max(1, config.num_threads // 8),
        )
        self.restored_from: str | None = None
        restored_checkpoint = None
        if config.restore_from:
            names, rows = self.partition.restore(config.restore_from)
            self.restored_from = config.restore_from
            log_event(
                logger,
                "restored",
                part_id=config.part_id,
                path=config.restore_from,
                tensors=len(names),
                rows=rows,
            )
        policy = config.checkpoint_policy()
        if config.restore_latest and policy is not None:
            restored = restore_latest(self.partition, policy.root)
            if restored is None:
                log_event(
                    logger,
                    "restore_skipped",
                    part_id=config.part_id,
                    reason="no_checkpoint",
                    root=policy.root,
                )
            else:
                path, names, rows = restored
                self.restored_from = str(path)
                restored_checkpoint = path
                log_event(
                    logger, "restored", part_id=config.part_id, path=path, tensors=len(names), rows=rows
                )
        self.metrics = (
            ServerMetrics(config.part_id, config.read_replica) if config.metrics_port is not None else None
        )
        self.checkpointer = (
            PeriodicCheckpointer(self.partition, policy, self.metrics) if policy is not None else None
        )
        self.durable = DurableState(self.checkpointer, config.durability, config.fsync, restored_checkpoint)
        interceptors = []
        if config.token:
            on_denied = self.metrics.denied if self.metrics is not None else None
            limiter = AuthFailureLimiter(config.limits.auth_failure_burst, config.limits.auth_cooldown_s)
            interceptors.append(
                TokenAuthInterceptor(config.token, on_denied, limiter, allow_short=config.allow_short_token)
            )
        self._grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=config.num_threads, thread_name_prefix="graphstore-rpc"),
            options=grpc_server_options(config.max_message_bytes),
            interceptors=interceptors,
        )
        self._servicer = PartitionServicer(
            self.partition,
            on_shutdown=self.request_stop,
            metrics=self.metrics,
            write_path=self.durable.write_path,
            limits=config.limits,
            max_call_streams=config.num_threads // 4,
        )
        self.durable.replay(self._servicer.apply_logged)
        self.load_time_s = time.monotonic() - started
        self._grpc.add_generic_rpc_handlers((self._servicer.generic_handler(),))
        self._health = health.HealthServicer(
            experimental_non_blocking=True,
            experimental_thread_pool=futures.ThreadPoolExecutor(max_workers=1),
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._grpc)
        bind = format_address(config.host, config.port)
        try:
            if config.tls_cert:
                credentials = server_credentials(config.tls_cert, config.tls_key, config.tls_ca)
                port = self._grpc.add_secure_port(bind, credentials)
            else:
                port = self._grpc.add_insecure_port(bind)
        except RuntimeError as exc:
            raise OSError(f"port: cannot listen on {bind}: {exc}") from None
        if port == 0:
            raise OSError(f"port: cannot listen on {bind}")
        self.address = format_address(config.host, port)
        self.partition.address = self.address
        self.metrics_port: int | None = None
        if self.metrics is not None:
            try:
                self.metrics_port = self.metrics.serve(
                    config.metrics_port,
                    config.metrics_host.strip("[]"),
                    config.tls_cert,
                    config.tls_key,
                    config.token,
                )
            except OSError as exc:
                self._grpc.stop(0)
                where = format_address(config.metrics_host, config.metrics_port)
                raise OSError(f"metrics_port: cannot listen on {where}: {exc}") from None
        if not is_loopback(config.host) and not (config.token and config.tls_cert):
            log_event(
                logger,
                "insecure_bind",
                logging.WARNING,
                address=self.address,
                token=bool(config.token),
                tls=bool(config.tls_cert),
                hint="other hosts can reach this address: set token and tls in the cluster config",
            )
        self._grpc.start()
        if self.checkpointer is not None:
            self.checkpointer.start()
        for service in ("", SERVICE_NAME):
            self._health.set(service, health_pb2.HealthCheckResponse.SERVING)

    def request_stop(self) -> None:
        """Ask :meth:`wait` to return (from any thread; a signal handler calls :meth:`signal_stop`)."""
        self._stop_requested.set()

    def signal_stop(self) -> None:
        """Ask :meth:`wait` to return, from a signal handler: only a flag is set. ``Event.set()`` there
        could deadlock: the handler runs in the main thread, possibly while that thread holds the
        event's lock inside :meth:`wait`. A waiting :meth:`wait` sees the flag when its timeout ends."""
        self._stop_signalled = True

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop is requested (or, when a timeout is given, signalled); True if it was."""
        if self._stop_signalled:
            return True
        return self._stop_requested.wait(timeout) or self._stop_signalled

    def stop(self) -> bool:
        """Report NOT_SERVING, stop accepting, finish calls in flight (bounded), checkpoint if asked.

        Returns:
            False when a last checkpoint failed (logged as ``final_checkpoint_failed`` with what was not
            saved), else True.
        """
        self._health.enter_graceful_shutdown()
        stopped = self._grpc.stop(self.config.grace_s)
        # New calls are refused from here on, so no barrier can fill up any more: release its waiters.
        self.partition.close()
        # Once the calls in flight are answered, cancel what is left (health Watch streams) at once.
        self._servicer.wait_idle(self.config.grace_s)
        self._grpc.stop(0)
        stopped.wait(self.config.grace_s + 1.0)
        saved = True
        if self.checkpointer is not None:
            # Every call is answered: the last checkpoint holds every update a client was told about.
            try:
                self.checkpointer.stop(final_checkpoint=True)
            except Exception as exc:  # noqa: BLE001 - reported, and the exit code says it
                saved = False
                self._log_unsaved(str(self.checkpointer.folder), exc, self.checkpointer.unsaved_updates)
        self.durable.close()
        if self.config.checkpoint_on_exit:
            try:
                files, rows = self.partition.checkpoint(self.config.checkpoint_on_exit)
            except Exception as exc:  # noqa: BLE001 - reported, and the exit code says it
                saved = False
                self._log_unsaved(self.config.checkpoint_on_exit, exc, None)
            else:
                log_event(
                    logger,
                    "checkpointed_on_exit",
                    part_id=self.config.part_id,
                    path=self.config.checkpoint_on_exit,
                    rows=rows,
                )
        if self.metrics is not None:
            self.metrics.close()
        return saved

    def _log_unsaved(self, path: str, error: Exception, unsaved_updates: int | None) -> None:
        tensors = [s.name for s in self.partition.list_tensors() if s.writable]
        log_event(
            logger,
            "final_checkpoint_failed",
            logging.ERROR,
            part_id=self.config.part_id,
            path=path,
            error=f"{type(error).__name__}: {error}",
            unsaved_updates="all" if unsaved_updates is None else unsaved_updates,
            unsaved_tensors=",".join(tensors) or "none",
            write_log_kept=self.config.durability == "wal" and path != self.config.checkpoint_on_exit,
        )


def serve(config: ServerConfig) -> int:
    """Run a partition server until SIGTERM, SIGINT or a Shutdown call.

    Prints one line to stdout once serving, e.g.
    ``graphstore server: serving partition 0 of cora at 127.0.0.1:50051 (loaded in 0.12 s)``.

    Returns:
        0 after a clean shutdown; 1 when a last checkpoint failed (what was not saved is logged).

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
            previous[sig] = signal.signal(sig, lambda signum, frame: running.signal_stop())
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
    try:
        graph_name = running.partition.partition.graph_name
        print(
            f"graphstore server: serving partition {config.part_id} of {graph_name} at {running.address} "
            f"(loaded in {running.load_time_s:.2f} s)",
            flush=True,
        )
        log_event(
            logger,
            "server_started",
            part_id=config.part_id,
            graph=graph_name,
            role="read_replica" if config.read_replica else "owner",
            address=running.address,
            threads=config.num_threads,
            tls=bool(config.tls_cert),
            mutual_tls=bool(config.tls_ca),
            token=bool(config.token),
            metrics_port=running.metrics_port if running.metrics_port is not None else "off",
            checkpoint_dir=config.checkpoint_dir or "off",
            restored_from=running.restored_from or "none",
            load_s=running.load_time_s,
        )
        while not running.wait(0.5):  # short waits keep the main thread responsive to signals
            pass
        log_event(logger, "server_stopping", part_id=config.part_id)
        saved = running.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log_event(logger, "server_stopped", part_id=config.part_id, saved=saved)
    return 0 if saved else 1
