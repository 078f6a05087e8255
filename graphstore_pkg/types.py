"""Contracts every layer shares: the partition interface and the dataclasses that cross it.

:class:`PartitionAPI` is the plain-Python interface of one partition. The server package implements
it in-process (:class:`graphstore.server.partition_server.PartitionServer`, over the memory-mapped
partition) and exposes it over gRPC through a thin servicer; the client reaches a partition through
one of its two transports, :mod:`graphstore.client.transport.remote` (gRPC) or
:mod:`graphstore.client.transport.inprocess` (standalone mode and co-located reads). One
implementation, two transports: everything the client does works the same on both.

This module sits at the root of the import graph (``graphstore`` <- ``protos`` <- ``server`` /
``client``), so the wire codec, the server and the client all speak of the same types without
importing each other.

Arrays crossing this interface are numpy arrays in *storage* form (bfloat16 as uint16 bit
patterns); the dtype travels by canonical name (:mod:`graphstore.dtypes`). IDs are global int64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

NODE = "node"
EDGE = "edge"
INITIALIZERS = ("zeros", "uniform", "normal", "constant", "pushed")
OPTIMIZERS = ("adagrad", "rowwise_adagrad", "adam")


@dataclass(frozen=True)
class TensorScheme:
    """What a server knows about one named tensor.

    Attributes:
        name: unique name on the cluster.
        dtype: canonical dtype name.
        shape: global shape; ``shape[0]`` is the number of nodes or edges of the graph.
        policy: ``"node"`` or ``"edge"``: which ID space indexes the rows.
        persistent: survives its creator's release.
        writable: Push / PushGrad allowed.
        version: bumps on every write.
        from_partition: loaded from the partition files.
        owner: creating client's id ("" for partition data).
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    policy: str
    persistent: bool = False
    writable: bool = True
    version: int = 0
    from_partition: bool = False
    owner: str = ""


@dataclass(frozen=True)
class InitSpec:
    """How a new tensor's rows start: ``kind`` in :data:`INITIALIZERS`.

    ``uniform``: U(a, b); ``normal``: N(mean=a, std=b); ``constant``: every element a;
    ``pushed``: zeros, then the creating client pushes its rows. ``seed`` makes the start reproducible
    (each partition draws from ``seed + part_id``).
    """

    kind: str = "zeros"
    a: float = 0.0
    b: float = 0.0
    seed: int = 0


@dataclass(frozen=True)
class OptimizerConfig:
    """A sparse optimizer's kind (:data:`OPTIMIZERS`) and hyper-parameters, checked on construction.

    The one place the hyper-parameters are validated: the client builds one from the user's
    arguments, the servicer from the wire, and both meet the same rules.

    Raises:
        ValueError: an unknown ``kind``; ``lr`` not a finite number > 0; ``eps`` not a finite
            number >= 0; ``beta1`` / ``beta2`` outside ``[0, 1)``. The message names the field.
    """

    kind: str
    lr: float
    eps: float = 1e-10
    beta1: float = 0.9
    beta2: float = 0.999

    def __post_init__(self) -> None:
        if self.kind not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer kind {self.kind!r}; supported: {list(OPTIMIZERS)}")
        for name in ("lr", "eps", "beta1", "beta2"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise ValueError(f"optimizer {name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"optimizer {name} must be finite, got {value!r}")
        if not self.lr > 0:
            raise ValueError(f"optimizer lr must be a finite number > 0, got {self.lr!r}")
        if not self.eps >= 0:
            raise ValueError(f"optimizer eps must be a finite number >= 0, got {self.eps!r}")
        for index, name in enumerate(("beta1", "beta2")):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(
                    f"optimizer {name} (betas[{index}]) must be in [0, 1), got {getattr(self, name)!r}"
                )


@dataclass(frozen=True)
class PartitionMetadata:
    """What a client learns from one partition server at connect time."""

    graph_name: str
    part_id: int
    num_parts: int
    num_nodes: int
    num_edges: int
    node_bounds: tuple[int, ...]  # num_parts + 1 boundaries
    edge_bounds: tuple[int, ...]
    tensors: tuple[TensorScheme, ...]
    part_config: str = ""
    hostname: str = ""
    format_version: int = 1
    checkpoint_root: str = ""  # the folder checkpoint names live under on the server's host


@dataclass(frozen=True)
class ServerStats:
    """Health and resource figures of one server (``graphstore status``)."""

    part_id: int
    uptime_s: float
    rss_bytes: int
    rss_anon_bytes: int
    tensors: tuple[TensorScheme, ...]
    counters: dict[str, int] = field(default_factory=dict)
    address: str = ""


class PartitionAPI(Protocol):
    """The operations one partition answers. Errors are built-in exceptions:

    - ValueError: a bad argument (wrong dtype, shape, ID out of this partition's range, fanout < -1...)
      -> INVALID_ARGUMENT on the wire;
    - KeyError: unknown tensor -> NOT_FOUND;
    - FileExistsError: Init with a different scheme under an existing name -> ALREADY_EXISTS;
    - PermissionError: a write to a read-only tensor -> FAILED_PRECONDITION;
    - TimeoutError: a barrier that timed out -> DEADLINE_EXCEEDED;
    - FileNotFoundError: a missing checkpoint folder -> NOT_FOUND.
    """

    part_id: int

    def metadata(self) -> PartitionMetadata: ...

    def pull(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows of ``name`` for global ``ids`` (all owned by this partition), in request order."""

    def push(self, name: str, ids: np.ndarray, rows: np.ndarray, op: str = "assign") -> int:
        """Assign (``op="assign"``) or add (``"add"``) rows; atomic per request; returns the new version."""

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
        """Create ``name`` (returns ``(True, scheme)``) or attach to an identical one ``(False, scheme)``."""

    def delete_tensor(self, name: str) -> bool: ...

    def list_tensors(self) -> list[TensorScheme]: ...

    def sample_neighbors(
        self,
        seeds: np.ndarray,
        fanout: int,
        edge_dir: str = "in",
        replace: bool = False,
        prob: str | None = None,
        random_seed: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sampled edges (src, dst, eid), global IDs, around seeds owned by this partition."""

    def find_edges(self, eids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of edges owned by this partition."""

    def in_subgraph(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All in-edges (src, dst, eid) of ``nodes``."""

    def degrees(self, nids: np.ndarray, edge_dir: str = "in") -> np.ndarray:
        """In- or out-degrees (int64) of owned nodes."""

    def push_grad(self, name: str, ids: np.ndarray, grads: np.ndarray, optimizer: OptimizerConfig) -> int:
        """Apply one sparse optimizer step to rows ``ids`` (unique) with float32 ``grads``."""

    def barrier(self, name: str, count: int, timeout_s: float, participant: str = "") -> int:
        """Block until ``count`` participants reached barrier ``name``; returns its generation."""

    def checkpoint(self, path: str, names: list[str] | None = None) -> tuple[list[str], int]:
        """Write tensors (rows keyed by original IDs) and optimizer state under ``path``."""

    def restore(self, path: str, names: list[str] | None = None) -> tuple[list[str], int]:
        """Load tensors and optimizer state written by :meth:`checkpoint` (any partition count)."""

    def stats(self) -> ServerStats: ...
