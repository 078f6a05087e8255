"""GNN layers over blocks: equal to dense reference computations, in every supported dtype and device."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from graphstore.client.block import to_block
from graphstore.client.constants import NID
from graphstore.client.frontier import SampledSubgraph
from graphstore.client.nn import GATConv, GraphSAGE, SAGEConv

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def random_two_layer_sample(rng, num_nodes=300, num_seeds=20, fanouts=(4, 3)):
    """Two frontiers in global IDs (output layer first) and the blocks built from them (input layer first)."""
    seeds = rng.choice(num_nodes, num_seeds, replace=False)
    frontiers, blocks = [], []
    dst = seeds
    for fanout in fanouts:
        # each dst node gets 0..fanout in-edges from random sources
        counts = rng.integers(0, fanout + 1, len(dst))
        edge_dst = np.repeat(dst, counts)
        edge_src = rng.integers(0, num_nodes, len(edge_dst))
        frontier = SampledSubgraph(edge_src, edge_dst, np.arange(len(edge_dst)), num_nodes)
        block = to_block(frontier, dst)
        frontiers.append(frontier)
        blocks.insert(0, block)
        dst = block.srcdata[NID].numpy()
    return seeds, frontiers[::-1], blocks


def dense_adjacency(frontier: SampledSubgraph) -> torch.Tensor:
    n = frontier.num_nodes()
    adj = torch.zeros(n, n, dtype=torch.float64)
    adj.index_put_((frontier.dst, frontier.src), torch.ones(frontier.num_edges(), dtype=torch.float64), True)
    return adj


def dense_sage(layer: SAGEConv, adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The SAGE layer over the whole graph with a dense (multi-)adjacency, in float64."""
    w_neigh = layer.fc_neigh.weight.double()
    deg = adj.sum(1, keepdim=True)
    if layer._aggre_type == "mean":
        neigh = (adj @ h) / deg.clamp(min=1)
        out = h @ layer.fc_self.weight.double().T + neigh @ w_neigh.T
    elif layer._aggre_type == "gcn":
        out = ((adj @ h + h) / (deg + 1)) @ w_neigh.T
    else:
        pooled_in = F.relu(h @ layer.fc_pool.weight.double().T + layer.fc_pool.bias.double())
        masked = torch.where(
            adj.unsqueeze(-1) > 0, pooled_in.unsqueeze(0), torch.tensor(-np.inf, dtype=h.dtype)
        )
        pooled = masked.max(dim=1).values
        pooled = torch.where(deg > 0, pooled, torch.zeros_like(pooled))
        out = h @ layer.fc_self.weight.double().T + pooled @ w_neigh.T
    return out + layer.bias.double()


@pytest.mark.parametrize("aggregator", ["mean", "gcn", "pool"])
@pytest.mark.parametrize("widths", [(6, 4), (3, 8)])  # project before / after aggregation
def test_sage_layer_equals_dense(aggregator, widths):
    rng = np.random.default_rng(1)
    torch.manual_seed(0)
    seeds, frontiers, blocks = random_two_layer_sample(rng)
    layer = SAGEConv(widths[0], widths[1], aggregator).double()
    x = torch.randn(frontiers[0].num_nodes(), widths[0], dtype=torch.float64)
    block = blocks[-1]
    out = layer(block, x[block.srcdata[NID]])
    expected = dense_sage(layer, dense_adjacency(frontiers[-1]), x)[torch.from_numpy(seeds)]
    torch.testing.assert_close(out, expected)
    # the (h_src, h_dst) form gives the same answer
    pair = layer(block, (x[block.srcdata[NID]], x[block.dstdata[NID]]))
    torch.testing.assert_close(pair, out)


@pytest.mark.parametrize("aggregator", ["mean", "gcn", "pool"])
@pytest.mark.parametrize("widths", [(6, 4), (3, 8)])
def test_sage_layer_gradients_equal_dense(aggregator, widths):
    rng = np.random.default_rng(3)
    torch.manual_seed(0)
    seeds, frontiers, blocks = random_two_layer_sample(rng)
    layer = SAGEConv(widths[0], widths[1], aggregator).double()
    x = torch.randn(frontiers[0].num_nodes(), widths[0], dtype=torch.float64, requires_grad=True)
    weights = torch.randn(len(seeds), widths[1], dtype=torch.float64)
    block = blocks[-1]
    (layer(block, x[block.srcdata[NID]]) * weights).sum().backward()
    got = {name: p.grad.clone() for name, p in layer.named_parameters()} | {"x": x.grad.clone()}
    layer.zero_grad()
    x.grad = None
    dense = dense_sage(layer, dense_adjacency(frontiers[-1]), x)[torch.from_numpy(seeds)]
    (dense * weights).sum().backward()
    expected = {name: p.grad for name, p in layer.named_parameters()} | {"x": x.grad}
    for name, grad in expected.items():
        torch.testing.assert_close(got[name], grad, msg=name)


