"""Message passing on blocks and pair graphs (``apply_edges``, ``update_all``, ``local_scope``), checked
against dense references: every (destination, source) pair of a dense tensor holds what the edge
between them must compute, and each sparse result is read back from it."""

from __future__ import annotations

import pytest
import torch

import graphstore.function as fn
from graphstore.client.block import to_block
from graphstore.client.dataloader import PairGraph
from graphstore.client.frontier import SampledSubgraph

NUM_NODES, NUM_DST, WIDTH = 30, 12, 5


@pytest.fixture
def block():
    """A block whose edges are distinct (destination, source) pairs, with random data on every side."""
    gen = torch.Generator().manual_seed(0)
    pairs = torch.nonzero(torch.rand(NUM_DST, NUM_NODES, generator=gen) < 0.3)
    dst, src = pairs[:, 0], pairs[:, 1]
    dst[0] = 0  # destination 0 keeps an edge; the last destination has none:
    keep = dst != NUM_DST - 1
    dst, src = dst[keep], src[keep]
    frontier = SampledSubgraph(src, dst, torch.arange(src.shape[0]), NUM_NODES)
    b = to_block(frontier, torch.arange(NUM_DST))
    b.srcdata["h"] = torch.randn(b.num_src_nodes(), WIDTH, generator=gen)
    b.dstdata["h"] = torch.randn(NUM_DST, WIDTH, generator=gen)
    b.edata["h"] = torch.randn(b.num_edges(), WIDTH, generator=gen)
    b.edata["w"] = torch.rand(b.num_edges(), generator=gen)
    return b


def _dense(block, values: torch.Tensor) -> torch.Tensor:
    """``[num_dst, num_src, ...]`` with each edge's row at (its destination, its source)."""
    src, dst = block.edges()
    out = torch.zeros(block.num_dst_nodes(), block.num_src_nodes(), *values.shape[1:], dtype=values.dtype)
    out[dst, src] = values
    return out


def _dense_operand(block, target: str, field: str) -> torch.Tensor:
    if target == "u":
        return block.srcdata[field].unsqueeze(0).expand(block.num_dst_nodes(), -1, -1)
    if target == "v":
        return block.dstdata[field].unsqueeze(1).expand(-1, block.num_src_nodes(), -1)
    return _dense(block, block.edata[field])


@pytest.mark.parametrize("name", fn.BINARY_MESSAGE_NAMES)
def test_every_binary_builtin_matches_the_dense_reference(block, name):
    lhs, op, rhs = name.split("_")
    left, right = _dense_operand(block, lhs, "h"), _dense_operand(block, rhs, "h")
    if op == "div":
        block.srcdata["h"], block.dstdata["h"] = block.srcdata["h"].abs() + 1, block.dstdata["h"].abs() + 1
        block.edata["h"] = block.edata["h"].abs() + 1
        left, right = _dense_operand(block, lhs, "h"), _dense_operand(block, rhs, "h")
    expected = {
        "add": left + right,
        "sub": left - right,
        "mul": left * right,
        "div": left / right,
        "dot": (left * right).sum(-1, keepdim=True),
    }[op]
    block.apply_edges(getattr(fn, name)("h", "h", "out"))
    src, dst = block.edges()
    torch.testing.assert_close(block.edata["out"], expected[dst, src])


