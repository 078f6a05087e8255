"""``GraphConv``: the graph convolution of Kipf and Welling (2017) over a block, with DGL's signature.

Each destination node gets ``sum over in-edges of (w_e * c_src * h_src) @ W * c_dst + b``, where the
normalizers come from the block's degrees (``norm='both'``: ``c_src = out_degree^-1/2``, ``c_dst =
in_degree^-1/2``; ``'right'``: ``c_dst = 1 / in_degree``; ``'left'``: ``c_src = 1 / out_degree``;
``'none'``: 1), degrees clamped to at least 1 and counted without the edge weights, as in DGL. The
parameters are ``weight`` (``[in_feats, out_feats]``) and ``bias``, so a DGL state dict loads.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from graphstore.client.nn.functional import aggregate_sum, split_features

NORMS = ("none", "both", "right", "left")


class GraphConv(nn.Module):
    """Graph convolution over a block (or any graph with ``edges()`` and node counts).

    Args:
        in_feats: input width (the source features'; with a pair, the first).
        out_feats: output width.
        norm: ``'both'``, ``'right'``, ``'left'`` or ``'none'`` (see the module docstring).
        weight: learn a weight matrix; False: pass one to :meth:`forward` or use none.
        bias: add a learned bias.
        activation: optional callable applied to the output.
        allow_zero_in_degree: if false, a destination node without in-edges raises ValueError (its
            output would be just the bias), as in DGL.

    Raises:
        ValueError: an unknown ``norm`` or non-positive widths.
    """

    def __init__(
        self,
        in_feats: int,
        out_feats: int,
        norm: str = "both",
        weight: bool = True,
        bias: bool = True,
        activation: Callable | None = None,
        allow_zero_in_degree: bool = False,
    ):
        super().__init__()
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
        for name, value in (("in_feats", in_feats), ("out_feats", out_feats)):
            if int(value) <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self._in_feats, self._out_feats, self._norm = int(in_feats), int(out_feats), norm
        self._allow_zero_in_degree = allow_zero_in_degree
        self.weight = nn.Parameter(torch.empty(self._in_feats, self._out_feats)) if weight else None
        self.bias = nn.Parameter(torch.zeros(self._out_feats)) if bias else None
        self._activation = activation
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weight, zero bias."""
        if self.weight is not None:
            nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        """Allow (or not) destination nodes without in-edges."""
        self._allow_zero_in_degree = bool(set_value)

    def forward(
        self,
        graph,
        feat,
        weight: torch.Tensor | None = None,
        edge_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Compute the destination nodes' new features.

        Args:
            graph: the block.
            feat: source features (destination rows first) or ``(h_src, h_dst)``.
            weight: an external ``[in_feats, out_feats]`` weight; only when built with ``weight=False``.
            edge_weight: optional ``[E]`` weight multiplying each message.

        Returns:
            ``[num_dst_nodes, out_feats]`` (``[num_dst_nodes, in_feats]`` with no weight at all).

        Raises:
            ValueError: zero in-degree destinations without ``allow_zero_in_degree``, or an external
                weight given to a layer that has its own.
        """
        h_src, _ = split_features(graph, feat)
        src, dst = graph.edges()
        num_src, num_dst = graph.num_src_nodes(), graph.num_dst_nodes()
        in_degrees = torch.bincount(dst, minlength=num_dst)
        if not self._allow_zero_in_degree and num_dst and bool((in_degrees == 0).any()):
            raise ValueError(
                f"{int((in_degrees == 0).sum())} destination nodes have no in-edges; their output would be "
                "invalid. Add self-loops or pass allow_zero_in_degree=True"
            )
        if weight is not None and self.weight is not None:
            raise ValueError("GraphConv has its own weight (weight=True); do not pass weight= to forward")
        weight = self.weight if weight is None else weight
        if self._norm in ("left", "both"):
            out_degrees = torch.bincount(src, minlength=num_src).clamp(min=1).to(h_src.dtype)
            scale = out_degrees.pow(-0.5 if self._norm == "both" else -1.0)
            h_src = h_src * scale.view(-1, *([1] * (h_src.dim() - 1)))
        # Multiply by the weight on the narrower side of the sum (linear maps commute with it).
        project_first = weight is not None and self._in_feats > self._out_feats
        if project_first:
            h_src = h_src @ weight
        out = aggregate_sum(graph, h_src, edge_weight).to(h_src.dtype)
        if weight is not None and not project_first:
            out = out @ weight
        if self._norm in ("right", "both"):
            scale = in_degrees.clamp(min=1).to(out.dtype).pow(-0.5 if self._norm == "both" else -1.0)
            out = out * scale.view(-1, *([1] * (out.dim() - 1)))
        if self.bias is not None:
            out = out + self.bias.to(out.dtype)
        if self._activation is not None:
            out = self._activation(out)
        return out

    def extra_repr(self) -> str:
        return f"in={self._in_feats}, out={self._out_feats}, normalization={self._norm}"
