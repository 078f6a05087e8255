"""Node rows carried with sampling answers: what a server sends equals a plain pull of the same IDs (plain
and typed graphs), a loader that takes them gives the same batches with fewer pulls, and rows a server
does not carry (over its request limits) are pulled instead."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.client import api, call_counts
from graphstore.client.constants import NID
from graphstore.client.dataloader import DistNodeDataLoader
from graphstore.client.dist_graph import DistGraph
from graphstore.client.samplers import NeighborSampler
from graphstore.client.transport import RemotePartition
from graphstore.client.transport.sample_requests import SampleSpec
from graphstore.launcher.local_servers import start_servers
from graphstore.partition import load_partition_book
from graphstore.rpc import RpcPolicy
from graphstore.server.carried_rows import held_node_ids
from tests.utils.graphs import make_partitioned_graph, relabeled
from tests.utils.typed_graphs import make_typed_partitions, relabeled_typed


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    folder = tmp_path_factory.mktemp("carried")
    config, arrays = make_partitioned_graph(folder, num_nodes=600, num_parts=2, avg_degree=8, feat_dim=12)
    with start_servers(config, 2, log_dir=folder / "logs") as group:
        yield config, relabeled(arrays), group


def _cluster(config: str, group, graph_name: str = "testgraph") -> dict:
    servers = [
        {"host": "127.0.0.1", "port": int(a.rsplit(":", 1)[1]), "part_id": k}
        for k, a in enumerate(group.addresses)
    ]
    return {
        "graph_name": graph_name,
        "part_config": config,
        "servers": servers,
        "local_read": "on",
        "local_part_id": 0,
    }


def test_held_node_ids_are_the_owned_nodes_in_the_tensors_id_space(tmp_path):
    result, _ = make_typed_partitions(tmp_path, 2, "random")
    book = load_partition_book(result.config_path)
    for part_id in range(2):
        low, high = (int(b) for b in book.node_bounds[part_id : part_id + 2])
        nodes = np.array([0, high - 1, low, low, int(book.node_bounds[-1]) - 1])
        homo = held_node_ids(book, part_id, "node", nodes)
        assert homo.tolist() == sorted({int(n) for n in nodes if low <= n < high})
        types, per_type = book.map_to_per_ntype(homo)
        for t, ntype in enumerate(book.ntypes):
            expected = sorted(int(i) for i in np.asarray(per_type)[np.asarray(types) == t])
            assert held_node_ids(book, part_id, f"node:{ntype}", nodes).tolist() == expected
    with pytest.raises(ValueError, match="not a node ID space"):
        held_node_ids(book, 0, "edge", np.arange(3))


def test_a_sample_carries_the_rows_a_pull_of_the_same_ids_gives(plain):
    config, new, group = plain
    remote = RemotePartition(group.addresses[1], 1, RpcPolicy(deadline_s=20))
    try:
        meta = remote.metadata()
        low, high = meta.node_bounds[1], meta.node_bounds[2]
        seeds = np.arange(low, high, 5)
        spec = SampleSpec(4, random_seed=3, with_rows=("feat",), with_seed_rows=("label",))
        src, dst, eid, carried = remote.sample_with_rows(seeds, spec)
        plain_src, _, _ = remote.sample_neighbors(seeds, 4, random_seed=3)
        np.testing.assert_array_equal(src, plain_src)  # carrying rows does not change the sample
        by_name = {rows.name: rows for rows in carried}
        expected = np.unique(np.concatenate((seeds, src)))
        expected = expected[(expected >= low) & (expected < high)]
        np.testing.assert_array_equal(by_name["feat"].ids, expected)
        np.testing.assert_array_equal(by_name["feat"].rows, remote.pull("feat", expected))
        np.testing.assert_array_equal(by_name["feat"].rows, new["feat"][expected])
        np.testing.assert_array_equal(by_name["label"].ids, seeds)
        np.testing.assert_array_equal(by_name["label"].rows, new["label"][seeds])
        with pytest.raises(KeyError, match="no_such"):
            remote.sample_with_rows(seeds, SampleSpec(4, with_rows=("no_such",)))
    finally:
        remote.close()


def test_a_typed_sample_carries_per_type_rows(tmp_path):
    result, arrays = make_typed_partitions(tmp_path, 2, "metis")
    new = relabeled_typed(result, arrays)
    with start_servers(result.config_path, 2, log_dir=tmp_path / "logs") as group:
        remote = RemotePartition(group.addresses[0], 0, RpcPolicy(deadline_s=20))
        try:
            book = load_partition_book(result.config_path)
            low, high = (int(b) for b in book.node_bounds[:2])
            seeds = np.arange(low, high, 3)
            fanouts = [3] * len(book.canonical_etypes)
            spec = SampleSpec(fanouts, with_rows=("paper/feat", "author/age"))
            src, _, _, carried = remote.sample_with_rows(seeds, spec)
            nodes = np.unique(np.concatenate((seeds, src)))
            owned = nodes[(nodes >= low) & (nodes < high)]
            types, per_type = book.map_to_per_ntype(owned)
            for rows in carried:
                ntype, name = rows.name.split("/")
                expected = np.asarray(per_type)[np.asarray(types) == book.ntypes.index(ntype)]
                np.testing.assert_array_equal(rows.ids, expected)
                np.testing.assert_array_equal(rows.rows, new["nodes"][ntype][name][expected])
            assert {rows.name for rows in carried} == {"paper/feat", "author/age"}
        finally:
            remote.close()


def _batches(g, carry: bool) -> list:
    nodes = torch.arange(0, g.num_nodes(), 3)
    loader = DistNodeDataLoader(
        g, nodes, NeighborSampler([4, 3], seed=5), batch_size=64, shuffle=True, seed=1, carry_node_data=carry
    )
    return [
        (blocks[0].srcdata[NID], blocks[0].srcdata["feat"], blocks[-1].dstdata["label"])
        for _, _, blocks in loader
    ]


def test_a_loader_taking_carried_rows_gives_the_same_batches_with_fewer_pulls(plain):
    config, new, group = plain
    api.exit_client()
    api.initialize(_cluster(config, group))
    try:
        g = DistGraph("testgraph")
        counts = []
        batches = {}
        for carry in (False, True):
            before = call_counts().get("Pull")
            batches[carry] = _batches(g, carry)
            after = call_counts()["Pull"]
            counts.append(after.calls - (before.calls if before else 0))
        for (ids, feat, label), (ids2, feat2, label2) in zip(batches[False], batches[True], strict=True):
            assert torch.equal(ids, ids2)
            assert torch.equal(feat, feat2) and torch.equal(feat, torch.from_numpy(new["feat"][ids.numpy()]))
            assert torch.equal(label, label2)
        assert counts[1] < counts[0]  # the labels and most remote features came with the samples
    finally:
        api.exit_client()


def test_rows_over_a_servers_limit_are_pulled_instead(plain, tmp_path):
    config, new, _ = plain
    # 250 rows of 12 float32 at most per answer: a sample of the 300 nodes of partition 1 needs more.
    with start_servers(config, 2, ("--max-request-bytes", str(250 * 48)), log_dir=tmp_path) as group:
        remote = RemotePartition(group.addresses[1], 1, RpcPolicy(deadline_s=20))
        low, high = remote.metadata().node_bounds[1:3]
        _, _, _, carried = remote.sample_with_rows(np.arange(low, high), SampleSpec(8, with_rows=("feat",)))
        assert carried == []
        remote.close()
        api.exit_client()
        api.initialize(_cluster(config, group))
        try:
            g = DistGraph("testgraph")
            for ids, feat, _ in _batches(g, True):
                assert torch.equal(feat, torch.from_numpy(new["feat"][ids.numpy()]))
        finally:
            api.exit_client()
