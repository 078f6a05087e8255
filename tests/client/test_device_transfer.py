"""Where loader batches land (graphstore.client.dataloader.device_transfer): the device a loader or cache
resolves to, the one function that moves a finished batch (every tensor of blocks, pair graphs, typed
blocks and dicts, IDs), and CPU loaders with pinning off; the iterating thread hands each batch over."""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np
import pytest
import torch

from graphstore.client import api
from graphstore.client.block import Block
from graphstore.client.constants import NID
from graphstore.client.dataloader import DistEdgeDataLoader, DistNodeDataLoader, PairGraph
from graphstore.client.dataloader.device_transfer import (
    BatchTransfer,
    StagedBatch,
    iter_tensors,
    map_batch,
    resolve_device,
)
from graphstore.client.dataloader.prefetch import PrefetchIterator
from graphstore.client.device import bind_device, unbind_device
from graphstore.client.dist_graph import DistGraph
from graphstore.client.samplers import NeighborSampler, Uniform
from tests.utils.typed_graphs import make_typed_partitions, relabeled_typed

META = torch.device("meta")


pytestmark = pytest.mark.usefixtures("unbound_device")


@pytest.fixture
def no_current_device(monkeypatch):
    """``torch.cuda.current_device()`` fails the test: the library must never ask for it."""

    def current_device():
        raise AssertionError("torch.cuda.current_device() must not be used")

    monkeypatch.setattr(torch.cuda, "current_device", current_device)


# -- the device ---------------------------------------------------------------------------------------


