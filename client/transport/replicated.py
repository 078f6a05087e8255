"""``ReplicatedPartition``: one partition served by several servers, its owner and read replicas.

A partition listed several times in the cluster YAML has one owner (its first entry) and read replicas
(``graphstore server --read-replica``, see ``docs/reliability.md``). This transport implements
:class:`graphstore.types.PartitionAPI` over all of them:

- read-only calls (``sample_neighbors``, ``find_edges``, ``in_subgraph``, ``degrees``, and ``pull`` of a
  tensor the partition files hold read-only) go to the live server with the fewest calls in flight
  (least outstanding calls; ties rotate). Each server is reached through a channel that does not retry:
  a call that fails with UNAVAILABLE or DEADLINE_EXCEEDED marks that server down and moves to the next
  live one at once, without waiting on the failed one. A background probe asks the servers that are
  down for their health every ``probe_interval_s``; one that answers SERVING for the same partition
  rejoins. When every server of the partition is down, a read waits as a single server's call does
  (retries with backoff over every replica, bounded by the owner's ``max_call_time_s``) and then raises
  :class:`~graphstore.errors.ServerUnavailableError` naming all of them;
- everything else (writes, run-time tensors such as embeddings and their optimizer state, barriers,
  checkpoints, metadata, stats, health) goes to the owner, each by an explicit method (so the class
  is checked against :class:`~graphstore.types.PartitionAPI` like the other transports), through its
  ordinary retrying
  :class:`~graphstore.client.transport.remote.RemotePartition`: one owner per partition keeps the
  request IDs' exactly-once promise and the write-ahead log in one place, and a lost owner is restarted
  in place (``restart: on-failure``) while its calls retry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from graphstore.client.transport.call_counts import MethodCounts, merged
from graphstore.client.transport.remote import RemotePartition
from graphstore.client.transport.sample_requests import SampleSpec
from graphstore.errors import ServerUnavailableError
from graphstore.protos.edges_wire import CarriedRows
from graphstore.types import InitSpec, OptimizerConfig, PartitionMetadata, ServerStats, TensorScheme

T = TypeVar("T")

OWNER = "owner"
READ_REPLICA = "read_replica"
LIVE = "live"
DOWN = "down"


@dataclass
class Replica:
    """One server of a replicated partition, as the client sees it.

    Attributes:
        address: ``host:port``.
        role: ``owner`` or ``read_replica``.
        remote: its non-retrying RemotePartition (reads only).
        live: whether reads are sent to it.
        outstanding: its read calls in flight now.
        served: read calls it answered.
        failures: read calls that failed over from it (each marked it down).
        last_error: the error that last marked it down.
    """

    address: str
    role: str
    remote: RemotePartition
    live: bool = True
    outstanding: int = 0
    served: int = 0
    failures: int = 0
    last_error: str = ""


class ReplicatedPartition:
    """A partition with an owner and read replicas (see the module docstring).

    Args:
        owner: the owner's retrying RemotePartition (writes, run-time tensors, metadata).
        readers: one non-retrying RemotePartition per server of the partition, the owner's first
            (``policy.max_retries`` 0): the servers reads are spread over.
        roles: ``owner`` / ``read_replica`` for each of ``readers``.
        replica_tensors: the tensors every server of the partition holds read-only (partition files):
            the pulls that may go to any of them.
        probe_interval_s: how often the servers that are down are asked for their health.

    Raises:
        ValueError: ``readers`` and ``roles`` of different lengths, or no readers.
    """

    def __init__(
        self,
        owner: RemotePartition,
        readers: Sequence[RemotePartition],
        roles: Sequence[str],
        replica_tensors: set[str] | frozenset[str],
        probe_interval_s: float = 0.2,
    ) -> None:
        if len(readers) != len(roles) or not readers:
            raise ValueError(f"readers ({len(readers)}) and roles ({len(roles)}) must match and not be empty")
        self._owner = owner
        # The owner's address (the one errors and logs name), call policy and longest call.
        self.address = owner.address
        self.policy = owner.policy
        self.max_call_time_s = owner.max_call_time_s
        self._replicas = [Replica(r.address, role, r) for r, role in zip(readers, roles, strict=True)]
        self._replica_tensors = frozenset(replica_tensors)
        self._probe_interval_s = probe_interval_s
        self._lock = threading.Lock()
        self._next = 0  # where the search for the least loaded replica starts (ties rotate)
        self._closed = threading.Event()
        self._prober: threading.Thread | None = None

    # -- plumbing --------------------------------------------------------------------------------

    def __repr__(self) -> str:
        servers = [r.address for r in self._replicas]
        return f"ReplicatedPartition(part_id={self._owner.part_id}, servers={servers})"

    @property
    def part_id(self) -> int:
        """The partition these servers hold."""
        return self._owner.part_id

    @property
    def owner(self) -> RemotePartition:
        """The owner's retrying RemotePartition."""
        return self._owner

    def close(self) -> None:
        """Stop the probe and close every channel (calls after this fail)."""
        self._closed.set()
        prober = self._prober
        if prober is not None:
            prober.join(timeout=5.0)
        for replica in self._replicas:
            replica.remote.close()
        self._owner.close()

    def replica_states(self) -> list[dict[str, Any]]:
        """Each server's address, role, state (``live`` / ``down``), read calls in flight, read calls
        served and failed over, and the error that last marked it down."""
        with self._lock:
            return [
                {
                    "address": r.address,
                    "role": r.role,
                    "state": LIVE if r.live else DOWN,
                    "outstanding": r.outstanding,
                    "served": r.served,
                    "failures": r.failures,
                    "last_error": r.last_error,
                }
                for r in self._replicas
            ]

    # -- choosing a replica ----------------------------------------------------------------------

    def _acquire(self, tried: set[int]) -> int | None:
        """The live, untried replica with the fewest calls in flight (its count raised), or None."""
        with self._lock:
            count = len(self._replicas)
            best = None
            for step in range(count):
                index = (self._next + step) % count
                replica = self._replicas[index]
                if replica.live and index not in tried:
                    if best is None or replica.outstanding < self._replicas[best].outstanding:
                        best = index
            if best is not None:
                self._replicas[best].outstanding += 1
                self._next = (best + 1) % count
            return best

    def _release(self, index: int, error: ServerUnavailableError | None = None, served: bool = False) -> None:
        with self._lock:
            replica = self._replicas[index]
            replica.outstanding -= 1
            if served:
                replica.served += 1
            if error is not None:
                replica.failures += 1
                replica.last_error = f"{error.code}: {error.details}"
                replica.live = False
        if error is not None:
            self._start_prober()

    def _read(self, what: str, call: Callable[[RemotePartition], T]) -> T:
        """Run a read on the least loaded live replica, moving on at once when one fails."""
        tried: set[int] = set()
        while (index := self._acquire(tried)) is not None:
            try:
                result = call(self._replicas[index].remote)
            except ServerUnavailableError as exc:
                self._release(index, error=exc)
                tried.add(index)
                continue
            except BaseException:
                self._release(index)
                raise
            self._release(index, served=True)
            return result
        return self._read_waiting(what, call)

    def _read_waiting(self, what: str, call: Callable[[RemotePartition], T]) -> T:
        """Every replica is down: retry over all of them with the owner's backoff, bounded by its
        ``max_call_time_s`` (what a call to a partition of one server waits), then give up."""
        policy = self._owner.policy
        started = time.monotonic()
        give_up_at = started + self._owner.max_call_time_s
        delay = policy.backoff_initial_s
        attempts = 0
        last: ServerUnavailableError | None = None
        while True:
            for index, replica in enumerate(self._replicas):
                attempts += 1
                with self._lock:
                    replica.outstanding += 1
                try:
                    result = call(replica.remote)
                except ServerUnavailableError as exc:
                    last = exc
                    self._release(index)
                    continue
                except BaseException:
                    self._release(index)
                    raise
                with self._lock:
                    replica.live = True
                self._release(index, served=True)
                return result
            if time.monotonic() + delay >= give_up_at or self._closed.is_set():
                break
            time.sleep(delay)
            delay = min(delay * policy.backoff_multiplier, policy.backoff_max_s)
        addresses = ", ".join(r.address for r in self._replicas)
        raise ServerUnavailableError(
            addresses,
            last.code if last is not None else "UNAVAILABLE",
            f"partition {self.part_id}: none of its {len(self._replicas)} servers answered {what} in "
            f"{attempts} attempts over {time.monotonic() - started:.1f} s"
            + (f" (last: {last.details})" if last is not None else ""),
        )

    # -- rejoining -------------------------------------------------------------------------------

    def _start_prober(self) -> None:
        with self._lock:
            if self._closed.is_set() or (self._prober is not None and self._prober.is_alive()):
                return
            self._prober = threading.Thread(
                target=self._probe_down, name=f"graphstore-replica-probe-{self.part_id}", daemon=True
            )
            self._prober.start()

    def _probe_down(self) -> None:
        """Until every replica is live again (or the partition is closed): ask those that are down for
        their health; one that serves this partition again rejoins."""
        timeout = min(1.0, self._owner.policy.deadline_s)
        while not self._closed.wait(self._probe_interval_s):
            with self._lock:
                down = [r for r in self._replicas if not r.live]
            if not down:
                with self._lock:
                    if all(r.live for r in self._replicas):
                        self._prober = None
                        return
                continue
            for replica in down:
                try:
                    if replica.remote.health(timeout) != "SERVING":
                        continue
                    replica.remote.metadata()  # checks it still serves this partition
                except (ServerUnavailableError, ValueError):
                    continue
                with self._lock:
                    replica.live = True

    # -- reads spread over the replicas ----------------------------------------------------------

    def pull(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows of ``name`` for global ``ids``: from any replica when the partition files hold ``name``
        read-only, else from the owner (see :meth:`RemotePartition.pull`)."""
        if name in self._replica_tensors:
            return self._read("Pull", lambda remote: remote.pull(name, ids))
        return self._owner.pull(name, ids)

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
        """Sampled edges around ``seeds`` from any replica (see :meth:`RemotePartition.sample_neighbors`);
        a probability tensor that only the owner holds makes it the owner's call."""
        probs = [prob] if isinstance(prob, str) else list(prob or [])
        if any(p and p not in self._replica_tensors for p in probs):
            return self._owner.sample_neighbors(
                seeds, fanout, edge_dir, replace, prob, random_seed, exclude_eids
            )
        return self._read(
            "SampleNeighbors",
            lambda remote: remote.sample_neighbors(
                seeds, fanout, edge_dir, replace, prob, random_seed, exclude_eids
            ),
        )

    def sample_with_rows(
        self, seeds: np.ndarray, spec: SampleSpec
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[CarriedRows]]:
        """A sample and the node rows it carries (see :meth:`RemotePartition.sample_with_rows`): from any
        replica when the replicas hold every tensor it names, else from the owner."""
        probs = [spec.prob] if isinstance(spec.prob, str) else list(spec.prob or [])
        named = [p for p in probs if p] + [*spec.with_rows, *spec.with_seed_rows]
        if any(name not in self._replica_tensors for name in named):
            return self._owner.sample_with_rows(seeds, spec)
        return self._read("SampleNeighbors", lambda remote: remote.sample_with_rows(seeds, spec))

    def find_edges(self, eids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` of edges of this partition, from any replica."""
        return self._read("FindEdges", lambda remote: remote.find_edges(eids))

    def in_subgraph(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All in-edges of ``nodes`` of this partition, from any replica."""
        return self._read("InSubgraph", lambda remote: remote.in_subgraph(nodes))

    def degrees(self, nids: np.ndarray, edge_dir: str = "in", etype: int | None = None) -> np.ndarray:
        """Degrees of nodes of this partition, from any replica."""
        return self._read("Degrees", lambda remote: remote.degrees(nids, edge_dir, etype))

    # -- everything else is the owner's: writes, run-time tensors, barriers, checkpoints ------------

    def metadata(self) -> PartitionMetadata:
        """The owner's metadata (its tensor schemes include the run-time tensors)."""
        return self._owner.metadata()

    def health(self, timeout: float = 5.0) -> str:
        """The owner's health status name (see :meth:`RemotePartition.health`)."""
        return self._owner.health(timeout)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the owner reports SERVING (see :meth:`RemotePartition.wait_ready`)."""
        self._owner.wait_ready(timeout)

    def stats(self) -> ServerStats:
        """The owner's uptime, memory and counters."""
        return self._owner.stats()

    def call_counts(self) -> dict[str, MethodCounts]:
        """Calls and bytes per method sent to the owner and every replica."""
        return merged([self._owner.call_counts(), *(r.remote.call_counts() for r in self._replicas)])

    def shutdown(self) -> None:
        """Ask the owner to stop (read replicas follow their own lifecycle)."""
        self._owner.shutdown()

    def tensor_scheme(self, name: str) -> TensorScheme:
        """The owner's scheme of ``name`` (see :meth:`RemotePartition.tensor_scheme`)."""
        return self._owner.tensor_scheme(name)

    def list_tensors(self) -> list[TensorScheme]:
        """Every tensor the owner holds."""
        return self._owner.list_tensors()

    def push(self, name: str, ids: np.ndarray, rows: np.ndarray, op: str = "assign") -> int:
        """Assign or add rows on the owner (see :meth:`RemotePartition.push`)."""
        return self._owner.push(name, ids, rows, op)

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
        """Create (or attach to) a run-time tensor on the owner."""
        return self._owner.init_tensor(name, shape, dtype, policy, persistent, init, owner)

    def delete_tensor(self, name: str) -> bool:
        """Delete a run-time tensor on the owner."""
        return self._owner.delete_tensor(name)

    def push_grad(self, name: str, ids: np.ndarray, grads: np.ndarray, optimizer: OptimizerConfig) -> int:
        """One sparse optimizer step on the owner (see :meth:`RemotePartition.push_grad`)."""
        return self._owner.push_grad(name, ids, grads, optimizer)

    def prepare_push_grad(
        self, name: str, ids: np.ndarray, grads: np.ndarray, optimizer: OptimizerConfig
    ) -> Callable[[], int]:
        """:meth:`push_grad` with its request IDs fixed (see :meth:`RemotePartition.prepare_push_grad`)."""
        return self._owner.prepare_push_grad(name, ids, grads, optimizer)

    def barrier(self, name: str, count: int, timeout_s: float, participant: str = "") -> int:
        """Wait at barrier ``name`` on the owner."""
        return self._owner.barrier(name, count, timeout_s, participant)

    def checkpoint(
        self, path: str, names: list[str] | None = None, save_id: str | None = None
    ) -> tuple[list[str], int]:
        """Write the owner's part of a checkpoint (see :meth:`RemotePartition.checkpoint`)."""
        return self._owner.checkpoint(path, names, save_id)

    def commit_checkpoint(self, path: str, save_id: str, names: list[str]) -> None:
        """Commit save ``save_id`` on the owner."""
        self._owner.commit_checkpoint(path, save_id, names)

    def abort_checkpoint(self, path: str, save_id: str) -> None:
        """Remove the owner's files of the unfinished save ``save_id``."""
        self._owner.abort_checkpoint(path, save_id)

    def restore(self, path: str, names: list[str] | None = None) -> tuple[list[str], int]:
        """Restore tensors on the owner from a checkpoint folder on its host."""
        return self._owner.restore(path, names)
