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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

NODE = "node"
EDGE = "edge"
INITIALIZERS = ("zeros", "uniform", "normal", "constant", "pushed")
OPTIMIZERS = ("adagrad", "rowwise_adagrad", "adam")


DEFAULT_NTYPE = "_N"
DEFAULT_ETYPE = "_E"
DEFAULT_CANONICAL_ETYPE = (DEFAULT_NTYPE, DEFAULT_ETYPE, DEFAULT_NTYPE)
# Characters that separate the parts of policy strings and tensor names ("node:paper", "paper/feat").
_RESERVED_TYPE_CHARS = (":", "/")

CanonicalEtype = tuple[str, str, str]


@dataclass(frozen=True)
class GraphSchema:
    """The node and edge types of a graph, in type-ID order (a type's ID is its index).

    A homogeneous graph is the one-type case: ``ntypes == ("_N",)`` and
    ``canonical_etypes == (("_N", "_E", "_N"),)``, DGL's default names.

    Raises:
        ValueError: no node type, an empty or duplicate name, a name containing ``:`` or ``/``, or an
            edge type whose source or destination is not a node type.
    """

    ntypes: tuple[str, ...] = (DEFAULT_NTYPE,)
    canonical_etypes: tuple[CanonicalEtype, ...] = (DEFAULT_CANONICAL_ETYPE,)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ntypes", tuple(self.ntypes))
        object.__setattr__(self, "canonical_etypes", tuple(tuple(c) for c in self.canonical_etypes))
        if not self.ntypes:
            raise ValueError("a graph needs at least one node type")
        for name in self.ntypes + tuple(c[1] for c in self.canonical_etypes):
            if not isinstance(name, str) or not name or any(ch in name for ch in _RESERVED_TYPE_CHARS):
                raise ValueError(f"type names must be non-empty strings without ':' or '/', got {name!r}")
        if len(set(self.ntypes)) != len(self.ntypes):
            raise ValueError(f"duplicate node type in {list(self.ntypes)}")
        if len(set(self.canonical_etypes)) != len(self.canonical_etypes):
            raise ValueError(f"duplicate canonical edge type in {list(self.canonical_etypes)}")
        for canonical in self.canonical_etypes:
            if len(canonical) != 3:
                raise ValueError(
                    f"a canonical edge type is (src_type, edge_type, dst_type), got {canonical!r}"
                )
            for end in (canonical[0], canonical[2]):
                if end not in self.ntypes:
                    raise ValueError(
                        f"edge type {canonical!r} names node type {end!r}, "
                        f"which is not one of {list(self.ntypes)}"
                    )

    @property
    def is_homogeneous(self) -> bool:
        """One node type and one edge type, whatever their names."""
        return len(self.ntypes) == 1 and len(self.canonical_etypes) == 1

    @property
    def etypes(self) -> list[str]:
        """Edge type names in ID order (a name may repeat across canonical types)."""
        return [c[1] for c in self.canonical_etypes]

    def ntype_id(self, ntype: str | None) -> int:
        """The ID of a node type; None means the only one.

        Raises:
            KeyError: an unknown type (the message lists the known ones), or None on a typed graph.
        """
        if ntype is None:
            if len(self.ntypes) == 1:
                return 0
            raise KeyError(f"the graph has several node types; name one of {list(self.ntypes)}")
        try:
            return self.ntypes.index(ntype)
        except ValueError:
            raise KeyError(f"unknown node type {ntype!r}; the graph has {list(self.ntypes)}") from None

    def etype_id(self, etype) -> int:
        """The ID of an edge type given as a canonical triple, a ``"src:etype:dst"`` key, a plain name
        when it is unambiguous, or None when the graph has one edge type.

        Raises:
            KeyError: an unknown type, or an ambiguous plain name (the message lists the candidates).
        """
        return self.canonical_etypes.index(self.to_canonical_etype(etype))

    def to_canonical_etype(self, etype) -> CanonicalEtype:
        """The canonical ``(src_type, edge_type, dst_type)`` of an edge type (see :meth:`etype_id`).

        Raises:
            KeyError: an unknown or ambiguous edge type.
        """
        if etype is None:
            if len(self.canonical_etypes) == 1:
                return self.canonical_etypes[0]
            raise KeyError(f"the graph has several edge types; name one of {self._etype_keys()}")
        if isinstance(etype, str) and etype.count(":") == 2:
            etype = tuple(etype.split(":"))
        if isinstance(etype, (tuple, list)):
            canonical = tuple(etype)
            if canonical in self.canonical_etypes:
                return canonical  # type: ignore[return-value]
            raise KeyError(f"unknown edge type {canonical!r}; the graph has {self._etype_keys()}")
        matches = [c for c in self.canonical_etypes if c[1] == etype]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise KeyError(f"unknown edge type {etype!r}; the graph has {self.etypes}")
        raise KeyError(
            f"edge type {etype!r} is ambiguous: it names {[etype_key(c) for c in matches]}; "
            "give the canonical (src_type, edge_type, dst_type)"
        )

    def _etype_keys(self) -> list[str]:
        return [etype_key(c) for c in self.canonical_etypes]

    def node_policy(self, ntype: str | None) -> str:
        """The policy (ID space) of data of one node type: ``"node"`` on a homogeneous graph, else
        ``"node:<ntype>"``.

        Raises:
            KeyError: an unknown node type.
        """
        name = self.ntypes[self.ntype_id(ntype)]
        return NODE if self.is_homogeneous else f"{NODE}:{name}"

    def edge_policy(self, etype) -> str:
        """The policy of data of one edge type: ``"edge"`` on a homogeneous graph, else
        ``"edge:<src>:<etype>:<dst>"``.

        Raises:
            KeyError: an unknown or ambiguous edge type.
        """
        canonical = self.to_canonical_etype(etype)
        return EDGE if self.is_homogeneous else f"{EDGE}:{etype_key(canonical)}"

    def policy_type(self, policy: str) -> tuple[str, int | None]:
        """Split a policy string into its kind (``"node"`` / ``"edge"``) and type ID (None: the
        homogeneous ID space of all types).

        Raises:
            ValueError: a policy that is not ``node``, ``edge``, ``node:<ntype>`` or ``edge:<s>:<e>:<d>``.
            KeyError: an unknown type.
        """
        kind, _, type_name = policy.partition(":")
        if kind not in (NODE, EDGE):
            raise ValueError(
                f"policy must be 'node', 'edge', 'node:<ntype>' or 'edge:<src>:<etype>:<dst>', got {policy!r}"
            )
        if not type_name:
            return kind, None
        if self.is_homogeneous:
            # "node:_N" on a one-type graph is the whole node ID space: the same bounds, the same data.
            (self.ntype_id if kind == NODE else self.etype_id)(type_name)
            return kind, None
        if kind == NODE:
            return kind, self.ntype_id(type_name)
        return kind, self.etype_id(type_name)

    def to_dict(self) -> dict:
        """The JSON form: ``{"ntypes": [...], "canonical_etypes": [[s, e, d], ...]}``."""
        return {"ntypes": list(self.ntypes), "canonical_etypes": [list(c) for c in self.canonical_etypes]}


