"""Mini-batch samplers: multi-layer neighbor sampling into blocks, and uniform negative sampling.

:class:`NeighborSampler` builds one block per GNN layer, from the output (seed) nodes back to the
input nodes, as DGL's ``dgl.dataloading.NeighborSampler`` does: ``fanouts[i]`` is the fanout of
layer ``i`` counted from the input, so ``[25, 10]`` samples 10 neighbors of each seed and then 25
neighbors of each of those.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from graphstore.client.batch_rows import BatchRows
from graphstore.client.block import Block, to_block
from graphstore.client.constants import NID
from graphstore.client.sampling import EDGE_DIRS, find_edges, graph_context, sample_neighbors
from graphstore.ids import as_id_array
from graphstore.sampling_rules import batch_layer_seeds, check_layer_fanout


class NeighborSampler:
    """Sample a multi-layer message-flow graph (one :class:`Block` per layer) around seed nodes.

    Args:
        fanouts: neighbors per node for each layer, input layer first; -1 takes every neighbor. A
            layer's fanout is an int (for every edge type) or ``{etype: int}`` naming every edge type
            (0 skips a type).
        edge_dir: ``'in'`` (messages flow along in-edges, the usual case) or ``'out'`` (graphs with one
            node type).
        prob: edge weights (a feature name, or ``{etype: name}``; see
            :func:`~graphstore.client.sampling.sample_neighbors`).
        replace: sample with replacement.
        output_device: device the blocks are moved to (default: stay on CPU).
        seed: makes every sample a function of ``seed`` and the batch's seed nodes (same blocks in
            standalone and distributed mode, whichever loader thread draws them); None: fresh randomness.
        prefetch_node_feats: node data the loaders pull into ``blocks[0].srcdata`` when they are not
            told otherwise: names (for every node type that has them) or ``{ntype: [names]}``.

    Raises:
        ValueError: an empty ``fanouts``, a fanout below -1, or a bad ``edge_dir``.
    """

    def __init__(
        self,
        fanouts: Sequence[int | Mapping],
        edge_dir: str = "in",
        prob=None,
        replace: bool = False,
        output_device=None,
        seed: int | None = None,
        prefetch_node_feats: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    ):
        fanouts = list(fanouts)
        if not fanouts:
            raise ValueError("fanouts must name at least one layer, got []")
        if edge_dir not in EDGE_DIRS:
            raise ValueError(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")
        self.fanouts = [check_layer_fanout(f, f"fanouts[{i}]") for i, f in enumerate(fanouts)]
        self.edge_dir = edge_dir
        self.prob = prob
        self.replace = replace
        self.output_device = output_device
        self.seed = seed
        self.prefetch_node_feats = prefetch_node_feats

    def _layer_seeds(self, output_nodes) -> list[int | None]:
        """The random seed of each layer's sampling call (output layer first), or None each."""
        return batch_layer_seeds(self.seed, output_nodes, len(self.fanouts))

    @property
    def num_layers(self) -> int:
        """Number of blocks each sample has."""
        return len(self.fanouts)

    def sample_blocks(self, g, seed_nodes, exclude_eids=None, *, rows: BatchRows | None = None):
        """Sample the blocks of one mini-batch.

        Args:
            g: the DistGraph.
            seed_nodes: the output nodes (unique IDs): a tensor, or ``{ntype: IDs}`` on a typed graph.
            exclude_eids: edges never to sample (e.g. the batch's own edges in link prediction): IDs, or
                ``{etype: IDs}`` on a typed graph; left out before drawing.
            rows: the node rows the batch asks the servers to send with their answers (the loaders'
                features with the last hop, labels with the first); kept in it.

        Returns:
            ``(input_nodes, output_nodes, blocks)``: the first block's source nodes and the last block's
            destination nodes (``{ntype: IDs}`` for dict seeds, every node type in ``input_nodes``),
            and the blocks, input layer first.

        Raises:
            ValueError: repeated seed nodes, or ``edge_dir='out'`` on a graph with several node types.
        """
        typed = isinstance(seed_nodes, Mapping)
        if typed:
            output_nodes = {
                t: torch.from_numpy(as_id_array(ids, "seed_nodes").copy()) for t, ids in seed_nodes.items()
            }
        else:
            output_nodes = torch.from_numpy(as_id_array(seed_nodes, "seed_nodes").copy())
        if self.edge_dir == "out" and len(g.ntypes) > 1:
            raise ValueError(
                f"edge_dir='out' builds blocks on graphs with one node type; this graph has {g.ntypes}"
            )
        seeds = output_nodes
        blocks: list[Block] = []
        layers = list(zip(reversed(self.fanouts), self._layer_seeds(output_nodes), strict=True))
        for hop, (fanout, random_seed) in enumerate(layers):
            frontier = sample_neighbors(
                g,
                seeds,
                fanout,
                edge_dir=self.edge_dir,
                prob=self.prob,
                exclude_edges=exclude_eids,
                replace=self.replace,
                random_seed=random_seed,
                rows=rows,
                carry_hop=(hop == 0, hop == len(layers) - 1),
            )
            if self.edge_dir == "out":
                frontier = frontier.reversed()  # messages flow towards the seeds
            block = to_block(frontier, seeds)
            seeds = {t: block.srcnodes[t].data[NID] for t in block.srctypes} if typed else block.srcdata[NID]
            blocks.insert(0, block)
        if self.output_device is not None:
            blocks = [b.to(self.output_device) for b in blocks]
        return seeds, output_nodes, blocks

    def sample(self, g, seed_nodes, exclude_eids=None):
        """Alias of :meth:`sample_blocks` (DGL's newer name)."""
        return self.sample_blocks(g, seed_nodes, exclude_eids)

    def __repr__(self) -> str:
        return f"NeighborSampler(fanouts={self.fanouts}, edge_dir={self.edge_dir!r}, replace={self.replace})"


