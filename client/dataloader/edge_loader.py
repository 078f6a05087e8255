"""``DistEdgeDataLoader``: mini-batches for link prediction over edges,
``(input_nodes, pair_graph, [neg_pair_graph,] blocks)``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from graphstore.client.dataloader.feature_cache import RemoteFeatureCache
from graphstore.client.dataloader.graph_loader_base import GraphLoaderBase
from graphstore.client.dataloader.loader_base import as_item_ids
from graphstore.client.dataloader.pair_graph import PairGraph
from graphstore.client.local_ids import compact_ids
from graphstore.client.samplers import Uniform
from graphstore.client.sampling import find_edges, graph_context
from graphstore.ids import as_id_array

# What the loader can keep out of a batch's sampled blocks: nothing, the batch's own edges, or those
# and their reverse edges.
EXCLUDE_MODES = (None, "self", "reverse_id")


class DistEdgeDataLoader(GraphLoaderBase):
    """Mini-batches for link prediction over edges.

    Yields ``(input_nodes, pair_graph, blocks)``, or ``(input_nodes, pair_graph, neg_pair_graph, blocks)``
    with a negative sampler; the blocks' output nodes are the pair graphs' nodes (every endpoint of
    the batch's positive and negative pairs). The batch's own edges can be kept out of the sampled
    blocks, so the model does not see the edges it must predict.

    Args:
        g: the DistGraph.
        eids: the training edge IDs of this rank (e.g. from ``edge_split``), or a boolean mask.
        sampler: a NeighborSampler.
        batch_size, shuffle, drop_last: as in PyTorch.
        negative_sampler: ``Uniform(k)`` or any callable ``(g, eids) -> (neg_src, neg_dst)``.
        exclude: ``None``, ``'self'`` (drop the batch's edges from the blocks) or ``'reverse_id'``
            (also their reverse edges, given by ``reverse_eids``).
        reverse_eids: for ``'reverse_id'``: ``reverse_eids[e]`` is the ID of edge ``e``'s reverse.
        device, load_features, prefetch, num_workers, seed, equal_batches, cache_remote_features: as in
            DistNodeDataLoader.

    Raises:
        ValueError: an unknown ``exclude``, or ``'reverse_id'`` without a full ``reverse_eids``.
        KeyError: a feature name the graph does not have.
    """

    def __init__(
        self,
        g,
        eids,
        sampler,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        negative_sampler: Callable | None = None,
        exclude: str | None = None,
        reverse_eids=None,
        device=None,
        load_features: Sequence[str] | str = ("feat",),
        prefetch: int = 2,
        num_workers: int = 1,
        seed: int | None = None,
        equal_batches: bool = True,
        cache_remote_features: float | Mapping[str, RemoteFeatureCache] = 0.0,
    ):
        if exclude not in EXCLUDE_MODES:
            raise ValueError(f"exclude must be one of {EXCLUDE_MODES}, got {exclude!r}")
        self.eids = as_item_ids(eids, "eids")
        self._init_graph(g, sampler, device, load_features, None, cache_remote_features)
        self._num_nodes = int(graph_context(g).book.num_nodes())
        num_edges = int(graph_context(g).book.num_edges())
        self.reverse_eids = None
        if exclude == "reverse_id":
            if reverse_eids is None:
                raise ValueError("exclude='reverse_id' needs reverse_eids (the reverse edge of each edge)")
            self.reverse_eids = as_id_array(reverse_eids, "reverse_eids")
            if self.reverse_eids.size != num_edges:
                raise ValueError(
                    f"reverse_eids must have one entry per edge ({num_edges}), got {self.reverse_eids.size}"
                )
        self.exclude = exclude
        self.negative_sampler = negative_sampler
        super().__init__(
            self.eids.size, batch_size, shuffle, drop_last, prefetch, num_workers, seed, equal_batches
        )

    def _produce(self, positions: np.ndarray):
        batch_eids = self.eids[positions]
        src, dst = find_edges(self.g, batch_eids)
        src_np, dst_np = src.numpy(), dst.numpy()
        arrays = [src_np, dst_np]
        if self.negative_sampler is not None:
            if isinstance(self.negative_sampler, Uniform):
                neg_src, neg_dst = self.negative_sampler.from_sources(src_np, self._num_nodes)
            else:
                neg_src, neg_dst = self.negative_sampler(self.g, torch.from_numpy(batch_eids))
            arrays += [as_id_array(neg_src, "neg_src"), as_id_array(neg_dst, "neg_dst")]
        seeds, local = compact_ids(np.empty(0, dtype=np.int64), arrays, self._num_nodes)
        seeds_t = torch.from_numpy(seeds)
        excluded = None
        if self.exclude == "self":
            excluded = batch_eids
        elif self.exclude == "reverse_id":
            excluded = np.concatenate([batch_eids, self.reverse_eids[batch_eids]])
        input_nodes, _, blocks = self.graph_sampler.sample_blocks(self.g, seeds_t, exclude_eids=excluded)
        self._attach(input_nodes, None, blocks)
        pair = PairGraph(
            torch.from_numpy(local[0]), torch.from_numpy(local[1]), seeds_t, torch.from_numpy(batch_eids)
        )
        if self.negative_sampler is None:
            return self._move(input_nodes), self._move(pair), self._move(blocks)
        neg_pair = PairGraph(torch.from_numpy(local[2]), torch.from_numpy(local[3]), seeds_t)
        return self._move(input_nodes), self._move(pair), self._move(neg_pair), self._move(blocks)
