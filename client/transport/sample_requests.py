"""The SampleNeighbors request of a remote partition, per chunk of seeds, and the answer size it plans for.

A sample's answer size is known only roughly (a seed has at most ``fanout`` edges per edge type, or all
of them for ``-1``), so requests are chunked by an estimate of their answer
(:func:`~graphstore.client.transport.chunking.query_edges_in_chunks` halves a chunk that still comes
back too large). Rows carried with the answer (``with_rows``) are bounded by the server instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphstore.protos import codec
from graphstore.protos import graphstore_pb2 as pb

# Answers whose size is not known in advance (all neighbors, in-subgraphs) are sized from the average
# degree times this margin; a chunk that still comes back too large is split in half and retried.
DEGREE_MARGIN = 4.0
# Bytes an edge takes in an answer: its source, destination and edge ID (int64 each).
EDGE_ANSWER_BYTES = 24.0


@dataclass(frozen=True)
class SampleSpec:
    """The arguments of one sample, as sent for every chunk of its seeds.

    Attributes:
        fanout: one value for every edge type, or one per edge type.
        edge_dir: ``"in"`` or ``"out"``.
        replace: with replacement.
        prob: a weight tensor's name, or one (or None) per edge type.
        random_seed: the sample's seed (chunk ``i`` draws from ``random_seed + i``), or None.
        exclude: edge IDs never drawn, or None.
        with_rows: node tensors whose rows the answer carries for its seeds and neighbors.
        with_seed_rows: node tensors whose rows the answer carries for its seeds.
    """

    fanout: int | Sequence[int]
    edge_dir: str = "in"
    replace: bool = False
    prob: str | Sequence[str | None] | None = None
    random_seed: int | None = None
    exclude: np.ndarray | None = None
    with_rows: tuple[str, ...] = ()
    with_seed_rows: tuple[str, ...] = ()

    def fanouts(self) -> list[int]:
        """The fanout per edge type (one entry for a single fanout)."""
        fanout = self.fanout
        return [int(fanout)] if isinstance(fanout, (int, np.integer)) else [int(f) for f in fanout]

    def request(self, seeds: np.ndarray, index: int) -> pb.SampleRequest:
        """The request of chunk ``index`` (its ``seeds``)."""
        request = pb.SampleRequest(edge_dir=codec.edge_dir_to_wire(self.edge_dir), replace=self.replace)
        if isinstance(self.fanout, (int, np.integer)):
            request.fanout = int(self.fanout)
        else:
            request.fanouts[:] = self.fanouts()
        if isinstance(self.prob, str):
            request.prob = self.prob
        elif self.prob:
            request.probs[:] = [p or "" for p in self.prob]
        codec.write_ids(request.seeds, seeds)
        if self.exclude is not None:
            codec.write_ids(request.exclude_eids, self.exclude)
        if self.random_seed is not None:
            request.has_random_seed = True
            request.random_seed = int(self.random_seed) + index  # chunks draw different, reproducible streams
        request.with_rows[:] = self.with_rows
        request.with_seed_rows[:] = self.with_seed_rows
        return request

    def chunk_request(self, seeds: np.ndarray, index: int) -> tuple[str, pb.SampleRequest]:
        """``(method, request)`` of chunk ``index``, as the chunked edge queries take them."""
        return "SampleNeighbors", self.request(seeds, index)

    def answer_bytes_per_seed(self, average_degree: float) -> float:
        """The answer bytes one seed's edges are planned for (``average_degree`` times a margin for a
        fanout of -1). Rows carried with the answer are not planned for: the server carries at most
        ``max_request_bytes`` of them and leaves the rest to a pull, so they never make an answer exceed
        the message limit, and chunks sized for them would carry the same rows twice."""
        edges = sum(f if f >= 0 else average_degree * DEGREE_MARGIN for f in self.fanouts())
        return EDGE_ANSWER_BYTES * edges
