"""``dgl.dataloading`` and ``dgl.nn`` of the DGL compatibility namespace, called with DGL's documented
arguments on a small real graph in standalone mode: samplers, the distributed loaders, the negative
sampler and the GNN layers, checked against the graph's arrays and against the layers' formulas.

DGL 2.x arguments are accepted; a value graphstore does not implement raises ``NotImplementedError``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch as th

import graphstore.compat.dgl as dgl
from tests.e2e.conftest import CompatGraph


def _check_block_edges(block, ref) -> None:
    """Every edge of the block is the graph edge its EID names, in global IDs."""
    src, dst = block.edges()
    eid = block.edata[dgl.EID].numpy()
    np.testing.assert_array_equal(block.srcdata[dgl.NID][src].numpy(), ref["src"][eid])
    np.testing.assert_array_equal(block.dstdata[dgl.NID][dst].numpy(), ref["dst"][eid])


def test_dist_data_loader_runs_dgl_documented_collate_example(compat_graph: CompatGraph):
    g, ref = compat_graph.graph, compat_graph.ref
    nodes = th.arange(0, 600, 3)

    def sample(seeds):
        seeds = th.LongTensor(np.asarray(seeds))
        frontier = dgl.distributed.sample_neighbors(g, seeds, 10)
        return dgl.to_block(frontier, seeds)

    dataloader = dgl.distributed.DistDataLoader(dataset=nodes, batch_size=64, collate_fn=sample, shuffle=True)
    seen = []
    for block in dataloader:
        feat = g.ndata["feat"][block.srcdata[dgl.NID]]
        labels = g.ndata["label"][block.dstdata[dgl.NID]]
        np.testing.assert_array_equal(feat.numpy(), ref["feat"][block.srcdata[dgl.NID].numpy()])
        assert labels.shape == (block.num_dst_nodes(),)
        _check_block_edges(block, ref)
        seen.append(block.dstdata[dgl.NID])
    assert [len(batch) for batch in seen] == [64, 64, 64, 8]
    assert th.equal(th.sort(th.cat(seen)).values, nodes), "every node once per epoch"
    dropped = dgl.distributed.DistDataLoader(nodes, 64, shuffle=False, drop_last=True)
    assert [batch.tolist() for batch in dropped] == [nodes[i : i + 64].tolist() for i in (0, 64, 128)]


def test_neighbor_sampler_sample_blocks(compat_graph: CompatGraph):
    g, ref = compat_graph.graph, compat_graph.ref
    in_deg = np.bincount(ref["dst"], minlength=600)
    sampler = dgl.dataloading.NeighborSampler([4, 2], edge_dir="in", prob=None, replace=False)
    seeds = th.tensor([10, 320, 599])
    input_nodes, output_nodes, blocks = sampler.sample_blocks(g, seeds)
    assert len(blocks) == 2 and th.equal(output_nodes, seeds)
    assert th.equal(blocks[-1].dstdata[dgl.NID], seeds) and th.equal(blocks[0].srcdata[dgl.NID], input_nodes)
    assert th.equal(blocks[0].dstdata[dgl.NID], blocks[1].srcdata[dgl.NID]), "layers chain"
    for block, fanout in zip(blocks, [4, 2], strict=True):
        _check_block_edges(block, ref)
        dst_global = block.dstdata[dgl.NID].numpy()
        per_dst = np.bincount(block.edges()[1].numpy(), minlength=block.num_dst_nodes())
        np.testing.assert_array_equal(per_dst, np.minimum(in_deg[dst_global], fanout))

    full = dgl.dataloading.MultiLayerFullNeighborSampler(1)
    _, _, (block,) = full.sample_blocks(g, seeds)
    assert block.num_edges() == int(in_deg[seeds.numpy()].sum()), "every in-edge of every seed"


def test_node_loader_with_prefetch_lists(compat_graph: CompatGraph):
    g, ref = compat_graph.graph, compat_graph.ref
    pb = g.get_partition_book()
    train = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    expected = np.flatnonzero(ref["train_mask"])
    sampler = dgl.dataloading.NeighborSampler([5, 5], prefetch_node_feats=["feat"], prefetch_labels=["label"])
    loader = dgl.dataloading.DistNodeDataLoader(
        g, train, sampler, batch_size=64, shuffle=True, drop_last=False
    )
    seen = []
    for input_nodes, seeds, blocks in loader:
        assert th.equal(blocks[0].srcdata[dgl.NID], input_nodes)
        np.testing.assert_array_equal(blocks[0].srcdata["feat"].numpy(), ref["feat"][input_nodes.numpy()])
        np.testing.assert_array_equal(blocks[-1].dstdata["label"].numpy(), ref["label"][seeds.numpy()])
        seen.append(seeds)
    np.testing.assert_array_equal(np.sort(th.cat(seen).numpy()), expected)


def test_node_loader_without_prefetch_lists_pulls_nothing_like_dgl(compat_graph: CompatGraph):
    g, ref = compat_graph.graph, compat_graph.ref
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(1)
    loader = dgl.dataloading.DistNodeDataLoader(g, th.arange(50), sampler, batch_size=50)
    (input_nodes, output_nodes, blocks) = next(iter(loader))
    assert "feat" not in blocks[0].srcdata and "label" not in blocks[-1].dstdata
    assert th.equal(output_nodes, th.arange(50))
    assert blocks[0].num_edges() == int(np.isin(ref["dst"], np.arange(50)).sum())


def test_edge_loader_with_a_uniform_negative_sampler(compat_graph: CompatGraph):
    g, ref = compat_graph.graph, compat_graph.ref
    eids = th.arange(0, 200)
    k = 3
    neg_src, neg_dst = dgl.dataloading.negative_sampler.Uniform(k)(g, eids)
    np.testing.assert_array_equal(neg_src.numpy(), np.repeat(ref["src"][:200], k))
    assert neg_dst.shape == (200 * k,) and 0 <= int(neg_dst.min()) and int(neg_dst.max()) < 600

    sampler = dgl.dataloading.NeighborSampler([3])
    loader = dgl.dataloading.DistEdgeDataLoader(
        g,
        eids,
        sampler,
        device=None,
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(k),
        batch_size=64,
        shuffle=True,
        drop_last=False,
    )
    seen = []
    for input_nodes, pair_graph, neg_pair_graph, blocks in loader:
        nids = pair_graph.ndata[dgl.NID]
        assert th.equal(blocks[-1].dstdata[dgl.NID], nids) and th.equal(
            blocks[0].srcdata[dgl.NID], input_nodes
        )
        src, dst = pair_graph.edges()
        batch = pair_graph.edata[dgl.EID].numpy()
        np.testing.assert_array_equal(nids[src].numpy(), ref["src"][batch])
        np.testing.assert_array_equal(nids[dst].numpy(), ref["dst"][batch])
        neg_src, _ = neg_pair_graph.edges()
        assert neg_pair_graph.num_edges() == k * pair_graph.num_edges()
        np.testing.assert_array_equal(
            neg_pair_graph.ndata[dgl.NID][neg_src].numpy(), np.repeat(ref["src"][batch], k)
        )
        seen.append(batch)
    np.testing.assert_array_equal(np.sort(np.concatenate(seen)), eids.numpy())


@pytest.fixture
def one_block(compat_graph: CompatGraph):
    """A full-neighbor block around 40 nodes and random input features of its source nodes."""
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(1)
    _, _, (block,) = sampler.sample_blocks(compat_graph.graph, th.arange(0, 400, 10))
    return block, th.randn(block.num_src_nodes(), 6, generator=th.Generator().manual_seed(0))


def test_sage_conv_mean_is_dgl_formula(one_block):
    block, h = one_block
    conv = dgl.nn.pytorch.SAGEConv(6, 5, "mean", feat_drop=0.0, bias=True, norm=None, activation=None)
    th.nn.init.normal_(conv.bias)
    out = conv(block, h, edge_weight=None)
    src, dst = block.edges()
    num_dst = block.num_dst_nodes()
    summed = th.zeros(num_dst, 6).index_add_(0, dst, h[src])
    mean = summed / th.bincount(dst, minlength=num_dst).clamp(min=1).unsqueeze(1)
    expected = conv.fc_self(h[:num_dst]) + conv.fc_neigh(mean) + conv.bias
    assert out.shape == (num_dst, 5)
    th.testing.assert_close(out, expected)


def test_gat_conv_attention_is_a_softmax_over_each_nodes_in_edges(one_block):
    block, h = one_block
    conv = dgl.nn.pytorch.GATConv(
        6, 4, 2, feat_drop=0.0, attn_drop=0.0, negative_slope=0.2, residual=False, activation=None,
        allow_zero_in_degree=True, bias=True,
    )  # fmt: skip
    out, attention = conv(block, h, get_attention=True)
    num_dst, num_edges = block.num_dst_nodes(), block.num_edges()
    assert out.shape == (num_dst, 2, 4) and attention.shape == (num_edges, 2, 1)
    dst = block.edges()[1]
    per_node = th.zeros(num_dst, 2).index_add_(0, dst, attention[:, :, 0])
    has_edges = th.bincount(dst, minlength=num_dst) > 0
    th.testing.assert_close(per_node[has_edges], th.ones(int(has_edges.sum()), 2))
    # The output is the attention-weighted sum of the projected sources, plus the bias.
    z = conv.fc(h).view(-1, 2, 4)
    expected = th.zeros(num_dst, 2, 4).index_add_(0, dst, z[block.edges()[0]] * attention) + conv.bias.view(
        1, 2, 4
    )
    th.testing.assert_close(out, expected)


def test_dgl_only_arguments_give_clear_errors():
    with pytest.raises(NotImplementedError, match="mask"):
        dgl.dataloading.NeighborSampler([5], mask="train_edges")
    with pytest.raises(NotImplementedError, match="prefetch_edge_feats"):
        dgl.dataloading.NeighborSampler([5], prefetch_edge_feats=["w"])


@pytest.mark.parametrize("call", ["NeighborSampler(fused=True)", "GATConv.forward(edge_weight=None)"])
def test_dgl_2x_arguments(one_block, call):
    block, h = one_block
    if call.startswith("NeighborSampler"):
        assert dgl.dataloading.NeighborSampler([2], fused=True).num_layers == 1
        with pytest.raises(NotImplementedError, match="fused=False"):
            dgl.dataloading.NeighborSampler([2], fused=False)
    else:
        conv = dgl.nn.pytorch.GATConv(6, 4, 2, allow_zero_in_degree=True)
        assert conv(block, h, edge_weight=None, get_attention=False).shape == (block.num_dst_nodes(), 2, 4)


def test_graph_conv_on_a_sampled_block(one_block):
    block, h = one_block
    conv = dgl.nn.pytorch.GraphConv(6, 3, norm="both", allow_zero_in_degree=True)
    assert dgl.nn.GraphConv is conv.__class__
    out = conv(block, h)
    src, dst = block.edges()
    out_deg = th.bincount(src, minlength=block.num_src_nodes()).clamp(min=1).float()
    in_deg = th.bincount(dst, minlength=block.num_dst_nodes()).clamp(min=1).float()
    summed = th.zeros(block.num_dst_nodes(), 6).index_add_(0, dst, (h * out_deg.rsqrt().unsqueeze(1))[src])
    th.testing.assert_close(out, (summed * in_deg.rsqrt().unsqueeze(1)) @ conv.weight + conv.bias)


def test_edge_prediction_sampler_and_dot_product_scores_on_pair_graphs(compat_graph: CompatGraph):
    """DGL's unsupervised flow: as_edge_prediction_sampler(..., negative_sampler=Uniform(k)), then
    ``u_dot_v`` scores on the positive and negative pair graphs inside ``local_scope``."""
    import graphstore.compat.dgl.function as fn

    g, ref = compat_graph.graph, compat_graph.ref
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        dgl.dataloading.NeighborSampler([4]),
        exclude="self",
        negative_sampler=dgl.dataloading.negative_sampler.PerSourceUniform(2),
    )
    loader = dgl.dataloading.DistEdgeDataLoader(g, th.arange(100), sampler, batch_size=50)
    feat = th.from_numpy(ref["feat"])
    batches = 0
    for _input_nodes, pair_graph, neg_pair_graph, blocks in loader:
        excluded = set(pair_graph.edata[dgl.EID].tolist())
        assert not excluded & set(blocks[0].edata[dgl.EID].tolist()), "exclude='self'"
        h = feat[blocks[-1].dstdata[dgl.NID]]
        for graph in (pair_graph, neg_pair_graph):
            with graph.local_scope():
                graph.ndata["h"] = h
                graph.apply_edges(fn.u_dot_v("h", "h", "score"))
                score = graph.edata["score"]
            src, dst = graph.edges()
            th.testing.assert_close(score, (h[src] * h[dst]).sum(1, keepdim=True))
            assert "h" not in graph.ndata and "score" not in graph.edata
        assert neg_pair_graph.num_edges() == 2 * pair_graph.num_edges()
        batches += 1
    assert batches == 2
    with pytest.raises(NotImplementedError, match="exclude='reverse_types'"):
        dgl.dataloading.as_edge_prediction_sampler(
            dgl.dataloading.NeighborSampler([4]), exclude="reverse_types"
        )
    with pytest.raises(TypeError, match="given both"):
        dgl.dataloading.DistEdgeDataLoader(g, th.arange(10), sampler, negative_sampler=None)
