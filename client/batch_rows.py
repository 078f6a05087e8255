"""Node rows a mini-batch's sampling answers carried, kept until the batch reads its node data.

A loader's batch samples its blocks, then reads its input nodes' features and its output nodes' labels.
The servers answering the sampling calls own most of those nodes, so the loader asks them to send the
rows with their answers (``SampleRequest.with_rows``): the features with the last hop (its seeds and
sampled neighbors are the input nodes), the labels with the first (its seeds are the output nodes). The
reads then take those rows from here and pull only the rest (:meth:`DistTensor.read`'s ``carried``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from graphstore.protos.edges_wire import CarriedRows


@dataclass
class BatchRows:
    """What one batch asks its sampling answers to carry, and what they carried.

    Attributes:
        features: server tensor names carried for the last hop's nodes (the input nodes' features).
        labels: server tensor names carried for the first hop's seeds (the output nodes' labels).
    """

    features: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    _rows: dict[str, list[CarriedRows]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def ask(self, first_hop: bool, last_hop: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(with_rows, with_seed_rows)`` of one hop's sampling calls."""
        return (self.features if last_hop else ()), (self.labels if first_hop else ())

    def add(self, carried: list[CarriedRows]) -> None:
        """Keep rows that came with an answer (any thread)."""
        if not carried:
            return
        with self._lock:
            for rows in carried:
                self._rows.setdefault(rows.name, []).append(rows)

    def of(self, name: str) -> list[CarriedRows]:
        """The rows of tensor ``name`` carried so far."""
        with self._lock:
            return list(self._rows.get(name, ()))

    def carried_bytes(self) -> int:
        """Bytes of rows carried so far (for profiles)."""
        with self._lock:
            return sum(rows.rows.nbytes for entries in self._rows.values() for rows in entries)
