"""Node data rows for IDs on a device: the held rows gathered there, the others pulled from their servers
(or a :class:`~graphstore.client.dataloader.feature_cache.RemoteFeatureCache`) and copied in.

Read-only data of the partition files (features, labels, masks) is held for the co-located partitions by
the :class:`~graphstore.client.device_graph.local_graph.LocalDeviceGraph`, in the type the model reads
(``dtype``: e.g. float32 features held as bfloat16, half the bytes each batch gathers), so a batch's held
rows are one gather on the device. Rows of other partitions are pulled by the client into pinned memory
and copied without blocking; data a server may change (writable tensors, embeddings) is always pulled.
"""

from __future__ import annotations

import torch

from graphstore.client.device import pin_host_tensor
from graphstore.client.device_graph.local_graph import LocalDeviceGraph
from graphstore.client.device_graph.stage_clock import StageClock, timed


class DeviceNodeData:
    """One node data ``name`` of ``ntype``, read for IDs on ``local.device``.

    Args:
        g: the DistGraph.
        local: the held co-located partitions.
        ntype: the node type.
        name: the node data's name.
        dtype: the type rows are delivered in (None: the stored type).
        cache: a cache of other partitions' rows (on the device), or None.

    Raises:
        KeyError: data the node type does not have.
    """

    def __init__(self, g, local: LocalDeviceGraph, ntype: str, name: str, dtype=None, cache=None):
        self.local = local
        self.ntype = ntype
        self.name = name
        self.tensor = g.nodes[ntype].data[name]
        self.dtype = self.tensor.dtype if dtype is None else dtype
        self.cache = cache
        # Rows a server may change are never held (the copy would go stale).
        self.held = bool(getattr(self.tensor, "_local_reads", False)) and bool(local.parts)
        self._pins = local.device.type == "cuda" and torch.cuda.is_available()
        self.clock: StageClock | None = None

    def table(self) -> torch.Tensor | None:
        """The held rows (made on first use), or None when this data is not held."""
        return self.local.node_table(self.ntype, self.name, self.dtype) if self.held else None

    def read(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows for per-type IDs ``ids`` (on the device; known to be in range), on the device.

        Args:
            ids: int64 IDs of ``ntype`` on ``local.device``.

        Returns:
            ``[len(ids), *row_shape]`` rows in ``dtype``.
        """
        device = self.local.device
        table = self.table()
        if table is not None and self.local.holds_all_nodes(self.ntype):
            with timed(self.clock, "gather_held"):
                return table.index_select(0, ids)
        out = torch.empty((ids.numel(), *self.tensor.shape[1:]), dtype=self.dtype, device=device)
        if table is None:
            outside, other = torch.arange(ids.numel(), device=device), ids
        else:
            with timed(self.clock, "gather_held"):
                lo, hi = self.local.node_range(self.ntype)
                inside = (ids >= lo) & (ids < hi)
                held = torch.nonzero(inside).reshape(-1)
                out[held] = table.index_select(0, ids[held] - lo)
                outside = torch.nonzero(~inside).reshape(-1)
                other = ids[outside]
        if other.numel():
            with timed(self.clock, "pull_remote"):
                out[outside] = self._pull(other.cpu())
        return out

    def _pull(self, host_ids: torch.Tensor) -> torch.Tensor:
        """Rows of other partitions, on the device (from the cache when there is one)."""
        device = self.local.device
        if self.cache is not None:
            rows = self.cache.read(host_ids)
        else:
            rows = self.tensor.read(host_ids)
        if rows.device != device:
            if self._pins:
                rows = pin_host_tensor(rows)
            rows = rows.to(device, non_blocking=self._pins)
        return rows.to(self.dtype)
