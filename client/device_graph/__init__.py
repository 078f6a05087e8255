"""Sampling and gathering on the loader's device: the co-located partitions' structure and read-only node
data held there (GPU memory, or pinned host memory the GPU reads through UVA), torch kernels that sample
and relabel on it, and the node data reads of a batch. A loader uses it with ``use_uva=True`` or
``placement=`` (see :class:`~graphstore.client.dataloader.DistNodeDataLoader`)."""

from graphstore.client.device_graph.block_sampler import DeviceBlockSampler
from graphstore.client.device_graph.local_graph import LocalDeviceGraph
from graphstore.client.device_graph.node_data import DeviceNodeData
from graphstore.client.device_graph.placement import DEVICE, PINNED, PLACEMENTS, resolve_placement, uva_view
from graphstore.client.device_graph.stage_clock import StageClock

__all__ = [
    "DEVICE",
    "PINNED",
    "PLACEMENTS",
    "StageClock",
    "DeviceBlockSampler",
    "DeviceNodeData",
    "LocalDeviceGraph",
    "resolve_placement",
    "uva_view",
]