MultiLayerNeighborSampler = NeighborSampler


class MultiLayerFullNeighborSampler(NeighborSampler):
    """Every neighbor at every layer: ``NeighborSampler([-1] * num_layers)``."""

    def __init__(self, num_layers: int, edge_dir: str = "in", output_device=None):
        if int(num_layers) < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        super().__init__([-1] * int(num_layers), edge_dir=edge_dir, output_device=output_device)


class Uniform:
    """Uniform negative sampler: for each positive edge ``(u, v)``, ``k`` pairs ``(u, v')`` with ``v'``
    drawn uniformly from every node of the destination's type (DGL's ``negative_sampler.Uniform``).

    Args:
        k: negatives per positive edge.
        seed: seed of the sampler's own random generator (``None``: fresh entropy).

    Raises:
        ValueError: ``k < 1``.
    """

    def __init__(self, k: int, seed: int | None = None):
        if int(k) < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self.k = int(k)
        self._seed_sequence = np.random.SeedSequence(seed)

    def _generator(self) -> np.random.Generator:
        # One child stream per call: safe from several loader threads at once, and reproducible.
        return np.random.default_rng(self._seed_sequence.spawn(1)[0])

    def from_sources(self, src, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Negative pairs for positive edges whose sources are ``src``.

        Args:
            src: the positive edges' sources.
            num_nodes: the number of candidate destinations (of the destination's type).

        Returns:
            ``(neg_src, neg_dst)`` of length ``k * len(src)``: each source repeated ``k`` times in a row.
        """
        sources = as_id_array(src, "src")
        neg_src = np.repeat(sources, self.k)
        neg_dst = self._generator().integers(0, int(num_nodes), size=neg_src.size, dtype=np.int64)
        return torch.from_numpy(neg_src), torch.from_numpy(neg_dst)

    def __call__(self, g, eids):
        """Negative pairs for the edges ``eids`` of ``g`` (looked up with ``find_edges``).

        Args:
            g: the DistGraph.
            eids: edge IDs, or ``{etype: per-type IDs}`` on a typed graph.

        Returns:
            ``(neg_src, neg_dst)``, or ``{canonical etype: (neg_src, neg_dst)}`` for dict ``eids``.
        """
        if isinstance(eids, Mapping):
            out = {}
            for etype, ids in eids.items():
                canonical = g.to_canonical_etype(etype)
                src, _ = g.find_edges(ids, canonical)
                out[canonical] = self.from_sources(src, g.num_nodes(canonical[2]))
            return out
        src, _ = find_edges(g, eids)
        return self.from_sources(src, int(graph_context(g).book.num_nodes()))
