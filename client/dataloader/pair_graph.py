"""``PairGraph``: the positive or negative node pairs of a link-prediction batch."""

from __future__ import annotations

import torch

from graphstore.client.constants import EID, NID
from graphstore.client.device import pin_host_tensor
from graphstore.client.graph_ops import GraphOps, Relation


class PairGraph(GraphOps):
    """The edges of a link-prediction batch (positive or negative pairs) over compact node IDs.

    Its nodes are the batch's seed nodes (the output nodes of the blocks, same order): ``edges()``
    gives local endpoints, ``ndata[NID]`` the nodes' global IDs, ``edata[EID]`` the global edge IDs
    (positive pairs only). Scoring runs on it as in DGL (``local_scope``, ``apply_edges``,
    ``update_all``; ``srcdata`` and ``dstdata`` are ``ndata``).
    """

    _frame_attrs = ("ndata", "edata")

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, node_ids: torch.Tensor, eids=None):
        self._src, self._dst = src, dst
        self.ndata: dict[str, torch.Tensor] = {NID: node_ids}
        self.edata: dict[str, torch.Tensor] = {} if eids is None else {EID: eids}

    @property
    def srcdata(self) -> dict[str, torch.Tensor]:
        """The node data (source and destination nodes are the same nodes)."""
        return self.ndata

    @property
    def dstdata(self) -> dict[str, torch.Tensor]:
        """The node data (source and destination nodes are the same nodes)."""
        return self.ndata

    def _relation(self) -> Relation:
        num = self.num_nodes()
        return Relation(self._src, self._dst, num, num, self.ndata, self.ndata, self.edata)

    def num_nodes(self) -> int:
        """Number of nodes (the batch's seed nodes)."""
        return int(self.ndata[NID].shape[0])

    number_of_nodes = num_nodes

    def num_edges(self) -> int:
        """Number of pairs."""
        return int(self._src.shape[0])

    number_of_edges = num_edges

    def edges(self, form: str = "uv"):
        """``(src, dst)`` local IDs (``form="uv"``), or with the local edge IDs (``form="all"``).

        Raises:
            ValueError: for an unknown ``form``.
        """
        if form == "uv":
            return self._src, self._dst
        if form == "all":
            return self._src, self._dst, torch.arange(self.num_edges(), device=self._src.device)
        raise ValueError(f"form must be 'uv' or 'all', got {form!r}")

    @property
    def edge_index(self) -> torch.Tensor:
        """``[2, E]`` local edge index."""
        return torch.stack([self._src, self._dst])

    def to(self, device, non_blocking: bool = False) -> PairGraph:
        """A copy on ``device``."""
        return self._map_tensors(lambda tensor: tensor.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> PairGraph:
        """A copy whose host tensors are in pinned (page-locked) memory (needs CUDA)."""
        return self._map_tensors(pin_host_tensor)

    def _map_tensors(self, move) -> PairGraph:
        out = PairGraph.__new__(PairGraph)
        out._src, out._dst = move(self._src), move(self._dst)
        out.ndata = {k: move(v) for k, v in self.ndata.items()}
        out.edata = {k: move(v) for k, v in self.edata.items()}
        return out

    def __repr__(self) -> str:
        return f"PairGraph(num_nodes={self.num_nodes()}, num_edges={self.num_edges()})"
