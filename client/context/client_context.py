"""``ClientContext``: the process's one connection to the cluster: partitions, partition book, call
policy, thread pool.

Every client object (``DistGraph``, ``DistTensor``, ``DistEmbedding``, samplers, loaders, optimizers)
talks to the partitions through the :class:`ClientContext` that
:func:`~graphstore.client.context.get_context` returns. It exists in one of two modes:

- distributed (``initialize()``): one :class:`~graphstore.client.transport.RemotePartition` per server;
  when a server runs on this host and its partition files are readable here (``local_read``), an
  in-process read-only view of that partition serves its read-only data without RPC;
- standalone (``DistGraph(name, part_config=...)`` with no ``initialize()``): every partition is loaded
  in-process behind the same :class:`~graphstore.types.PartitionAPI`, no network.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from graphstore.client.constants import ANONYMOUS_PREFIX
from graphstore.client.context.connect import close_quietly, connect_servers
from graphstore.client.context.trainer_rank import trainer_rank_and_world
from graphstore.client.rank_split import rank_partitions
from graphstore.client.routing import split_by_partition
from graphstore.client.transport import open_in_process
from graphstore.client.transport.call_counts import MethodCounts, merged
from graphstore.client.transport.request_ids import new_client_id
from graphstore.config import ClusterConfig
from graphstore.errors import ServerError
from graphstore.partition import load_partition, load_partition_book
from graphstore.priority import DEFAULT_BACKGROUND_NICE, check_nice, lower_thread_priority
from graphstore.rpc import RpcPolicy
from graphstore.types import NODE, PartitionAPI, TensorScheme

logger = logging.getLogger(__name__)

T = TypeVar("T")

NOT_INITIALIZED = (
    "graphstore client is not connected: call graphstore.client.initialize() first "
    "(or open DistGraph(name, part_config=...) for standalone mode)"
)


class ClientContext:
    """One connection to a partitioned graph (see the module docstring).

    Build it with :meth:`connect` (distributed) or :meth:`open_standalone`; user code gets it from
    :func:`get_context`.

    Attributes:
        client_id: unique per process (host, pid and a random suffix); the owner of tensors it creates
            and the client part of its request IDs.
        graph_name: the graph's name.
        book: the :class:`~graphstore.partition.RangePartitionBook`.
        num_parts: number of partitions.
        policy: deadlines / retries / chunking of calls.
        standalone: True when every partition is in-process.
        local_part_id: the co-located partition read in-process, or None.
        part_config: path of the partition config on this host, when known.
        config: the :class:`ClusterConfig` of a distributed context (None when standalone).
        background_nice: nice increment of the RPC pool's and the loaders' threads.
    """

    def __init__(
        self,
        *,
        graph_name: str,
        book,
        partitions: list[PartitionAPI],
        policy: RpcPolicy,
        standalone: bool,
        local_readers: dict[int, PartitionAPI],
        local_part_id: int | None,
        local_partition_data=None,
        part_config: str | None = None,
        config: ClusterConfig | None = None,
        background_nice: int = DEFAULT_BACKGROUND_NICE,
        client_id: str | None = None,
    ):
        self.client_id = client_id or new_client_id()
        self.graph_name = graph_name
        self.book = book
        self.num_parts = len(partitions)
        self.policy = policy
        self.standalone = standalone
        self.local_part_id = local_part_id
        self.local_partition_data = local_partition_data
        self.part_config = part_config
        self.config = config
        self._partitions = list(partitions)
        self._local_readers = dict(local_readers)
        self._bounds_cache: dict[str, np.ndarray] = {}
        self._schemes: dict[str, TensorScheme] = {}
        self._schemes_lock = threading.Lock()
        self._anonymous_counter = itertools.count()
        self._owned: dict[str, Callable[[], None]] = {}
        self._owned_lock = threading.Lock()
        self._shared: dict = {}
        self._shared_lock = threading.Lock()
        self._in_worker = threading.local()
        self.background_nice = check_nice(background_nice)
        self._pool = ThreadPoolExecutor(
            max_workers=max(4, 2 * self.num_parts),
            thread_name_prefix="graphstore-client",
            initializer=functools.partial(lower_thread_priority, self.background_nice),
        )
        self.closed = False

    # ----- construction ------------------------------------------------------------------------

    @classmethod
    def connect(cls, config: ClusterConfig) -> ClientContext:
        """Connect to every server of ``config``: wait (bounded) until each is SERVING, fetch and
        cross-check metadata, build the partition book, and open the co-located partition's files
        (:func:`~graphstore.client.context.connect.connect_servers`).

        Raises:
            graphstore.errors.ServerUnavailableError: a server that does not become ready in
                ``config.rpc.connect_timeout_s`` (the message names its address).
            graphstore.errors.ConfigError: servers that disagree with the config or each other.
        """
        client_id = new_client_id()
        cluster = connect_servers(config, client_id)
        ctx = cls(
            graph_name=cluster.metadata.graph_name,
            book=cluster.book,
            partitions=cluster.partitions,
            policy=config.rpc,
            standalone=False,
            local_readers=cluster.local_readers,
            local_part_id=cluster.local_part_id,
            local_partition_data=cluster.local_partition_data,
            part_config=cluster.part_config,
            config=config,
            background_nice=config.background_nice,
            client_id=client_id,
        )
        for scheme in cluster.metadata.tensors:
            ctx._schemes[scheme.name] = scheme
        logger.info(
            "connected to %d servers of graph %r (co-located partition: %s)",
            len(cluster.partitions),
            ctx.graph_name,
            cluster.local_part_id,
        )
        return ctx

    @classmethod
    def open_standalone(cls, part_config: str, policy: RpcPolicy | None = None) -> ClientContext:
        """Load every partition of ``part_config`` in-process (no servers, no network).

        Raises:
            FileNotFoundError: a missing partition config or partition folder.
            graphstore.errors.ConfigError: an invalid partition config.
        """
        part_config = os.path.abspath(os.fspath(part_config))
        book = load_partition_book(part_config)
        rank, world = trainer_rank_and_world()
        servers: list[PartitionAPI] = []
        datas = []
        for part_id in range(book.num_partitions()):
            data = load_partition(part_config, part_id)
            datas.append(data)
            servers.append(open_in_process(data))
        home = rank_partitions(rank, world, book.num_partitions())[0]
        book = book.for_partition(home)
        ctx = cls(
            graph_name=datas[0].graph_name,
            book=book,
            partitions=servers,
            policy=policy or RpcPolicy(),
            standalone=True,
            local_readers=dict(enumerate(servers)),
            local_part_id=home,
            local_partition_data=datas[home],
            part_config=part_config,
        )
        for scheme in servers[0].list_tensors():
            ctx._schemes[scheme.name] = scheme
        return ctx

    # ----- the contract ------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """This trainer's rank (read each time: torch.distributed may be initialized after connecting)."""
        return trainer_rank_and_world()[0]

    @property
    def world_size(self) -> int:
        """Size of the trainer group."""
        return trainer_rank_and_world()[1]

    def partition(self, part_id: int) -> PartitionAPI:
        """The partition ``part_id``: a RemotePartition (distributed) or the in-process PartitionServer.

        Raises:
            IndexError: for a partition index out of range.
            RuntimeError: after :meth:`close`.
        """
        self._check_open()
        if not 0 <= part_id < self.num_parts:
            raise IndexError(f"partition {part_id} out of range; the graph has {self.num_parts} partitions")
        return self._partitions[part_id]

    def local_reader(self, part_id: int) -> PartitionAPI | None:
        """An in-process reader of partition ``part_id``'s read-only data and structure, or None when the
        partition is not co-located (standalone: the in-process server of any partition)."""
        return self._local_readers.get(part_id)

    def tensor_scheme(self, name: str, refresh: bool = False) -> TensorScheme | None:
        """The scheme of tensor ``name`` (cached), or None when no server has it.

        Args:
            name: the tensor's name.
            refresh: ask the servers again even if the name is cached.
        """
        with self._schemes_lock:
            scheme = None if refresh else self._schemes.get(name)
        if scheme is not None:
            return scheme
        self.refresh_schemes()
        with self._schemes_lock:
            return self._schemes.get(name)

    def refresh_schemes(self) -> dict[str, TensorScheme]:
        """Fetch the tensor list from partition 0 and replace the cache; returns name -> scheme."""
        schemes = {s.name: s for s in self.partition(0).list_tensors()}
        with self._schemes_lock:
            self._schemes = schemes
        return dict(schemes)

    def remember_scheme(self, scheme: TensorScheme) -> None:
        """Cache ``scheme`` (after creating or attaching to a tensor)."""
        with self._schemes_lock:
            self._schemes[scheme.name] = scheme

    def forget_scheme(self, name: str) -> None:
        """Drop ``name`` from the cache (after deleting it)."""
        with self._schemes_lock:
            self._schemes.pop(name, None)

    def call_counts(self) -> dict[str, MethodCounts]:
        """Calls and bytes per method sent to every server so far (:func:`graphstore.client.call_counts`)."""
        return merged(p.call_counts() for p in self._partitions if hasattr(p, "call_counts"))

    def run_parallel(self, calls: list[Callable[[], T]]) -> list[T]:
        """Run ``calls`` concurrently on the shared pool; results in order; re-raise the first failure.

        A single call, or a call made from inside a pool worker, runs inline (no nested waiting on the
        same pool). Every call is waited for before an exception is re-raised, so nothing is left
        running in the background.
        """
        self._check_open()
        if len(calls) <= 1 or getattr(self._in_worker, "active", False):
            return [call() for call in calls]
        futures = [self._pool.submit(self._run_in_worker, call) for call in calls[1:]]
        results: list = [None] * len(calls)
        errors: list[BaseException | None] = [None] * len(calls)
        try:
            results[0] = calls[0]()
        except BaseException as exc:  # noqa: BLE001 - re-raised below in call order
            errors[0] = exc
        for index, future in enumerate(futures, start=1):
            try:
                results[index] = future.result()
            except BaseException as exc:  # noqa: BLE001
                errors[index] = exc
        for error in errors:
            if error is not None:
                raise error
        return results

    def _run_in_worker(self, call: Callable[[], T]) -> T:
        self._in_worker.active = True
        try:
            return call()
        finally:
            self._in_worker.active = False

    def route(self, ids: np.ndarray, policy: str = NODE) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Group global IDs by owning partition: ``[(part_id, positions, ids_of_part), ...]``.

        Raises:
            ValueError: a malformed policy. KeyError: an unknown type.
            IndexError: for an ID outside the ID space.
        """
        return split_by_partition(np.asarray(ids, dtype=np.int64), self.bounds(policy))

    def bounds(self, policy: str = NODE) -> np.ndarray:
        """The partition boundaries of a policy's ID space (``"node"``, ``"edge"``, ``"node:<ntype>"``,
        ``"edge:<src>:<etype>:<dst>"``; DGL's ``"node:_N"`` / ``"edge:_E"`` too).

        Raises:
            ValueError: a malformed policy. KeyError: an unknown type.
        """
        bounds = self._bounds_cache.get(policy)
        if bounds is None:
            bounds = self.book.policy_bounds(policy)
            self._bounds_cache[policy] = bounds
        return bounds

    def num_rows(self, policy: str) -> int:
        """Number of IDs in a policy's ID space (all nodes, all edges, or one type's)."""
        return int(self.bounds(policy)[-1])

    # ----- tensors owned by this client --------------------------------------------------------

    def anonymous_name(self) -> str:
        """A tensor name unique to this client."""
        return f"{ANONYMOUS_PREFIX}{self.client_id}.{next(self._anonymous_counter)}"

    def register_owned(self, name: str, release: Callable[[], None]) -> None:
        """Remember that this client created the non-persistent tensor ``name``; ``release`` deletes it."""
        with self._owned_lock:
            self._owned[name] = release

    def unregister_owned(self, name: str) -> None:
        """Forget ``name`` (it was released or deleted)."""
        with self._owned_lock:
            self._owned.pop(name, None)

    def delete_everywhere(self, name: str) -> bool:
        """Delete tensor ``name`` on every partition; returns whether any partition had it."""
        calls = [lambda p=p: self._delete_on(p, name) for p in range(self.num_parts)]
        deleted = any(self.run_parallel(calls))
        self.forget_scheme(name)
        return deleted

    def _delete_on(self, part_id: int, name: str) -> bool:
        try:
            return bool(self.partition(part_id).delete_tensor(name))
        except KeyError:
            return False

    # ----- objects shared by this client's users ----------------------------------------------

    def shared_object(self, key, factory: Callable[[], T]) -> T:
        """The object every user of this context shares under ``key`` (e.g. the co-located graph held
        on a GPU, which every loader on that GPU reads), made by ``factory()`` the first time.

        Args:
            key: a hashable key.
            factory: makes the object.
        """
        with self._shared_lock:
            if key not in self._shared:
                self._shared[key] = factory()
            return self._shared[key]

    # ----- lifetime ----------------------------------------------------------------------------

    def release_owned(self) -> None:
        """Delete every non-persistent tensor this client created and still holds (best effort)."""
        with self._owned_lock:
            releases = list(self._owned.values())
            self._owned.clear()
        for release in releases:
            try:
                release()
            except (ServerError, OSError, RuntimeError, KeyError, ValueError) as exc:
                logger.warning("could not delete a tensor while closing: %s", exc)

    def close(self) -> None:
        """Delete the non-persistent tensors this client created, then close every connection.

        Idempotent; failures to reach a server while cleaning up are logged, not raised.
        """
        if self.closed:
            return
        self.release_owned()
        self.closed = True
        with self._shared_lock:
            self._shared.clear()
        self._pool.shutdown(wait=True)
        if not self.standalone:
            for partition in self._partitions:
                close_quietly(partition)
        for reader in self._local_readers.values():
            close = getattr(reader, "close", None)
            if close is not None and not self.standalone:
                close_quietly(reader)
        self._local_readers.clear()

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(NOT_INITIALIZED)

    def __repr__(self) -> str:
        mode = "standalone" if self.standalone else "distributed"
        return (
            f"ClientContext({mode}, graph={self.graph_name!r}, num_parts={self.num_parts}, "
            f"local_part_id={self.local_part_id}, client_id={self.client_id!r})"
        )
