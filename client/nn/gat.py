"""Graph attention over sampled blocks, in plain PyTorch, with DGL's signature: :class:`GATConv`.

Parameter names match DGL's (``fc``, ``attn_l``, ``attn_r``), so a DGL state dict loads into it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from graphstore.client.graph_ops import scatter_sum
from graphstore.client.nn.functional import edge_softmax, split_features


class GATConv(nn.Module):
    """Graph attention layer (Veličković et al., 2018) over a block.

    For each head: ``z = W h``; ``e_uv = leaky_relu(a_l · z_u + a_r · z_v)``; ``alpha`` = softmax of
    ``e`` over the in-edges of ``v``; ``out_v = sum_u alpha_uv z_u (+ residual) + bias``.

    Args:
        in_feats: input width, or ``(src_width, dst_width)`` (then separate ``fc_src`` / ``fc_dst``).
        out_feats: output width per head.
        num_heads: number of attention heads.
        feat_drop: dropout on the input features.
        attn_drop: dropout on the attention weights.
        negative_slope: LeakyReLU slope.
        residual: add a (projected) skip connection from the destination input.
        activation: optional callable applied to the output.
        allow_zero_in_degree: if false, a destination node without in-edges raises ValueError
            (its output would be just the bias), as DGL does.
        bias: add a learned bias.

    Output shape: ``[num_dst_nodes, num_heads, out_feats]``.
    """

    def __init__(
        self,
        in_feats: int | tuple[int, int],
        out_feats: int,
        num_heads: int,
        feat_drop: float = 0.0,
        attn_drop: float = 0.0,
        negative_slope: float = 0.2,
        residual: bool = False,
        activation: Callable | None = None,
        allow_zero_in_degree: bool = False,
        bias: bool = True,
    ):
        super().__init__()
        for name, value in (("out_feats", out_feats), ("num_heads", num_heads)):
            if int(value) <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self._num_heads, self._out_feats = int(num_heads), int(out_feats)
        self._pair_input = isinstance(in_feats, (tuple, list))
        in_src, in_dst = in_feats if self._pair_input else (in_feats, in_feats)
        self._in_src_feats, self._in_dst_feats = int(in_src), int(in_dst)
        if self._pair_input:
            self.fc_src = nn.Linear(self._in_src_feats, out_feats * num_heads, bias=False)
            self.fc_dst = nn.Linear(self._in_dst_feats, out_feats * num_heads, bias=False)
        else:
            self.fc = nn.Linear(self._in_src_feats, out_feats * num_heads, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.attn_r = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        self._allow_zero_in_degree = allow_zero_in_degree
        if residual:
            if self._in_dst_feats != out_feats * num_heads:
                self.res_fc = nn.Linear(self._in_dst_feats, out_feats * num_heads, bias=False)
            else:
                self.res_fc = nn.Identity()
        else:
            self.res_fc = None
        self.bias = nn.Parameter(torch.zeros(num_heads * out_feats)) if bias else None
        self.activation = activation
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-normal weights (ReLU gain), zero bias."""
        gain = nn.init.calculate_gain("relu")
        if self._pair_input:
            nn.init.xavier_normal_(self.fc_src.weight, gain=gain)
            nn.init.xavier_normal_(self.fc_dst.weight, gain=gain)
        else:
            nn.init.xavier_normal_(self.fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        """Allow (or not) destination nodes without in-edges (``HeteroGraphConv`` allows them)."""
        self._allow_zero_in_degree = bool(set_value)

    def forward(self, graph, feat, edge_weight: torch.Tensor | None = None, get_attention: bool = False):
        """Compute the destination nodes' new features.

        Args:
            graph: the block.
            feat: source features (destination rows first) or ``(h_src, h_dst)``.
            edge_weight: optional ``[E]`` weights multiplying each edge's attention (after the softmax).
            get_attention: also return the attention weights ``[E, num_heads, 1]`` (weighted).

        Returns:
            ``[num_dst_nodes, num_heads, out_feats]`` in the input dtype (and the weights).

        Raises:
            ValueError: on zero in-degree destination nodes unless ``allow_zero_in_degree``.
        """
        h_src, h_dst = split_features(graph, feat)
        src, dst = graph.edges()
        num_dst = graph.num_dst_nodes()
        if not self._allow_zero_in_degree and num_dst:
            degrees = torch.bincount(dst, minlength=num_dst)
            if bool((degrees == 0).any()):
                raise ValueError(
                    f"{int((degrees == 0).sum())} destination nodes have no in-edges; their output would be "
                    "invalid. Add self-loops or pass allow_zero_in_degree=True"
                )
        h_src, h_dst = self.feat_drop(h_src), self.feat_drop(h_dst)
        heads, width = self._num_heads, self._out_feats
        if self._pair_input:
            z_src = self.fc_src(h_src).view(-1, heads, width)
            z_dst = self.fc_dst(h_dst).view(-1, heads, width)
        else:
            z_src = self.fc(h_src).view(-1, heads, width)
            z_dst = z_src[:num_dst]
        score_src = (z_src * self.attn_l.to(z_src.dtype)).sum(dim=-1)  # [N_src, H]
        score_dst = (z_dst * self.attn_r.to(z_dst.dtype)).sum(dim=-1)  # [N_dst, H]
        logits = self.leaky_relu(score_src[src] + score_dst[dst])
        alpha = self.attn_drop(edge_softmax(graph, logits))  # [E, H] float32 for half input
        if edge_weight is not None:
            alpha = alpha * edge_weight.reshape(-1, 1).to(alpha.dtype)
        out = scatter_sum(z_src[src] * alpha.unsqueeze(-1).to(z_src.dtype), dst, num_dst).to(z_src.dtype)
        if self.res_fc is not None:
            out = out + self.res_fc(h_dst).view(num_dst, heads, width)
        if self.bias is not None:
            out = out + self.bias.view(1, heads, width).to(out.dtype)
        if self.activation is not None:
            out = self.activation(out)
        if get_attention:
            return out, alpha.unsqueeze(-1)
        return out
