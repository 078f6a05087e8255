"""The building blocks of the synthetic generators: power-law popularity, drawing nodes by popularity
inside a community, seeded edge and feature chunks.

A :class:`CommunityTable` holds one node set (a homogeneous graph's nodes, or one node type of a typed
graph), each node with a community and a popularity weight. An edge of a relation draws its
destination from the destination table by popularity and, with probability ``homophily``, its source
from the source table's nodes of the destination's community (else from all of them), again by
popularity: in- and out-degrees are heavy-tailed and most edges stay inside a community. Tables of a
typed graph share one community numbering, so "the same community" makes sense across types.

Chunk ``i`` of a stream is seeded by ``(*seed_key, i)``, so the output depends only on the seed,
and a graph of any size is produced a chunk at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

EDGE_CHUNK = 1 << 22
FEAT_CHUNK = 1 << 17


def capped_pareto_popularity(
    rng: np.random.Generator, n: int, exponent: float, cap_ratio: float
) -> np.ndarray:
    """Pareto popularity weights (minimum 1), capped at ``cap_ratio`` times their mean.

    With ``E`` edges over ``n`` nodes, ``cap_ratio = n / sqrt(E)`` keeps every node's expected degree
    below ``sqrt(E)``.

    Args:
        rng: the generator to draw from (``n`` uniform draws).
        n: number of nodes.
        exponent: power-law exponent of the degree distribution, > 2.
        cap_ratio: the cap as a multiple of the mean weight (never below 1).

    Returns:
        float64 [n].
    """
    popularity = (1.0 - rng.random(n)) ** (-1.0 / (exponent - 1.0))
    cap = max(1.0, cap_ratio * popularity.mean())
    np.minimum(popularity, cap, out=popularity)
    return popularity


def class_centers(rng: np.random.Generator, num_classes: int, feat_dim: int, length: float) -> np.ndarray:
    """Random directions of length ``length``, one per class: float32 [num_classes, feat_dim]."""
    centers = rng.standard_normal((num_classes, feat_dim))
    centers *= length / np.maximum(np.linalg.norm(centers, axis=1, keepdims=True), 1e-12)
    return centers.astype(np.float32)


@dataclass
class CommunityTable:
    """One node set sorted by community, with cumulative popularity for weighted draws.

    Attributes:
        community: int64 [n], each node's community.
        order: node IDs sorted by community.
        cum_weight: float64 [n], cumulative popularity along ``order``.
        community_start, community_end: first and one-past-last position in ``order`` of each community.
    """

    community: np.ndarray
    order: np.ndarray
    cum_weight: np.ndarray
    community_start: np.ndarray
    community_end: np.ndarray

    @classmethod
    def build(cls, community: np.ndarray, popularity: np.ndarray, num_communities: int) -> CommunityTable:
        """Sort ``community`` (values in ``[0, num_communities)``) and accumulate ``popularity`` along it."""
        order = np.argsort(community, kind="stable")
        sizes = np.bincount(community, minlength=num_communities)
        community_end = np.cumsum(sizes)
        return cls(
            community=community,
            order=order,
            cum_weight=np.cumsum(popularity[order]),
            community_start=community_end - sizes,
            community_end=community_end,
        )

    @property
    def num_nodes(self) -> int:
        return int(self.community.shape[0])

    def draw(self, rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Draw one node per entry from positions ``[lo, hi)`` of ``order`` (non-empty), by popularity."""
        cum = self.cum_weight
        base = np.where(lo > 0, cum[np.maximum(lo - 1, 0)], 0.0)
        r = base + rng.random(lo.size) * (cum[hi - 1] - base)
        # Binary search with sorted keys walks the table in order; random keys miss the cache at every
        # step and are ~100x slower on a table of millions of nodes.
        perm = np.argsort(r)
        pos = np.empty(r.size, dtype=np.int64)
        pos[perm] = np.searchsorted(cum, r[perm], side="right")
        np.clip(pos, lo, hi - 1, out=pos)
        return self.order[pos]

    def draw_anywhere(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Draw ``size`` nodes from the whole table, by popularity."""
        return self.draw(rng, np.zeros(size, dtype=np.int64), np.full(size, self.num_nodes, dtype=np.int64))


def relation_edge_chunks(
    src_table: CommunityTable,
    dst_table: CommunityTable,
    num_edges: int,
    homophily: float,
    seed_key: tuple[int, ...],
    chunk: int = EDGE_CHUNK,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(src, dst)`` int64 chunks of one relation; chunk ``i`` is seeded by ``(*seed_key, i)``.

    When both ends are the same table, self loops are redrawn (and, if one survives, moved to the next
    node). A community without source nodes falls back to a draw from the whole source table.

    Args:
        src_table, dst_table: the node sets of the two ends (the same object for a homogeneous relation).
        num_edges: total number of edges.
        homophily: probability that a source is drawn from its destination's community.
        seed_key: the stream's seed prefix.
        chunk: edges per chunk.
    """
    n_src = src_table.num_nodes
    for index, start in enumerate(range(0, num_edges, chunk)):
        size = min(chunk, num_edges - start)
        rng = np.random.default_rng([*seed_key, index])
        dst = dst_table.draw_anywhere(rng, size)
        comm = dst_table.community[dst]
        start_pos, end_pos = src_table.community_start[comm], src_table.community_end[comm]
        local = (rng.random(size) < homophily) & (end_pos > start_pos)
        lo = np.where(local, start_pos, 0)
        hi = np.where(local, end_pos, n_src)
        src = src_table.draw(rng, lo, hi)
        if src_table is dst_table:
            loops = src == dst
            if loops.any():
                src[loops] = src_table.draw_anywhere(rng, int(loops.sum()))
                still = src == dst
                src[still] = (src[still] + 1) % n_src
        yield src, dst


def feature_chunks(
    label: np.ndarray,
    centers: np.ndarray,
    seed_key: tuple[int, ...],
    chunk: int = FEAT_CHUNK,
) -> Iterator[np.ndarray]:
    """Yield float32 rows ``centers[label] + N(0, 1)``; chunk ``i`` is seeded by ``(*seed_key, i)``.

    Args:
        label: int64 [n], each row's class.
        centers: float32 [num_classes, feat_dim].
        seed_key: the stream's seed prefix.
        chunk: rows per chunk.
    """
    n, feat_dim = label.shape[0], centers.shape[1]
    for index, start in enumerate(range(0, n, chunk)):
        end = min(n, start + chunk)
        rng = np.random.default_rng([*seed_key, index])
        rows = rng.standard_normal((end - start, feat_dim), dtype=np.float32)
        rows += centers[label[start:end]]
        yield rows


def collect_edges(chunks: Iterator[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate ``(src, dst)`` chunks into two int64 arrays (empty when there are none)."""
    src_parts, dst_parts = [], []
    for src, dst in chunks:
        src_parts.append(src)
        dst_parts.append(dst)
    if not src_parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(src_parts), np.concatenate(dst_parts)
