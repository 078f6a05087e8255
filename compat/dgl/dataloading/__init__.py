"""``dgl.dataloading`` for distributed graphs: neighbor samplers and the distributed loaders.

The loaders follow DGL's behaviour: they pull no node data unless the sampler asks for it
(``NeighborSampler(..., prefetch_node_feats=['feat'], prefetch_labels=['label'])`` puts the rows in
``blocks[0].srcdata`` / ``blocks[-1].dstdata``, pulled in the background), so a script that reads
``g.ndata['feat'][input_nodes]`` itself works unchanged. Unlike DGL, every trainer gets the same
number of batches (DDP's ``join()`` is then a no-op, and still allowed).
"""

from __future__ import annotations

from collections.abc import Sequence

from graphstore.client import dataloader as _loaders
from graphstore.client import samplers as _samplers
from graphstore.compat.dgl.dataloading import negative_sampler
from graphstore.compat.dgl.dataloading.edge_prediction import (
    EdgePredictionSampler,
    as_edge_prediction_sampler,
)


class NeighborSampler(_samplers.NeighborSampler):
    """``dgl.dataloading.NeighborSampler``: one block per layer, ``fanouts`` input layer first.

    Args:
        fanouts: neighbors per node for each layer; -1 takes all.
        edge_dir: ``'in'`` or ``'out'``.
        prob: name of an edge feature of sampling weights.
        mask: not supported (DGL's boolean edge mask); must be None.
        replace: sample with replacement.
        prefetch_node_feats: node data pulled into ``blocks[0].srcdata`` by the distributed loaders.
        prefetch_labels: node data pulled into ``blocks[-1].dstdata`` (only the first name is used).
        prefetch_edge_feats: not supported; must be None.
        output_device: device the blocks are moved to.
        fused: True (DGL's default; graphstore has one sampling path).

    Raises:
        NotImplementedError: for ``mask``, ``prefetch_edge_feats`` or ``fused=False``.
        ValueError: bad fanouts or ``edge_dir``.
    """

    def __init__(
        self,
        fanouts: Sequence[int],
        edge_dir: str = "in",
        prob: str | None = None,
        mask: str | None = None,
        replace: bool = False,
        prefetch_node_feats: Sequence[str] | None = None,
        prefetch_labels: Sequence[str] | None = None,
        prefetch_edge_feats: Sequence[str] | None = None,
        output_device=None,
        fused: bool = True,
    ):
        if not fused:
            raise NotImplementedError(
                "NeighborSampler(fused=False) is not supported: graphstore has one sampling path (DGL's "
                "default fused=True)"
            )
        if mask is not None:
            raise NotImplementedError(f"NeighborSampler(mask={mask!r}) is not supported; use prob= weights")
        if prefetch_edge_feats:
            raise NotImplementedError(
                f"NeighborSampler(prefetch_edge_feats={prefetch_edge_feats!r}) is not supported"
            )
        super().__init__(fanouts, edge_dir=edge_dir, prob=prob, replace=replace, output_device=output_device)
        self.prefetch_node_feats = list(prefetch_node_feats or [])
        self.prefetch_labels = list(prefetch_labels or [])


MultiLayerNeighborSampler = NeighborSampler


class MultiLayerFullNeighborSampler(NeighborSampler):
    """Every neighbor at every layer (``NeighborSampler([-1] * num_layers)``)."""

    def __init__(self, num_layers: int, edge_dir: str = "in", **kwargs):
        if int(num_layers) < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        super().__init__([-1] * int(num_layers), edge_dir=edge_dir, **kwargs)


def _prefetch_names(sampler, kwargs: dict) -> None:
    """DGL loaders pull nothing by default; a compat sampler's prefetch lists say what to pull."""
    kwargs.setdefault("load_features", tuple(getattr(sampler, "prefetch_node_feats", ()) or ()))
    labels = getattr(sampler, "prefetch_labels", None) or []
    kwargs.setdefault("load_labels", labels[0] if labels else None)


class DistNodeDataLoader(_loaders.DistNodeDataLoader):
    """``dgl.dataloading.DistNodeDataLoader(g, nids, graph_sampler, device=None, batch_size=...,
    shuffle=..., drop_last=...)``: yields ``(input_nodes, output_nodes, blocks)``.

    Extra keyword arguments of :class:`graphstore.client.dataloader.DistNodeDataLoader` (``prefetch``,
    ``num_workers``, ``seed``, ``load_features``, ...) are accepted too.
    """

    def __init__(self, g, nids, graph_sampler, device=None, **kwargs):
        _prefetch_names(graph_sampler, kwargs)
        super().__init__(g, nids, graph_sampler, device=device, **kwargs)


class DistEdgeDataLoader(_loaders.DistEdgeDataLoader):
    """``dgl.dataloading.DistEdgeDataLoader(g, eids, graph_sampler, device=None, negative_sampler=...,
    exclude=..., reverse_eids=..., batch_size=..., ...)``: yields ``(input_nodes, pair_graph, blocks)``
    or, with a negative sampler, ``(input_nodes, pair_graph, neg_pair_graph, blocks)``.

    ``graph_sampler`` is a neighbor sampler, or what :func:`as_edge_prediction_sampler` returns (its
    ``exclude``, ``reverse_eids`` and ``negative_sampler`` then apply).

    Raises:
        TypeError: an option given both to ``as_edge_prediction_sampler`` and to the loader.
    """

    def __init__(self, g, eids, graph_sampler, device=None, **kwargs):
        if isinstance(graph_sampler, EdgePredictionSampler):
            for name, value in graph_sampler.loader_options().items():
                if name in kwargs:
                    raise TypeError(f"DistEdgeDataLoader: {name} is given both here and to the edge sampler")
                kwargs[name] = value
            graph_sampler = graph_sampler.sampler
        kwargs.setdefault("load_features", tuple(getattr(graph_sampler, "prefetch_node_feats", ()) or ()))
        super().__init__(g, eids, graph_sampler, device=device, **kwargs)


DistDataLoader = _loaders.DistDataLoader

__all__ = [
    "DistDataLoader",
    "DistEdgeDataLoader",
    "DistNodeDataLoader",
    "EdgePredictionSampler",
    "MultiLayerFullNeighborSampler",
    "MultiLayerNeighborSampler",
    "NeighborSampler",
    "as_edge_prediction_sampler",
    "negative_sampler",
]
