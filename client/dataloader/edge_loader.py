"""``DistEdgeDataLoader``: mini-batches for link prediction over edges,
``(input_nodes, pair_graph, [neg_pair_graph,] blocks)``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from graphstore.client.dataloader.data_names import FROM_GRAPH
from graphstore.client.dataloader.exclusion import (
    EXCLUDE_MODES,
    resolve_reverse_etypes,
    reverse_edge_ids,
)
from graphstore.client.dataloader.feature_cache import RemoteFeatureCache
from graphstore.client.dataloader.graph_loader_base import GraphLoaderBase
from graphstore.client.dataloader.items import LoaderItems
from graphstore.client.dataloader.pair_graph import PairGraph
from graphstore.client.local_ids import compact_by_type
from graphstore.client.samplers import Uniform
from graphstore.client.sampling import find_edges, graph_context
from graphstore.ids import as_id_array


class DistEdgeDataLoader(GraphLoaderBase):
    """Mini-batches for link prediction over edges.

    Yields ``(input_nodes, pair_graph, blocks)``, or ``(input_nodes, pair_graph, neg_pair_graph, blocks)``
    with a negative sampler; the blocks' output nodes are the pair graphs' nodes (every endpoint of
    the batch's positive and negative pairs). The batch's own edges can be kept out of the sampled
    blocks (before sampling: a node still gets its fanout of other edges), so the model does not see
    the edges it must predict. On a typed graph the edges come as ``{etype: IDs}`` (DGL's form), the
    pair graphs and ``input_nodes`` are typed, and batches take the edges type after type (shuffled
    together).

    Args:
        g: the DistGraph.
        eids: the training edge IDs of this rank (e.g. from ``edge_split``), or a boolean mask; or
            ``{etype: IDs or mask}``.
        sampler: a NeighborSampler.
        batch_size, shuffle, drop_last: as in PyTorch.
        negative_sampler: ``Uniform(k)`` (negatives of the destination's type) or any callable
            ``(g, eids) -> (neg_src, neg_dst)`` (``{etype: (neg_src, neg_dst)}`` for typed ``eids``).
        exclude: ``None``, ``'self'`` (the batch's edges), ``'reverse_id'`` (also their reverse edges,
            given by ``reverse_eids``; one edge type) or ``'reverse_types'`` (also every edge ``v -> u``
            of the reverse type of a batch edge ``u -> v``, given by ``reverse_etypes``).
        reverse_eids: for ``'reverse_id'``: ``reverse_eids[e]`` is the ID of edge ``e``'s reverse.
        reverse_etypes: for ``'reverse_types'``: ``{etype: its reverse edge type}`` (both ways, as DGL).
        device, load_features, prefetch, num_workers, seed, equal_batches, cache_remote_features,
            pin_memory, use_uva, placement, feature_dtype, carry_node_data: as in DistNodeDataLoader (the
            pair graphs land on ``device`` too; they are built on the CPU, the blocks where the graph is
            held).

    Raises:
        ValueError: an unknown ``exclude``; ``'reverse_id'`` without a full ``reverse_eids`` or on a typed
            graph; ``'reverse_types'`` without a valid ``reverse_etypes``; plain IDs on a graph with
            several edge types.
        KeyError: a feature name the graph does not have, or an unknown edge type.
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
        load_features: Sequence[str] | str | Mapping | None = FROM_GRAPH,
        prefetch: int = 2,
        num_workers: int = 1,
        seed: int | None = None,
        equal_batches: bool = True,
        cache_remote_features: float | Mapping[str, RemoteFeatureCache] = 0.0,
        reverse_etypes: Mapping | None = None,
        pin_memory: bool | None = None,
        use_uva: bool = False,
        placement: str | None = None,
        feature_dtype=None,
        carry_node_data: bool = True,
    ):
        if exclude not in EXCLUDE_MODES:
            raise ValueError(f"exclude must be one of {EXCLUDE_MODES}, got {exclude!r}")
        self._book = graph_context(g).book
        self._schema = schema = self._book.schema
        self.items = LoaderItems(eids, "eids", schema.to_canonical_etype)
        if not self.items.typed and len(schema.canonical_etypes) > 1:
            raise ValueError(f"eids must be {{etype: IDs}} on a graph with edge types {schema.etypes}")
        self._init_graph(
            g,
            sampler,
            device,
            load_features,
            None,
            cache_remote_features,
            pin_memory,
            use_uva,
            placement,
            feature_dtype,
            carry_node_data,
        )
        self.reverse_eids = None
        if exclude == "reverse_id":
            if not schema.is_homogeneous:
                raise ValueError("exclude='reverse_id' is for graphs with one edge type; use 'reverse_types'")
            if reverse_eids is None:
                raise ValueError("exclude='reverse_id' needs reverse_eids (the reverse edge of each edge)")
            self.reverse_eids = as_id_array(reverse_eids, "reverse_eids")
            num_edges = self._book.num_edges()
            if self.reverse_eids.size != num_edges:
                raise ValueError(
                    f"reverse_eids must have one entry per edge ({num_edges}), got {self.reverse_eids.size}"
                )
        self.reverse_etypes = (
            resolve_reverse_etypes(schema, reverse_etypes) if exclude == "reverse_types" else {}
        )
        self.exclude = exclude
        self.negative_sampler = negative_sampler
        super().__init__(
            len(self.items), batch_size, shuffle, drop_last, prefetch, num_workers, seed, equal_batches
        )

    def _num_nodes(self, ntype: str) -> int:
        return self._book.num_nodes(None if self._schema.is_homogeneous else ntype)

    def _produce(self, positions: np.ndarray):
        schema, typed = self._schema, not self._schema.is_homogeneous
        batch = self.items.take(positions)
        if not self.items.typed:
            batch = {schema.canonical_etypes[0]: batch}
        if typed:
            pairs = {c: (src.numpy(), dst.numpy()) for c, (src, dst) in find_edges(self.g, batch).items()}
        else:
            ((canonical, ids),) = batch.items()
            src, dst = find_edges(self.g, ids)
            pairs = {canonical: (src.numpy(), dst.numpy())}
        negatives = None if self.negative_sampler is None else self._negatives(batch, pairs)
        arrays = []
        for canonical, (src, dst) in pairs.items():
            arrays += [(canonical[0], src), (canonical[2], dst)]
        for canonical, (src, dst) in (negatives or {}).items():
            arrays += [(canonical[0], src), (canonical[2], dst)]
        num_nodes = {t: self._num_nodes(t) for t in schema.ntypes}
        seeds, local = compact_by_type({}, arrays, num_nodes)
        seeds_t = {t: torch.from_numpy(ids) for t, ids in seeds.items()}
        excluded = self._excluded(batch, pairs)
        rows = self._batch_rows(with_labels=False)
        if typed:
            input_nodes, _, blocks = self._sample_blocks(seeds_t, excluded, rows)
        else:
            (only,) = seeds_t.values()
            exclude = None if excluded is None else next(iter(excluded.values()))
            input_nodes, _, blocks = self._sample_blocks(only, exclude, rows)
        self._attach(input_nodes, None, blocks, rows)
        local_pairs = iter(local)
        pair = self._pair_graph(
            {c: (next(local_pairs), next(local_pairs)) for c in pairs},
            seeds_t,
            {c: torch.from_numpy(ids) for c, ids in batch.items()},
        )
        if negatives is None:
            return input_nodes, pair, blocks
        neg_pair = self._pair_graph(
            {c: (next(local_pairs), next(local_pairs)) for c in negatives}, seeds_t, None
        )
        return input_nodes, pair, neg_pair, blocks

    def _negatives(self, batch, pairs) -> dict:
        """Negative pairs per canonical type, in per-type IDs."""
        sampler = self.negative_sampler
        if isinstance(sampler, Uniform):
            return {
                c: tuple(t.numpy() for t in sampler.from_sources(src, self._num_nodes(c[2])))
                for c, (src, _) in pairs.items()
            }
        eids = {c: torch.from_numpy(ids) for c, ids in batch.items()}
        if self._schema.is_homogeneous and not self.items.typed:
            neg_src, neg_dst = sampler(self.g, next(iter(eids.values())))
            return {next(iter(eids)): (as_id_array(neg_src, "neg_src"), as_id_array(neg_dst, "neg_dst"))}
        drawn = sampler(self.g, eids)
        return {
            self._schema.to_canonical_etype(etype): (as_id_array(s, "neg_src"), as_id_array(d, "neg_dst"))
            for etype, (s, d) in drawn.items()
        }

    def _excluded(self, batch, pairs) -> dict | None:
        """Edges kept out of the batch's blocks, per canonical type (None: none)."""
        if self.exclude is None:
            return None
        excluded = dict(batch)
        if self.exclude == "reverse_id":
            ((canonical, ids),) = batch.items()
            excluded[canonical] = np.concatenate([ids, self.reverse_eids[ids]])
        elif self.exclude == "reverse_types":
            for canonical, ids in reverse_edge_ids(self.g, pairs, self.reverse_etypes).items():
                excluded[canonical] = (
                    np.concatenate([excluded[canonical], ids]) if canonical in excluded else ids
                )
        return excluded

    def _pair_graph(self, edges, seeds, eids) -> PairGraph:
        """A pair graph over the batch's seed nodes: homogeneous, or with every type of the graph."""
        schema = self._schema
        if schema.is_homogeneous:
            ((src, dst),) = edges.values()
            (nodes,) = seeds.values()
            return PairGraph(
                torch.from_numpy(src),
                torch.from_numpy(dst),
                nodes,
                None if eids is None else next(iter(eids.values())),
            )
        empty = torch.empty(0, dtype=torch.int64)
        return PairGraph.from_types(
            schema,
            {
                c: (torch.from_numpy(edges[c][0]), torch.from_numpy(edges[c][1]))
                if c in edges
                else (empty, empty)
                for c in schema.canonical_etypes
            },
            seeds,
            None if eids is None else {c: eids.get(c, empty) for c in schema.canonical_etypes},
        )
