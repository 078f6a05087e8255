"""What the node and edge loaders share: the graph and its sampler, the features and labels pulled for
each batch (from memory-recycling buffers or a :class:`RemoteFeatureCache`), and the move of each
finished batch to the loader's device (:mod:`.device_transfer`)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from graphstore.client.block import Block
from graphstore.client.buffers import RowBufferPool
from graphstore.client.dataloader.data_names import FROM_GRAPH, default_feature_names, default_label_name
from graphstore.client.dataloader.device_transfer import BatchTransfer, resolve_device
from graphstore.client.dataloader.feature_cache import FeatureCacheStats, RemoteFeatureCache
from graphstore.client.dataloader.loader_base import LoaderBase

# Feature buffers recycled per loaded feature: enough for the default prefetch of 2, the batch in
# training and the one being produced (more prefetch just allocates the extra batches afresh).
_RECYCLED_BATCHES = 4


class GraphLoaderBase(LoaderBase):
    """Feature pulls and device moves shared by the node and edge loaders.

    The loader's device is ``device`` when given, else the sampler's ``output_device`` when it has one,
    else the trainer's bound device, else the CPU; the whole batch (IDs, blocks and their data,
    features, labels) lands there.
    """

    def _init_graph(
        self, g, sampler, device, load_features, load_labels, cache_remote_features=0.0, pin_memory=None
    ) -> None:
        self.g = g
        self.graph_sampler = sampler
        if device is None:
            device = getattr(sampler, "output_device", None)
        self.device = resolve_device(device)
        self._transfer = BatchTransfer(self.device, pin_memory)
        if load_features is FROM_GRAPH:
            load_features = default_feature_names(g)
        if load_labels is FROM_GRAPH:
            load_labels = default_label_name(g)
        if isinstance(load_features, str):
            load_features = (load_features,)
        self.load_features = tuple(load_features or ())
        self.load_labels = load_labels
        available = set(g.ndata.keys())
        wanted = list(self.load_features) + ([load_labels] if load_labels else [])
        for name in wanted:
            if name not in available:
                raise KeyError(
                    f"node data {name!r} does not exist on the graph (available: {sorted(available)}); "
                    "pass load_features=() / load_labels=None to load nothing"
                )
        # Input features of a batch are tens of MB: their memory is recycled once a batch is dropped.
        self._buffers = RowBufferPool(max_buffers=_RECYCLED_BATCHES * max(1, len(self.load_features)))
        self.feature_caches: dict[str, RemoteFeatureCache] = {}
        if isinstance(cache_remote_features, Mapping):
            self.feature_caches = {n: c for n, c in cache_remote_features.items() if n in self.load_features}
        elif cache_remote_features:
            edge_dir = getattr(sampler, "edge_dir", "in")
            for name in self.load_features:
                self.feature_caches[name] = RemoteFeatureCache(
                    g, name, cache_remote_features, edge_dir, device=self.device
                )

    @property
    def pin_memory(self) -> bool:
        """Whether host tensors are staged in pinned memory."""
        return self._transfer.pin_memory

    def cache_stats(self, reset: bool = False) -> dict[str, FeatureCacheStats]:
        """``{feature: counters}`` of the loader's feature caches (see :meth:`RemoteFeatureCache.stats`)."""
        return {name: cache.stats(reset) for name, cache in self.feature_caches.items()}

    def _attach(
        self, input_nodes: torch.Tensor, output_nodes: torch.Tensor | None, blocks: list[Block]
    ) -> None:
        for name in self.load_features:
            cache = self.feature_caches.get(name)
            if cache is not None:
                rows = cache.read(input_nodes)
            else:
                rows = self.g.ndata[name].read(input_nodes, buffers=self._buffers)
            blocks[0].srcdata[name] = rows
        if self.load_labels and output_nodes is not None:
            blocks[-1].dstdata[self.load_labels] = self.g.ndata[self.load_labels][output_nodes]

    def _make_batch(self, positions):
        with self._transfer.producing():
            return self._transfer.stage(self._produce(positions))

    def _deliver_batch(self, staged):
        return self._transfer.deliver(staged)
