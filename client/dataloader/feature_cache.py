"""``RemoteFeatureCache``: an opt-in copy of the hottest remote rows of a read-only node feature, held in
host memory (CPU trainers) or GPU memory (GPU trainers), with hit and pull counters."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch

from graphstore import dtypes
from graphstore.client.dataloader.device_transfer import host_to_device, resolve_device
from graphstore.client.sampling import graph_context
from graphstore.ids import as_id_array, check_id_range
from graphstore.types import NODE

# How the cached rows are chosen: by the nodes' degree, or by the reads of the first batches.
RANK_BY = ("degree", "access")
DEFAULT_WARMUP_BATCHES = 8


@dataclass(frozen=True)
class FeatureCacheStats:
    """What a :class:`RemoteFeatureCache` served since it was built (or its counters last reset).

    Attributes:
        lookups: rows asked for.
        hits: rows served from the cache.
        remote_lookups: rows asked for that live outside the co-located partition (only those cross the
            network, and only those are ever cached).
        rows_pulled: remote rows read from their servers (the remote lookups the cache missed).
        bytes_pulled: bytes of those rows (as stored: float16 rows count 2 bytes a value).
        cached_rows: rows the cache holds (0 while it warms up).
        cached_bytes: memory those rows take on the cache's device.
    """

    lookups: int
    hits: int
    remote_lookups: int
    rows_pulled: int
    bytes_pulled: int
    cached_rows: int
    cached_bytes: int

    @property
    def hit_rate(self) -> float:
        """Share of all rows asked for that the cache served."""
        return self.hits / self.lookups if self.lookups else 0.0

    @property
    def remote_hit_rate(self) -> float:
        """Share of the remote rows asked for that the cache served (saved a network pull)."""
        return self.hits / self.remote_lookups if self.remote_lookups else 0.0


class _Table:
    """The cached rows: sorted node IDs, their rows on the cache's device, and ID -> slot lookup (a
    dense slot array, or a binary search of the IDs on graphs too large for one)."""

    def __init__(
        self,
        node_ids: np.ndarray,
        rows: torch.Tensor,
        num_nodes: int,
        dense: bool,
        storage: np.ndarray | None = None,
    ):
        self.node_ids = node_ids
        self.rows = rows
        # On the CPU, the rows' numpy storage array (the same memory): numpy's fancy indexing
        # assembles a batch about twice as fast as torch's index_copy_.
        self.storage = storage
        self._slots = None
        if dense:
            self._slots = np.full(num_nodes, -1, dtype=np.int32)
            self._slots[node_ids] = np.arange(node_ids.size, dtype=np.int32)

    def slots_of(self, ids: np.ndarray) -> np.ndarray:
        if self._slots is not None:
            return self._slots[ids]
        where = np.minimum(np.searchsorted(self.node_ids, ids), max(self.node_ids.size - 1, 0))
        found = self.node_ids.size > 0 and (self.node_ids[where] == ids)
        return np.where(found, where, -1)


class RemoteFeatureCache:
    """A copy of the most-read remote rows of a read-only node feature, on a chosen device.

    A sampled node enters a batch through one of its out-edges (in-edges with ``edge_dir='out'``), so
    the nodes of highest out-degree outside the co-located partition are the ones whose rows most often
    cross the network (``rank_by="degree"``, chosen at construction). ``rank_by="access"`` counts
    instead which remote rows the first ``warmup_batches`` reads asked for, and then holds the most
    asked-for ones (until then every row is pulled). The number of rows held is set by ``fraction`` (of
    the remote nodes) and/or ``max_bytes`` (the rows' memory on the device); with both, the smaller.

    Reads gather the hits on the cache's device and pull the misses (co-located reads, RPCs), copying
    them there (pinned, non-blocking onto a GPU). Only features loaded from the partition files and
    never written are cached (their rows cannot change).

    Args:
        g: the DistGraph.
        name: the node feature.
        fraction: share (0..1] of the non-co-located nodes to cache; None: set by ``max_bytes`` alone.
        edge_dir: the sampler's edge direction (degree ranking by out- or in-degree).
        max_bytes: most memory the cached rows may take (0 holds nothing: a cache that only counts).
        rank_by: ``"degree"`` or ``"access"``.
        warmup_batches: reads counted before an ``"access"`` cache fills.
        device: where the rows are held and reads are returned: ``"cpu"``, ``"cuda"`` / ``"cuda:N"``;
            None: the trainer's bound device, else the CPU.

    Raises:
        KeyError: an unknown feature.
        ValueError: a writable or run-time feature, a fraction outside (0, 1], a negative ``max_bytes``,
            neither limit given, an unknown ``rank_by``, ``warmup_batches`` < 1 with ``"access"``, or
            degree ranking of a feature whose rows are not the graph's node IDs.
    """

    _DENSE_SLOTS_MAX_NODES = 1 << 26

    def __init__(
        self,
        g,
        name: str,
        fraction: float | None = None,
        edge_dir: str = "in",
        *,
        max_bytes: int | None = None,
        rank_by: str = "degree",
        warmup_batches: int = DEFAULT_WARMUP_BATCHES,
        device: str | torch.device | None = None,
    ):
        if fraction is None and max_bytes is None:
            raise ValueError(
                "give fraction (share of the remote nodes) or max_bytes (memory budget), got neither"
            )
        if fraction is not None and not 0.0 < float(fraction) <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        if max_bytes is not None and int(max_bytes) < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        if rank_by not in RANK_BY:
            raise ValueError(f"rank_by must be one of {RANK_BY}, got {rank_by!r}")
        if rank_by == "access" and int(warmup_batches) < 1:
            raise ValueError(f"warmup_batches must be at least 1 for rank_by='access', got {warmup_batches}")
        tensor = g.ndata[name]
        scheme = tensor.scheme
        if scheme.writable or not scheme.from_partition:
            raise ValueError(
                f"node feature {name!r} is writable or created at run time; only read-only partition "
                "features can be cached"
            )
        if rank_by == "degree" and scheme.policy != NODE:
            raise ValueError(
                f"node feature {name!r} is indexed by {scheme.policy!r} IDs, not the graph's node IDs: "
                "rank its rows with rank_by='access'"
            )
        self.name = name
        self.device = resolve_device(device)
        self.rank_by = rank_by
        self._tensor = tensor
        self._dtype = scheme.dtype
        self._num_rows = len(tensor)
        self._row_shape = tuple(tensor.shape[1:])
        row_items = int(np.prod(self._row_shape, dtype=np.int64))
        self._row_bytes = row_items * dtypes.info(scheme.dtype).storage.itemsize
        ctx = graph_context(g)
        self._local = (0, 0)
        if ctx.local_part_id is not None:
            bounds = ctx.bounds(scheme.policy)
            self._local = (int(bounds[ctx.local_part_id]), int(bounds[ctx.local_part_id + 1]))
        num_remote = self._num_rows - (self._local[1] - self._local[0])
        self.capacity = self._capacity(num_remote, fraction, max_bytes)
        self._lock = threading.Lock()
        self._reset_counters()
        self._warmup_left = int(warmup_batches) if rank_by == "access" else 0
        self._warmup_ids: list[np.ndarray] = []
        self._table: _Table | None = None
        if rank_by == "degree":
            self._fill(self._top_by_degree(g, edge_dir))

    # -- choosing and filling ------------------------------------------------------------------------
    def _capacity(self, num_remote: int, fraction: float | None, max_bytes: int | None) -> int:
        count = num_remote
        if fraction is not None:
            count = min(count, int(round(float(fraction) * num_remote)))
        if max_bytes is not None:
            count = min(count, int(max_bytes) // max(self._row_bytes, 1))
        return count

    def _remote_candidates(self) -> np.ndarray:
        start, end = self._local
        ids = np.arange(self._num_rows, dtype=np.int64)
        return np.concatenate([ids[:start], ids[end:]])

    def _top_by_degree(self, g, edge_dir: str) -> np.ndarray:
        candidates = self._remote_candidates()
        count = self.capacity
        if 0 < count < candidates.size:
            degrees = g.out_degrees if edge_dir == "in" else g.in_degrees
            degree = degrees(torch.from_numpy(candidates)).numpy()
            candidates = candidates[np.argpartition(-degree, count - 1)[:count]]
        return candidates[:count]

    def _top_by_access(self, ids: np.ndarray) -> np.ndarray:
        nodes, counts = np.unique(ids, return_counts=True)
        if nodes.size > self.capacity:
            # The most read first; among equal counts the lower ID (np.unique sorted them).
            nodes = nodes[np.argsort(-counts, kind="stable")[: self.capacity]]
        return nodes

    def _fill(self, node_ids: np.ndarray) -> None:
        node_ids = np.sort(node_ids)
        storage = np.ascontiguousarray(self._tensor.pull_storage(node_ids))
        rows = dtypes.to_torch(storage, self._dtype)
        rows = rows.to(self.device)
        if rows.is_cuda:
            # Reads may run on other streams (each loader copies on its own): the rows must be there.
            torch.cuda.current_stream(self.device).synchronize()
            storage = None
        dense = self._num_rows <= self._DENSE_SLOTS_MAX_NODES
        self._table = _Table(node_ids, rows, self._num_rows, dense, storage)

    # -- reading -------------------------------------------------------------------------------------
    def read(self, ids) -> torch.Tensor:
        """The feature rows of ``ids`` on the cache's device (same values and dtype as
        ``g.ndata[name][ids]``).

        Raises:
            IndexError: an ID outside the feature's rows.
        """
        ids = as_id_array(ids, "ids")
        check_id_range(ids, self._num_rows, f"ids of feature {self.name!r}")
        table = self._table
        slots = table.slots_of(ids) if table is not None else np.full(ids.size, -1, dtype=np.int32)
        hit = slots >= 0
        remote = (ids < self._local[0]) | (ids >= self._local[1])
        self._count(ids, hit, remote)
        if table is not None and table.storage is not None:
            return self._read_host(ids, slots, hit, table.storage)
        if table is not None and hit.all():
            return table.rows.index_select(0, self._index(slots))
        miss = ~hit
        pulled = dtypes.to_torch(self._tensor.pull_storage(ids[miss]), self._dtype)
        pulled = host_to_device(pulled, self.device)
        if not hit.any():
            return pulled
        out = torch.empty((ids.size, *self._row_shape), dtype=table.rows.dtype, device=self.device)
        out.index_copy_(
            0, self._index(np.flatnonzero(hit)), table.rows.index_select(0, self._index(slots[hit]))
        )
        out.index_copy_(0, self._index(np.flatnonzero(miss)), pulled)
        return out

    def _read_host(self, ids: np.ndarray, slots: np.ndarray, hit: np.ndarray, storage: np.ndarray):
        if hit.all():
            out = storage[slots]
        else:
            out = np.empty((ids.size, *storage.shape[1:]), dtype=storage.dtype)
            out[hit] = storage[slots[hit]]
            miss = ~hit
            out[miss] = self._tensor.pull_storage(ids[miss])
        return dtypes.to_torch(out, self._dtype)

    def _index(self, positions: np.ndarray) -> torch.Tensor:
        return host_to_device(torch.from_numpy(positions.astype(np.int64, copy=False)), self.device)

    def _count(self, ids: np.ndarray, hit: np.ndarray, remote: np.ndarray) -> None:
        hits, remote_lookups = int(hit.sum()), int(remote.sum())
        fill = None
        with self._lock:
            self._lookups += ids.size
            self._hits += hits
            self._remote_lookups += remote_lookups
            self._rows_pulled += remote_lookups - hits
            if self._warmup_left > 0:
                self._warmup_ids.append(ids[remote])
                self._warmup_left -= 1
                if self._warmup_left == 0:
                    fill, self._warmup_ids = np.concatenate(self._warmup_ids), []
        if fill is not None:
            # The read that ends the warm-up fills the cache; reads meanwhile pull as before.
            self._fill(self._top_by_access(fill))

    # -- counters ------------------------------------------------------------------------------------
    def _reset_counters(self) -> None:
        self._lookups = self._hits = self._remote_lookups = self._rows_pulled = 0

    def stats(self, reset: bool = False) -> FeatureCacheStats:
        """The counters (see :class:`FeatureCacheStats`); ``reset`` starts them again from 0 (e.g. per
        epoch)."""
        table = self._table
        with self._lock:
            out = FeatureCacheStats(
                lookups=self._lookups,
                hits=self._hits,
                remote_lookups=self._remote_lookups,
                rows_pulled=self._rows_pulled,
                bytes_pulled=self._rows_pulled * self._row_bytes,
                cached_rows=0 if table is None else int(table.node_ids.size),
                cached_bytes=self.nbytes,
            )
            if reset:
                self._reset_counters()
        return out

    @property
    def node_ids(self) -> np.ndarray:
        """The cached node IDs, sorted (empty while an ``"access"`` cache warms up)."""
        table = self._table
        return table.node_ids if table is not None else np.empty(0, dtype=np.int64)

    @property
    def nbytes(self) -> int:
        """Memory the cached rows take."""
        table = self._table
        return 0 if table is None else int(table.rows.numel() * table.rows.element_size())

    @property
    def hits(self) -> int:
        """Rows served from the cache so far."""
        return self._hits

    @property
    def lookups(self) -> int:
        """Rows asked for so far."""
        return self._lookups

    @property
    def hit_rate(self) -> float:
        """Share of the rows read so far that came from the cache."""
        return self.stats().hit_rate
