"""The DGL compatibility namespace, called the way DGL documents its API (``dgl.distributed``, DGL 2.x
signatures): each name is called with DGL's arguments on a small real graph in standalone mode (and
``initialize`` against real servers), and its results are checked against the graph's own arrays.

DGL 2.x calls are accepted with DGL's arguments; an argument value graphstore does not implement raises
``NotImplementedError`` naming it.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch as th

import graphstore.compat.dgl as dgl
from graphstore.launcher.local_servers import start_servers
from tests.e2e.conftest import CompatGraph
from tests.launcher.helpers import write_cluster

NUM_NODES = 600
CANONICAL_ETYPE = ("_N", "_E", "_N")


def test_dgl_aliases_are_the_same_objects_on_every_path():
    from graphstore.compat.dgl.dataloading import negative_sampler
    from graphstore.compat.dgl.distributed import optim
    from graphstore.compat.dgl.nn.pytorch import GATConv, SAGEConv

    assert dgl.nn.pytorch.SAGEConv is SAGEConv is dgl.nn.SAGEConv
    assert dgl.nn.pytorch.GATConv is GATConv is dgl.nn.GATConv
    assert optim.SparseAdagrad is dgl.distributed.SparseAdagrad
    assert optim.SparseAdam is dgl.distributed.SparseAdam
    assert dgl.dataloading.MultiLayerNeighborSampler is dgl.dataloading.NeighborSampler
    assert negative_sampler.Uniform is dgl.dataloading.negative_sampler.Uniform
    assert dgl.distributed.DistDataLoader is dgl.dataloading.DistDataLoader
    assert issubclass(dgl.distributed.RangePartitionBook, dgl.distributed.GraphPartitionBook)
    assert (dgl.NID, dgl.EID, dgl.NTYPE, dgl.ETYPE) == ("_ID", "_ID", "_TYPE", "_TYPE")


def test_dist_graph_sizes_types_data_and_structure(compat_graph: CompatGraph):
    g, ref = compat_graph.graph, compat_graph.ref
    num_edges = ref["src"].shape[0]
    assert g.num_nodes() == g.number_of_nodes() == g.num_nodes("_N") == NUM_NODES
    assert g.num_edges() == g.number_of_edges() == g.num_edges(CANONICAL_ETYPE) == g.num_edges("_E")
    assert g.num_edges() == num_edges
    assert (g.ntypes, g.etypes, g.canonical_etypes) == (["_N"], ["_E"], [CANONICAL_ETYPE])
    assert g.get_ntype_id("_N") == 0 and g.get_etype_id("_E") == 0
    assert g.idtype == th.int64 and g.device == th.device("cpu") and g.rank() == 0
    scheme = g.node_attr_schemes()["feat"]
    assert scheme.shape == (8,) and scheme.dtype == th.float32
    ids = th.tensor([0, 599, 17, 17, 300])
    feat = g.ndata["feat"][ids]
    assert isinstance(feat, th.Tensor) and feat.dtype == th.float32
    np.testing.assert_array_equal(feat.numpy(), ref["feat"][ids.numpy()])
    np.testing.assert_array_equal(g.ndata["label"][ids].numpy(), ref["label"][ids.numpy()])
    eids = th.tensor([5, num_edges - 1, 5, 0])
    src, dst = g.find_edges(eids)
    assert src.dtype == dst.dtype == th.int64
    np.testing.assert_array_equal(src.numpy(), ref["src"][eids.numpy()])
    np.testing.assert_array_equal(dst.numpy(), ref["dst"][eids.numpy()])
    in_deg = np.bincount(ref["dst"], minlength=NUM_NODES)
    out_deg = np.bincount(ref["src"], minlength=NUM_NODES)
    np.testing.assert_array_equal(g.in_degrees().numpy(), in_deg)
    np.testing.assert_array_equal(g.out_degrees(ids).numpy(), out_deg[ids.numpy()])
    assert g.in_degrees(17) == int(in_deg[17])
    assert g.barrier() is None  # standalone: the only trainer


def test_partition_book_and_policies(compat_graph: CompatGraph):
    g = compat_graph.graph
    pb = g.get_partition_book()
    assert isinstance(pb, dgl.distributed.GraphPartitionBook) and pb.num_partitions() == 2
    meta = pb.metadata()
    assert [m["machine_id"] for m in meta] == [0, 1]
    assert sum(m["num_nodes"] for m in meta) == NUM_NODES
    assert sum(m["num_edges"] for m in meta) == g.num_edges()
    first_of_1 = meta[0]["num_nodes"]
    nids = th.tensor([0, first_of_1 - 1, first_of_1, NUM_NODES - 1])
    parts = pb.nid2partid(nids, "_N")
    assert isinstance(parts, th.Tensor) and parts.tolist() == [0, 0, 1, 1]
    local = pb.nid2localnid(nids[2:], 1, "_N")
    assert isinstance(local, th.Tensor) and local.tolist() == [0, NUM_NODES - 1 - first_of_1]
    eids = th.tensor([0, g.num_edges() - 1])
    assert pb.eid2partid(eids, CANONICAL_ETYPE).tolist() == [0, 1]
    type_ids, per_type = pb.map_to_per_ntype(nids)
    assert type_ids.tolist() == [0] * 4 and th.equal(per_type, nids)

    node_policy = dgl.distributed.NodePartitionPolicy(pb, "_N")
    assert node_policy.policy_str == "node:_N" and node_policy.is_node
    assert node_policy.get_size() == NUM_NODES and th.equal(node_policy.to_partid(nids), parts)
    edge_policy = dgl.distributed.EdgePartitionPolicy(pb, CANONICAL_ETYPE)
    assert not edge_policy.is_node and edge_policy.get_size() == g.num_edges()
    generic = dgl.distributed.PartitionPolicy("node:_N", pb)
    assert generic.get_size() == NUM_NODES
    assert g.get_node_partition_policy("_N").policy_str == "node:_N"
    assert g.get_edge_partition_policy(CANONICAL_ETYPE).get_size() == g.num_edges()


def test_dist_tensor_as_dgl_documents_it(compat_graph: CompatGraph):
    g = compat_graph.graph
    init = lambda shape, dtype: th.ones(shape, dtype=dtype)  # noqa: E731 - DGL's documented example
    arr = dgl.distributed.DistTensor((g.number_of_nodes(), 2), th.int32, init_func=init)
    assert th.equal(arr[0:3], th.ones((3, 2), dtype=th.int32))
    arr[0:3] = th.ones((3, 2), dtype=th.int32) * 2
    assert th.equal(arr[0:4], th.tensor([[2, 2], [2, 2], [2, 2], [1, 1]], dtype=th.int32))
    assert arr.shape == (NUM_NODES, 2) and arr.dtype == th.int32 and len(arr) == NUM_NODES
    assert isinstance(arr.name, str) and arr.part_policy.policy_str == "node:_N"
    assert arr.tensor_name == arr.kvstore_key == arr.name
    home = g.get_partition_book().partid2nids(g.get_partition_book().partid)
    assert th.equal(arr.local_partition, arr[home]), "the rows of this trainer's partition"

    zeros = dgl.distributed.DistTensor((g.num_edges(), 1), th.float32, name="compat_edge_w", persistent=True)
    assert zeros.part_policy.policy_str == "edge:_E" and zeros.count_nonzero() == 0
    zeros[th.tensor([4, 9])] = th.tensor([[1.5], [2.5]])
    assert zeros.count_nonzero() == 2
    again = dgl.distributed.DistTensor((g.num_edges(), 1), th.float32, name="compat_edge_w")
    assert again[th.tensor([9, 4, 0])].tolist() == [[2.5], [1.5], [0.0]], "the same name refers to the rows"


@pytest.mark.parametrize(
    "optimizer, kwargs",
    [
        ("SparseAdagrad", {"lr": 0.1, "eps": 1e-10}),
        ("SparseAdam", {"lr": 0.1, "betas": (0.9, 0.999), "eps": 1e-8}),
    ],
)
def test_dist_embedding_and_its_optimizers(compat_graph: CompatGraph, optimizer, kwargs):
    """DGL's documented example: rows initialized to one, a loss whose gradient is one per element; the
    first Adagrad step and the first bias-corrected Adam step both move each looked-up row by ``-lr``."""
    g = compat_graph.graph

    def initializer(shape, dtype):
        arr = th.zeros(shape, dtype=dtype)
        arr.uniform_(1, 1)
        return arr

    emb = dgl.distributed.DistEmbedding(g.num_nodes(), 4, name=f"compat_{optimizer}", init_func=initializer)
    assert (emb.num_embeddings, emb.embedding_dim, emb.name) == (NUM_NODES, 4, f"compat_{optimizer}")
    assert emb.part_policy.policy_str == "node:_N"
    opt = getattr(dgl.distributed.optim, optimizer)([emb], **kwargs)
    assert isinstance(opt, dgl.distributed.optim.DistSparseGradOptimizer)
    ids = th.tensor([3, 400, 17])
    rows = emb(ids, th.device("cpu"))
    assert rows.shape == (3, 4) and rows.requires_grad and th.equal(rows, th.ones(3, 4))
    rows.sum().backward()
    opt.step()
    after = emb.weight[th.tensor([3, 400, 17, 5])]
    th.testing.assert_close(after[:3], th.full((3, 4), 0.9), rtol=0, atol=1e-5)
    assert th.equal(after[3], th.ones(4)), "a row not looked up is unchanged"


def test_node_split_and_edge_split(compat_graph: CompatGraph):
    g, ref = compat_graph.graph, compat_graph.ref
    pb = g.get_partition_book()
    train = dgl.distributed.node_split(g.ndata["train_mask"], pb, ntype="_N", rank=0, force_even=True)
    assert train.dtype == th.int64
    np.testing.assert_array_equal(np.sort(train.numpy()), np.flatnonzero(ref["train_mask"]))
    edge_mask = np.zeros(g.num_edges(), dtype=bool)
    edge_mask[::7] = True
    mask = dgl.distributed.DistTensor((g.num_edges(),), th.bool, name="compat_edge_mask")
    mask[th.arange(g.num_edges())] = th.from_numpy(edge_mask)
    edges = dgl.distributed.edge_split(mask, pb, etype="_E", rank=0, force_even=True)
    np.testing.assert_array_equal(np.sort(edges.numpy()), np.flatnonzero(edge_mask))
    # One trainer: DGL's trainer IDs change nothing; trainer IDs of the wrong length are refused.
    by_trainer = dgl.distributed.node_split(
        g.ndata["train_mask"], pb, rank=0, node_trainer_ids=th.zeros(NUM_NODES, dtype=th.int64)
    )
    assert th.equal(by_trainer, train)
    with pytest.raises(ValueError, match="trainer IDs have 3 entries"):
        dgl.distributed.node_split(
            g.ndata["train_mask"], pb, rank=0, node_trainer_ids=th.zeros(3, dtype=th.int64)
        )


def _in_edges(ref, nodes: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.isin(ref["dst"], nodes))


def test_sample_neighbors_find_edges_in_subgraph_and_to_block(compat_graph: CompatGraph):
    g, ref = compat_graph.graph, compat_graph.ref
    nodes = th.tensor([3, 150, 299, 300, 451, 599])
    in_deg = np.bincount(ref["dst"], minlength=NUM_NODES)
    frontier = dgl.distributed.sample_neighbors(
        g, nodes, 3, edge_dir="in", prob=None, exclude_edges=None, replace=False
    )
    src, dst = frontier.edges()
    eid = frontier.edata[dgl.EID].numpy()
    np.testing.assert_array_equal(src.numpy(), ref["src"][eid])
    np.testing.assert_array_equal(dst.numpy(), ref["dst"][eid])
    assert len(set(eid.tolist())) == len(eid), "without replacement no edge is drawn twice"
    per_node = np.bincount(dst.numpy(), minlength=NUM_NODES)[nodes.numpy()]
    np.testing.assert_array_equal(per_node, np.minimum(in_deg[nodes.numpy()], 3))
    out = dgl.distributed.sample_neighbors(g, nodes, 2, edge_dir="out", etype_sorted=True, output_device=None)
    out_eid = out.edata[dgl.EID].numpy()
    assert np.isin(ref["src"][out_eid], nodes.numpy()).all() and np.isin(out.edges()[0], nodes).all()

    src, dst = dgl.distributed.find_edges(g, th.from_numpy(eid))
    np.testing.assert_array_equal(src.numpy(), ref["src"][eid])
    subgraph = dgl.distributed.in_subgraph(g, nodes)
    np.testing.assert_array_equal(np.sort(subgraph.edata[dgl.EID].numpy()), _in_edges(ref, nodes.numpy()))

    block = dgl.to_block(frontier, nodes)
    assert block.num_dst_nodes() == len(nodes) and block.number_of_dst_nodes() == len(nodes)
    assert th.equal(block.dstdata[dgl.NID], nodes) and th.equal(block.srcdata[dgl.NID][: len(nodes)], nodes)
    assert block.num_edges() == frontier.num_edges()
    local_src, local_dst = block.edges()
    block_eid = block.edata[dgl.EID].numpy()
    np.testing.assert_array_equal(block.srcdata[dgl.NID][local_src].numpy(), ref["src"][block_eid])
    np.testing.assert_array_equal(block.dstdata[dgl.NID][local_dst].numpy(), ref["dst"][block_eid])


def _write_ip_config(path, addresses: list[str]) -> str:
    path.write_text("".join(f"{address.replace(':', ' ')}\n" for address in addresses))
    return str(path)


@pytest.fixture(scope="module")
def compat_servers(compat_files, tmp_path_factory):
    group = start_servers(compat_files[0], 2, log_dir=tmp_path_factory.mktemp("compat-servers"))
    yield group
    group.stop()


def test_initialize_with_a_dgl_ip_config_file(compat_files, compat_servers, tmp_path):
    config_path, ref = compat_files
    ip_config = _write_ip_config(tmp_path / "ip_config.txt", compat_servers.addresses)
    dgl.distributed.exit_client()
    try:
        dgl.distributed.initialize(ip_config, max_queue_size=1024, net_type="socket", num_worker_threads=1)
        g = dgl.distributed.DistGraph("testgraph", part_config=config_path)
        assert g.num_nodes() == NUM_NODES and g.get_partition_book().num_partitions() == 2
        np.testing.assert_array_equal(g.ndata["feat"][th.tensor([1, 598])].numpy(), ref["feat"][[1, 598]])
    finally:
        dgl.distributed.exit_client()
    with pytest.raises(FileNotFoundError, match="ip_config"):
        dgl.distributed.initialize(str(tmp_path / "missing_ip_config.txt"))


def test_initialize_accepts_use_graphbolt(compat_servers, tmp_path):
    ip_config = _write_ip_config(tmp_path / "ip_config.txt", compat_servers.addresses)
    dgl.distributed.exit_client()
    try:
        dgl.distributed.initialize(ip_config, use_graphbolt=False)
        assert dgl.distributed.DistGraph("testgraph").num_nodes() == NUM_NODES
    finally:
        dgl.distributed.exit_client()
    with pytest.raises(NotImplementedError, match="use_graphbolt=True"):
        dgl.distributed.initialize(ip_config, use_graphbolt=True)


def test_a_launched_cluster_wins_over_a_dgl_ip_config(
    compat_files, compat_servers, tmp_path, monkeypatch, caplog
):
    """Under ``graphstore launch`` (GRAPHSTORE_CONFIG set) a DGL script's own ip_config.txt (DGL's default
    port) does not replace the cluster: initialize() uses the cluster and checks the file's hosts."""
    ports = [int(address.rsplit(":", 1)[1]) for address in compat_servers.addresses]
    monkeypatch.setenv("GRAPHSTORE_CONFIG", str(write_cluster(tmp_path, compat_files[0], ports)))
    same_hosts = tmp_path / "ip_config.txt"
    same_hosts.write_text("127.0.0.1\n")  # one machine, DGL's default port 30050
    other_hosts = tmp_path / "ip_config_other.txt"
    other_hosts.write_text("10.11.12.13 30050\n10.11.12.14 30050\n")
    dgl.distributed.exit_client()
    try:
        with caplog.at_level(logging.WARNING, logger="graphstore.client.config"):
            dgl.distributed.initialize(str(same_hosts))
            assert dgl.distributed.DistGraph("testgraph").num_nodes() == NUM_NODES
            assert not caplog.records, "the same host: no warning"
            dgl.distributed.exit_client()
            dgl.distributed.initialize(str(other_hosts))
            assert dgl.distributed.DistGraph("testgraph").num_nodes() == NUM_NODES
        (record,) = caplog.records
        assert "10.11.12.13" in record.getMessage() and "127.0.0.1" in record.getMessage()
    finally:
        dgl.distributed.exit_client()


