"""The aggregations the layers of :mod:`graphstore.client.nn` share, over a block's edges.

Neighbor sums are ``embedding_bag`` sums over each destination's in-edges (:func:`aggregate_sum`), other
aggregations a scatter over the edge list (``index_add_`` / ``scatter_reduce``), so the layers run
wherever torch does (CPU, CUDA) and in float32, float16 and bfloat16; half-precision sums and softmaxes
accumulate in float32 (:func:`~graphstore.client.graph_ops.accumulation_dtype`) and the result comes
back in the input dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from graphstore.client.block import csr_by_destination
from graphstore.client.graph_ops import accumulation_dtype, scatter_sum

# Accumulation dtypes of the embedding_bag neighbor sum.
_BAG_DTYPES = (torch.float32, torch.float64)


def split_features(graph, feat) -> tuple[torch.Tensor, torch.Tensor]:
    """``(h_src, h_dst)`` from a tensor (destination rows first, DGL's block convention) or a pair.

    Raises:
        ValueError: a sequence of other than two tensors, or row counts other than the block's.
    """
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
    acc = accumulation_dtype(h_src.dtype)
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
    scores = logits.to(accumulation_dtype(logits.dtype))
    index = dst.view(-1, *([1] * (scores.dim() - 1))).expand_as(scores)
    row_max = torch.full(
        (num_dst, *scores.shape[1:]), float("-inf"), dtype=scores.dtype, device=scores.device
    )
    row_max = row_max.scatter_reduce(0, index, scores, reduce="amax", include_self=False)
    # Subtracting the max is for range only; it is constant per destination, so no gradient flows through.
    exp = torch.exp(scores - row_max.detach()[dst])
    denom = torch.zeros_like(row_max).index_add_(0, dst, exp)
    return exp / denom[dst]
