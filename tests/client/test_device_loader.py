"""Loaders with the co-located graph held for their device (``placement=`` / ``use_uva=``): on the CPU
(the same torch kernels a GPU runs) and, where CUDA is present, on a GPU with the graph in its memory
and in pinned host memory read through UVA. Every sampled edge exists in the graph with its ID, the
fanouts hold, features and labels are the stored rows, full-neighbor blocks equal the CPU path's exactly
(homogeneous and typed, standalone and beside servers that sample the other partition), and weights,
exclusion and feature types behave as on the CPU path."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from graphstore.client import api
from graphstore.client.constants import EID, NID
from graphstore.client.dataloader import DistEdgeDataLoader, DistNodeDataLoader
from graphstore.client.dist_graph import DistGraph
from graphstore.client.samplers import MultiLayerFullNeighborSampler, NeighborSampler
from graphstore.launcher.local_servers import start_servers
from tests.client.conftest import LOADER_GRAPH_NODES
from tests.utils.graphs import make_partitioned_graph, relabeled
from tests.utils.sampling import expected_sample_counts
from tests.utils.typed_graphs import CANONICAL_ETYPES, NUM_NODES, make_typed_partitions, relabeled_typed

CUDA_MARKS = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@dataclass(frozen=True)
class Held:
    """A loader device and where the co-located graph is held for it."""

    device: str
    placement: str

    def loader_args(self) -> dict:
        return {"device": self.device, "placement": self.placement}


HELD = [
    pytest.param(Held("cpu", "device"), id="cpu"),
    pytest.param(Held("cuda:0", "device"), id="gpu-memory", marks=CUDA_MARKS),
    pytest.param(Held("cuda:0", "pinned"), id="gpu-uva", marks=CUDA_MARKS),
]


@pytest.fixture(params=HELD)
def held(request) -> Held:
    return request.param


def host(t: torch.Tensor) -> np.ndarray:
    return t.cpu().numpy()


def check_homogeneous_batch(new, input_nodes, output_nodes, blocks, fanouts) -> None:
    """Edges exist with their IDs, fanouts hold, blocks chain, features and labels are the stored rows."""
    src_of, dst_of = new["src"], new["dst"]
    in_degree = np.bincount(dst_of, minlength=new["feat"].shape[0])
    for block, fanout in zip(blocks, fanouts, strict=True):
        src, dst = block.edges()
        global_src = host(block.srcdata[NID][src])
        global_dst = host(block.dstdata[NID][dst])
        eids = host(block.edata[EID])
        np.testing.assert_array_equal(src_of[eids], global_src)
        np.testing.assert_array_equal(dst_of[eids], global_dst)
        assert torch.equal(block.srcdata[NID][: block.num_dst_nodes()], block.dstdata[NID])
        assert block.srcdata[NID].unique().numel() == block.num_src_nodes()
        counts = host(block.in_degrees())
        available = in_degree[host(block.dstdata[NID])]
        np.testing.assert_array_equal(counts, expected_sample_counts(available, fanout, False))
    for outer, inner in zip(blocks[:-1], blocks[1:], strict=True):
        assert torch.equal(outer.dstdata[NID], inner.srcdata[NID])
    np.testing.assert_array_equal(host(blocks[0].srcdata["feat"]), new["feat"][host(input_nodes)])
    np.testing.assert_array_equal(host(blocks[-1].dstdata["label"]), new["label"][host(output_nodes)])
    device = input_nodes.device
    for block in blocks:
        assert block.device == device and block.srcdata[NID].device == device


def assert_same_blocks(left, right) -> None:
    """Two batches of blocks are the same graphs: the same nodes in the same order, the same edges."""
    for a, b in zip(left, right, strict=True):
        for ntype in a.srctypes:
            assert torch.equal(a.srcnodes[ntype].data[NID].cpu(), b.srcnodes[ntype].data[NID].cpu())
        for canonical in a.canonical_etypes:
            # the same edges (the order of a block's edges is free: compared by edge ID)
            edges = []
            for block in (a, b):
                eid = block.edges[canonical].data[EID].cpu()
                order = torch.argsort(eid)
                src, dst = (t.cpu()[order] for t in block.edges(etype=canonical))
                edges.append((eid[order], src, dst))
            for x, y in zip(*edges, strict=True):
                assert torch.equal(x, y)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_homogeneous_batches_sampled_on_the_device_hold_the_samplers_rules(standalone_graph, held, prefetch):
    g, new = standalone_graph
    fanouts = [3, 5]
    loader = DistNodeDataLoader(
        g,
        torch.arange(400),
        NeighborSampler(fanouts, seed=1),
        batch_size=64,
        shuffle=True,
        seed=0,
        prefetch=prefetch,
        **held.loader_args(),
    )
    assert loader.placement == held.placement and loader._device_sampler is not None
    seen = []
    for input_nodes, output_nodes, blocks in loader:
        assert input_nodes.device == torch.device(held.device)
        check_homogeneous_batch(new, input_nodes, output_nodes, blocks, fanouts)
        seen.append(host(output_nodes))
    np.testing.assert_array_equal(np.sort(np.concatenate(seen)), np.arange(400))


def test_full_neighbor_blocks_equal_the_cpu_paths(standalone_graph, held):
    g, _ = standalone_graph
    sampler = MultiLayerFullNeighborSampler(2)
    seeds = torch.arange(0, LOADER_GRAPH_NODES, 7)
    cpu = DistNodeDataLoader(g, seeds, sampler, batch_size=50, prefetch=0, device="cpu")
    on_device = DistNodeDataLoader(g, seeds, sampler, batch_size=50, prefetch=0, **held.loader_args())
    for (cpu_in, cpu_out, cpu_blocks), (in_, out, blocks) in zip(cpu, on_device, strict=True):
        assert torch.equal(cpu_in, in_.cpu()) and torch.equal(cpu_out, out.cpu())
        assert_same_blocks(cpu_blocks, blocks)
        assert torch.equal(cpu_blocks[0].srcdata["feat"], blocks[0].srcdata["feat"].cpu())


def test_seeded_samples_repeat_and_differ_between_seeds(standalone_graph):
    g, _ = standalone_graph

    def first_batch(seed):
        loader = DistNodeDataLoader(
            g, torch.arange(100), NeighborSampler([4], seed=seed), batch_size=100, placement="device"
        )
        return next(iter(loader))[2]

    assert_same_blocks(first_batch(5), first_batch(5))
    assert first_batch(5)[0].num_src_nodes() != first_batch(6)[0].num_src_nodes() or not torch.equal(
        first_batch(5)[0].srcdata[NID], first_batch(6)[0].srcdata[NID]
    )


def test_feature_dtype_delivers_the_features_in_the_models_type(standalone_graph, held):
    g, new = standalone_graph
    loader = DistNodeDataLoader(
        g,
        torch.arange(64),
        NeighborSampler([3]),
        batch_size=64,
        feature_dtype=torch.bfloat16,
        **held.loader_args(),
    )
    input_nodes, output_nodes, blocks = next(iter(loader))
    feat = blocks[0].srcdata["feat"]
    assert feat.dtype == torch.bfloat16
    expected = torch.from_numpy(new["feat"][host(input_nodes)]).to(torch.bfloat16)
    assert torch.equal(feat.cpu(), expected)
    assert blocks[-1].dstdata["label"].dtype == torch.int64  # labels keep their type


def test_bad_placements_are_refused(standalone_graph):
    g, _ = standalone_graph
    with pytest.raises(ValueError, match="placement must be None, 'device' or 'pinned'"):
        DistNodeDataLoader(g, torch.arange(8), NeighborSampler([2]), placement="gpu")
    with pytest.raises(ValueError, match="loader's device is cpu"):
        DistNodeDataLoader(g, torch.arange(8), NeighborSampler([2]), device="cpu", use_uva=True)
    with pytest.raises(ValueError, match="excludes placement='device'"):
        DistNodeDataLoader(g, torch.arange(8), NeighborSampler([2]), use_uva=True, placement="device")


def test_edge_loader_excludes_the_batchs_edges_on_the_device(standalone_graph, held):
    g, new = standalone_graph
    eids = torch.arange(0, len(new["src"]), 3)
    loader = DistEdgeDataLoader(
        g,
        eids,
        NeighborSampler([-1]),
        batch_size=40,
        exclude="self",
        **held.loader_args(),
    )
    assert loader._device_sampler is not None
    for _input_nodes, pair, blocks in loader:
        batch = host(pair.edata[EID])
        assert not np.isin(host(blocks[0].edata[EID]), batch).any()
        # every other in-edge of the seeds is there (fanout -1)
        seeds = host(blocks[0].dstdata[NID])
        expected = np.flatnonzero(np.isin(new["dst"], seeds) & ~np.isin(np.arange(len(new["dst"])), batch))
        np.testing.assert_array_equal(np.sort(host(blocks[0].edata[EID])), expected)


# ----- beside servers: the co-located partition on the device, the other sampled by its server --------


@pytest.fixture(scope="module")
def served_graph(tmp_path_factory):
    config_path, graph = make_partitioned_graph(
        tmp_path_factory.mktemp("device-served"), num_nodes=600, num_parts=2, feat_dim=8
    )
    group = start_servers(config_path, 2, log_dir=tmp_path_factory.mktemp("device-served-logs"))
    try:
        yield config_path, relabeled(graph), group
    finally:
        group.stop()


def connect(config_path, group) -> DistGraph:
    servers = []
    for part_id, address in enumerate(group.addresses):
        host, port = address.rsplit(":", 1)
        servers.append({"host": host, "port": int(port), "part_id": part_id})
    api.exit_client()
    api.initialize(
        {
            "graph_name": "testgraph",
            "part_config": config_path,
            "servers": servers,
            "local_read": "on",
            "local_part_id": 0,
            "rpc": {"deadline_s": 20.0, "connect_timeout_s": 30.0, "max_retries": 2},
        }
    )
    return DistGraph("testgraph", part_config=config_path)


def test_beside_servers_the_other_partition_is_sampled_remotely(served_graph, held):
    config_path, new, group = served_graph
    g = connect(config_path, group)
    try:
        ctx = g._ctx
        assert ctx.local_part_id == 0 and ctx.local_reader(1) is None
        loader = DistNodeDataLoader(
            g, torch.arange(0, 600, 3), NeighborSampler([4, 4], seed=2), batch_size=50, **held.loader_args()
        )
        for input_nodes, output_nodes, blocks in loader:
            check_homogeneous_batch(new, input_nodes, output_nodes, blocks, [4, 4])
        sampler = MultiLayerFullNeighborSampler(2)
        seeds = torch.arange(0, 600, 11)
        cpu = DistNodeDataLoader(g, seeds, sampler, batch_size=30, prefetch=0, device="cpu")
        on_device = DistNodeDataLoader(g, seeds, sampler, batch_size=30, prefetch=0, **held.loader_args())
        for (cpu_in, _, cpu_blocks), (in_, _, blocks) in zip(cpu, on_device, strict=True):
            assert torch.equal(cpu_in, in_.cpu())
            assert_same_blocks(cpu_blocks, blocks)
            assert torch.equal(cpu_blocks[0].srcdata["feat"], blocks[0].srcdata["feat"].cpu())
        # the other partition's rows through a remote feature cache on the device
        cached = DistNodeDataLoader(
            g, seeds, NeighborSampler([4, 4]), batch_size=30, cache_remote_features=0.5, **held.loader_args()
        )
        for input_nodes, _, blocks in cached:
            np.testing.assert_array_equal(host(blocks[0].srcdata["feat"]), new["feat"][host(input_nodes)])
        assert cached.cache_stats()["feat"].hits > 0
    finally:
        api.exit_client()


# ----- typed graphs ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def typed_files(tmp_path_factory):
    result, arrays = make_typed_partitions(tmp_path_factory.mktemp("device-typed"), 2, "metis")
    return result, relabeled_typed(result, arrays)


@pytest.fixture
def typed_graph(typed_files):
    api.exit_client()
    try:
        yield DistGraph("typed", part_config=typed_files[0].config_path)
    finally:
        api.exit_client()


def test_typed_blocks_sampled_on_the_device(typed_graph, typed_files, held):
    g = typed_graph
    _, new = typed_files
    fanout = {"writes": 2, "cites": 3, "affiliated_with": 1, "has_topic": 0, "rev_writes": 2}
    papers = torch.from_numpy(np.flatnonzero(new["nodes"]["paper"]["train_mask"]))
    loader = DistNodeDataLoader(
        g,
        {"paper": papers, "author": torch.arange(0, NUM_NODES["author"], 3)},
        NeighborSampler([fanout, fanout], seed=3),
        batch_size=20,
        load_features={"paper": ["feat"]},
        load_labels={"paper": "label"},
        **held.loader_args(),
    )
    for input_nodes, output_nodes, blocks in loader:
        for block in blocks:
            for canonical in CANONICAL_ETYPES:
                src, dst = block.edges(etype=canonical)
                eids = host(block.edges[canonical].data[EID])
                want_src, want_dst = new["edges"][canonical]
                global_src = host(block.srcnodes[canonical[0]].data[NID][src])
                global_dst = host(block.dstnodes[canonical[2]].data[NID][dst])
                np.testing.assert_array_equal(want_src[eids], global_src)
                np.testing.assert_array_equal(want_dst[eids], global_dst)
                per_dst = np.bincount(host(dst), minlength=block.num_dst_nodes(canonical[2]))
                assert per_dst.max(initial=0) <= fanout[canonical[1]]
            assert block.num_edges(("paper", "has_topic", "topic")) == 0
        papers_in = host(input_nodes["paper"])
        np.testing.assert_array_equal(
            host(blocks[0].srcnodes["paper"].data["feat"]), new["nodes"]["paper"]["feat"][papers_in]
        )
        np.testing.assert_array_equal(
            host(blocks[-1].dstnodes["paper"].data["label"]),
            new["nodes"]["paper"]["label"][host(output_nodes["paper"])],
        )


def test_typed_full_neighbor_blocks_equal_the_cpu_paths(typed_graph, held):
    g = typed_graph
    seeds = {"paper": torch.arange(0, NUM_NODES["paper"], 5), "institution": torch.arange(3)}
    sampler = MultiLayerFullNeighborSampler(2)
    none = {"load_labels": None, "load_features": (), "prefetch": 0, "batch_size": 9}
    cpu = DistNodeDataLoader(g, seeds, sampler, device="cpu", **none)
    on_device = DistNodeDataLoader(g, seeds, sampler, **none, **held.loader_args())
    for (cpu_in, _, cpu_blocks), (in_, _, blocks) in zip(cpu, on_device, strict=True):
        for ntype in cpu_in:
            assert torch.equal(cpu_in[ntype], in_[ntype].cpu())
        assert_same_blocks(cpu_blocks, blocks)


def test_typed_weights_never_draw_a_zero_weight_edge(typed_graph, typed_files, held):
    g = typed_graph
    _, new = typed_files
    cites = ("paper", "cites", "paper")
    weights = torch.rand(len(new["edges"][cites][0]), generator=torch.Generator().manual_seed(0))
    zeroed = torch.arange(0, weights.numel(), 2)
    weights[zeroed] = 0.0
    g.edges[cites].data["half_zero"] = weights  # a run-time tensor: the servers' copy is read
    fanout = {"writes": 0, "cites": 2, "affiliated_with": 0, "has_topic": 0, "rev_writes": 0}
    loader = DistNodeDataLoader(
        g,
        {"paper": torch.arange(NUM_NODES["paper"])},
        NeighborSampler([fanout], prob={"cites": "half_zero"}),
        batch_size=40,
        load_features=(),
        load_labels=None,
        **held.loader_args(),
    )
    drawn = np.concatenate([host(blocks[0].edges[cites].data[EID]) for _, _, blocks in loader])
    assert drawn.size > 0 and not np.isin(drawn, zeroed.numpy()).any()


# ----- UVA --------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool]
)
def test_a_uva_view_reads_pinned_host_memory_in_place(dtype):
    from graphstore.client.device_graph import uva_view

    host_rows = (torch.arange(3000 * 7) % 97).reshape(3000, 7).to(dtype).pin_memory()
    view = uva_view(host_rows, torch.device("cuda:0"))
    assert view.is_cuda and view.dtype == dtype and view.data_ptr() == host_rows.data_ptr()
    index = torch.randint(0, 3000, (5000,), device="cuda:0")
    assert torch.equal(view.index_select(0, index).cpu(), host_rows[index.cpu()])
    host_rows[5] = 1  # no copy: a write on the host is what the GPU reads next
    torch.cuda.synchronize()
    assert torch.equal(view[5].cpu(), host_rows[5])
    with pytest.raises(ValueError, match="pinned"):
        uva_view(torch.zeros(4), torch.device("cuda:0"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_use_uva_is_dgls_spelling_of_pinned(standalone_graph):
    g, new = standalone_graph
    loader = DistNodeDataLoader(
        g, torch.arange(100), NeighborSampler([3, 3]), batch_size=50, device="cuda", use_uva=True
    )
    assert loader.placement == "pinned"
    for input_nodes, output_nodes, blocks in loader:
        check_homogeneous_batch(new, input_nodes, output_nodes, blocks, [3, 3])