def etype_key(canonical: CanonicalEtype) -> str:
    """The string form ``"src:etype:dst"`` of a canonical edge type (partition JSON keys, policy strings)."""
    return ":".join(canonical)


def typed_tensor_name(type_key: str, name: str) -> str:
    """The tensor name of a typed graph's node or edge data: ``"paper/feat"``, ``"author:writes:paper/w"``
    (DGL's feature keys)."""
    return f"{type_key}/{name}"


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
    schema: GraphSchema = field(default_factory=GraphSchema)
    ntype_counts: tuple[int, ...] = ()  # num_parts x num_ntypes, row-major; empty: one type
    etype_counts: tuple[int, ...] = ()  # num_parts x num_etypes, row-major
    checkpoint_root: str = ""  # the folder checkpoint names live under on the server's host
    read_replica: bool = False  # a read replica: the partition files' read-only data and structure only


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
    read_replica: bool = False


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
        fanout: int | Sequence[int],
        edge_dir: str = "in",
        replace: bool = False,
        prob: str | Sequence[str | None] | None = None,
        random_seed: int | None = None,
        exclude_eids: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sampled edges (src, dst, eid), homogeneous global IDs, around seeds owned by this partition.

        ``fanout`` is one value for every edge type or one per edge type (0 skips a type, -1 takes
        all); ``prob`` names a weight tensor, or one per edge type. An edge's type follows from its ID
        (the partition book's ``map_to_per_etype``). ``exclude_eids`` (homogeneous edge IDs) are
        never drawn: a seed samples among its other edges.
        """

    def find_edges(self, eids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of edges owned by this partition."""

    def in_subgraph(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All in-edges (src, dst, eid) of ``nodes``."""

    def degrees(self, nids: np.ndarray, edge_dir: str = "in", etype: int | None = None) -> np.ndarray:
        """In- or out-degrees (int64) of owned nodes, over every edge type or over type ID ``etype``."""

    def push_grad(self, name: str, ids: np.ndarray, grads: np.ndarray, optimizer: OptimizerConfig) -> int:
        """Apply one sparse optimizer step to rows ``ids`` (unique) with float32 ``grads``."""

    def barrier(self, name: str, count: int, timeout_s: float, participant: str = "") -> int:
        """Block until ``count`` participants reached barrier ``name``; returns its generation."""

    def checkpoint(
        self, path: str, names: list[str] | None = None, save_id: str | None = None
    ) -> tuple[list[str], int]:
        """Write tensors (rows keyed by original IDs) and optimizer state under ``path`` (with
        ``save_id``: this partition's part of a cluster-wide save, committed or aborted below)."""

    def commit_checkpoint(self, path: str, save_id: str, names: list[str]) -> None:
        """Make save ``save_id``, whose parts every partition wrote, the checkpoint of ``names``."""

    def abort_checkpoint(self, path: str, save_id: str) -> None:
        """Remove the files of the unfinished save ``save_id``."""

    def restore(self, path: str, names: list[str] | None = None) -> tuple[list[str], int]:
        """Load tensors and optimizer state written by :meth:`checkpoint` (any partition count)."""

    def stats(self) -> ServerStats: ...
