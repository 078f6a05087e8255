"""``DistHeteroEmbedding``: learnable input rows for the node types of a typed graph that have no
features (e.g. ogbn-mag's authors, institutions and fields of study), one
:class:`~graphstore.client.dist_embedding.DistEmbedding` per type over that type's ID space, trained
by a sparse optimizer (``SparseAdagrad(list(emb.values()), lr)``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence

import torch

from graphstore.client.dist_embedding import DistEmbedding
from graphstore.types import InitSpec

# Spreads the seeds of the types' tables apart (any prime works).
_SEED_STRIDE = 7919


class DistHeteroEmbedding(Mapping):
    """A ``{ntype: DistEmbedding}`` table set; called with ``{ntype: IDs}``, the rows of those types.

    Args:
        g: the DistGraph.
        ntypes: the node types that get rows.
        embedding_dim: width of a row.
        name: prefix of the tables' names on the cluster (``{name}.{ntype}``).
        init_func: as for DistEmbedding; an :class:`~graphstore.types.InitSpec` seed is offset per type
            so that the types' rows differ.
        persistent: keep the tables after their creator releases them.

    Raises:
        KeyError: an unknown node type.
        ValueError: no node type, or a bad ``embedding_dim``.
    """

    def __init__(
        self,
        g,
        ntypes: Sequence[str],
        embedding_dim: int,
        name: str = "node_emb",
        init_func: Callable | InitSpec | None = None,
        persistent: bool = False,
    ):
        if not ntypes:
            raise ValueError("DistHeteroEmbedding needs at least one node type")
        self._tables: dict[str, DistEmbedding] = {}
        for index, ntype in enumerate(ntypes):
            ntype = g.ntypes[g.get_ntype_id(ntype)]
            init = init_func
            if isinstance(init_func, InitSpec):
                init = dataclasses.replace(init_func, seed=init_func.seed + _SEED_STRIDE * index)
            self._tables[ntype] = DistEmbedding(
                g.num_nodes(ntype),
                embedding_dim,
                name=f"{name}.{ntype}",
                init_func=init,
                part_policy=g.get_node_partition_policy(ntype),
                persistent=persistent,
            )
        self.embedding_dim = int(embedding_dim)

    def __call__(self, ids: Mapping[str, torch.Tensor], device=None) -> dict[str, torch.Tensor]:
        """The rows of the given nodes of this set's types (other types in ``ids`` are left out).

        Args:
            ids: ``{ntype: per-type IDs}``.
            device: where to put the rows (default: CPU).

        Returns:
            ``{ntype: [len(ids[ntype]), embedding_dim]}``; recorded for the sparse optimizer when autograd
            is on.
        """
        return {t: self._tables[t](i, device=device) for t, i in ids.items() if t in self._tables}

    def __getitem__(self, ntype: str) -> DistEmbedding:
        return self._tables[ntype]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tables)

    def __len__(self) -> int:
        return len(self._tables)

    def reset_trace(self) -> None:
        """Forget the recorded lookups of every table."""
        for table in self._tables.values():
            table.reset_trace()

    def __repr__(self) -> str:
        return f"DistHeteroEmbedding(ntypes={list(self._tables)}, embedding_dim={self.embedding_dim})"
