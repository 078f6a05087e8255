"""A PyG ``BaseSampler`` that samples on graphstore's partition servers.

:class:`NeighborSampler` is what PyG's ``NodeLoader`` / ``LinkLoader`` call for each batch: every hop
is one :func:`graphstore.client.sample_neighbors` call (the seeds routed to their partitions, the
co-located one sampled in-process, the others over RPC in parallel), and the hops are relabelled into
PyG's ``SamplerOutput`` / ``HeteroSamplerOutput`` (:mod:`.hops`). Seed handling, negative sampling and
the link metadata are PyG's own (``torch_geometric.sampler.neighbor_sampler.node_sample`` /
``edge_sample``), so a batch carries what PyG's in-memory sampler gives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch_geometric.sampler import (
    BaseSampler,
    EdgeSamplerInput,
    HeteroSamplerOutput,
    NegativeSampling,
    NodeSamplerInput,
    SamplerOutput,
)
from torch_geometric.sampler.base import SubgraphType
from torch_geometric.sampler.neighbor_sampler import edge_sample, node_sample

from graphstore.client.sampling import sample_neighbors
from graphstore.compat.pyg.hops import HopSample, sample_hops
from graphstore.sampling_rules import batch_layer_seeds, check_fanout


class NeighborSampler(BaseSampler):
    """PyG's neighbor sampling, run by graphstore's partitions.

    Args:
        g: the DistGraph.
        num_neighbors: neighbors per node for each hop, seeds' hop first (PyG's order; -1: every
            neighbor): a list for every edge type, or ``{edge_type: list}`` (``(src, rel, dst)`` keys;
            a type left out is not sampled; every list as long).
        subgraph_type: ``'directional'`` (PyG's default) or ``'bidirectional'`` (every edge also
            reversed, by PyG's ``to_bidirectional``); ``'induced'`` is refused.
        replace: sample with replacement.
        disjoint: must be False (a tree per seed is not supported; refused with ValueError).
        seed: makes each batch's sample a function of ``seed`` and the batch's seeds; None: fresh
            randomness.
        exclude_edges: edges never sampled (held-out edges of a link prediction split): per-type edge
            IDs of the graph's one edge type, or ``{edge_type: IDs}``.

    Raises:
        ValueError: ``disjoint=True``, ``subgraph_type='induced'`` or an unknown one, an empty or
            malformed ``num_neighbors``.
        KeyError: an unknown edge type in ``num_neighbors``.
    """

    def __init__(
        self,
        g,
        num_neighbors: Sequence[int] | Mapping,
        subgraph_type: str | SubgraphType = "directional",
        replace: bool = False,
        disjoint: bool = False,
        seed: int | None = None,
        exclude_edges=None,
    ):
        if disjoint:
            raise ValueError(
                "disjoint=True (one subgraph per seed) is not supported by graphstore's NeighborSampler; "
                "use disjoint=False"
            )
        try:
            subgraph_type = SubgraphType(subgraph_type)
        except ValueError:
            raise ValueError(
                f"subgraph_type must be 'directional' or 'bidirectional', got {subgraph_type!r}"
            ) from None
        if subgraph_type == SubgraphType.induced:
            raise ValueError(
                "subgraph_type='induced' is not supported by graphstore's NeighborSampler; "
                "use 'directional' or 'bidirectional'"
            )
        self.graph = g
        self.subgraph_type = subgraph_type
        self.replace = bool(replace)
        self.disjoint = False
        self.seed = seed
        self.exclude_edges = exclude_edges
        self._homogeneous = bool(g.is_homogeneous)
        self._canonical = [tuple(c) for c in g.canonical_etypes]
        self._num_nodes = {t: int(g.num_nodes(t)) for t in g.ntypes}
        self.num_neighbors = num_neighbors
        self._fanouts = self._hop_fanouts(num_neighbors)

    def _hop_fanouts(self, num_neighbors) -> list:
        """Per hop: an int for every edge type, or ``{canonical: int}`` naming every edge type."""
        if isinstance(num_neighbors, Mapping):
            lists = {}
            for edge_type, values in num_neighbors.items():
                canonical = tuple(self.graph.to_canonical_etype(tuple(edge_type) if edge_type else None))
                lists[canonical] = [_fanout(v, num_neighbors) for v in values]
            lengths = {len(v) for v in lists.values()}
            if len(lengths) != 1 or 0 in lengths:
                raise ValueError(
                    f"num_neighbors must give every edge type as many hops (>= 1), got {num_neighbors}"
                )
            hops = lengths.pop()
            return [{c: lists.get(c, [0] * hops)[hop] for c in self._canonical} for hop in range(hops)]
        if (
            isinstance(num_neighbors, (str, bytes))
            or not isinstance(num_neighbors, Sequence)
            or not num_neighbors
        ):
            raise ValueError(
                f"num_neighbors must be a non-empty list of ints or a dict of them, got {num_neighbors!r}"
            )
        return [_fanout(v, num_neighbors) for v in num_neighbors]

    @property
    def num_hops(self) -> int:
        """Number of hops each sample has."""
        return len(self._fanouts)

    # ----- PyG's interface ---------------------------------------------------------------------

    def sample_from_nodes(self, inputs: NodeSamplerInput, **kwargs) -> SamplerOutput | HeteroSamplerOutput:
        """Sample around a batch of seed nodes (PyG's ``NodeLoader`` calls this)."""
        out = node_sample(inputs, self._sample)
        if self.subgraph_type == SubgraphType.bidirectional:
            out = out.to_bidirectional()
        return out

    def sample_from_edges(
        self, inputs: EdgeSamplerInput, neg_sampling: NegativeSampling | None = None
    ) -> SamplerOutput | HeteroSamplerOutput:
        """Sample around a batch of edges' endpoints, with PyG's negative sampling (``LinkLoader``)."""
        num_nodes = self._num_nodes[self.graph.ntypes[0]] if self._homogeneous else dict(self._num_nodes)
        out = edge_sample(inputs, self._sample, num_nodes, False, None, neg_sampling)
        if self.subgraph_type == SubgraphType.bidirectional:
            out = out.to_bidirectional()
        return out

    @property
    def edge_permutation(self):
        """None: ``edge`` holds the graph's own (per-type) edge IDs."""
        return None

    # ----- sampling ----------------------------------------------------------------------------

    def _sample(self, seed, seed_time=None, **kwargs) -> SamplerOutput | HeteroSamplerOutput:
        if seed_time is not None:
            raise ValueError("temporal sampling (seed_time) is not supported by graphstore's NeighborSampler")
        if isinstance(seed, Mapping):
            if self._homogeneous:
                raise ValueError(
                    f"typed seeds ({{type: IDs}}, input type {list(seed)}) need a typed graph; this graph "
                    "has one node type: pass the IDs alone (input_nodes=ids, edge_label_index=(None, pairs))"
                )
            seeds = {t: _as_numpy(ids) for t, ids in seed.items()}
        elif self._homogeneous:
            seeds = {self.graph.ntypes[0]: _as_numpy(seed)}
        else:
            raise ValueError(
                f"seeds without a node type on a typed graph (node types {self.graph.ntypes}): pass "
                "input_nodes=(ntype, ids), or edge_label_index=(edge_type, pairs)"
            )
        random_seeds = self._random_seeds(seeds)
        sample = sample_hops(
            seeds,
            self._num_nodes,
            self._canonical,
            self.num_hops,
            lambda hop, frontier: self._sample_hop(frontier, self._fanouts[hop], random_seeds[hop]),
        )
        if self._homogeneous:
            return _homogeneous_output(sample, self.graph.ntypes[0], self._canonical[0])
        return _hetero_output(sample)

    def _sample_hop(self, frontier: dict[str, np.ndarray], fanout, random_seed):
        nodes = frontier[self.graph.ntypes[0]] if self._homogeneous else frontier
        sampled = sample_neighbors(
            self.graph,
            nodes,
            fanout,
            edge_dir="in",
            exclude_edges=self.exclude_edges,
            replace=self.replace,
            random_seed=random_seed,
        )
        return {c: sampled.arrays(c) for c in self._canonical}

    def _random_seeds(self, seeds: dict[str, np.ndarray]) -> list[int | None]:
        # The seeds the trainer's NeighborSampler derives for the same batch (a graph with one node
        # type: its IDs alone).
        batch = seeds[self.graph.ntypes[0]] if self._homogeneous else seeds
        return batch_layer_seeds(self.seed, batch, self.num_hops)

    def __repr__(self) -> str:
        return (
            f"NeighborSampler(num_neighbors={self.num_neighbors}, "
            f"subgraph_type={self.subgraph_type.value!r}, replace={self.replace})"
        )


def _fanout(value, num_neighbors) -> int:
    return check_fanout(value, f"every entry of num_neighbors (here {num_neighbors})")


def _as_numpy(ids) -> np.ndarray:
    if isinstance(ids, torch.Tensor):
        return ids.detach().cpu().to(torch.int64).numpy()
    return np.asarray(ids, dtype=np.int64)


def _tensor(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.int64))


def _homogeneous_output(sample: HopSample, ntype: str, canonical: tuple) -> SamplerOutput:
    return SamplerOutput(
        node=_tensor(sample.node[ntype]),
        row=_tensor(sample.row[canonical]),
        col=_tensor(sample.col[canonical]),
        edge=_tensor(sample.edge[canonical]),
        batch=None,
        num_sampled_nodes=sample.num_sampled_nodes[ntype],
        num_sampled_edges=sample.num_sampled_edges[canonical],
    )


def _hetero_output(sample: HopSample) -> HeteroSamplerOutput:
    return HeteroSamplerOutput(
        node={t: _tensor(ids) for t, ids in sample.node.items()},
        row={c: _tensor(a) for c, a in sample.row.items()},
        col={c: _tensor(a) for c, a in sample.col.items()},
        edge={c: _tensor(a) for c, a in sample.edge.items()},
        batch=None,
        num_sampled_nodes=dict(sample.num_sampled_nodes),
        num_sampled_edges=dict(sample.num_sampled_edges),
    )
