"""Multi-layer neighbor sampling into blocks on a device: the co-located partitions sampled there (from
a :class:`~graphstore.client.device_graph.local_graph.LocalDeviceGraph`), the other partitions by their
servers at the same time, and the blocks built there.

It runs a :class:`~graphstore.client.samplers.NeighborSampler`'s settings (fanouts per layer and edge
type, ``prob``, ``replace``, ``seed``; in-edges) and gives what its ``sample_blocks`` gives: the same
layout (destination nodes first among the sources, the others in increasing ID order, per type), the same
rules per seed, every tensor on the device. The draws differ from the CPU sampler's (another random
generator); with a ``seed`` they are a function of it and of the batch's seed nodes, as there.

Per layer: the seeds of each node type are split into held and other nodes (one range check); held
seeds sample the edge types into their type with :mod:`.kernels` on the device while the others' servers
answer one request each (in the client's thread pool); the edges of both are relabeled together on the
device (:func:`~graphstore.client.device_graph.kernels.relabel_with_heads`, in homogeneous IDs, then per
type), which gives the block and the next layer's seeds.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from graphstore.client.block import Block
from graphstore.client.device_graph import kernels
from graphstore.client.device_graph.local_graph import LocalDeviceGraph
from graphstore.client.device_graph.stage_clock import StageClock, timed
from graphstore.client.per_type import etype_fanouts, etype_probs, homo_edge_ids
from graphstore.client.samplers import NeighborSampler
from graphstore.ids import as_id_array, check_id_range
from graphstore.sampling_rules import partition_seed
from graphstore.types import CanonicalEtype

# The pieces of one edge type's sampled edges: homogeneous sources, destinations as indices into the
# layer's seeds of the destination type, per-type edge IDs.
_Edges = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


class DeviceBlockSampler:
    """Samples blocks for a loader on ``local.device`` (see the module docstring).

    Args:
        g: the DistGraph.
        local: the co-located partitions, held for the device.
    """

    def __init__(self, g, local: LocalDeviceGraph):
        self.g = g
        self.local = local
        self.ctx = local.ctx
        self.book = local.book
        self.schema = local.schema
        self.device = local.device
        self.clock: StageClock | None = None

    @staticmethod
    def supports(sampler) -> bool:
        """Whether ``sampler`` runs here: a NeighborSampler (or subclass keeping its ``sample_blocks``)
        over in-edges."""
        return (
            isinstance(sampler, NeighborSampler)
            and type(sampler).sample_blocks is NeighborSampler.sample_blocks
            and sampler.edge_dir == "in"
        )

    def sample_blocks(self, sampler, seed_nodes, exclude_eids=None):
        """The blocks of one mini-batch, as ``sampler.sample_blocks(g, seed_nodes, exclude_eids)``.

        Args:
            sampler: the NeighborSampler whose settings are used.
            seed_nodes: the output nodes (unique): IDs, or ``{ntype: IDs}``.
            exclude_eids: edges never sampled: IDs, or ``{etype: IDs}``.

        Returns:
            ``(input_nodes, output_nodes, blocks)`` with every tensor on the device.

        Raises:
            ValueError: repeated seed nodes; IndexError: a seed outside its type.
        """
        schema = self.schema
        typed = isinstance(seed_nodes, Mapping)
        if typed:
            host_out = {
                schema.ntypes[schema.ntype_id(t)]: torch.from_numpy(as_id_array(ids, "seed_nodes").copy())
                for t, ids in seed_nodes.items()
            }
        else:
            if len(schema.ntypes) != 1:
                raise ValueError(f"seed_nodes must be {{ntype: IDs}} on a graph with types {schema.ntypes}")
            host_out = torch.from_numpy(as_id_array(seed_nodes, "seed_nodes").copy())
        per_type = host_out if typed else {schema.ntypes[0]: host_out}
        for ntype, ids in per_type.items():
            count = self.book.num_nodes(None if schema.is_homogeneous else ntype)
            check_id_range(ids.numpy(), count, "seed_nodes" if not typed else f"seed_nodes[{ntype!r}]")
        layer_seeds = sampler._layer_seeds(host_out)
        seeds = {t: ids.to(self.device) for t, ids in per_type.items()}
        output_nodes = seeds if typed else seeds[schema.ntypes[0]]
        excluded = None if exclude_eids is None else homo_edge_ids(self.book, exclude_eids)
        if excluded is not None and excluded.size == 0:
            excluded = None
        blocks: list[Block] = []
        for depth, (fanout, random_seed) in enumerate(
            zip(reversed(sampler.fanouts), layer_seeds, strict=True)
        ):
            fanouts = etype_fanouts(schema, fanout)
            block, seeds = self._layer(seeds, fanouts, sampler, excluded, random_seed, check_heads=depth == 0)
            blocks.insert(0, block)
        input_nodes = seeds if typed else seeds[schema.ntypes[0]]
        return input_nodes, output_nodes, blocks

    # -- one layer -------------------------------------------------------------------------------
    def _generator(self, random_seed: int | None) -> torch.Generator:
        generator = torch.Generator(device=self.device)
        if random_seed is None:
            generator.seed()
        else:
            generator.manual_seed(int(random_seed) % (1 << 63))
        return generator

    def _layer(self, seeds, fanouts, sampler, excluded, random_seed, check_heads):
        schema = self.schema
        with timed(self.clock, "route"):
            held, other = self._split(seeds)
        calls = [lambda: self._sample_held(held, fanouts, sampler, excluded, random_seed)]
        if other:
            calls.append(lambda: self._sample_remote(other, fanouts, sampler, excluded, random_seed))
        results = self.ctx.run_parallel(calls) if len(calls) > 1 else [calls[0]()]
        edges: dict[CanonicalEtype, list[_Edges]] = {c: [] for c in schema.canonical_etypes}
        for result in results:
            for canonical, piece in result.items():
                edges[canonical].append(piece)
        with timed(self.clock, "relabel"):
            return self._block(seeds, edges, check_heads)

    def _split(self, seeds):
        """``(held, other)``: per node type, the seeds held here and the others, each as ``(index into the
        type's seeds or None for all, IDs)``."""
        held, other = {}, {}
        for ntype, ids in seeds.items():
            if ids.numel() == 0:
                continue
            if self.local.holds_all_nodes(ntype):
                held[ntype] = (None, ids)
                continue
            lo, hi = self.local.node_range(ntype)
            inside = (ids >= lo) & (ids < hi)
            index = torch.nonzero(inside).reshape(-1)
            held[ntype] = (index, ids[index])
            outside = torch.nonzero(~inside).reshape(-1)
            if outside.numel():
                other[ntype] = (outside, ids[outside])
        return held, other

    def _sample_held(self, held, fanouts, sampler, excluded, random_seed) -> dict[CanonicalEtype, _Edges]:
        """The held seeds' edges, sampled on the device."""
        with timed(self.clock, "sample_held"):
            return self._sample_held_edges(held, fanouts, sampler, excluded, random_seed)

    def _sample_held_edges(
        self, held, fanouts, sampler, excluded, random_seed
    ) -> dict[CanonicalEtype, _Edges]:
        schema = self.schema
        generator = self._generator(random_seed)
        out = {}
        for etype_id, (canonical, fanout) in enumerate(zip(schema.canonical_etypes, fanouts, strict=True)):
            if fanout == 0 or canonical[2] not in held:
                continue
            index, ids = held[canonical[2]]
            if ids.numel() == 0:
                continue
            relation = self.local.relation(canonical)
            lo, _ = self.local.node_range(canonical[2])
            rows = ids - lo
            weights = self._weights(canonical, sampler.prob)
            skip = self._excluded_positions(canonical, etype_id, excluded)
            if skip is None:
                positions, seed_index = kernels.sample_rows(
                    relation.indptr, rows, fanout, sampler.replace, weights, generator
                )
            else:
                positions, seed_index = kernels.sample_rows_avoiding(
                    relation.indptr, rows, fanout, skip, sampler.replace, weights, generator
                )
            src = relation.src[positions].to(torch.int64)
            dst = seed_index if index is None else index[seed_index]
            out[canonical] = (src, dst, relation.edge_ids(positions))
        return out

    def _weights(self, canonical: CanonicalEtype, prob) -> torch.Tensor | None:
        """The held weights one edge type is sampled by (``prob``: None, a name, or ``{etype: name}``)."""
        if prob is None:
            return None
        if isinstance(prob, Mapping):
            names = {self.schema.to_canonical_etype(key): value for key, value in prob.items()}
            name = names.get(canonical)
        else:
            name = prob
        return None if name is None else self.local.weights(canonical, name)

    def _excluded_positions(self, canonical, etype_id, excluded) -> torch.Tensor | None:
        """The held CSR positions of one edge type among the excluded homogeneous edge IDs."""
        if excluded is None:
            return None
        homo = torch.from_numpy(excluded).to(self.device)
        types, per_type = self.local.edge_space.to_per_type(homo)
        elo, ehi = self.local.edge_range(canonical)
        mine = (types == etype_id) & (per_type >= elo) & (per_type < ehi)
        return self.local.relation(canonical).positions_of(per_type[mine] - elo)

    def _sample_remote(self, other, fanouts, sampler, excluded, random_seed) -> dict[CanonicalEtype, _Edges]:
        """The other seeds' edges, sampled by their partitions' servers (one request each)."""
        with timed(self.clock, "sample_remote"):
            return self._sample_remote_edges(other, fanouts, sampler, excluded, random_seed)

    def _sample_remote_edges(self, other, fanouts, sampler, excluded, random_seed):
        schema, book, ctx = self.schema, self.book, self.ctx
        host = {t: (index.cpu().numpy(), ids.cpu().numpy()) for t, (index, ids) in other.items()}
        homo_seeds = np.concatenate(
            [ids if schema.is_homogeneous else book.map_to_homo_nid(ids, t) for t, (_, ids) in host.items()]
        )
        wire_fanout = fanouts[0] if len(fanouts) == 1 else fanouts
        probs = etype_probs(self.g, sampler.prob, fanouts)
        exclude_of = (
            {part: ids for part, _, ids in ctx.route(excluded, "edge")} if excluded is not None else {}
        )
        answers = []
        for part_id, _, part_seeds in ctx.route(homo_seeds, "node"):
            seed = partition_seed(random_seed, part_id)
            remote = ctx.partition(part_id)
            answers.append(
                remote.sample_neighbors(
                    part_seeds,
                    wire_fanout,
                    "in",
                    sampler.replace,
                    probs,
                    seed,
                    exclude_of.get(part_id),
                )
            )
        if not answers:
            return {}
        src = np.concatenate([a[0] for a in answers])
        dst = np.concatenate([a[1] for a in answers])
        eid = np.concatenate([a[2] for a in answers])
        etypes, per_type_eid = book.map_to_per_etype(eid)
        _, dst_ids = book.map_to_per_ntype(dst)
        out = {}
        for etype_id, canonical in enumerate(schema.canonical_etypes):
            take = np.flatnonzero(etypes == etype_id)
            if take.size == 0:
                continue
            index, ids = host[canonical[2]]
            order = np.argsort(ids, kind="stable")
            where = order[np.searchsorted(ids, dst_ids[take], sorter=order)]
            out[canonical] = tuple(
                torch.from_numpy(np.ascontiguousarray(a)).to(self.device)
                for a in (src[take], index[where], per_type_eid[take])
            )
        return out

    # -- the block -------------------------------------------------------------------------------
    def _block(self, seeds, edges: dict[CanonicalEtype, list[_Edges]], check_heads: bool):
        schema = self.schema
        empty = torch.empty(0, dtype=torch.int64, device=self.device)
        joined = {}
        for canonical, pieces in edges.items():
            if not pieces:
                joined[canonical] = (empty, empty, empty)
            elif len(pieces) == 1:
                joined[canonical] = pieces[0]
            else:
                joined[canonical] = tuple(torch.cat(column) for column in zip(*pieces, strict=True))
        if schema.is_homogeneous:
            ((canonical, (src, dst, eid)),) = joined.items()
            (ntype,) = schema.ntypes
            heads = seeds.get(ntype, empty)
            unique_ids, local_src = kernels.relabel_with_heads(heads, src, check_heads)
            block = Block(local_src, dst, unique_ids, heads.numel(), eid)
            return block, {ntype: unique_ids}
        space = self.local.node_space
        head_pieces = [
            space.to_homo(seeds[t], type_id)
            for type_id, t in enumerate(schema.ntypes)
            if t in seeds and seeds[t].numel()
        ]
        heads = torch.cat(head_pieces) if head_pieces else empty
        sources = [joined[c][0] for c in schema.canonical_etypes]
        unique_homo, local = kernels.relabel_with_heads(heads, torch.cat(sources), check_heads)
        types, per_type_ids = space.to_per_type(unique_homo)
        within = torch.empty_like(unique_homo)
        src_nids = {}
        for type_id, ntype in enumerate(schema.ntypes):
            members = torch.nonzero(types == type_id).reshape(-1)
            within[members] = torch.arange(members.numel(), dtype=torch.int64, device=self.device)
            src_nids[ntype] = per_type_ids[members]
        block_edges, eids, start = {}, {}, 0
        for canonical, source in zip(schema.canonical_etypes, sources, strict=True):
            _, dst, eid = joined[canonical]
            block_edges[canonical] = (within[local[start : start + source.numel()]], dst)
            eids[canonical] = eid
            start += source.numel()
        num_dst = {t: int(seeds[t].numel()) if t in seeds else 0 for t in schema.ntypes}
        block = Block.from_types(schema, block_edges, src_nids, num_dst, eids)
        return block, src_nids