@pytest.mark.parametrize(
    "call",
    [
        "DistTensor(is_gdata=True, attach=True)",
        "DistTensor.count_nonzero counts elements",
        "load_partition -> 7-tuple",
        "load_partition_book -> 4-tuple",
        "partid2nids -> tensor",
        "sample_neighbors(use_graphbolt=False)",
        "DistGraph.to_canonical_etype / is_pinned / sample_neighbors",
    ],
)
def test_dgl_2x_calls(compat_graph: CompatGraph, call):
    g, config = compat_graph.graph, compat_graph.config
    if call.startswith("DistTensor.count_nonzero"):
        # DGL counts the nonzero elements (torch.count_nonzero over the rows); a row [0, 1] has one.
        arr = dgl.distributed.DistTensor((NUM_NODES, 2), th.int32)
        arr[th.tensor([3, 8])] = th.tensor([[0, 1], [1, 1]], dtype=th.int32)
        assert arr.count_nonzero() == 3
    elif call.startswith("DistTensor"):
        arr = dgl.distributed.DistTensor(
            (NUM_NODES, 1), th.float32, "compat_gdata", is_gdata=True, attach=True
        )
        assert arr.shape == (NUM_NODES, 1)
        for option in ("is_gdata", "attach"):
            with pytest.raises(NotImplementedError, match=f"{option}=False"):
                dgl.distributed.DistTensor((NUM_NODES, 1), th.float32, "compat_gdata", **{option: False})
    elif call.startswith("load_partition ->"):
        part = dgl.distributed.load_partition(config, 0, load_feats=True, use_graphbolt=False)
        assert isinstance(part, tuple) and len(part) == 7
        _, node_feats, _, gpb, graph_name, ntypes, etypes = part
        assert "_N/feat" in node_feats and graph_name == "testgraph" and gpb.partid == 0
        assert list(ntypes) == ["_N"] and list(etypes) == [CANONICAL_ETYPE]
        local = gpb.partid2nids(0)
        np.testing.assert_array_equal(node_feats["_N/feat"].numpy(), compat_graph.ref["feat"][local.numpy()])
        assert dgl.distributed.load_partition(config, 1, load_feats=False)[1:3] == ({}, {})
        with pytest.raises(ValueError, match="not made for GraphBolt"):  # partitioned without GraphBolt
            dgl.distributed.load_partition(config, 0, use_graphbolt=True)
    elif call.startswith("load_partition_book"):
        result = dgl.distributed.load_partition_book(config, 1)
        assert isinstance(result, tuple) and len(result) == 4
        gpb, graph_name, ntypes, etypes = result
        assert gpb.partid == 1 and graph_name == "testgraph" and ntypes == {"_N": 0}
        assert etypes == {CANONICAL_ETYPE: 0}
    elif call.startswith("partid2nids"):
        nids = g.get_partition_book().partid2nids(1)
        assert isinstance(nids, th.Tensor) and int(nids[-1]) == NUM_NODES - 1
    elif call.startswith("sample_neighbors"):
        frontier = dgl.distributed.sample_neighbors(g, th.tensor([1, 2]), 2, use_graphbolt=False)
        assert frontier.num_edges() > 0
        with pytest.raises(NotImplementedError, match="use_graphbolt=True"):
            dgl.distributed.sample_neighbors(g, th.tensor([1, 2]), 2, use_graphbolt=True)
    else:
        assert g.to_canonical_etype("_E") == CANONICAL_ETYPE and g.is_pinned() is False
        assert g.sample_neighbors(th.tensor([1, 2]), 2).num_edges() > 0


