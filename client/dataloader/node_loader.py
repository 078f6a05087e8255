"""``DistNodeDataLoader``: mini-batches for node classification, ``(input_nodes, output_nodes, blocks)``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from graphstore.client.dataloader.data_names import FROM_GRAPH
from graphstore.client.dataloader.feature_cache import RemoteFeatureCache
from graphstore.client.dataloader.graph_loader_base import GraphLoaderBase
from graphstore.client.dataloader.items import LoaderItems


class DistNodeDataLoader(GraphLoaderBase):
    """Mini-batches for node classification: ``(input_nodes, output_nodes, blocks)``.

    ``blocks[0].srcdata[f]`` holds the input features ``f`` of ``load_features`` and
    ``blocks[-1].dstdata[load_labels]`` the output nodes' labels, pulled in the background. On a typed
    graph the nodes come as ``{ntype: IDs}`` (DGL's form): ``input_nodes`` and ``output_nodes`` are
    dicts per type, and batches take the items type after type (shuffled together).

    Args:
        g: the DistGraph.
        nids: the training node IDs of this rank (e.g. from ``node_split``), or a boolean mask; or
            ``{ntype: IDs or mask}``.
        sampler: a :class:`~graphstore.client.samplers.NeighborSampler` (anything with ``sample_blocks``).
        batch_size, shuffle, drop_last: as in PyTorch.
        device: where the whole batch lands (IDs, blocks, features, labels): ``"cpu"``, ``"cuda"`` (the
            trainer's GPU) or ``"cuda:N"``; default: the sampler's ``output_device``, else the trainer's
            bound device, else the CPU (see :mod:`.device_transfer`).
        load_features: node features to pull for the input nodes: names (for every node type that has
            them) or ``{ntype: names}``; default (or None): the sampler's ``prefetch_node_feats``, else
            the graph's features (``feat``, else its floating ``[N, D]`` arrays; see :mod:`.data_names`).
        load_labels: node data to pull for the output nodes (a name, or ``{ntype: name}``; None: none);
            default: the graph's labels (``label``, ``labels`` or ``y``, else its only integer ``[N]``
            array, else none).
        prefetch: batches produced ahead (0: no background threads).
        num_workers: background threads.
        seed: shuffling seed.
        equal_batches: agree with the other trainer ranks on the batch count.
        cache_remote_features: keep this share (0..1) of the other partitions' nodes' input features
            in memory, chosen by degree (see :class:`RemoteFeatureCache`); 0 caches nothing; or a
            ``{feature: RemoteFeatureCache}`` mapping to share caches between loaders. A cache made
            here is held on ``device``.
        pin_memory: stage host tensors in pinned memory for non-blocking copies; default: on when
            ``device`` is a GPU.
        use_uva: sample the co-located partitions and gather their read-only node data on the GPU,
            reading them from pinned host memory (DGL's spelling of ``placement="pinned"``).
        placement: where the co-located partitions' structure and read-only node data are held for the
            loader's device: None (sample and gather on the CPU, then move the batch), ``"pinned"``
            (pinned host memory the GPU reads, as ``use_uva``) or ``"device"`` (a copy in the device's
            memory; on a CPU device, the same torch kernels on the CPU). Other partitions are still
            sampled by their servers, at the same time. Blocks are sampled there for a
            :class:`~graphstore.client.samplers.NeighborSampler` over in-edges (other samplers run as
            before); the held data is read once (edge weights for ``prob`` too), so data a server
            changes is never held.
        feature_dtype: deliver floating input features in this type (e.g. ``torch.bfloat16`` for a
            bf16 model: held and gathered in it, half the bytes); None: the stored type. Applies with
            a ``placement``.
        carry_node_data: ask the servers to send each batch's node data with their sampling answers
            (input features with the last hop, labels with the first: ``client/batch_rows.py``), so that
            only the rows no answer carried are pulled afterwards. The device path (``placement``) and
            samplers other than :class:`~graphstore.client.samplers.NeighborSampler` pull as before.

    Raises:
        KeyError: a feature or label name the graph does not have.
        ValueError: bad sizes, or a cache of a writable feature.
    """

    def __init__(
        self,
        g,
        nids,
        sampler,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        device=None,
        load_features: Sequence[str] | str | Mapping | None = FROM_GRAPH,
        load_labels: str | Mapping | None = FROM_GRAPH,
        prefetch: int = 2,
        num_workers: int = 1,
        seed: int | None = None,
        equal_batches: bool = True,
        cache_remote_features: float | Mapping[str, RemoteFeatureCache] = 0.0,
        pin_memory: bool | None = None,
        use_uva: bool = False,
        placement: str | None = None,
        feature_dtype=None,
        carry_node_data: bool = True,
    ):
        self.items = LoaderItems(nids, "nids", lambda ntype: g.ntypes[g.get_ntype_id(ntype)])
        self._init_graph(
            g,
            sampler,
            device,
            load_features,
            load_labels,
            cache_remote_features,
            pin_memory,
            use_uva,
            placement,
            feature_dtype,
            carry_node_data,
        )
        super().__init__(
            len(self.items), batch_size, shuffle, drop_last, prefetch, num_workers, seed, equal_batches
        )

    def _produce(self, positions: np.ndarray):
        seeds = self.items.take(positions)
        rows = self._batch_rows(with_labels=True)
        input_nodes, output_nodes, blocks = self._sample_blocks(seeds, rows=rows)
        self._attach(input_nodes, output_nodes, blocks, rows)
        return input_nodes, output_nodes, blocks
