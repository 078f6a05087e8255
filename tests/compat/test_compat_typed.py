"""What DGL 2.x's typed distributed scripts call, through the compat namespace only: the R-GCN layer of
DGL's example (``HeteroGraphConv`` of ``GraphConv(norm='right', weight=False)`` with ``WeightBasis``
weights through ``mod_kwargs``) equals a dense reference; ``DGLGraph`` is the type of blocks and pair
graphs and their DGL members work; ``sample_etype_neighbors``, typed ``in_subgraph`` and ``edge_subgraph``
on a typed graph; ``g._client.barrier()``; ``torch.save`` of a ``DistTensor`` / ``DistEmbedding``
reloads as a handle on the same rows."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

import graphstore.compat.dgl as dgl
from graphstore.client.context import set_context
from graphstore.compat.dgl import nn as dglnn
from tests.client.nn.test_hetero import NUM_DST, NUM_SRC, SCHEMA, features, random_block
from tests.utils.typed_graphs import make_typed_partitions

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")


def dense_rgcn(block, x, weights):
    """``h_v = sum_r mean_{u in N_r(v)} x_u @ W_r`` over relations with edges, by hand."""
    out = {}
    for rel_id, canonical in enumerate(block.canonical_etypes):
        src_type, _, dst_type = canonical
        src, dst = block.edges(etype=canonical)
        if src.numel() == 0:
            continue
        adjacency = torch.zeros(NUM_DST[dst_type], NUM_SRC[src_type])
        adjacency.index_put_((dst, src), torch.ones(src.numel()), accumulate=True)
        mean = adjacency / adjacency.sum(1, keepdim=True).clamp(min=1)
        term = mean @ x[src_type] @ weights[rel_id]
        out[dst_type] = out[dst_type] + term if dst_type in out else term
    return out


def test_rgcn_layer_of_dgls_example_equals_a_dense_reference():
    block, x = random_block(), features(5)
    rel_names = block.etypes
    basis = dglnn.WeightBasis((5, 4), 2, len(rel_names))
    conv = dglnn.HeteroGraphConv(
        {rel: dglnn.GraphConv(5, 4, norm="right", weight=False, bias=False) for rel in rel_names}
    )
    weights = basis()
    assert weights.shape == (len(rel_names), 5, 4)
    local = block.local_var()
    out = conv(local, x, mod_kwargs={rel: {"weight": w} for rel, w in zip(rel_names, weights, strict=True)})
    expected = dense_rgcn(block, x, weights)
    assert set(out) == set(expected) == {"user", "item"}
    for ntype, h in expected.items():
        torch.testing.assert_close(out[ntype], h)
    out["user"].sum().backward()
    assert basis.weight.grad.abs().sum() > 0 and basis.w_comp.grad.abs().sum() > 0


@pytest.mark.parametrize("aggregate", ["max", "stack", lambda outs, _: sum(outs) * 2])
def test_hetero_graph_conv_of_sage_and_gat_on_a_typed_block(aggregate):
    block, x = random_block(), features(5)
    conv = dglnn.HeteroGraphConv(
        {
            "buys": dglnn.GATConv(5, 4, 2),
            "bought_by": dglnn.SAGEConv(5, 4, "mean"),
            "has": dglnn.SAGEConv(5, 4, "mean"),
            "follows": dglnn.GraphConv(5, 4),
        },
        aggregate=aggregate,
    )
    out = conv(block, x)  # GraphConv on "follows" leaves users without in-edges: allowed, as in DGL
    assert out["item"].shape[0] == NUM_DST["item"] and out["item"].shape[-2:] == (2, 4)
    assert out["user"].shape[0] == NUM_DST["user"] and out["user"].shape[-1] == 4


def test_typed_linear_layers_and_embeddings():
    linear = dglnn.HeteroLinear({"user": 5, ("user", "buys", "item"): 3}, 2)
    out = linear({"user": torch.ones(4, 5), ("user", "buys", "item"): torch.ones(1, 3)})
    assert out["user"].shape == (4, 2) and out[("user", "buys", "item")].shape == (1, 2)
    emb = dglnn.HeteroEmbedding({"user": 10, "item": 3}, 6)
    rows = emb({"user": torch.tensor([1, 9]), "item": torch.tensor([0])})
    assert rows["user"].shape == (2, 6)
    torch.testing.assert_close(rows["item"], emb.weight["item"][[0]])
    typed = dglnn.TypedLinear(4, 3, 2, regularizer="basis", num_bases=1)
    x, types = torch.randn(5, 4), torch.tensor([0, 1, 1, 0, 1])
    torch.testing.assert_close(typed(x, types, sorted_by_type=False), typed(x, types))
    rel = dglnn.RelGraphConv(5, 4, len(SCHEMA.canonical_etypes), "basis", 2, self_loop=False)
    assert set(rel(random_block(), features(5), None)) == {"user", "item", "tag"}


def test_blocks_and_pair_graphs_are_dgl_graphs_with_dgls_members():
    from graphstore.client.dataloader.pair_graph import PairGraph

    block = random_block()
    pair = PairGraph(torch.tensor([0, 1, 1]), torch.tensor([1, 0, 2]), torch.tensor([7, 8, 9]))
    assert isinstance(block, dgl.DGLGraph) and isinstance(block, dgl.DGLHeteroGraph)
    assert isinstance(block, dgl.DGLBlock) and isinstance(pair, dgl.DGLGraph)
    assert not isinstance(torch.zeros(1), dgl.DGLGraph)
    with pytest.raises(NotImplementedError, match="dgl.graph"):
        dgl.DGLGraph()
    assert block.is_block and not pair.is_block and pair.srctypes == pair.dsttypes == ["_N"]
    assert block.number_of_dst_nodes("user") == NUM_DST["user"] == block.num_dst_nodes("user")
    assert block.num_nodes("user") == NUM_SRC["user"] + NUM_DST["user"] == block.number_of_nodes("user")
    assert block.srcnodes["item"].data[dgl.NID].shape[0] == NUM_SRC["item"]
    local = block.local_var()
    local.srcnodes["user"].data["h"] = torch.ones(NUM_SRC["user"])
    assert "h" not in block.srcnodes["user"].data
    assert block.to("cpu").num_edges() == block.num_edges() and block.idtype == torch.int64
    src, dst = block.edges(etype="buys")
    assert block.out_degrees(etype="buys").sum() == src.numel()
    assert torch.equal(torch.stack(block.find_edges([0, 1], etype="buys")), torch.stack([src[:2], dst[:2]]))
    assert pair.num_src_nodes() == 3 and pair.in_degrees().tolist() == [1, 1, 1]
    assert pair.edge_ids(1, 2) == 2 and pair.has_edges_between([0, 2], [1, 0]).tolist() == [True, False]


@pytest.fixture(scope="module")
def typed_graph(tmp_path_factory):
    """A standalone DistGraph of the typed test graph through the compat namespace."""
    result, _ = make_typed_partitions(tmp_path_factory.mktemp("compat-typed"), 2)
    g = dgl.distributed.DistGraph("typed", part_config=result.config_path)
    yield g
    set_context(None).close()


def test_typed_graph_services(typed_graph):
    g = typed_graph
    papers = torch.arange(0, 30)
    frontier = dgl.distributed.sample_etype_neighbors(
        g, {"paper": papers}, {e: 2 for e in g.canonical_etypes}
    )
    for canonical in g.canonical_etypes:
        src, dst = frontier.edges(etype=canonical)
        if canonical[2] != "paper":
            assert src.numel() == 0
        else:
            assert torch.isin(dst, papers).all() and torch.bincount(dst).max() <= 2
    block = dgl.to_block(frontier, {"paper": papers})
    assert block.num_dst_nodes("paper") == 30
    whole = dgl.distributed.in_subgraph(g, {"paper": papers})
    writes = whole.edges(etype="writes")
    assert whole.num_edges("writes") >= frontier.num_edges("writes") and torch.isin(writes[1], papers).all()
    eids = {"writes": torch.tensor([0, 5, 9]), "cites": torch.tensor([3])}
    sub = g.edge_subgraph(eids)
    assert isinstance(sub, dgl.DGLGraph) and sub.num_edges("writes") == 3 and sub.num_edges("rev_writes") == 0
    expected = g.find_edges(torch.tensor([0, 5, 9]), etype="writes")
    u, v = sub.edges(etype="writes")
    assert torch.equal(sub.ndata[dgl.NID]["author"][u], expected[0])
    assert torch.equal(sub.ndata[dgl.NID]["paper"][v], expected[1])
    assert torch.equal(sub.edges["writes"].data[dgl.EID], eids["writes"])
    raw = g.edge_subgraph(eids, relabel_nodes=False)
    assert torch.equal(raw.edges(etype="writes")[0], expected[0])
    g._client.barrier()


def test_torch_save_of_dist_tensor_and_embedding_reattaches_by_name(typed_graph):
    g = typed_graph
    tensor = dgl.distributed.DistTensor(
        (g.num_nodes("paper"), 3),
        torch.float32,
        "saved_rows",
        init_func=lambda s, d: torch.rand(s, dtype=d),
        part_policy=g.get_node_partition_policy("paper"),
    )
    emb = dgl.distributed.DistEmbedding(
        g.num_nodes("author"), 4, "saved_emb", part_policy=g.get_node_partition_policy("author")
    )
    buffer = io.BytesIO()
    torch.save({"t": tensor, "e": emb}, buffer)
    assert buffer.tell() < 4096  # the name, shape and dtype; no rows
    loaded = torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)
    ids = torch.arange(g.num_nodes("paper"))
    assert type(loaded["t"]) is type(tensor) and torch.equal(loaded["t"][ids], tensor[ids])
    loaded["t"][torch.tensor([0])] = torch.full((1, 3), 7.0)
    assert tensor[torch.tensor([0])].eq(7.0).all()
    assert loaded["e"].name == emb.name and loaded["e"].embedding_dim == 4
    assert torch.equal(loaded["e"](torch.tensor([1, 2])).detach(), emb.weight[torch.tensor([1, 2])])
    del loaded  # a loaded handle never deletes the table
    assert np.allclose(tensor[torch.tensor([0])].numpy(), 7.0)
    tensor.delete()
    with pytest.raises(KeyError, match="saved_rows"):
        torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)
