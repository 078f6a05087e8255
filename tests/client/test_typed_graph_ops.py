"""Message passing on typed blocks and pair graphs: ``apply_edges`` / ``update_all`` run on the relation
``etype`` names and read and write the frames of its types (the same frames ``block[etype]`` shows), and
``local_scope`` drops what is set on any type's frame, views made inside it included."""

from __future__ import annotations

import pytest
import torch

import graphstore.function as fn
from graphstore.client.dataloader import PairGraph
from graphstore.client.nn.graph_conv import GraphConv
from graphstore.client.nn.hetero_graph_conv import HeteroGraphConv
from tests.client.nn.test_hetero import NUM_DST, NUM_SRC, SCHEMA, features, random_block

# torch warns once per process that sparse CSR tensors (used by GraphConv) are a beta feature.
pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")

BUYS, BOUGHT_BY, FOLLOWS = (
    ("user", "buys", "item"),
    ("item", "bought_by", "user"),
    ("user", "follows", "user"),
)
WIDTH = 5


def _summed(block, canonical, h_src: dict) -> torch.Tensor:
    """Reference: per destination of one relation, the sum of its in-neighbors' ``h``."""
    src, dst = block.edges(etype=canonical)
    out = torch.zeros(NUM_DST[canonical[2]], WIDTH)
    return out.index_add_(0, dst, h_src[canonical[0]][src])


def test_update_all_and_apply_edges_run_on_the_named_relation():
    block, h = random_block(), features(WIDTH)
    block.srcdata["h"] = h
    block.dstdata["h"] = {t: h[t][: NUM_DST[t]] for t in NUM_DST}
    for canonical in (BUYS, BOUGHT_BY, FOLLOWS):
        block.update_all(fn.copy_u("h", "m"), fn.sum("m", f"agg_{canonical[1]}"), etype=canonical)
    # two relations into "user" write their own names; each equals its relation's reference
    for canonical in (BUYS, BOUGHT_BY, FOLLOWS):
        got = block.dstnodes[canonical[2]].data[f"agg_{canonical[1]}"]
        torch.testing.assert_close(got, _summed(block, canonical, h))
    assert "m" not in block.edges[BUYS].data, "messages are not kept"
    block.apply_edges(fn.u_dot_v("h", "h", "score"), etype="follows")  # a name that is unambiguous
    src, dst = block.edges(etype=FOLLOWS)
    expected = (h["user"][src] * h["user"][dst]).sum(1, keepdim=True)
    torch.testing.assert_close(block.edges[FOLLOWS].data["score"], expected)
    assert "score" not in block.edges[BUYS].data
    with pytest.raises(ValueError, match="etype=None: the graph has several edge types"):
        block.apply_edges(fn.u_dot_v("h", "h", "score"))
    with pytest.raises(ValueError, match="etype='nope'"):
        block.update_all(fn.copy_u("h", "m"), fn.sum("m", "x"), etype="nope")


def test_a_relation_view_writes_into_the_typed_block():
    block, h = random_block(), features(WIDTH)
    block.srcdata["h"] = h
    relation = block[BUYS]
    relation.update_all(fn.copy_u("h", "m"), fn.mean("m", "h_neigh"))
    assert block.dstnodes["item"].data["h_neigh"] is relation.dstdata["h_neigh"]
    src, dst = block.edges(etype=BUYS)
    degree = torch.bincount(dst, minlength=NUM_DST["item"]).clamp(min=1).unsqueeze(1)
    torch.testing.assert_close(relation.dstdata["h_neigh"], _summed(block, BUYS, h) / degree)
    relation.apply_edges(lambda edges: {"w": edges.src["h"].sum(1)}, etype=BUYS)  # its own type
    torch.testing.assert_close(block.edges[BUYS].data["w"], h["user"][src].sum(1))
    with pytest.raises(ValueError, match="etype='follows'"):
        relation.apply_edges(fn.copy_u("h", "x"), etype="follows")


def test_local_scope_drops_changes_on_every_type_and_in_views():
    block, h = random_block(), features(WIDTH)
    block.srcdata["h"] = h
    before = {t: dict(block.srcnodes[t].data) for t in NUM_SRC}
    dst_before = {t: dict(block.dstnodes[t].data) for t in NUM_DST}
    with block.local_scope():
        block.srcdata["tmp"] = {"user": torch.ones(NUM_SRC["user"])}
        block.srcdata["h"] = {"item": torch.zeros(NUM_SRC["item"], WIDTH)}
        block[BOUGHT_BY].update_all(fn.copy_u("h", "m"), fn.sum("m", "agg"))  # a view made in the scope
        assert torch.equal(block.dstnodes["user"].data["agg"], torch.zeros(NUM_DST["user"], WIDTH))
        with block.local_scope():
            block.dstdata["inner"] = {"user": torch.ones(NUM_DST["user"])}
        assert "inner" not in block.dstnodes["user"].data
        block.srcnodes["user"].data["h"].add_(1.0)
    for ntype, frame in before.items():
        assert block.srcnodes[ntype].data.keys() == frame.keys(), f"{ntype} names restored"
        assert all(block.srcnodes[ntype].data[k] is v for k, v in frame.items()), f"{ntype} tensors"
    assert {t: block.dstnodes[t].data.keys() for t in NUM_DST} == {t: f.keys() for t, f in dst_before.items()}
    assert "agg" not in block[BOUGHT_BY].dstdata, "a view made after the scope sees the restored frames"
    torch.testing.assert_close(block.srcdata["h"]["user"], h["user"])  # the in-place add stays
    relation = block[BUYS]
    with relation.local_scope():
        relation.dstdata["x"] = torch.ones(NUM_DST["item"])
        assert "x" not in block.dstnodes["item"].data, "a view's scope copies its own frames"
    assert "x" not in relation.dstdata and "x" not in block.dstnodes["item"].data


def test_a_typed_pair_graph_is_scored_per_edge_type_as_in_dgl():
    gen = torch.Generator().manual_seed(3)
    num = {"user": 4, "item": 3, "tag": 2}
    edges = {
        canonical: (
            torch.randint(0, num[canonical[0]], (5,), generator=gen),
            torch.randint(0, num[canonical[2]], (5,), generator=gen),
        )
        for canonical in SCHEMA.canonical_etypes
    }
    pair = PairGraph.from_types(SCHEMA, edges, {t: torch.arange(n) for t, n in num.items()})
    h = {t: torch.randn(n, WIDTH, generator=gen) for t, n in num.items()}
    scores = {}
    with pair.local_scope():
        pair.ndata["h"] = h
        for canonical in pair.canonical_etypes:
            pair.apply_edges(fn.u_dot_v("h", "h", "score"), etype=canonical)
        scores = dict(pair.edata["score"])
    assert "h" not in pair.ndata and "score" not in pair.edata
    for canonical, (src, dst) in edges.items():
        expected = (h[canonical[0]][src] * h[canonical[2]][dst]).sum(1, keepdim=True)
        torch.testing.assert_close(scores[canonical], expected)


def test_graph_conv_serves_as_a_relation_module():
    block, h = random_block(), features(WIDTH)
    modules = {
        c: GraphConv(WIDTH, WIDTH, norm="none", weight=False, bias=False) for c in SCHEMA.canonical_etypes
    }
    for module in modules.values():
        module.set_allow_zero_in_degree(True)
    out = HeteroGraphConv(modules, aggregate="sum")(block, h)
    expected_user = _summed(block, BOUGHT_BY, h) + _summed(block, FOLLOWS, h)
    torch.testing.assert_close(out["user"], expected_user)
    torch.testing.assert_close(out["item"], _summed(block, BUYS, h))
