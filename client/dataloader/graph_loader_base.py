"""What the node and edge loaders share: the graph and its sampler, the node data pulled for each batch
(input features per node type, from memory-recycling buffers or a :class:`RemoteFeatureCache`; labels of
the output nodes), and the move of each finished batch to the loader's device (:mod:`.device_transfer`)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping

import torch

from graphstore.client.batch_rows import BatchRows
from graphstore.client.block import Block
from graphstore.client.buffers import RowBufferPool
from graphstore.client.dataloader.data_names import FROM_GRAPH, default_feature_names, default_label_name
from graphstore.client.dataloader.device_transfer import BatchTransfer, resolve_device
from graphstore.client.dataloader.feature_cache import FeatureCacheStats, RemoteFeatureCache
from graphstore.client.dataloader.loader_base import LoaderBase
from graphstore.client.device_graph import (
    DeviceBlockSampler,
    DeviceNodeData,
    LocalDeviceGraph,
    resolve_placement,
)
from graphstore.client.device_graph.stage_clock import StageClock, timed
from graphstore.client.sampling import graph_context

# Feature buffers recycled per loaded feature: enough for the default prefetch of 2, the batch in
# training and the one being produced (more prefetch just allocates the extra batches afresh).
_RECYCLED_BATCHES = 4


def node_data_plan(g, names, what: str) -> dict[str, tuple[str, ...]]:
    """Which node data to pull for which node type.

    Args:
        g: the DistGraph.
        names: a name or names (pulled for every node type that has them), or ``{ntype: name(s)}``.
        what: the loader argument, for error messages.

    Returns:
        ``{ntype: names}`` for the types that get something.

    Raises:
        KeyError: a name no node type has (or the named type lacks), or an unknown node type.
    """

    def available(ntype: str) -> list[str]:
        return sorted(g.nodes[ntype].data)

    if isinstance(names, Mapping):
        plan = {}
        for key, values in names.items():
            ntype = g.ntypes[g.get_ntype_id(key)]
            values = (values,) if isinstance(values, str) else tuple(values)
            for name in values:
                if name not in g.nodes[ntype].data:
                    raise KeyError(
                        f"{what}: node type {ntype!r} has no data {name!r} (available: {available(ntype)})"
                    )
            if values:
                plan[ntype] = values
        return plan
    plan: dict[str, tuple[str, ...]] = {}
    for name in (names,) if isinstance(names, str) else tuple(names or ()):
        holders = [t for t in g.ntypes if name in g.nodes[t].data]
        if not holders:
            known = available(g.ntypes[0]) if len(g.ntypes) == 1 else {t: available(t) for t in g.ntypes}
            raise KeyError(
                f"node data {name!r} does not exist on the graph (available: {known}); pass "
                "load_features=() / load_labels=None to load nothing"
            )
        for ntype in holders:
            plan[ntype] = plan.get(ntype, ()) + (name,)
    return plan


def _takes_rows(sampler) -> bool:
    """Whether ``sampler.sample_blocks`` takes the batch's ``rows`` (a subclass overriding it may not)."""
    try:
        return "rows" in inspect.signature(sampler.sample_blocks).parameters
    except (AttributeError, TypeError, ValueError):
        return False


