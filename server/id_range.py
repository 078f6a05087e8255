"""The global IDs one partition owns in one ID space, and the conversion of global IDs to local rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphstore.ids import as_id_array, first_outside


@dataclass(frozen=True)
class IdRange:
    """The global IDs ``[start, end)`` this partition owns in one ID space, out of ``total``."""

    start: int
    end: int
    total: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_local_ids(ids: np.ndarray, start: int, end: int, arg: str, what: str, part_id: int) -> np.ndarray:
    """Convert global IDs to local row indices of the range ``[start, end)`` owned by ``part_id``.

    Args:
        ids: 1-d integer array of global IDs.
        start, end: the owned global ID range.
        arg: the argument's name for error messages.
        what: ``"node"`` or ``"edge"``.
        part_id: this partition, for error messages.

    Returns:
        int64 local indices (``ids - start``).

    Raises:
        ValueError: ``ids`` is not 1-d, or an ID is negative or outside ``[start, end)``; the message
            names the first offending ID.
    """
    ids = as_id_array(ids, arg, one_dim=True)
    bad = first_outside(ids, start, end)
    if bad is not None:
        raise ValueError(
            f"{arg}: {what} ID {bad} is not owned by partition {part_id} "
            f"(it owns {what} IDs [{start}, {end}))"
        )
    return ids - start