@pytest.mark.parametrize("aggregator", ["mean", "gcn"])
def test_sage_layer_runs_the_hooks_of_its_linear_layers(aggregator):
    rng = np.random.default_rng(4)
    torch.manual_seed(0)
    seeds, frontiers, blocks = random_two_layer_sample(rng)
    layer = SAGEConv(3, 5, aggregator).double()
    x = torch.randn(frontiers[0].num_nodes(), 3, dtype=torch.float64)
    block = blocks[-1]
    plain = layer(block, x[block.srcdata[NID]])
    calls = []
    layer.fc_neigh.register_forward_hook(lambda module, inputs, output: calls.append(1) or output * 2)
    hooked = layer(block, x[block.srcdata[NID]])
    assert calls == [1]
    bias = layer.bias.detach()
    if aggregator == "gcn":
        torch.testing.assert_close(hooked - bias, (plain - bias) * 2)
    else:
        self_term = x[block.dstdata[NID]] @ layer.fc_self.weight.detach().T
        torch.testing.assert_close(hooked - bias - self_term, (plain - bias - self_term) * 2)


def test_neighbor_sums_of_half_precision_inputs_accumulate_in_float32():
    from graphstore.client.nn import aggregate_sum

    rng = np.random.default_rng(6)
    seeds, frontiers, blocks = random_two_layer_sample(rng)
    block = blocks[-1]
    h = torch.full((block.num_src_nodes(), 2), 1000.0, dtype=torch.float16)
    weight = torch.rand(block.num_edges(), dtype=torch.float64)
    summed = aggregate_sum(block, h, weight.to(torch.float16))
    assert summed.dtype == torch.float32
    src, dst = block.edges()
    expected = torch.zeros(block.num_dst_nodes(), dtype=torch.float64)
    expected.index_add_(0, dst, 1000.0 * weight.to(torch.float16).double())
    torch.testing.assert_close(summed[:, 0].double(), expected, rtol=1e-6, atol=1e-3)
    assert (summed[expected == 0] == 0).all()  # destinations without in-edges sum to zero


@pytest.mark.parametrize("aggregator", ["mean", "gcn"])
@pytest.mark.parametrize("project_first", [True, False])
def test_sage_layer_equals_dense_in_either_order_of_projection_and_aggregation(
    aggregator, project_first, monkeypatch
):
    rng = np.random.default_rng(7)
    torch.manual_seed(0)
    seeds, frontiers, blocks = random_two_layer_sample(rng)
    layer = SAGEConv(6, 4, aggregator).double()
    monkeypatch.setattr(layer, "_cheaper_to_project_first", lambda *sizes: project_first)
    x = torch.randn(frontiers[0].num_nodes(), 6, dtype=torch.float64, requires_grad=True)
    block = blocks[-1]
    out = layer(block, x[block.srcdata[NID]])
    expected = dense_sage(layer, dense_adjacency(frontiers[-1]), x)[torch.from_numpy(seeds)]
    torch.testing.assert_close(out, expected)
    (grad,) = torch.autograd.grad(out.sum(), x)
    (expected_grad,) = torch.autograd.grad(expected.sum(), x)
    torch.testing.assert_close(grad, expected_grad)


def test_sage_layer_projects_first_only_where_that_costs_less():
    layer = SAGEConv(256, 16)
    # a sampled output layer: many more sources than destinations
    assert not layer._cheaper_to_project_first(num_src=12_700, num_dst=1_024, num_edges=13_726)
    # nearly every source is a destination and each has many in-edges
    assert layer._cheaper_to_project_first(num_src=1_100, num_dst=1_000, num_edges=50_000)
    # widening layers aggregate first
    assert not SAGEConv(16, 256)._cheaper_to_project_first(num_src=1_100, num_dst=1_000, num_edges=50_000)


