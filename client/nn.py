"""GNN layers over sampled blocks, in plain PyTorch, with DGL's signatures.

``SAGEConv`` and ``GATConv`` (and ``GraphConv``, in :mod:`graphstore.client.nn_graph_conv`) take a
:class:`graphstore.client.block.Block` (or anything with ``edges()``, ``num_src_nodes()`` and
``num_dst_nodes()``) and node features, either one tensor for
the source nodes (the destination nodes being its first ``num_dst_nodes()`` rows, DGL's block
convention) or a ``(h_src, h_dst)`` pair. Neighbor sums are ``embedding_bag`` sums over each
destination's in-edges (:func:`aggregate_sum`), other aggregations a scatter over the edge list
(``index_add_`` / ``scatter_reduce``), so the layers run wherever torch does (CPU, CUDA) and in
float32, float16 and bfloat16; half-precision sums and softmaxes accumulate in float32 and the result
comes back in the input dtype.

Parameter names match DGL's (``fc_self``, ``fc_neigh``, ``bias``; ``fc``, ``attn_l``, ``attn_r``),
so a DGL state dict loads into these layers.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from graphstore.client.block import csr_by_destination

_LOW_PRECISION = (torch.float16, torch.bfloat16)
# Accumulation dtypes of the embedding_bag neighbor sum.
_BAG_DTYPES = (torch.float32, torch.float64)


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in _LOW_PRECISION else dtype


def _split_features(graph, feat) -> tuple[torch.Tensor, torch.Tensor]:
    """(h_src, h_dst) from a tensor (dst rows first) or a pair."""
    if isinstance(feat, (tuple, list)):
        if len(feat) != 2:
            raise ValueError(f"feat must be a tensor or a (h_src, h_dst) pair, got {len(feat)} items")
        h_src, h_dst = feat
    else:
        h_src = feat
        h_dst = feat[: graph.num_dst_nodes()]
    if h_src.shape[0] != graph.num_src_nodes():
        raise ValueError(
            f"feat has {h_src.shape[0]} source rows but the block has {graph.num_src_nodes()} source nodes"
        )
    if h_dst.shape[0] != graph.num_dst_nodes():
        raise ValueError(
            f"feat has {h_dst.shape[0]} destination rows but the block has "
            f"{graph.num_dst_nodes()} destination nodes"
        )
    return h_src, h_dst


def scatter_sum(messages: torch.Tensor, index: torch.Tensor, num_rows: int) -> torch.Tensor:
    """Sum ``messages`` rows into ``num_rows`` rows by ``index`` (in float32 for half precision).

    Args:
        messages: ``[E, ...]`` per-edge values.
        index: ``[E]`` destination row of each edge (int64).
        num_rows: number of output rows.

    Returns:
        ``[num_rows, ...]`` sums in the accumulation dtype (float32 for float16 / bfloat16 input).
    """
    acc = _accumulation_dtype(messages.dtype)
    out = torch.zeros((num_rows, *messages.shape[1:]), dtype=acc, device=messages.device)
    return out.index_add_(0, index, messages.to(acc))


def aggregate_sum(graph, h_src: torch.Tensor, edge_weight: torch.Tensor | None = None) -> torch.Tensor:
    """Sum of (weighted) source features over each destination's in-edges.

    One ``embedding_bag`` sum over the in-edges grouped by destination (the block's cached CSR): a
    fused gather-and-add with no ``[E, F]`` message tensor, 2-2.5x faster on the CPU than torch's
    sparse CSR product (12.7k destinations, 119k edges, 100-d: 3.4 vs 8.9 ms on one thread). A gather +
    ``index_add_`` where the edge weights need a gradient or the features are not 2-D.

    Args:
        graph: the block.
        h_src: ``[num_src, F]`` source features.
        edge_weight: optional ``[E]`` weights.

    Returns:
        ``[num_dst, F]`` sums in the accumulation dtype (float32 for float16 / bfloat16 input).
    """
    num_dst = graph.num_dst_nodes()
    acc = _accumulation_dtype(h_src.dtype)
    if h_src.dim() != 2 or acc not in _BAG_DTYPES or (edge_weight is not None and edge_weight.requires_grad):
        src, dst = graph.edges()
        messages = h_src[src]
        if edge_weight is not None:
            messages = messages * edge_weight.view(-1, *([1] * (messages.dim() - 1))).to(messages.dtype)
        return scatter_sum(messages, dst, num_dst)
    indptr, columns, order = (
        graph.csr() if hasattr(graph, "csr") else csr_by_destination(*graph.edges(), num_dst)
    )
    weights = None if edge_weight is None else edge_weight.reshape(-1)[order].to(acc)
    # Autocast would run the sum in a lower precision than the accumulation dtype.
    with torch.autocast(device_type=h_src.device.type, enabled=False):
        return F.embedding_bag(
            columns.long(),
            h_src.to(acc),
            indptr.long(),
            mode="sum",
            per_sample_weights=weights,
            include_last_offset=True,
        )


def edge_softmax(graph, logits: torch.Tensor) -> torch.Tensor:
    """Softmax of per-edge ``logits`` over the incoming edges of each destination node.

    Args:
        graph: the block.
        logits: ``[E, ...]`` scores.

    Returns:
        ``[E, ...]`` weights in float32 (for half precision input) or the input dtype; the weights
        of each destination's in-edges sum to 1.
    """
    _, dst = graph.edges()
    num_dst = graph.num_dst_nodes()
    scores = logits.to(_accumulation_dtype(logits.dtype))
    index = dst.view(-1, *([1] * (scores.dim() - 1))).expand_as(scores)
    row_max = torch.full(
        (num_dst, *scores.shape[1:]), float("-inf"), dtype=scores.dtype, device=scores.device
    )
    row_max = row_max.scatter_reduce(0, index, scores, reduce="amax", include_self=False)
    # Subtracting the max is for range only; it is constant per destination, so no gradient flows through.
    exp = torch.exp(scores - row_max.detach()[dst])
    denom = torch.zeros_like(row_max).index_add_(0, dst, exp)
    return exp / denom[dst]


class SAGEConv(nn.Module):
    """GraphSAGE layer (Hamilton et al., 2017) over a block.

    ``'mean'``: ``fc_self(h_dst) + fc_neigh(mean of h_src over in-edges) + bias``;
    ``'gcn'``: ``fc_neigh((sum of h_src over in-edges + h_dst) / (in_degree + 1)) + bias``;
    ``'pool'``: ``fc_self(h_dst) + fc_neigh(max over in-edges of relu(fc_pool(h_src))) + bias``.
    Destination nodes without in-edges aggregate zeros.

    Args:
        in_feats: input width, or ``(src_width, dst_width)``.
        out_feats: output width.
        aggregator_type: ``'mean'``, ``'gcn'`` or ``'pool'``.
        feat_drop: dropout on the input features.
        bias: add a learned bias.
        norm: optional callable applied to the output.
        activation: optional callable applied to the output (after ``norm``).

    Raises:
        ValueError: for an unknown aggregator or non-positive widths.
    """

    AGGREGATORS = ("mean", "gcn", "pool")

    def __init__(
        self,
        in_feats: int | tuple[int, int],
        out_feats: int,
        aggregator_type: str = "mean",
        feat_drop: float = 0.0,
        bias: bool = True,
        norm: Callable | None = None,
        activation: Callable | None = None,
    ):
        super().__init__()
        if aggregator_type not in self.AGGREGATORS:
            raise ValueError(f"aggregator_type must be one of {self.AGGREGATORS}, got {aggregator_type!r}")
        in_src, in_dst = in_feats if isinstance(in_feats, (tuple, list)) else (in_feats, in_feats)
        for name, value in (("in_feats", in_src), ("in_feats", in_dst), ("out_feats", out_feats)):
            if int(value) <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        if aggregator_type == "gcn" and in_src != in_dst:
            raise ValueError(f"the 'gcn' aggregator needs equal src/dst widths, got in_feats={in_feats}")
        self._in_src_feats, self._in_dst_feats, self._out_feats = int(in_src), int(in_dst), int(out_feats)
        self._aggre_type = aggregator_type
        self.feat_drop = nn.Dropout(feat_drop)
        self.norm = norm
        self.activation = activation
        if aggregator_type == "pool":
            self.fc_pool = nn.Linear(self._in_src_feats, self._in_src_feats)
        if aggregator_type != "gcn":
            self.fc_self = nn.Linear(self._in_dst_feats, out_feats, bias=False)
        self.fc_neigh = nn.Linear(self._in_src_feats, out_feats, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_feats)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weights (ReLU gain), zero bias."""
        gain = nn.init.calculate_gain("relu")
        if self._aggre_type == "pool":
            nn.init.xavier_uniform_(self.fc_pool.weight, gain=gain)
            nn.init.zeros_(self.fc_pool.bias)
        if self._aggre_type != "gcn":
            nn.init.xavier_uniform_(self.fc_self.weight, gain=gain)
        nn.init.xavier_uniform_(self.fc_neigh.weight, gain=gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, graph, feat, edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        """Compute the destination nodes' new features.

        Args:
            graph: the block.
            feat: source features (destination rows first) or ``(h_src, h_dst)``.
            edge_weight: optional ``[E]`` weight multiplying each message.

        Returns:
            ``[num_dst_nodes, out_feats]`` in the input dtype.
        """
        h_src, h_dst = _split_features(graph, feat)
        h_src, h_dst = self.feat_drop(h_src), self.feat_drop(h_dst)
        src, dst = graph.edges()
        num_dst = graph.num_dst_nodes()
        out_dtype = h_src.dtype
        project_first = self._aggre_type != "pool" and self._cheaper_to_project_first(
            h_src.shape[0], num_dst, src.shape[0]
        )

        if self._aggre_type == "pool":
            messages = F.relu(self.fc_pool(h_src))[src]
            if edge_weight is not None:
                messages = messages * edge_weight.view(-1, 1).to(messages.dtype)
            index = dst.view(-1, 1).expand_as(messages)
            pooled = torch.zeros((num_dst, messages.shape[1]), dtype=messages.dtype, device=messages.device)
            aggregated = pooled.scatter_reduce(0, index, messages, reduce="amax", include_self=False)
        else:
            summed = aggregate_sum(graph, self.fc_neigh(h_src) if project_first else h_src, edge_weight)
            degrees = torch.bincount(dst, minlength=num_dst).to(summed.dtype).unsqueeze(-1)
            if self._aggre_type == "mean":
                aggregated = summed / degrees.clamp(min=1)
            else:
                self_term = self.fc_neigh(h_dst) if project_first else h_dst
                aggregated = (summed + self_term.to(summed.dtype)) / (degrees + 1)
            aggregated = aggregated.to(out_dtype)
        out = self._output(h_dst, aggregated, projected=project_first)
        if self.norm is not None:
            out = self.norm(out)
        if self.activation is not None:
            out = self.activation(out)
        return out

    def _cheaper_to_project_first(self, num_src: int, num_dst: int, num_edges: int) -> bool:
        """Whether ``fc_neigh`` costs less before the neighbor aggregation than after it.

        Linear maps commute with sums, so either order gives the same result. Projecting first
        multiplies every source row and aggregates ``out``-wide messages; aggregating first sums
        ``in``-wide messages and multiplies only the destination rows. Deciding on the widths alone
        (``in > out``, DGL's rule) misses that a block has far more sources than destinations: a
        GraphSAGE output layer (12.7k sources, 1,024 destinations, 256 -> 16) does 7x fewer
        multiply-adds aggregating first (7.7M against 52M), and a step of a 2-layer hidden-256 model
        takes a fifth less time.
        """
        width_in, width_out = self._in_src_feats, self._out_feats
        project = num_src * width_in * width_out + num_edges * width_out
        aggregate = num_edges * width_in + num_dst * width_in * width_out
        if self._aggre_type == "gcn":
            project += num_dst * width_in * width_out  # the destinations' own rows are projected too
        return project < aggregate

    def _output(self, h_dst: torch.Tensor, aggregated: torch.Tensor, projected: bool) -> torch.Tensor:
        """``fc_self(h_dst) + fc_neigh(aggregated) + bias`` (no ``fc_self`` for 'gcn'; ``aggregated``
        already through ``fc_neigh`` when ``projected``).

        With plain ``nn.Linear`` layers (no hooks) both products and the bias are one GEMM over the
        concatenated inputs: one pass over the ``[num_dst, out]`` result instead of three (two
        products, then the sum and the bias), 14% off the first layer's forward + backward of a
        hidden-256 GraphSAGE batch.
        """
        fused = all(
            type(layer) is nn.Linear and not layer._forward_hooks and not layer._forward_pre_hooks
            for layer in ([self.fc_neigh] if self._aggre_type == "gcn" else [self.fc_self, self.fc_neigh])
        )
        if not fused:
            h_neigh = aggregated if projected else self.fc_neigh(aggregated)
            out = h_neigh if self._aggre_type == "gcn" else self.fc_self(h_dst) + h_neigh
            return out if self.bias is None else out + self.bias.to(out.dtype)
        if self._aggre_type == "gcn":
            if projected:
                return aggregated if self.bias is None else aggregated + self.bias.to(aggregated.dtype)
            return F.linear(aggregated, self.fc_neigh.weight, self.bias)
        if projected:
            return F.linear(h_dst, self.fc_self.weight, self.bias) + aggregated
        weight = torch.cat([self.fc_self.weight, self.fc_neigh.weight], dim=1)
        return F.linear(torch.cat([h_dst, aggregated], dim=1), weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_feats=({self._in_src_feats}, {self._in_dst_feats}), out_feats={self._out_feats}, "
            f"aggregator_type={self._aggre_type!r}"
        )


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
        h_src, h_dst = _split_features(graph, feat)
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


class GraphSAGE(nn.Module):
    """A stack of :class:`SAGEConv` layers applied to a list of blocks (input layer first).

    Args:
        in_feats: input feature width.
        n_hidden: hidden width.
        n_classes: output width.
        n_layers: number of layers (one block per layer).
        activation: applied between layers.
        dropout: dropout between layers.
        aggregator_type: passed to every :class:`SAGEConv`.

    Raises:
        ValueError: for ``n_layers < 1``.
    """

    def __init__(
        self,
        in_feats: int,
        n_hidden: int,
        n_classes: int,
        n_layers: int = 2,
        activation: Callable = F.relu,
        dropout: float = 0.0,
        aggregator_type: str = "mean",
    ):
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"n_layers must be at least 1, got {n_layers}")
        widths = [in_feats] + [n_hidden] * (n_layers - 1) + [n_classes]
        self.layers = nn.ModuleList(
            SAGEConv(widths[i], widths[i + 1], aggregator_type) for i in range(n_layers)
        )
        self.n_layers = n_layers
        self.activation = activation
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x: torch.Tensor) -> torch.Tensor:
        """Run the layers over ``blocks`` (one per layer, input layer first) from input features ``x``.

        Raises:
            ValueError: if the number of blocks differs from the number of layers.
        """
        if len(blocks) != self.n_layers:
            raise ValueError(f"expected {self.n_layers} blocks (one per layer), got {len(blocks)}")
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
            h = layer(block, h)
            if i != self.n_layers - 1:
                h = self.dropout(self.activation(h))
        return h