def test_partition_book_methods_return_tensors_for_any_input(compat_graph: CompatGraph):
    pb = compat_graph.graph.get_partition_book()
    first_of_1 = pb.metadata()[0]["num_nodes"]
    for ids in ([0, first_of_1], np.array([0, first_of_1]), th.tensor([0, first_of_1])):
        parts = pb.nid2partid(ids)
        assert isinstance(parts, th.Tensor) and parts.dtype == th.int64 and parts.tolist() == [0, 1]
    results = [
        pb.partid2eids(0),
        pb.nid2localnid([first_of_1], 1),
        pb.eid2localeid(np.array([0]), 0),
        pb.eid2partid([0]),
        *pb.map_to_per_ntype([1, 2]),
        *pb.map_to_per_etype([1, 2]),
        pb.map_to_homo_nid([1, 2], "_N"),
        pb.map_to_homo_eid([1, 2], "_E"),
    ]
    assert all(isinstance(r, th.Tensor) and r.dtype == th.int64 for r in results)
    assert pb.is_homogeneous and pb.local_ntype_offset == [0, first_of_1]
    assert pb.global_nid_dtype == pb.global_eid_dtype == th.int64
    with pytest.raises(NotImplementedError, match="shared_memory"):
        pb.shared_memory("testgraph")


