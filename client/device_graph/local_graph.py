"""The co-located partitions of a graph held where a loader's device reads them: per edge type the
in-edge CSR over the partitions' destination nodes, and the read-only node data, each made the first
time a loader asks for it and shared by every loader of the client on that device.

Co-located means the partitions this process reads in-process: every partition in standalone mode, the
host's own partition beside a server. They are one contiguous run of partitions, so each node type's
nodes held are one range of its per-type IDs, ``[lo, hi)``, and each edge type's edges one range of its
per-type edge IDs; one CSR per edge type covers the whole run (the partitions' CSRs end to end), with a
row per destination ``lo + row`` and the per-type ID of the edge at position ``k`` equal to ``elo + k``
(or, where a partition numbers its edges otherwise, ``RelationCSR.eid[k]``: see the partition format's
``in_eid``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch

from graphstore.client.device_graph.id_space import DeviceIdSpace
from graphstore.client.device_graph.placement import place
from graphstore.types import CanonicalEtype

# Source IDs are held as int32 while every node ID fits: half the bytes a GPU reads per sampled edge.
_INT32_MAX_NODES = 1 << 31


@dataclass
class RelationCSR:
    """The in-edges of one edge type over the held destination nodes.

    Attributes:
        indptr: int64 ``[hi - lo + 1]``: row ``r`` (destination ``lo + r``) has positions
            ``indptr[r]:indptr[r + 1]``.
        src: homogeneous source IDs per position (int32 or int64).
        elo: the first per-type edge ID held.
        eid: int64 per-type edge ID of each position, or None when it is ``elo + position``.
        position: int64 position of each held edge ID (``per-type ID - elo``), or None likewise.
    """

    indptr: torch.Tensor
    src: torch.Tensor
    elo: int
    eid: torch.Tensor | None = None
    position: torch.Tensor | None = None

    def edge_ids(self, positions: torch.Tensor) -> torch.Tensor:
        """Per-type edge IDs of positions."""
        return positions + self.elo if self.eid is None else self.eid[positions]

    def positions_of(self, offsets: torch.Tensor) -> torch.Tensor:
        """Positions of held edge IDs given as ``per-type ID - elo``."""
        return offsets if self.position is None else self.position[offsets]


class LocalDeviceGraph:
    """The co-located run of partitions of ``ctx``'s graph, held for ``device`` (see the module docstring).

    Args:
        g: the DistGraph (its data views give the node and edge data).
        ctx: the client context.
        device: the loader's device.
        placement: ``"device"`` (copied into its memory) or ``"pinned"`` (pinned host memory, UVA).

    Raises:
        ValueError: co-located partitions that are not one contiguous run.
    """

    def __init__(self, g, ctx, device: torch.device, placement: str):
        self.g = g
        self.ctx = ctx
        self.device = torch.device(device)
        self.placement = placement
        self.book = ctx.book
        self.schema = self.book.schema
        parts = [p for p in range(ctx.num_parts) if ctx.local_reader(p) is not None]
        if parts and parts != list(range(parts[0], parts[-1] + 1)):
            raise ValueError(f"co-located partitions {parts} are not one contiguous run")
        self.parts = parts
        self.node_space = DeviceIdSpace(self.book.node_ranges, self.device)
        self.edge_space = DeviceIdSpace(self.book.edge_ranges, self.device)
        self._lock = threading.Lock()
        self._relations: dict[CanonicalEtype, RelationCSR] = {}
        self._weights: dict[tuple[CanonicalEtype, str], torch.Tensor] = {}
        self._tables: dict[tuple[str, str, torch.dtype | None], torch.Tensor] = {}

    # -- ranges ----------------------------------------------------------------------------------
    def node_range(self, ntype: str) -> tuple[int, int]:
        """``[lo, hi)``: the per-type IDs of ``ntype`` held (empty when nothing is co-located)."""
        if not self.parts:
            return 0, 0
        bounds = self.book.node_type_bounds(None if self.schema.is_homogeneous else ntype)
        return int(bounds[self.parts[0]]), int(bounds[self.parts[-1] + 1])

    def edge_range(self, canonical: CanonicalEtype) -> tuple[int, int]:
        """``[elo, ehi)``: the per-type IDs of the edges of ``canonical`` held."""
        if not self.parts:
            return 0, 0
        bounds = self.book.edge_type_bounds(None if self.schema.is_homogeneous else canonical)
        return int(bounds[self.parts[0]]), int(bounds[self.parts[-1] + 1])

    def holds_all_nodes(self, ntype: str) -> bool:
        """Whether every node of ``ntype`` is held (standalone mode)."""
        lo, hi = self.node_range(ntype)
        return lo == 0 and hi == self.book.num_nodes(None if self.schema.is_homogeneous else ntype)

    # -- structure -------------------------------------------------------------------------------
    def relation(self, canonical: CanonicalEtype) -> RelationCSR:
        """The in-edge CSR of one edge type over the held destinations (made on first use)."""
        with self._lock:
            relation = self._relations.get(canonical)
            if relation is None:
                relation = self._build_relation(canonical)
                self._relations[canonical] = relation
            return relation

    def _build_relation(self, canonical: CanonicalEtype) -> RelationCSR:
        etype_id = self.schema.canonical_etypes.index(canonical)
        indptrs, sources, offsets, base = [], [], [], 0
        renumbered = False
        for part_id in self.parts:
            data = self.ctx.local_reader(part_id).partition
            indptr = np.asarray(data.in_indptr_of(etype_id), dtype=np.int64)
            first, last = int(indptr[0]), int(indptr[-1])
            indptrs.append(indptr[:-1] - first + base)
            sources.append(np.asarray(data.in_src[first:last]))
            # The held ID offset (per-type ID - elo) of each position of this partition's run.
            offsets.append(data.edge_ids_at(np.arange(first, last, dtype=np.int64)) - first + base)
            renumbered = renumbered or data.in_eid is not None
            base += last - first
        indptrs.append(np.array([base], dtype=np.int64))
        src = np.concatenate(sources) if sources else np.empty(0, dtype=np.int64)
        src_type = torch.int32 if self.book.num_nodes() < _INT32_MAX_NODES else torch.int64
        elo = self.edge_range(canonical)[0]
        eid = position = None
        if renumbered:
            offset = torch.from_numpy(np.concatenate(offsets).astype(np.int64))
            position = torch.empty_like(offset)
            position[offset] = torch.arange(offset.numel(), dtype=torch.int64)
            eid = place(offset + elo, self.device, self.placement)
            position = place(position, self.device, self.placement)
        return RelationCSR(
            indptr=place(torch.from_numpy(np.concatenate(indptrs)), self.device, self.placement),
            src=place(torch.from_numpy(src), self.device, self.placement, src_type),
            elo=elo,
            eid=eid,
            position=position,
        )

    def weights(self, canonical: CanonicalEtype, name: str) -> torch.Tensor:
        """The held edges' weights ``name`` of one edge type, by position (read once, on first use)."""
        key = (canonical, name)
        eid = self.relation(canonical).eid  # outside the lock: relation() takes it
        with self._lock:
            held = self._weights.get(key)
            if held is None:
                elo, ehi = self.edge_range(canonical)
                tensor = self.g.edges[canonical].data[name]
                ids = torch.arange(elo, ehi) if eid is None else eid.cpu()  # rows in position order
                rows = tensor[ids] if ehi > elo else torch.empty(0)
                held = place(rows.reshape(ehi - elo), self.device, self.placement, torch.float32)
                self._weights[key] = held
            return held

    # -- node data -------------------------------------------------------------------------------
    def node_table(self, ntype: str, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The held nodes' rows of node data ``name`` (read-only data of the partition files), row
        ``i`` for per-type ID ``lo + i``, in ``dtype`` (None: the stored type); made on first use."""
        key = (ntype, name, dtype)
        with self._lock:
            held = self._tables.get(key)
            if held is None:
                lo, hi = self.node_range(ntype)
                tensor = self.g.nodes[ntype].data[name]
                rows = tensor[torch.arange(lo, hi)] if hi > lo else torch.empty((0, *tensor.shape[1:]))
                held = place(rows.to(tensor.dtype), self.device, self.placement, dtype)
                self._tables[key] = held
            return held

    def nbytes(self) -> int:
        """Bytes held (structure, weights and node data)."""
        with self._lock:
            tensors = [t for r in self._relations.values() for t in (r.indptr, r.src)]
            tensors += list(self._weights.values()) + list(self._tables.values())
        return sum(t.numel() * t.element_size() for t in tensors)