class GraphLoaderBase(LoaderBase):
    """Node data pulls and device moves shared by the node and edge loaders.

    The loader's device is ``device`` when given, else the sampler's ``output_device`` when it has one,
    else the trainer's bound device, else the CPU; the whole batch (IDs, blocks and their data,
    features, labels; every node type's) lands there.
    """

    def _init_graph(
        self,
        g,
        sampler,
        device,
        load_features,
        load_labels,
        cache_remote_features=0.0,
        pin_memory=None,
        use_uva: bool = False,
        placement: str | None = None,
        feature_dtype: torch.dtype | None = None,
        carry_node_data: bool = True,
    ) -> None:
        self.g = g
        self.graph_sampler = sampler
        self.carry_node_data = bool(carry_node_data)
        self._carried_names: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        if device is None:
            device = getattr(sampler, "output_device", None)
        self.device = resolve_device(device)
        self._transfer = BatchTransfer(self.device, pin_memory)
        if load_features is FROM_GRAPH or load_features is None:
            load_features = getattr(sampler, "prefetch_node_feats", None) or default_feature_names(g)
        if load_labels is FROM_GRAPH:
            load_labels = default_label_name(g)
        self.features = node_data_plan(g, load_features, "load_features")
        self.labels = node_data_plan(g, load_labels, "load_labels") if load_labels else {}
        self.load_features = tuple(dict.fromkeys(n for names in self.features.values() for n in names))
        self.load_labels = load_labels
        count = sum(len(names) for names in self.features.values())
        # Input features of a batch are tens of MB: their memory is recycled once a batch is dropped.
        self._buffers = RowBufferPool(max_buffers=_RECYCLED_BATCHES * max(1, count))
        self.feature_caches: dict[str, RemoteFeatureCache] = {}
        if cache_remote_features and len(g.ntypes) > 1:
            raise ValueError("cache_remote_features is for graphs with one node type")
        if isinstance(cache_remote_features, Mapping):
            self.feature_caches = {n: c for n, c in cache_remote_features.items() if n in self.load_features}
        elif cache_remote_features:
            edge_dir = getattr(sampler, "edge_dir", "in")
            for name in self.load_features:
                self.feature_caches[name] = RemoteFeatureCache(
                    g, name, cache_remote_features, edge_dir, device=self.device
                )
        self.placement = resolve_placement(placement, use_uva, self.device)
        self.feature_dtype = feature_dtype
        self._init_device_graph(g, sampler)

    def _init_device_graph(self, g, sampler) -> None:
        """With a placement: the co-located graph held for the device (shared by the client's loaders
        there), its block sampler, and a device reader of each node data the batches carry."""
        self._device_sampler = None
        self._device_data: dict[tuple[str, str], DeviceNodeData] = {}
        self._clock: StageClock | None = None
        self.device_graph: LocalDeviceGraph | None = None
        if self.placement is None:
            return
        ctx = graph_context(g)
        device, placement = self.device, self.placement
        local = ctx.shared_object(
            ("device_graph", str(device), placement), lambda: LocalDeviceGraph(g, ctx, device, placement)
        )
        self.device_graph = local
        if DeviceBlockSampler.supports(sampler):
            self._device_sampler = DeviceBlockSampler(g, local)
        for ntype, names in self.features.items():
            for name in names:
                floating = g.nodes[ntype].data[name].dtype.is_floating_point
                self._device_data[(ntype, name)] = DeviceNodeData(
                    g,
                    local,
                    ntype,
                    name,
                    self.feature_dtype if floating else None,
                    self.feature_caches.get(name),
                )
        for ntype, names in self.labels.items():
            for name in names:
                self._device_data.setdefault((ntype, name), DeviceNodeData(g, local, ntype, name))

    def profile_stages(self, clock: StageClock | None) -> None:
        """Time this loader's stages with ``clock`` (None stops it), for profiles: ``sample`` (the blocks),
        ``gather`` (node data onto them) and ``move`` (the batch to the device); on the device path also
        ``route``, ``sample_held``, ``sample_remote``, ``relabel``, ``gather_held`` and ``pull_remote``
        inside them."""
        self._clock = clock
        if self._device_sampler is not None:
            self._device_sampler.clock = clock
        for reader in self._device_data.values():
            reader.clock = clock

    def _batch_rows(self, with_labels: bool) -> BatchRows | None:
        """What one batch asks the servers to send with its sampling answers: its features (not those
        a feature cache serves) and, for a node loader, its labels; None when nothing is carried (turned
        off, the device path, or a sampler that does not take it)."""
        if (
            not self.carry_node_data
            or self._device_sampler is not None
            or not _takes_rows(self.graph_sampler)
        ):
            return None
        if self._carried_names is None:
            data = self.g.nodes
            features = tuple(
                data[ntype].data[name].name
                for ntype, names in self.features.items()
                for name in names
                if name not in self.feature_caches
            )
            labels = tuple(
                data[ntype].data[name].name for ntype, names in self.labels.items() for name in names
            )
            self._carried_names = features, labels
        features, labels = self._carried_names
        return BatchRows(features, labels if with_labels else ())

    def _sample_blocks(self, seeds, exclude_eids=None, rows: BatchRows | None = None):
        """The sampler's blocks for ``seeds``: on the device when its graph is held there; the batch's
        ``rows`` ride along with the answers."""
        with timed(self._clock, "sample"):
            return self._sample_blocks_untimed(seeds, exclude_eids, rows)

    def _sample_blocks_untimed(self, seeds, exclude_eids=None, rows: BatchRows | None = None):
        if self._device_sampler is not None:
            return self._device_sampler.sample_blocks(self.graph_sampler, seeds, exclude_eids)
        extra = {} if rows is None else {"rows": rows}
        if exclude_eids is None:
            return self.graph_sampler.sample_blocks(self.g, seeds, **extra)
        return self.graph_sampler.sample_blocks(self.g, seeds, exclude_eids=exclude_eids, **extra)

    def _read_node_data(self, ntype: str, name: str, ids, buffers=None, rows: BatchRows | None = None):
        """Rows of node data ``name`` of ``ntype`` for ``ids``: read on the device when it is held there;
        those the batch's sampling answers carried are not read again."""
        reader = self._device_data.get((ntype, name))
        if reader is not None:
            return reader.read(torch.as_tensor(ids).to(self.device))
        cache = self.feature_caches.get(name)
        if cache is not None:
            return cache.read(ids)
        data = self.g.nodes[ntype].data[name]
        carried = rows.of(data.name) if rows is not None else ()
        return data.read(ids, buffers=buffers, carried=carried)

    @property
    def pin_memory(self) -> bool:
        """Whether host tensors are staged in pinned memory."""
        return self._transfer.pin_memory

    def cache_stats(self, reset: bool = False) -> dict[str, FeatureCacheStats]:
        """``{feature: counters}`` of the loader's feature caches (see :meth:`RemoteFeatureCache.stats`)."""
        return {name: cache.stats(reset) for name, cache in self.feature_caches.items()}

    def _attach(self, input_nodes, output_nodes, blocks: list[Block], rows: BatchRows | None = None) -> None:
        """Pull the input features into ``blocks[0]``'s source frames and the labels of ``output_nodes``
        into ``blocks[-1]``'s destination frames (node IDs: a tensor, or ``{ntype: IDs}``); rows the
        sampling answers carried (``rows``) are taken from there."""
        with timed(self._clock, "gather"):
            self._attach_untimed(input_nodes, output_nodes, blocks, rows)

    def _attach_untimed(self, input_nodes, output_nodes, blocks: list[Block], rows=None) -> None:
        for ntype, names in self.features.items():
            ids = input_nodes[ntype] if isinstance(input_nodes, Mapping) else input_nodes
            frame = blocks[0].srcnodes[ntype].data
            for name in names:
                frame[name] = self._read_node_data(ntype, name, ids, self._buffers, rows)
        if output_nodes is None:
            return
        for ntype, names in self.labels.items():
            if isinstance(output_nodes, Mapping) and ntype not in output_nodes:
                continue
            ids = output_nodes[ntype] if isinstance(output_nodes, Mapping) else output_nodes
            frame = blocks[-1].dstnodes[ntype].data
            for name in names:
                frame[name] = self._read_node_data(ntype, name, ids, rows=rows)

    def _make_batch(self, positions):
        with self._transfer.producing():
            batch = self._produce(positions)
            with timed(self._clock, "move"):
                return self._transfer.stage(batch)

    def _deliver_batch(self, staged):
        return self._transfer.deliver(staged)