@pytest.mark.parametrize("reducer", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("message", ["copy_u", "copy_e", "u_mul_e"])
def test_update_all_matches_the_dense_reference(block, message, reducer):
    src, dst = block.edges()
    per_edge = {
        "copy_u": block.srcdata["h"][src],
        "copy_e": block.edata["h"],
        "u_mul_e": block.srcdata["h"][src] * block.edata["w"].unsqueeze(1),
    }[message]
    func = {
        "copy_u": fn.copy_u("h", "m"),
        "copy_e": fn.copy_e("h", "m"),
        "u_mul_e": fn.u_mul_e("h", "w", "m"),
    }[message]
    dense = _dense(block, per_edge)
    present = _dense(block, torch.ones(block.num_edges(), dtype=torch.bool))
    degree = present.sum(1, keepdim=True)
    if reducer == "sum":
        expected = dense.sum(1)
    elif reducer == "mean":
        expected = dense.sum(1) / degree.clamp(min=1)
    else:
        fill = float("-inf") if reducer == "max" else float("inf")
        masked = torch.where(present.unsqueeze(-1), dense, torch.full_like(dense, fill))
        expected = masked.amax(1) if reducer == "max" else masked.amin(1)
        expected[degree.squeeze(1) == 0] = 0.0
    block.update_all(func, getattr(fn, reducer)("m", "out"))
    torch.testing.assert_close(block.dstdata["out"], expected)
    assert "m" not in block.edata, "messages are not kept"
    assert torch.equal(block.dstdata["out"][NUM_DST - 1], torch.zeros(WIDTH)), "no in-edge: zeros"


def test_broadcasting_aligns_feature_dimensions_on_the_right(block):
    block.srcdata["heads"] = torch.randn(block.num_src_nodes(), 3, WIDTH)
    block.apply_edges(fn.u_mul_e("heads", "w", "scaled"))
    src, _ = block.edges()
    expected = block.srcdata["heads"][src] * block.edata["w"].view(-1, 1, 1)
    torch.testing.assert_close(block.edata["scaled"], expected)
    block.apply_edges(fn.u_dot_e("heads", "h", "score"))
    dot = (block.srcdata["heads"][src] * block.edata["h"].unsqueeze(1)).sum(-1, keepdim=True)
    assert block.edata["score"].shape == (block.num_edges(), 3, 1)
    torch.testing.assert_close(block.edata["score"], dot)


def test_user_defined_edge_and_node_functions(block):
    block.apply_edges(lambda edges: {"s": (edges.src["h"] * edges.dst["h"]).sum(1) + edges.data["w"]})
    src, dst = block.edges()
    expected = (block.srcdata["h"][src] * block.dstdata["h"][dst]).sum(1) + block.edata["w"]
    torch.testing.assert_close(block.edata["s"], expected)
    block.update_all(
        lambda edges: {"m": edges.src["h"] * 2},
        fn.sum("m", "agg"),
        apply_node_func=lambda nodes: {"agg_plus": nodes.data["agg"] + 1},
    )
    summed = torch.zeros(NUM_DST, WIDTH).index_add_(0, dst, block.srcdata["h"][src] * 2)
    torch.testing.assert_close(block.dstdata["agg"], summed)
    torch.testing.assert_close(block.dstdata["agg_plus"], summed + 1)


def test_local_scope_drops_new_data_and_keeps_in_place_changes(block):
    before = {name: dict(getattr(block, name)) for name in ("srcdata", "dstdata", "edata")}
    with block.local_scope():
        block.srcdata["tmp"] = torch.ones(block.num_src_nodes())
        block.srcdata["h"] = torch.zeros(block.num_src_nodes(), WIDTH)
        del block.edata["w"]
        block.update_all(fn.copy_u("h", "m"), fn.sum("m", "agg"))
        assert torch.equal(block.dstdata["agg"], torch.zeros(NUM_DST, WIDTH))
        with block.local_scope():
            block.dstdata["inner"] = torch.ones(NUM_DST)
        assert "inner" not in block.dstdata
        block.dstdata["h"].add_(1.0)
    for name, frame in before.items():
        assert list(getattr(block, name)) == list(frame), f"{name} names restored"
        assert all(getattr(block, name)[k] is v for k, v in frame.items()), f"{name} tensors restored"
    torch.testing.assert_close(block.dstdata["h"], before["dstdata"]["h"])  # the in-place add stays


def test_pair_graph_scores_and_aggregates_on_its_one_node_set():
    gen = torch.Generator().manual_seed(1)
    src, dst = torch.tensor([0, 1, 2, 2, 3]), torch.tensor([1, 2, 0, 3, 3])
    pair = PairGraph(src, dst, torch.tensor([10, 11, 12, 13]))
    h = torch.randn(4, 6, generator=gen)
    with pair.local_scope():
        pair.ndata["h"] = h
        assert pair.srcdata is pair.ndata and pair.dstdata is pair.ndata
        pair.apply_edges(fn.u_dot_v("h", "h", "score"))
        score = pair.edata["score"]
        pair.update_all(fn.copy_u("h", "m"), fn.mean("m", "avg"))
        avg = pair.ndata["avg"]
    assert "h" not in pair.ndata and "score" not in pair.edata
    torch.testing.assert_close(score, (h[src] * h[dst]).sum(1, keepdim=True))
    expected = torch.stack([h[2], h[0], h[1], (h[2] + h[3]) / 2])
    torch.testing.assert_close(avg, expected)


def test_errors_name_the_argument(block):
    with pytest.raises(KeyError, match="srcdata has no 'nope'"):
        block.apply_edges(fn.u_add_v("nope", "h", "x"))
    with pytest.raises(KeyError, match="edata has no 'nope'"):
        block.update_all(fn.copy_e("nope", "m"), fn.sum("m", "x"))
    with pytest.raises(TypeError, match="reduce built-in"):
        block.update_all(fn.copy_u("h", "m"), lambda nodes: {"x": nodes.mailbox["m"].sum(1)})
    with pytest.raises(TypeError, match="reduce function"):
        block.apply_edges(fn.sum("h", "x"))
    with pytest.raises(KeyError, match="'m2'"):
        block.update_all(fn.copy_u("h", "m"), fn.sum("m2", "x"))
    with pytest.raises(NotImplementedError, match="edges="):
        block.apply_edges(fn.copy_u("h", "x"), edges=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="etype="):
        block.apply_edges(fn.copy_u("h", "x"), etype="follows")
    with pytest.raises(TypeError, match="dict of tensors"):
        block.apply_edges(lambda edges: edges.src["h"])
    block.apply_edges(fn.copy_u("h", "x"), etype=("_N", "_E", "_N"))  # the one relation, by name
    assert "x" in block.edata
