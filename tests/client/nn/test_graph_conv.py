"""GraphConv over blocks equals the dense formula ``D_in^-a A_w D_out^-b H W + b`` for every ``norm``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.client.block import to_block
from graphstore.client.frontier import SampledSubgraph
from graphstore.client.nn.graph_conv import GraphConv


def _block(rng, num_nodes=80, num_seeds=12, zero_in_degree=False):
    seeds = rng.choice(num_nodes, num_seeds, replace=False)
    counts = rng.integers(0 if zero_in_degree else 1, 5, num_seeds)
    dst = np.repeat(seeds, counts)
    src = rng.integers(0, num_nodes, dst.size)
    return to_block(SampledSubgraph(src, dst, np.arange(dst.size), num_nodes), seeds)


def _dense(layer: GraphConv, block, h, edge_weight, norm, weight):
    src, dst = block.edges()
    num_dst, num_src = block.num_dst_nodes(), block.num_src_nodes()
    counts = torch.zeros(num_dst, num_src, dtype=torch.float64).index_put_(
        (dst, src), torch.ones(src.shape[0], dtype=torch.float64), accumulate=True
    )
    w = torch.ones(src.shape[0], dtype=torch.float64) if edge_weight is None else edge_weight
    weighted = torch.zeros(num_dst, num_src, dtype=torch.float64).index_put_((dst, src), w, accumulate=True)
    out_deg, in_deg = counts.sum(0).clamp(min=1), counts.sum(1).clamp(min=1)
    left = {"both": out_deg.pow(-0.5), "left": 1 / out_deg}.get(
        norm, torch.ones(num_src, dtype=torch.float64)
    )
    right = {"both": in_deg.pow(-0.5), "right": 1 / in_deg}.get(
        norm, torch.ones(num_dst, dtype=torch.float64)
    )
    out = right.unsqueeze(1) * (weighted @ (left.unsqueeze(1) * h))
    return out @ weight + (layer.bias if layer.bias is not None else 0)


@pytest.mark.parametrize("norm", ["both", "right", "left", "none"])
@pytest.mark.parametrize("widths", [(6, 3), (3, 7)])  # weight applied before / after the sum
@pytest.mark.parametrize("weighted", [False, True])
def test_graph_conv_equals_the_dense_formula(norm, widths, weighted):
    rng = np.random.default_rng(3)
    torch.manual_seed(0)
    block = _block(rng)
    layer = GraphConv(*widths, norm=norm).double()
    torch.nn.init.normal_(layer.bias)
    h = torch.randn(block.num_src_nodes(), widths[0], dtype=torch.float64)
    edge_weight = torch.rand(block.num_edges(), dtype=torch.float64) if weighted else None
    out = layer(block, h, edge_weight=edge_weight)
    assert out.shape == (block.num_dst_nodes(), widths[1])
    torch.testing.assert_close(out, _dense(layer, block, h, edge_weight, norm, layer.weight))


def test_external_weight_zero_in_degree_and_dgl_parameter_names():
    rng = np.random.default_rng(4)
    block = _block(rng, zero_in_degree=True)
    h = torch.randn(block.num_src_nodes(), 4, dtype=torch.float64)
    assert set(dict(GraphConv(4, 2).named_parameters())) == {"weight", "bias"}
    assert GraphConv(4, 2).weight.shape == (4, 2)
    with pytest.raises(ValueError, match="no in-edges"):
        GraphConv(4, 2)(block, h.float())
    layer = GraphConv(4, 2, norm="right", weight=False, bias=False, allow_zero_in_degree=True)
    external = torch.randn(4, 2, dtype=torch.float64)
    out = layer(block, h, weight=external)
    torch.testing.assert_close(out, _dense(layer, block, h, None, "right", external))
    layer.set_allow_zero_in_degree(False)
    with pytest.raises(ValueError, match="allow_zero_in_degree"):
        layer(block, h, weight=external)
    with pytest.raises(ValueError, match="own weight"):
        GraphConv(4, 2, allow_zero_in_degree=True).double()(block, h, weight=external)
    with pytest.raises(ValueError, match="norm"):
        GraphConv(4, 2, norm="sym")