def test_range_partition_book_takes_dgls_constructor_arguments():
    node_map = {"_N": th.tensor([[0, 4], [4, 10]])}
    edge_map = {CANONICAL_ETYPE: np.array([[0, 7], [7, 20]])}
    book = dgl.distributed.RangePartitionBook(1, 2, node_map, edge_map, {"_N": 0}, {CANONICAL_ETYPE: 0})
    assert book.partid == 1 and book.num_partitions() == 2
    assert book.partid2nids(1).tolist() == list(range(4, 10))
    assert book.eid2partid(th.tensor([6, 7])).tolist() == [0, 1]
    typed = dgl.distributed.RangePartitionBook(
        0,
        2,
        {"user": [[0, 3], [5, 9]], "item": [[3, 5], [9, 10]]},
        {"user:buys:item": [[0, 6], [6, 8]]},
        {"user": 0, "item": 1},
        {("user", "buys", "item"): 0},
    )
    assert typed.ntypes == ["user", "item"] and typed.canonical_etypes == [("user", "buys", "item")]
    assert typed.map_to_homo_nid(th.tensor([0, 1, 2]), "item").tolist() == [3, 4, 9]
    type_ids, per_type = typed.map_to_per_ntype(th.tensor([4, 5, 9]))
    assert type_ids.tolist() == [1, 0, 1] and per_type.tolist() == [1, 3, 2]
    with pytest.raises(ValueError, match="num_parts=3"):
        dgl.distributed.RangePartitionBook(0, 3, node_map, edge_map, {"_N": 0}, {CANONICAL_ETYPE: 0})
    with pytest.raises(TypeError, match="ntypes must be a dict"):
        dgl.distributed.RangePartitionBook(0, 2, node_map, edge_map, ["_N"], {CANONICAL_ETYPE: 0})
