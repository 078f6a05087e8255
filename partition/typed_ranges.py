"""The per-(partition, type) layout of one ID space, and its conversion to and from DGL's maps.

Inside partition ``k``'s homogeneous range the types lie one after the other in type-ID order; every
type's IDs in partition ``k`` are one contiguous range of its per-type IDs. :class:`TypedRanges` holds
the counts and answers the two conversions (homogeneous <-> per-type) with one ``searchsorted`` each.
"""

from __future__ import annotations

import numpy as np


def route_ids(ids: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Partition index of each ID under range ``bounds`` (``num_parts + 1`` ascending boundaries).

    IDs must already be known to lie in ``[bounds[0], bounds[-1])``.
    """
    return np.searchsorted(bounds, ids, side="right") - 1


class TypedRanges:
    """The per-(partition, type) layout of one ID space (nodes or edges).

    Args:
        bounds: homogeneous boundaries, ``num_parts + 1``.
        counts: int64 ``[num_parts, num_types]``: IDs of each type in each partition (rows sum to the
            partition's range size).
    """

    def __init__(self, bounds: np.ndarray, counts: np.ndarray, what: str):
        num_parts, num_types = counts.shape
        if not np.array_equal(counts.sum(axis=1), np.diff(bounds)):
            raise ValueError(
                f"{what} counts per type {counts.tolist()} do not add up to the partition sizes "
                f"{np.diff(bounds).tolist()}"
            )
        self.bounds = bounds
        self.counts = counts
        # type_bounds[t]: per-type ID boundaries of type t over the partitions.
        self.type_bounds = np.zeros((num_types, num_parts + 1), dtype=np.int64)
        np.cumsum(counts.T, axis=1, out=self.type_bounds[:, 1:])
        # homo_start[t, k]: homogeneous ID of type t's first ID in partition k.
        within = np.cumsum(counts, axis=1) - counts
        self.homo_start = (bounds[:-1, None] + within).T.copy()
        # Segments (k, t) in homogeneous order: their starts, types and per-type starts.
        self.seg_start = (bounds[:-1, None] + within).reshape(-1)
        self.seg_type = np.tile(np.arange(num_types, dtype=np.int64), num_parts)
        self.seg_type_start = self.type_bounds[:, :-1].T.reshape(-1)
        for array in (self.type_bounds, self.homo_start, self.seg_start):
            array.setflags(write=False)

    @property
    def num_types(self) -> int:
        return int(self.counts.shape[1])

    def to_per_type(self, homo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        seg = np.searchsorted(self.seg_start, homo, side="right") - 1
        return self.seg_type[seg], homo - self.seg_start[seg] + self.seg_type_start[seg]

    def to_homo(self, per_type: np.ndarray, type_id: int) -> np.ndarray:
        part = route_ids(per_type, self.type_bounds[type_id])
        return per_type - self.type_bounds[type_id][part] + self.homo_start[type_id][part]


def type_maps(ranges: TypedRanges, names: list[str]) -> dict[str, list[list[int]]]:
    out = {}
    for type_id, name in enumerate(names):
        starts = ranges.homo_start[type_id]
        ends = starts + ranges.counts[:, type_id]
        out[name] = [[int(s), int(e)] for s, e in zip(starts, ends, strict=True)]
    return out


def layout_from_ranges(type_ranges: list[np.ndarray], what: str) -> tuple[np.ndarray, np.ndarray]:
    """Homogeneous bounds and per-(partition, type) counts from per-type ``[start, end)`` ranges.

    Raises:
        ValueError: ranges that do not tile the ID space partition by partition, type by type.
    """
    num_parts = type_ranges[0].shape[0]
    if any(r.shape[0] != num_parts for r in type_ranges):
        raise ValueError(f"{what}: every type needs one range per partition ({num_parts})")
    counts = np.stack([r[:, 1] - r[:, 0] for r in type_ranges], axis=1)
    if (counts < 0).any():
        raise ValueError(f"{what}: a range ends before it starts")
    bounds = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(counts.sum(axis=1), out=bounds[1:])
    expected = bounds[:-1, None] + np.cumsum(counts, axis=1) - counts
    starts = np.stack([r[:, 0] for r in type_ranges], axis=1)
    nonempty = counts > 0
    if not np.array_equal(starts[nonempty], expected[nonempty]):
        raise ValueError(
            f"{what}: the ranges must lie partition by partition, and inside a partition type by type "
            "in type-ID order"
        )
    return bounds, counts
