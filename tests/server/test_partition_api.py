"""PartitionAPI behaviour, run against the in-process PartitionServer and over gRPC (RemotePartition)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from graphstore import dtypes
from graphstore.client.transport import RemotePartition
from graphstore.dtypes import bfloat16_bits_to_float32, float32_to_bfloat16_bits
from graphstore.rpc import RpcPolicy
from graphstore.types import InitSpec, OptimizerConfig
from tests.server.conftest import NUM_NODES, owned_edges, owned_nodes
from tests.utils.threads import run_in_threads

ALL_DTYPES = ["float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8", "bool"]


def _random_rows(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype == "bfloat16":
        return float32_to_bfloat16_bits(rng.standard_normal(shape).astype(np.float32))
    info = dtypes.info(dtype)
    if info.is_float:
        return rng.standard_normal(shape).astype(info.storage)
    return rng.integers(0, 200 if dtype == "uint8" else 1 << 30, size=shape).astype(info.storage)


def test_metadata_describes_the_graph(partitions, graph_files):
    meta = partitions[1].metadata()
    assert meta.graph_name == "testgraph"
    assert meta.part_id == 1 and meta.num_parts == 2
    assert meta.num_nodes == NUM_NODES
    assert meta.num_edges == len(graph_files[2]["src"])
    assert meta.node_bounds[0] == 0 and meta.node_bounds[-1] == NUM_NODES
    names = {s.name: s for s in meta.tensors}
    assert names["feat"].shape == (NUM_NODES, 12) and names["feat"].from_partition
    assert not names["feat"].writable
    assert names["weight"].policy == "edge"


def test_pull_partition_features_in_request_order(partitions, graph_files):
    ref = graph_files[2]
    rng = np.random.default_rng(0)
    for k, part in enumerate(partitions):
        ids = rng.choice(owned_nodes(partitions, k), size=150)  # with repeats, any order
        np.testing.assert_array_equal(part.pull("feat", ids), ref["feat"][ids])
        np.testing.assert_array_equal(part.pull("label", ids), ref["label"][ids])
        np.testing.assert_array_equal(part.pull("train_mask", ids), ref["train_mask"][ids])
        eids = rng.choice(owned_edges(partitions, k), size=40)
        np.testing.assert_array_equal(part.pull("weight", eids), ref["weight"][eids])
    assert partitions[0].pull("feat", np.empty(0, dtype=np.int64)).shape == (0, 12)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_push_pull_round_trip_every_dtype(partitions, dtype):
    part = partitions[0]
    name = f"rt_{dtype}"
    created, scheme = part.init_tensor(name, (NUM_NODES, 3, 2), dtype, "node")
    assert created and scheme.dtype == dtype and scheme.shape == (NUM_NODES, 3, 2)
    ids = owned_nodes(partitions, 0)
    rng = np.random.default_rng(1)
    rows = _random_rows(rng, dtype, (len(ids), 3, 2))
    part.push(name, ids, rows)
    back = part.pull(name, ids[::-1])
    assert back.dtype == dtypes.info(dtype).storage
    np.testing.assert_array_equal(back, rows[::-1])  # bit-exact, bfloat16 included


def test_push_add_sums_repeated_ids_and_bumps_version(partitions):
    part = partitions[1]
    part.init_tensor("acc", (NUM_NODES, 4), "float64", "node")
    ids = owned_nodes(partitions, 1)[:5]
    v1 = part.push("acc", ids[[0, 0, 1, 0]], np.ones((4, 4)), op="add")
    v2 = part.push("acc", ids[[1]], np.full((1, 4), 2.0), op="add")
    assert v2 == v1 + 1
    np.testing.assert_array_equal(part.pull("acc", ids[:3])[:, 0], [3.0, 3.0, 0.0])


def test_bfloat16_add_accumulates_in_float32(partitions):
    part = partitions[0]
    part.init_tensor("bf", (NUM_NODES, 2), "bfloat16", "node")
    ids = owned_nodes(partitions, 0)[:1]
    one = float32_to_bfloat16_bits(np.full((1, 2), 1.0, np.float32))
    for _ in range(3):
        part.push("bf", ids, one, op="add")
    np.testing.assert_array_equal(bfloat16_bits_to_float32(part.pull("bf", ids)), [[3.0, 3.0]])


def test_concurrent_add_from_8_threads_sums_exactly(partitions):
    part = partitions[0]
    part.init_tensor("counter", (NUM_NODES, 8), "float32", "node")
    ids = owned_nodes(partitions, 0)
    rounds = 25

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(rounds):
            chosen = rng.choice(ids, size=64)  # repeats inside a request too
            part.push("counter", chosen, np.ones((64, 8), np.float32), op="add")

    run_in_threads(worker, [(seed,) for seed in range(8)])
    expected = np.zeros(NUM_NODES)
    for seed in range(8):
        rng = np.random.default_rng(seed)
        for _ in range(rounds):
            np.add.at(expected, rng.choice(ids, size=64), 1.0)
    got = part.pull("counter", ids)
    np.testing.assert_array_equal(got, np.repeat(expected[ids][:, None], 8, axis=1).astype(np.float32))
    assert part.list_tensors()[[s.name for s in part.list_tensors()].index("counter")].version == 8 * rounds


def test_concurrent_reads_never_see_torn_rows(partitions):
    part = partitions[1]
    part.init_tensor("torn", (NUM_NODES, 256), "int64", "node")
    ids = owned_nodes(partitions, 1)
    stop, bad = threading.Event(), []

    def writer() -> None:
        value = 0
        while not stop.is_set():
            value += 1
            part.push("torn", ids, np.full((len(ids), 256), value, np.int64))

    def reader() -> None:
        for _ in range(30):
            rows = part.pull("torn", ids)
            if not (rows == rows[0, 0]).all():
                bad.append(rows)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads[1:]:
        t.join(60)
    stop.set()
    threads[0].join(60)
    assert not bad


def test_init_initializers_and_attach_and_conflict(partitions):
    part = partitions[0]
    ids = owned_nodes(partitions, 0)
    created, _ = part.init_tensor(
        "u", (NUM_NODES, 50), "float32", "node", init=InitSpec("uniform", -0.5, 0.25, 7)
    )
    assert created
    u = part.pull("u", ids)
    assert u.min() >= -0.5 and u.max() <= 0.25 and u.std() > 0.1
    part.init_tensor("n", (NUM_NODES, 50), "float64", "node", init=InitSpec("normal", 2.0, 0.5, 7))
    n = part.pull("n", ids)
    assert abs(n.mean() - 2.0) < 0.05 and abs(n.std() - 0.5) < 0.05
    part.init_tensor("c", (NUM_NODES,), "int32", "node", init=InitSpec("constant", 7))
    assert (part.pull("c", ids) == 7).all()
    part.init_tensor("e", (partitions[0].metadata().num_edges, 2), "float16", "edge", init=InitSpec("pushed"))
    assert (part.pull("e", owned_edges(partitions, 0)) == 0).all()

    part.push("u", ids[:2], np.zeros((2, 50), np.float32))
    created, scheme = part.init_tensor("u", (NUM_NODES, 50), "float32", "node", init=InitSpec("zeros"))
    assert not created and scheme.version == 1
    assert (part.pull("u", ids[2:4]) == u[2:4]).all()  # attaching does not touch the rows
    with pytest.raises(FileExistsError, match="'u'.*float32 \\[600, 50\\].*float64 \\[600, 50\\]"):
        part.init_tensor("u", (NUM_NODES, 50), "float64", "node")
    with pytest.raises(FileExistsError):
        part.init_tensor("u", (NUM_NODES, 49), "float32", "node")
    assert part.delete_tensor("u") and not part.delete_tensor("u")
    with pytest.raises(KeyError, match="'u'"):
        part.pull("u", ids[:1])


def test_same_seed_same_init_each_partition_differs(partitions):
    a = [
        p.init_tensor("r", (NUM_NODES, 4), "float32", "node", init=InitSpec("normal", 0, 1, 3))
        for p in partitions
    ]
    assert all(created for created, _ in a)
    rows0 = partitions[0].pull("r", owned_nodes(partitions, 0)[:10])
    rows1 = partitions[1].pull("r", owned_nodes(partitions, 1)[:10])
    assert not np.array_equal(rows0, rows1)


def test_read_only_features_refuse_writes(partitions):
    part = partitions[0]
    ids = owned_nodes(partitions, 0)[:2]
    with pytest.raises(PermissionError, match="'feat' is read-only"):
        part.push("feat", ids, np.zeros((2, 12), np.float32))
    with pytest.raises(PermissionError, match="'feat'"):
        part.delete_tensor("feat")
    with pytest.raises(PermissionError):
        part.push_grad("feat", ids, np.zeros((2, 12), np.float32), OptimizerConfig("adagrad", 0.1))


def test_bad_requests_raise_errors_naming_the_value(partitions):
    part = partitions[0]
    hi = owned_nodes(partitions, 0)[-1]
    part.init_tensor("w", (NUM_NODES, 4), "float32", "node")
    with pytest.raises(ValueError, match=f"node ID {hi + 1} is not owned by partition 0"):
        part.pull("feat", np.array([0, hi + 1]))
    with pytest.raises(ValueError, match="node ID -3"):
        part.pull("feat", np.array([-3]))
    with pytest.raises(KeyError, match="nope"):
        part.pull("nope", np.array([0]))
    with pytest.raises(ValueError, match="dtype"):
        part.push("w", np.array([0]), np.zeros((1, 4), np.float64))
    with pytest.raises(ValueError, match="shape"):
        part.push("w", np.array([0]), np.zeros((1, 5), np.float32))
    with pytest.raises(ValueError, match="op"):
        part.push("w", np.array([0]), np.zeros((1, 4), np.float32), op="mul")
    with pytest.raises(ValueError, match="fanout"):
        part.sample_neighbors(np.array([0]), -2)
    with pytest.raises(ValueError, match="edge_dir"):
        part.degrees(np.array([0]), "sideways")
    with pytest.raises(ValueError, match="shape"):
        part.init_tensor("bad", (NUM_NODES + 1, 4), "float32", "node")
    with pytest.raises(ValueError, match="dtype"):
        part.init_tensor("bad", (NUM_NODES, 4), "complex64", "node")
    with pytest.raises(ValueError, match="count"):
        part.barrier("b", 0, 1.0)
    with pytest.raises(TimeoutError, match="1 of 2"):
        part.barrier("b", 2, 0.2)
    with pytest.raises(ValueError, match="unknown optimizer"):
        part.push_grad("w", np.array([0]), np.zeros((1, 4), np.float32), OptimizerConfig("sgdx", 0.1))
    # Still serving afterwards.
    assert part.pull("w", np.array([0])).shape == (1, 4)


def _reference_in_edges(ref, nodes):
    """Edge IDs of every in-edge of ``nodes`` (sorted)."""
    return np.flatnonzero(np.isin(ref["dst"], nodes))


def test_sampled_edges_exist_with_right_ids_and_fanout_rules(partitions, graph_files):
    ref = graph_files[2]
    src_all, dst_all = ref["src"], ref["dst"]
    in_deg = np.bincount(dst_all, minlength=NUM_NODES)
    out_deg = np.bincount(src_all, minlength=NUM_NODES)
    for k, part in enumerate(partitions):
        seeds = owned_nodes(partitions, k)
        for edge_dir, deg in (("in", in_deg), ("out", out_deg)):
            for fanout, replace in ((3, False), (3, True), (-1, False), (0, False), (50, False)):
                src, dst, eid = part.sample_neighbors(seeds, fanout, edge_dir, replace, random_seed=5)
                np.testing.assert_array_equal(src_all[eid], src)
                np.testing.assert_array_equal(dst_all[eid], dst)
                center = dst if edge_dir == "in" else src
                counts = np.bincount(center, minlength=NUM_NODES)[seeds]
                if fanout == -1:
                    expected = deg[seeds]
                elif replace:
                    expected = np.where(deg[seeds] > 0, fanout, 0)
                else:
                    expected = np.minimum(deg[seeds], fanout)
                np.testing.assert_array_equal(counts, expected)
                if not replace:
                    assert len(np.unique(eid)) == len(eid)
                again = part.sample_neighbors(seeds, fanout, edge_dir, replace, random_seed=5)
                for x, y in zip((src, dst, eid), again, strict=True):
                    np.testing.assert_array_equal(x, y)


def test_weighted_sampling_never_draws_zero_weight_edges(partitions, graph_files):
    ref = graph_files[2]
    num_edges = len(ref["src"])
    part = partitions[0]
    part.init_tensor("p", (num_edges,), "float32", "edge")
    eids = owned_edges(partitions, 0)
    weights = np.where(eids % 3 == 0, 0.0, 1.0 + eids % 5).astype(np.float32)
    part.push("p", eids, weights)
    seeds = owned_nodes(partitions, 0)
    positive_deg = np.bincount(ref["dst"][eids[weights > 0]], minlength=NUM_NODES)[seeds]
    for replace in (False, True):
        src, dst, eid = part.sample_neighbors(seeds, 4, "in", replace, prob="p", random_seed=1)
        assert len(eid) and (eid % 3 != 0).all()
        np.testing.assert_array_equal(ref["src"][eid], src)
        counts = np.bincount(dst, minlength=NUM_NODES)[seeds]
        expected = np.where(positive_deg > 0, 4, 0) if replace else np.minimum(positive_deg, 4)
        np.testing.assert_array_equal(counts, expected)
    with pytest.raises(ValueError, match="edge_dir='in'"):
        part.sample_neighbors(seeds, 4, "out", prob="p")
    with pytest.raises(ValueError, match="per edge"):
        part.sample_neighbors(seeds, 4, "in", prob="feat")
    part.push("p", eids[:1], np.array([-1.0], np.float32))
    with pytest.raises(ValueError, match="non-negative"):
        part.sample_neighbors(seeds, 4, "in", prob="p")


@pytest.mark.parametrize("edge_dir", ["in", "out"])
def test_excluded_edges_are_never_drawn_and_seeds_sample_among_the_rest(partitions, graph_files, edge_dir):
    ref = graph_files[2]
    center_all = ref["dst"] if edge_dir == "in" else ref["src"]
    rng = np.random.default_rng(4)
    for k, part in enumerate(partitions):
        seeds = owned_nodes(partitions, k)
        # Exclude half of the seeds' edges (and some edges elsewhere, which change nothing).
        around = np.flatnonzero(np.isin(center_all, seeds))
        excluded = np.concatenate([rng.choice(around, around.size // 2, replace=False), [0, 1, 2]])
        kept = np.setdiff1d(around, excluded)
        remaining = np.bincount(center_all[kept], minlength=NUM_NODES)[seeds]
        for replace in (False, True):
            src, dst, eid = part.sample_neighbors(
                seeds, 3, edge_dir, replace, random_seed=2, exclude_eids=excluded
            )
            assert not np.isin(eid, excluded).any()
            np.testing.assert_array_equal(ref["src"][eid], src)
            np.testing.assert_array_equal(ref["dst"][eid], dst)
            counts = np.bincount(dst if edge_dir == "in" else src, minlength=NUM_NODES)[seeds]
            expected = np.where(remaining > 0, 3, 0) if replace else np.minimum(remaining, 3)
            np.testing.assert_array_equal(counts, expected)
        _, _, every = part.sample_neighbors(seeds, -1, edge_dir, exclude_eids=excluded)
        np.testing.assert_array_equal(np.sort(every), kept)


def test_find_edges_in_subgraph_degrees_match_numpy(partitions, graph_files):
    ref = graph_files[2]
    src_all, dst_all = ref["src"], ref["dst"]
    rng = np.random.default_rng(3)
    for k, part in enumerate(partitions):
        eids = rng.choice(owned_edges(partitions, k), size=100)
        src, dst = part.find_edges(eids)
        np.testing.assert_array_equal(src, src_all[eids])
        np.testing.assert_array_equal(dst, dst_all[eids])

        nodes = rng.choice(owned_nodes(partitions, k), size=40, replace=False)
        src, dst, eid = part.in_subgraph(nodes)
        expected = _reference_in_edges(ref, nodes)
        np.testing.assert_array_equal(np.sort(eid), expected)
        np.testing.assert_array_equal(src, src_all[eid])
        np.testing.assert_array_equal(dst, dst_all[eid])

        np.testing.assert_array_equal(
            part.degrees(nodes, "in"), np.bincount(dst_all, minlength=NUM_NODES)[nodes]
        )
        np.testing.assert_array_equal(
            part.degrees(nodes, "out"), np.bincount(src_all, minlength=NUM_NODES)[nodes]
        )
    with pytest.raises(ValueError, match="edge ID"):
        partitions[0].find_edges(owned_edges(partitions, 1)[:1])


def test_push_grad_applies_adagrad_on_the_server(partitions):
    part = partitions[1]
    part.init_tensor("emb", (NUM_NODES, 4), "float32", "node", init=InitSpec("constant", 1.0))
    ids = owned_nodes(partitions, 1)[[3, 7]]
    grads = np.array([[1, 2, 3, 4], [0.5, 0.5, 0.5, 0.5]], np.float32)
    v = part.push_grad("emb", ids, grads, OptimizerConfig("adagrad", lr=0.1, eps=1e-10))
    assert v == 1
    expected = 1.0 - 0.1 * grads / np.sqrt(grads * grads + 1e-10)
    np.testing.assert_allclose(part.pull("emb", ids), expected, rtol=1e-6)
    untouched = owned_nodes(partitions, 1)[[4]]
    np.testing.assert_array_equal(part.pull("emb", untouched), np.ones((1, 4), np.float32))


def test_remote_chunks_large_pulls_and_pushes(server_group, graph_files):
    ref = graph_files[2]
    policy = RpcPolicy(deadline_s=20, chunk_bytes=1000)  # ~20 feature rows per chunk
    with RemotePartition(server_group.addresses[1], 1, policy) as part:
        meta = part.metadata()
        ids = np.arange(meta.node_bounds[1], meta.node_bounds[2])[::-1]
        np.testing.assert_array_equal(part.pull("feat", ids), ref["feat"][ids])
        part.init_tensor("chunked", (NUM_NODES, 16), "float64", "node")
        try:
            rows = np.random.default_rng(0).standard_normal((len(ids), 16))
            part.push("chunked", ids, rows)
            np.testing.assert_array_equal(part.pull("chunked", ids), rows)
            src, dst, eid = part.in_subgraph(ids)
            assert len(eid) == np.isin(ref["dst"], ids).sum()
            assert len(part.degrees(ids)) == len(ids)
        finally:
            part.delete_tensor("chunked")


def _count_calls(part: RemotePartition) -> list[str]:
    """The methods of every call ``part`` makes from now on."""
    calls: list[str] = []
    channel = part._channel
    for method in ("call", "call_future"):
        original = getattr(channel, method)
        setattr(channel, method, lambda *a, _f=original, **k: calls.append(a[0]) or _f(*a, **k))
    return calls


def test_default_policy_sends_pull_answers_up_to_16_mib_as_one_request(server_group):
    policy = RpcPolicy(deadline_s=20)
    assert policy.chunk_bytes == 16 * 1024 * 1024
    with RemotePartition(server_group.addresses[1], 1, policy) as part:
        meta = part.metadata()
        ids = np.arange(meta.node_bounds[1], meta.node_bounds[2])
        width = 5 * 1024 * 1024 // (4 * len(ids)) + 1  # answers of just over 5 MiB
        part.init_tensor("wide", (NUM_NODES, width), "float32", "node")
        try:
            calls = _count_calls(part)
            assert part.pull("wide", ids).shape == (len(ids), width)
            assert calls.count("Pull") == 1
            with RemotePartition(
                server_group.addresses[1], 1, RpcPolicy(deadline_s=20, chunk_bytes=2**21)
            ) as small:
                calls = _count_calls(small)
                assert small.pull("wide", ids).shape == (len(ids), width)
            assert calls.count("Pull") == 3  # 2 MiB chunks
        finally:
            part.delete_tensor("wide")


def test_remote_pulls_from_many_threads_each_get_their_rows(server_group, graph_files):
    ref = graph_files[2]
    with RemotePartition(server_group.addresses[1], 1, RpcPolicy(deadline_s=20)) as part:
        meta = part.metadata()
        low, high = meta.node_bounds[1], meta.node_bounds[2]
        calls = _count_calls(part)

        def worker(seed):
            rng = np.random.default_rng(seed)
            for _ in range(40):
                ids = rng.integers(low, high, int(rng.integers(1, 30)))
                np.testing.assert_array_equal(part.pull("feat", ids), ref["feat"][ids])

        run_in_threads(worker, [(seed,) for seed in range(8)])
        assert 0 < calls.count("Pull") <= 8 * 40


def test_read_only_view_serves_partition_data_only(graph_files):
    from graphstore.partition import load_partition
    from graphstore.server.partition_server import PartitionServer

    view = PartitionServer(load_partition(graph_files[0], 0), read_only_view=True)
    np.testing.assert_array_equal(view.pull("feat", np.array([0, 1])), graph_files[2]["feat"][:2])
    assert view.degrees(np.array([0])).shape == (1,)
    with pytest.raises(PermissionError, match="read-only view"):
        view.init_tensor("x", (NUM_NODES, 2), "float32", "node")
    with pytest.raises(PermissionError):
        view.push("feat", np.array([0]), np.zeros((1, 12), np.float32))
    with pytest.raises(ValueError):
        PartitionServer(load_partition(graph_files[0], 0), read_only_view=True, writable_features=True)


def test_writable_features_accept_pushes(graph_files):
    from graphstore.partition import load_partition
    from graphstore.server.partition_server import PartitionServer

    server = PartitionServer(load_partition(graph_files[0], 0), writable_features=True)
    server.push("feat", np.array([0]), np.full((1, 12), 5.0, np.float32))
    assert (server.pull("feat", np.array([0])) == 5.0).all()
    # The files are untouched: a fresh load still has the original rows.
    fresh = PartitionServer(load_partition(graph_files[0], 0))
    np.testing.assert_array_equal(fresh.pull("feat", np.array([0])), graph_files[2]["feat"][:1])
