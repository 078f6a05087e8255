"""Relational layers over typed blocks: HeteroGraphConv equals its modules run per relation and aggregated;
RelGraphConv equals a dense reference (full, basis and block-diagonal weights), its typed and one-type
forms agree; DistHeteroEmbedding rows train with SparseAdagrad."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.client import api
from graphstore.client.block import Block
from graphstore.client.dist_graph import DistGraph
from graphstore.client.nn import GATConv, SAGEConv
from graphstore.client.nn.hetero_embedding import DistHeteroEmbedding
from graphstore.client.nn.hetero_graph_conv import HeteroGraphConv
from graphstore.client.nn.rel_graph_conv import RelGraphConv, TypedLinear
from graphstore.client.optim import SparseAdagrad
from graphstore.types import GraphSchema, InitSpec
from tests.client.test_dist_tensor import unique_name
from tests.utils.typed_graphs import make_typed_partitions

SCHEMA = GraphSchema(
    ("user", "item", "tag"),
    (
        ("user", "buys", "item"),
        ("item", "bought_by", "user"),
        ("item", "has", "tag"),
        ("user", "follows", "user"),
    ),
)
# torch warns once per process that sparse CSR tensors (used by the layers) are a beta feature.
pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")

NUM_SRC = {"user": 9, "item": 7, "tag": 4}
NUM_DST = {"user": 3, "item": 2, "tag": 0}


def random_block(seed: int = 0, empty=("item", "has", "tag")) -> Block:
    rng = np.random.default_rng(seed)
    edges, eids = {}, {}
    for canonical in SCHEMA.canonical_etypes:
        count = 0 if canonical == empty else 12
        src = torch.from_numpy(rng.integers(0, NUM_SRC[canonical[0]], count))
        dst = torch.from_numpy(rng.integers(0, max(NUM_DST[canonical[2]], 1), count))
        edges[canonical] = (src, dst)
        eids[canonical] = torch.arange(count)
    src_nids = {t: torch.arange(n) for t, n in NUM_SRC.items()}
    return Block.from_types(SCHEMA, edges, src_nids, NUM_DST, eids)


def features(width: int, seed: int = 1) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {t: torch.randn(n, width, generator=generator) for t, n in NUM_SRC.items()}


@pytest.mark.parametrize("aggregate", ["sum", "mean", "max", "min", "stack"])
def test_hetero_graph_conv_runs_each_module_on_its_relation(aggregate):
    block, x = random_block(), features(5)
    mods = {
        "buys": SAGEConv(5, 4),
        "bought_by": SAGEConv(5, 4, "gcn"),
        ("item", "has", "tag"): SAGEConv(5, 4),
        "follows": SAGEConv(5, 4, "pool"),
    }
    conv = HeteroGraphConv(mods, aggregate=aggregate)
    out = conv(block, x)
    assert set(out) == {"user", "item"}  # no relation with edges reaches a tag
    by_hand = {
        "item": [mods["buys"](block["buys"], (x["user"], x["item"][:2]))],
        "user": [
            mods["bought_by"](block["bought_by"], (x["item"], x["user"][:3])),
            mods["follows"](block["follows"], (x["user"], x["user"][:3])),
        ],
    }
    for ntype, outs in by_hand.items():
        stacked = torch.stack(outs, dim=1 if aggregate == "stack" else 0)
        expected = {
            "sum": lambda s: s.sum(0),
            "mean": lambda s: s.mean(0),
            "max": lambda s: s.amax(0),
            "min": lambda s: s.amin(0),
            "stack": lambda s: s,
        }[aggregate](stacked)
        torch.testing.assert_close(out[ntype], expected)
    out["user"].sum().backward()
    assert mods["follows"].fc_neigh.weight.grad is not None


def test_hetero_graph_conv_with_gat_and_a_missing_module():
    block, x = random_block(), features(6)
    conv = HeteroGraphConv({"buys": GATConv(6, 3, num_heads=2, allow_zero_in_degree=True)})
    out = conv(block, ({"user": x["user"]}, {"item": x["item"][:2]}))  # only "buys" has its inputs
    assert set(out) == {"item"} and out["item"].shape == (2, 2, 3)
    with pytest.raises(KeyError, match="no module for edge type item:bought_by:user"):
        HeteroGraphConv({"buys": SAGEConv(6, 3)})(block, x)
    with pytest.raises(ValueError, match="aggregate"):
        HeteroGraphConv({"buys": SAGEConv(6, 3)}, aggregate="median")


def dense_weight(linear: TypedLinear, rel: int) -> torch.Tensor:
    """W_rel as a dense ``[in, out]`` matrix, built from the parameters independently of the layer."""
    if linear.regularizer is None:
        return linear.W[rel]
    if linear.regularizer == "basis":
        return sum(linear.coeff[rel, b] * linear.W[b] for b in range(linear.num_bases))
    return torch.block_diag(*[linear.W[rel, b] for b in range(linear.num_bases)])


@pytest.mark.parametrize(("regularizer", "num_bases"), [(None, None), ("basis", 2), ("bdd", 2)])
def test_rel_graph_conv_equals_a_dense_reference(regularizer, num_bases):
    torch.manual_seed(0)
    block, x = random_block(), features(6)
    conv = RelGraphConv(6, 4, num_rels=4, regularizer=regularizer, num_bases=num_bases, activation=torch.tanh)
    with torch.no_grad():
        conv.h_bias.normal_()
    out = conv(block, x)
    assert set(out) == {"user", "item", "tag"} and out["tag"].shape == (0, 4)
    for ntype in ("user", "item"):
        expected = x[ntype][: NUM_DST[ntype]] @ conv.loop_weight + conv.h_bias
        for rel, canonical in enumerate(SCHEMA.canonical_etypes):
            if canonical[2] != ntype:
                continue
            src, dst = block.edges(etype=canonical)
            adjacency = torch.zeros(NUM_DST[ntype], NUM_SRC[canonical[0]])
            adjacency.index_put_((dst, src), torch.ones(src.numel()), accumulate=True)
            mean = adjacency / adjacency.sum(1, keepdim=True).clamp(min=1)
            expected = expected + mean @ x[canonical[0]] @ dense_weight(conv.linear_r, rel)
        torch.testing.assert_close(out[ntype], torch.tanh(expected), atol=1e-5, rtol=1e-5)
    # every relation's weight takes part, including the one without edges in this block
    sum(o.sum() for o in out.values()).backward()
    if regularizer is None:
        assert all(conv.linear_r.W.grad[r].abs().sum() > 0 for r in (0, 1, 3))


def test_rel_graph_conv_one_type_form_matches_the_typed_form():
    """A one-type block with a relation ID and a 1/degree norm per edge gives the typed form's output."""
    torch.manual_seed(1)
    rel_schema = GraphSchema(("n",), (("n", "a", "n"), ("n", "b", "n")))
    rng = np.random.default_rng(3)
    src = {c: torch.from_numpy(rng.integers(0, 10, 15)) for c in rel_schema.canonical_etypes}
    dst = {c: torch.from_numpy(rng.integers(0, 4, 15)) for c in rel_schema.canonical_etypes}
    typed = Block.from_types(
        rel_schema,
        {c: (src[c], dst[c]) for c in src},
        {"n": torch.arange(10)},
        {"n": 4},
        {c: torch.arange(15) for c in src},
    )
    conv = RelGraphConv(5, 3, num_rels=2, regularizer="basis", num_bases=1)
    x = torch.randn(10, 5)
    expected = conv(typed, {"n": x})["n"]
    all_src = torch.cat([src[c] for c in rel_schema.canonical_etypes])
    all_dst = torch.cat([dst[c] for c in rel_schema.canonical_etypes])
    etypes = torch.cat([torch.full((15,), r) for r in range(2)])
    norm = torch.cat([1.0 / typed[c].in_degrees()[dst[c]].float() for c in rel_schema.canonical_etypes])
    one_type = Block(all_src, all_dst, torch.arange(10), 4, torch.arange(30))
    torch.testing.assert_close(conv(one_type, x, etypes, norm.unsqueeze(1)), expected)
    with pytest.raises(ValueError, match="needs etypes"):
        conv(one_type, x)
    with pytest.raises(ValueError, match="3 relations, the block 2"):
        RelGraphConv(5, 3, num_rels=3)(typed, {"n": x})
    with pytest.raises(ValueError, match="'bdd' needs num_bases"):
        RelGraphConv(5, 3, num_rels=2, regularizer="bdd", num_bases=2)