@pytest.mark.usefixtures("two_gpus", "no_current_device")
def test_default_device_is_the_bound_one_else_the_cpu(monkeypatch):
    assert resolve_device(None) == torch.device("cpu")
    monkeypatch.setenv("LOCAL_RANK", "1")
    bind_device("cuda")
    assert resolve_device(None) == torch.device("cuda", 1)
    assert resolve_device("cuda") == torch.device("cuda", 1)
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.usefixtures("two_gpus", "no_current_device")
def test_cuda_without_an_index_binds_local_rank(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert resolve_device(torch.device("cuda")) == torch.device("cuda", 1)
    monkeypatch.setenv("LOCAL_RANK", "2")
    unbind_device()
    with pytest.raises(RuntimeError, match="LOCAL_RANK=2"):
        resolve_device("cuda")


@pytest.mark.parametrize("bad", ["mps", "tpu:0", "nonsense", 3.5])
def test_other_devices_are_refused(bad):
    with pytest.raises(ValueError, match="device must be"):
        resolve_device(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_pinning_without_cuda_is_refused():
    with pytest.raises(RuntimeError, match="pin_memory"):
        BatchTransfer(torch.device("cpu"), pin_memory=True)
    assert BatchTransfer(torch.device("cpu")).pin_memory is False


# -- moving a batch -----------------------------------------------------------------------------------


class Pair(NamedTuple):
    left: torch.Tensor
    right: object


def a_block() -> Block:
    block = Block(
        torch.tensor([0, 1, 2]), torch.tensor([0, 0, 1]), torch.tensor([5, 6, 7]), 2, torch.tensor([9, 8, 7])
    )
    block.srcdata["feat"] = torch.ones(3, 4)
    block.dstdata["label"] = torch.tensor([1, 0])
    block.in_degrees()
    return block


def test_move_puts_every_tensor_of_a_batch_on_the_device():
    block = a_block()
    pair = PairGraph(torch.tensor([0]), torch.tensor([1]), torch.tensor([3, 4]), torch.tensor([11]))
    typed = {"paper": torch.arange(3), "author": torch.arange(2)}
    batch = (torch.arange(4), [block, block], pair, typed, Pair(torch.zeros(2), "keep"), 7)
    moved = BatchTransfer(META, pin_memory=False).move(batch)
    tensors = list(iter_tensors(moved))
    # block: src, dst, NID (src and dst), EID, feat, label, in-degrees; pair: src, dst, NID, EID
    assert len(tensors) == 1 + 2 * 8 + 4 + 2 + 1
    assert moved[1][0] is not moved[1][1]  # one block listed twice, moved for each place
    assert all(t.device == META for t in tensors)
    assert isinstance(moved[1][0], Block) and moved[1][0].device == META
    assert moved[1][0].num_src_nodes() == 3 and moved[2].num_nodes() == 2
    assert set(moved[3]) == {"paper", "author"} and moved[4].right == "keep" and moved[5] == 7
    # the source batch is untouched
    assert all(t.device.type == "cpu" for t in iter_tensors(batch))
    assert block.srcdata["feat"].device.type == "cpu"


class SharedFrames:
    """A graph object whose view aliases one of its frames (as a typed block's ``srcdata`` does)."""

    def __init__(self, frame: dict):
        self.frames = {"paper": frame}
        self.view = frame

    def to(self, device, non_blocking=False):
        return SharedFrames(
            {k: v.to(device, non_blocking=non_blocking) for k, v in self.frames["paper"].items()}
        )


def test_map_batch_keeps_container_types_and_hands_graphs_over_whole():
    class Frame(dict):
        pass

    frame = Frame(h=torch.ones(2))
    graphs = []
    out = map_batch(
        {"f": frame, "t": (torch.ones(1),), "l": [torch.ones(1), SharedFrames({"x": torch.ones(1)})]},
        lambda t: t * 2,
        lambda g: graphs.append(g) or "graph",
    )
    assert type(out["f"]) is Frame and type(out["t"]) is tuple and type(out["l"]) is list
    assert out["f"]["h"].tolist() == [2.0, 2.0] and frame["h"].tolist() == [1.0, 1.0]
    assert out["l"][1] == "graph" and isinstance(graphs[0], SharedFrames)
    module = torch.nn.Linear(2, 2)
    assert map_batch(module, lambda t: t * 0, lambda g: None) is module


def test_a_graph_object_moves_with_its_own_to():
    """The frames a graph's views share stay shared after the move (a generic copy would split them)."""
    moved = BatchTransfer(META, pin_memory=False).move([SharedFrames({"x": torch.ones(2)})])[0]
    assert moved.view is moved.frames["paper"] and moved.view["x"].device == META
    moved.view["y"] = torch.zeros(1)
    assert "y" in moved.frames["paper"]
    # each tensor once, even when reached twice
    assert len(list(iter_tensors(moved))) == 2


def test_cpu_transfer_stages_and_delivers_the_batch_as_is():
    transfer = BatchTransfer(torch.device("cpu"), pin_memory=False)
    batch = (torch.arange(3), a_block())
    with transfer.producing():
        staged = transfer.stage(batch)
    assert isinstance(staged, StagedBatch) and staged.ready is None
    delivered = transfer.deliver(staged)
    assert delivered[1] is batch[1]  # nothing copied on the CPU
    assert delivered[0].data_ptr() == batch[0].data_ptr()
    assert delivered[1].srcdata["feat"].data_ptr() == batch[1].srcdata["feat"].data_ptr()


@pytest.mark.parametrize("prefetch", [0, 2])
def test_batches_are_delivered_in_the_iterating_thread(prefetch):
    made, delivered = [], []
    iterator = PrefetchIterator(
        lambda item: (made.append((item, threading.current_thread().name)), item)[1],
        list(range(5)),
        prefetch,
        deliver=lambda batch: (delivered.append(threading.current_thread()), batch * 10)[1],
    )
    assert list(iterator) == [0, 10, 20, 30, 40]
    assert delivered == [threading.current_thread()] * 5
    caller = threading.current_thread().name
    producers = dict(made)
    # The first batch is the caller's own (nothing to overlap it with); with prefetching the rest are
    # the workers'.
    assert producers[0] == caller
    assert (prefetch > 0) == all(producers[item] != caller for item in range(1, 5))


# -- CPU loaders with pinning off -----------------------------------------------------------------------


def test_node_loader_on_the_cpu_without_pinning(standalone_graph):
    g, new = standalone_graph
    loader = DistNodeDataLoader(
        g, torch.arange(200), NeighborSampler([3, 3], seed=0), batch_size=64, device="cpu", pin_memory=False
    )
    assert loader.device == torch.device("cpu") and loader.pin_memory is False
    for input_nodes, output_nodes, blocks in loader:
        assert all(t.device.type == "cpu" and not t.is_pinned() for t in iter_tensors(blocks))
        np.testing.assert_array_equal(blocks[0].srcdata["feat"].numpy(), new["feat"][input_nodes.numpy()])
        np.testing.assert_array_equal(blocks[-1].dstdata["label"].numpy(), new["label"][output_nodes.numpy()])
        assert torch.equal(blocks[0].srcdata[NID], input_nodes)


def test_edge_loader_on_the_cpu_without_pinning(standalone_graph):
    g, new = standalone_graph
    loader = DistEdgeDataLoader(
        g,
        torch.arange(300),
        NeighborSampler([3], seed=0),
        batch_size=100,
        negative_sampler=Uniform(1),
        device="cpu",
        pin_memory=False,
    )
    for batch in loader:
        assert len(batch) == 4
        assert all(t.device.type == "cpu" for t in iter_tensors(batch))
        input_nodes, pair, _, blocks = batch
        np.testing.assert_array_equal(blocks[0].srcdata["feat"].numpy(), new["feat"][input_nodes.numpy()])
        assert pair.num_edges() == 100


def test_a_loader_takes_the_samplers_output_device_else_the_bound_one(standalone_graph):
    g, _ = standalone_graph
    sampler = NeighborSampler([2], output_device="cpu")
    assert DistNodeDataLoader(g, torch.arange(10), sampler, batch_size=5).device == torch.device("cpu")
    bind_device("cpu")
    assert DistNodeDataLoader(g, torch.arange(10), NeighborSampler([2]), batch_size=5).device.type == "cpu"
    with pytest.raises(ValueError, match="device must be"):
        DistNodeDataLoader(g, torch.arange(10), NeighborSampler([2]), batch_size=5, device="mps")


def test_a_real_batch_moves_whole(standalone_graph):
    """The features the loader attaches after sampling move with the blocks (no mixed devices)."""
    g, _ = standalone_graph
    loader = DistNodeDataLoader(g, torch.arange(64), NeighborSampler([3, 3], seed=0), batch_size=64)
    batch = next(iter(loader))
    moved = BatchTransfer(META, pin_memory=False).move(batch)
    names = {"feat", NID}
    assert names <= set(moved[2][0].srcdata) and "label" in moved[2][-1].dstdata
    assert all(t.device == META for t in iter_tensors(moved))


def test_a_typed_batch_moves_whole_with_its_frames_shared(tmp_path):
    """Typed batches (dicts per node type, typed blocks and pair graphs) land on the device whole, and
    a moved typed block's relation views still write into its per-type frames."""
    result, arrays = make_typed_partitions(tmp_path, 2, "random")
    new = relabeled_typed(result, arrays)
    api.exit_client()
    try:
        g = DistGraph("typed", part_config=result.config_path)
        train = torch.from_numpy(np.flatnonzero(new["nodes"]["paper"]["train_mask"]))
        sampler = NeighborSampler([2, 2], prefetch_node_feats={"paper": ["feat"]})
        nodes = DistNodeDataLoader(
            g, {"paper": train}, sampler, batch_size=16, load_labels={"paper": "label"}
        )
        batch = next(iter(nodes))
        moved = BatchTransfer(META, pin_memory=False).move(batch)
        assert set(moved[0]) == set(batch[0]) and all(t.device == META for t in iter_tensors(moved))
        block = moved[2][0]
        assert block.srcdata["feat"]["paper"].device == META
        writes = block[("author", "writes", "paper")]
        writes.srcdata["h"] = torch.zeros(block.num_src_nodes("author"), 2, device=META)
        assert "h" in block.srcnodes["author"].data
        edges = DistEdgeDataLoader(
            g, {"cites": torch.arange(40)}, NeighborSampler([2]), batch_size=20, negative_sampler=Uniform(1)
        )
        typed_pairs = BatchTransfer(META, pin_memory=False).move(next(iter(edges)))
        assert all(t.device == META for t in iter_tensors(typed_pairs))
        assert typed_pairs[1].num_edges(("paper", "cites", "paper")) == 20
    finally:
        api.exit_client()
