"""``RemoteFeatureCache``: an opt-in in-memory copy of the most-sampled remote nodes' features."""

from __future__ import annotations

import threading

import numpy as np
import torch

from graphstore import dtypes
from graphstore.client.sampling import graph_context
from graphstore.ids import as_id_array


class RemoteFeatureCache:
    """An in-memory copy of a read-only node feature for the remote nodes sampled most often.

    A sampled node enters a batch through one of its out-edges (in-edges with ``edge_dir='out'``), so
    the nodes of highest out-degree outside the co-located partition are the ones whose rows most
    often cross the network. The cache pulls the rows of the top ``fraction`` of them once; reads
    serve those rows from memory and ask the DistTensor (co-located reads, RPCs) for the rest.
    Only features loaded from the partition files and never written are cached (rows cannot change).

    Args:
        g: the DistGraph.
        name: the node feature.
        fraction: share (0..1] of the non-co-located nodes to cache.
        edge_dir: the sampler's edge direction (ranks nodes by out- or in-degree).

    Raises:
        KeyError: an unknown feature.
        ValueError: a writable or run-time feature, or a fraction outside (0, 1].
    """

    _DENSE_SLOTS_MAX_NODES = 1 << 26

    def __init__(self, g, name: str, fraction: float, edge_dir: str = "in"):
        if not 0.0 < float(fraction) <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        tensor = g.ndata[name]
        scheme = tensor.scheme
        if scheme.writable or not scheme.from_partition:
            raise ValueError(
                f"node feature {name!r} is writable or created at run time; only read-only partition "
                "features can be cached"
            )
        ctx = graph_context(g)
        num_nodes = int(g.num_nodes())
        candidates = np.arange(num_nodes, dtype=np.int64)
        if ctx.local_part_id is not None:
            start, end = ctx.book.node_bounds[ctx.local_part_id], ctx.book.node_bounds[ctx.local_part_id + 1]
            candidates = np.concatenate([candidates[:start], candidates[end:]])
        count = int(round(float(fraction) * candidates.size))
        if count and count < candidates.size:
            degree = (g.out_degrees if edge_dir == "in" else g.in_degrees)(
                torch.from_numpy(candidates)
            ).numpy()
            candidates = candidates[np.argpartition(-degree, count - 1)[:count]]
        self.node_ids = np.sort(candidates[:count])
        self.name = name
        self._tensor = tensor
        self._dtype = scheme.dtype
        self._rows = tensor.pull_storage(self.node_ids)
        if num_nodes <= self._DENSE_SLOTS_MAX_NODES:
            self._slots = np.full(num_nodes, -1, dtype=np.int32)
            self._slots[self.node_ids] = np.arange(self.node_ids.size, dtype=np.int32)
        else:
            self._slots = None
        self._lock = threading.Lock()
        self.hits = 0
        self.lookups = 0

    @property
    def nbytes(self) -> int:
        """Memory the cached rows take."""
        return int(self._rows.nbytes)

    @property
    def hit_rate(self) -> float:
        """Share of the rows read so far that came from the cache."""
        return self.hits / self.lookups if self.lookups else 0.0

    def _slots_of(self, ids: np.ndarray) -> np.ndarray:
        if self._slots is not None:
            return self._slots[ids]
        where = np.minimum(np.searchsorted(self.node_ids, ids), max(self.node_ids.size - 1, 0))
        found = self.node_ids.size > 0 and (self.node_ids[where] == ids)
        return np.where(found, where, -1)

    def read(self, ids) -> torch.Tensor:
        """The feature rows of ``ids`` (same values and dtype as ``g.ndata[name][ids]``)."""
        ids = as_id_array(ids, "ids")
        slots = self._slots_of(ids)
        hit = slots >= 0
        hits = int(hit.sum())
        with self._lock:
            self.hits += hits
            self.lookups += ids.size
        if hits == ids.size:
            out = self._rows[slots]
        else:
            out = np.empty((ids.size, *self._rows.shape[1:]), dtype=self._rows.dtype)
            out[hit] = self._rows[slots[hit]]
            miss = ~hit
            out[miss] = self._tensor.pull_storage(ids[miss])
        return dtypes.to_torch(out, self._dtype)
