"""One named tensor of a partition: its local rows, its scheme's fields, its version and lock."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from graphstore.server.locks import ReadWriteLock
from graphstore.types import TensorScheme


@dataclass
class StoredTensor:
    """One named tensor's local rows and bookkeeping.

    Attributes:
        name, dtype, policy, persistent, writable, from_partition, owner: see :class:`TensorScheme`.
        global_rows: number of rows of the whole tensor (nodes or edges of the graph).
        data: local rows in storage form; row ``i`` is global ID ``start + i``.
        version: bumps on every write.
        lock: readers-writer lock (used only when writable).
    """

    name: str
    dtype: str
    policy: str
    global_rows: int
    data: np.ndarray
    writable: bool
    persistent: bool = False
    from_partition: bool = False
    owner: str = ""
    version: int = 0
    lock: ReadWriteLock = field(default_factory=ReadWriteLock, repr=False)

    @property
    def row_shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape[1:])

    def scheme(self) -> TensorScheme:
        """This tensor's :class:`TensorScheme` (global shape)."""
        return TensorScheme(
            name=self.name,
            dtype=self.dtype,
            shape=(self.global_rows, *self.row_shape),
            policy=self.policy,
            persistent=self.persistent,
            writable=self.writable,
            version=self.version,
            from_partition=self.from_partition,
            owner=self.owner,
        )