def test_graphsage_two_layers_on_blocks_equals_dense_on_sampled_subgraph():
    rng = np.random.default_rng(5)
    torch.manual_seed(0)
    seeds, frontiers, blocks = random_two_layer_sample(rng, fanouts=(5, 4))
    model = GraphSAGE(7, 9, 3, n_layers=2).double().eval()
    x = torch.randn(frontiers[0].num_nodes(), 7, dtype=torch.float64)
    out = model(blocks, x[blocks[0].srcdata[NID]])
    h = F.relu(dense_sage(model.layers[0], dense_adjacency(frontiers[0]), x))
    expected = dense_sage(model.layers[1], dense_adjacency(frontiers[1]), h)[torch.from_numpy(seeds)]
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def dense_gat(layer: GATConv, adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    heads, width = layer._num_heads, layer._out_feats
    z = (h @ layer.fc.weight.double().T).view(-1, heads, width)
    el = (z * layer.attn_l.double()).sum(-1)  # [N, H]
    er = (z * layer.attn_r.double()).sum(-1)
    logits = F.leaky_relu(er.unsqueeze(1) + el.unsqueeze(0), 0.2)  # [dst, src, H]
    # multi-edges: each parallel edge is its own softmax term
    weights = adj.unsqueeze(-1) * torch.exp(logits - logits.max())
    alpha = weights / weights.sum(1, keepdim=True).clamp(min=1e-300)
    return torch.einsum("dsh,shf->dhf", alpha, z) + layer.bias.double().view(1, heads, width)


def test_gat_layer_equals_dense_and_returns_attention():
    rng = np.random.default_rng(2)
    torch.manual_seed(0)
    num_nodes = 200
    seeds = rng.choice(num_nodes, 15, replace=False)
    counts = rng.integers(1, 6, len(seeds))
    dst = np.repeat(seeds, counts)
    src = rng.integers(0, num_nodes, len(dst))
    frontier = SampledSubgraph(src, dst, np.arange(len(dst)), num_nodes)
    block = to_block(frontier, seeds)
    layer = GATConv(5, 4, num_heads=3).double()
    x = torch.randn(num_nodes, 5, dtype=torch.float64)
    out, attention = layer(block, x[block.srcdata[NID]], get_attention=True)
    assert out.shape == (len(seeds), 3, 4) and attention.shape == (len(dst), 3, 1)
    expected = dense_gat(layer, dense_adjacency(frontier), x)[torch.from_numpy(seeds)]
    torch.testing.assert_close(out, expected)
    sums = torch.zeros(len(seeds), 3, dtype=torch.float64).index_add_(0, block.edges()[1], attention[..., 0])
    torch.testing.assert_close(sums, torch.ones_like(sums))


def test_gat_zero_in_degree_rejected_unless_allowed():
    frontier = SampledSubgraph([3], [1], [0], num_nodes=5)
    block = to_block(frontier, [1, 2])
    x = torch.randn(block.num_src_nodes(), 4)
    with pytest.raises(ValueError, match="no in-edges"):
        GATConv(4, 2, 2)(block, x)
    out = GATConv(4, 2, 2, allow_zero_in_degree=True)(block, x)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_close_to_float32(device, dtype):
    rng = np.random.default_rng(9)
    torch.manual_seed(0)
    seeds, frontiers, blocks = random_two_layer_sample(rng, fanouts=(6, 6))
    blocks = [b.to(device) for b in blocks]
    x = torch.randn(frontiers[0].num_nodes(), 8, device=device)[blocks[0].srcdata[NID]]
    sage = GraphSAGE(8, 16, 4).to(device)
    reference = sage(blocks, x)
    low = sage.to(dtype)(blocks, x.to(dtype))
    assert low.dtype == dtype
    torch.testing.assert_close(low.float(), reference, atol=0.1, rtol=0.05)
    low.float().sum().backward()

    gat = GATConv(8, 4, 2, allow_zero_in_degree=True).to(device)
    reference = gat(blocks[0], x)
    low = gat.to(dtype)(blocks[0], x.to(dtype))
    assert low.dtype == dtype
    torch.testing.assert_close(low.float(), reference, atol=0.1, rtol=0.05)


def test_layer_arguments_checked():
    with pytest.raises(ValueError, match="aggregator_type"):
        SAGEConv(4, 4, "lstm")
    with pytest.raises(ValueError, match="out_feats"):
        SAGEConv(4, 0)
    with pytest.raises(ValueError, match="num_heads"):
        GATConv(4, 4, 0)
    frontier = SampledSubgraph([3], [1], [0], num_nodes=5)
    block = to_block(frontier, [1])
    with pytest.raises(ValueError, match="source rows"):
        SAGEConv(4, 2)(block, torch.randn(7, 4))
    with pytest.raises(ValueError, match="2 blocks"):
        GraphSAGE(4, 4, 2)([block], torch.randn(2, 4))


def test_parameter_names_match_dgl():
    assert set(dict(SAGEConv(4, 3).named_parameters())) == {"fc_self.weight", "fc_neigh.weight", "bias"}
    assert set(dict(SAGEConv(4, 3, "gcn").named_parameters())) == {"fc_neigh.weight", "bias"}
    assert set(dict(GATConv(4, 3, 2).named_parameters())) == {"fc.weight", "attn_l", "attn_r", "bias"}


@pytest.mark.parametrize("aggregator", ["mean", "gcn", "pool"])
def test_sage_on_block_without_edges(aggregator):
    block = to_block(SampledSubgraph([], [], [], num_nodes=6), [4, 2])
    layer = SAGEConv(3, 5, aggregator)
    h = torch.randn(2, 3)
    out = layer(block, h)
    # no neighbors: gcn averages the node with itself alone, mean / pool aggregate zeros
    expected = layer.fc_neigh(h) + layer.bias if aggregator == "gcn" else layer.fc_self(h) + layer.bias
    torch.testing.assert_close(out, expected)


def test_weighted_sage_with_and_without_weight_gradients_agree():
    rng = np.random.default_rng(4)
    torch.manual_seed(0)
    _, frontiers, blocks = random_two_layer_sample(rng)
    block = blocks[-1]
    layer = SAGEConv(4, 6)
    h = torch.randn(block.num_src_nodes(), 4)
    weight = torch.rand(block.num_edges())
    fast = layer(block, h, edge_weight=weight)  # sparse product
    slow = layer(block, h, edge_weight=weight.clone().requires_grad_())  # gather + index_add_
    torch.testing.assert_close(fast, slow)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_layers_under_autocast(device, dtype):
    rng = np.random.default_rng(6)
    torch.manual_seed(0)
    _, frontiers, blocks = random_two_layer_sample(rng, fanouts=(5, 5))
    blocks = [b.to(device) for b in blocks]
    x = torch.randn(blocks[0].num_src_nodes(), 8, device=device)
    for aggregator in ("mean", "gcn", "pool"):
        model = GraphSAGE(8, 16, 4, aggregator_type=aggregator).to(device)
        reference = model(blocks, x)
        with torch.autocast(device_type=device, dtype=dtype):
            out = model(blocks, x)
        out.float().sum().backward()
        torch.testing.assert_close(out.float(), reference, atol=0.1, rtol=0.05)
    gat = GATConv(8, 4, 2, allow_zero_in_degree=True).to(device)
    with torch.autocast(device_type=device, dtype=dtype):
        out = gat(blocks[0], x)
    assert torch.isfinite(out.float()).all()


def test_gat_edge_weight_scales_each_edges_attention():
    rng = np.random.default_rng(6)
    torch.manual_seed(0)
    seeds = rng.choice(100, 10, replace=False)
    dst = np.repeat(seeds, rng.integers(1, 5, len(seeds)))
    block = to_block(SampledSubgraph(rng.integers(0, 100, dst.size), dst, np.arange(dst.size), 100), seeds)
    layer = GATConv(5, 4, num_heads=2).double()
    h = torch.randn(block.num_src_nodes(), 5, dtype=torch.float64)
    weight = torch.rand(block.num_edges(), dtype=torch.float64)
    _, plain = layer(block, h, get_attention=True)
    out, weighted = layer(block, h, edge_weight=weight, get_attention=True)
    torch.testing.assert_close(weighted, plain * weight.view(-1, 1, 1))
    src, dst_local = block.edges()
    z = layer.fc(h).view(-1, 2, 4)
    expected = torch.zeros(block.num_dst_nodes(), 2, 4, dtype=torch.float64).index_add_(
        0, dst_local, z[src] * weighted
    ) + layer.bias.view(1, 2, 4)
    torch.testing.assert_close(out, expected)