@pytest.fixture
def typed_graph(tmp_path):
    result, _ = make_typed_partitions(tmp_path, 2)
    api.exit_client()
    try:
        yield DistGraph("typed", part_config=result.config_path)
    finally:
        api.exit_client()


def test_dist_hetero_embedding_trains_with_sparse_adagrad(typed_graph):
    g = typed_graph
    name = unique_name("emb")
    emb = DistHeteroEmbedding(
        g, ["author", "institution"], 3, name=name, init_func=InitSpec("uniform", -1.0, 1.0, seed=3)
    )
    assert set(emb) == {"author", "institution"} and emb["author"].name == f"{name}.author"
    before = {t: emb[t].weight[torch.arange(g.num_nodes(t))].clone() for t in emb}
    optimizer = SparseAdagrad(list(emb.values()), lr=0.5)
    ids = {"author": torch.tensor([1, 5, 5]), "institution": torch.tensor([2]), "paper": torch.tensor([0])}
    rows = emb(ids)
    assert set(rows) == {"author", "institution"} and rows["author"].shape == (3, 3)
    (rows["author"].sum() + rows["institution"].sum()).backward()
    optimizer.step()
    for ntype, touched in (("author", [1, 5]), ("institution", [2])):
        after = emb[ntype].weight[torch.arange(g.num_nodes(ntype))]
        changed = torch.nonzero((after != before[ntype]).any(dim=1), as_tuple=True)[0].tolist()
        assert changed == touched
        assert (after[touched] < before[ntype][touched]).all()  # a positive gradient lowers the rows
    with pytest.raises(KeyError, match="unknown node type 'venue'"):
        DistHeteroEmbedding(g, ["venue"], 3)
