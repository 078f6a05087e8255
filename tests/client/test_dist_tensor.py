"""DistTensor against 2 real servers (RPC only, and with partition 0 co-located) and in standalone mode:
reads and writes equal a numpy reference, creation / attach / deletion semantics, bad input, and two
client processes writing concurrently.

The fixtures here (``graph_files``, ``cluster``, ``dist``) are shared by the other ``test_dist_*``
modules, which import them.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from graphstore.client import api
from graphstore.client.context import ClientContext, get_context
from graphstore.client.dist_graph import DistGraph
from graphstore.client.dist_tensor import DistTensor
from graphstore.launcher.local_servers import start_servers
from graphstore.types import InitSpec
from tests.launcher.helpers import free_ports
from tests.utils.graphs import REPO_ROOT, make_partitioned_graph, relabeled

GRAPH_NAME = "testgraph"
NUM_NODES = 600
MODES = ["standalone", "remote", "colocated"]
ALL_DTYPES = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
]


@dataclass
class Dist:
    """One connected client for a test."""

    mode: str
    graph: DistGraph
    ctx: ClientContext
    ref: dict[str, np.ndarray]  # the graph in partitioned IDs (what the servers serve)
    config_path: str
    cluster_config: dict | None


@pytest.fixture(scope="module")
def graph_files(tmp_path_factory):
    """A 2-partition graph with extra node arrays of several dtypes."""
    rng = np.random.default_rng(3)
    node_data = {
        "nd_int32": rng.integers(-1000, 1000, (NUM_NODES, 3)).astype(np.int32),
        "nd_uint8": rng.integers(0, 255, (NUM_NODES,)).astype(np.uint8),
        "nd_float64": rng.standard_normal((NUM_NODES, 2)),
        "nd_half": rng.standard_normal((NUM_NODES, 5)).astype(np.float16),
    }
    config_path, graph = make_partitioned_graph(
        tmp_path_factory.mktemp("client_graph"),
        num_nodes=NUM_NODES,
        num_parts=2,
        feat_dim=8,
        node_data=node_data,
    )
    return config_path, relabeled(graph)


@pytest.fixture(scope="module")
def cluster(graph_files, tmp_path_factory):
    """Two partition servers in subprocesses on free loopback ports (stopped at the end, by PID)."""
    group = start_servers(graph_files[0], 2, log_dir=tmp_path_factory.mktemp("server_logs"))
    yield group
    group.stop()


def cluster_config(group, config_path: str, local_read: str) -> dict:
    servers = []
    for part_id, address in enumerate(group.addresses):
        host, port = address.rsplit(":", 1)
        servers.append({"host": host, "port": int(port), "part_id": part_id})
    return {
        "graph_name": GRAPH_NAME,
        "part_config": config_path,
        "servers": servers,
        "local_read": local_read,
        "local_part_id": 0,
        "rpc": {"deadline_s": 20.0, "connect_timeout_s": 30.0, "max_retries": 2},
    }


@pytest.fixture(params=MODES)
def dist(request, graph_files):
    """A connected client: standalone, remote (RPC only) or colocated (partition 0 read locally)."""
    config_path, ref = graph_files
    api.exit_client()
    config = None
    if request.param == "standalone":
        graph = DistGraph(GRAPH_NAME, part_config=config_path)
    else:
        group = request.getfixturevalue("cluster")
        config = cluster_config(group, config_path, "off" if request.param == "remote" else "on")
        api.initialize(config)
        graph = DistGraph(GRAPH_NAME, part_config=config_path)
    try:
        yield Dist(request.param, graph, get_context(), ref, config_path, config)
    finally:
        api.exit_client()


def trainer_group_env(world_size: int = 2) -> dict[str, str]:
    """The environment of trainer processes of one new group (its own MASTER_PORT, so its own barrier);
    each process adds its ``RANK``."""
    return {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "WORLD_SIZE": str(world_size),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_ports(1)[0]),
    }


def end_processes(procs: list[subprocess.Popen]) -> None:
    """Kill and reap the processes that are still running (clean-up after a failure)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@contextmanager
def connected(config: dict) -> Iterator[ClientContext]:
    """This process connected to the cluster ``config`` for the ``with`` block."""
    api.exit_client()
    ctx = api.initialize(config)
    try:
        yield ctx
    finally:
        api.exit_client()


def unique_name(prefix: str = "t") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def random_ids(rng: np.random.Generator, high: int, size: int = 200) -> np.ndarray:
    ids = rng.integers(0, high, size)
    ids[: size // 10] = ids[size // 10 : 2 * (size // 10)]  # guaranteed duplicates
    return rng.permutation(ids)


def random_rows(rng: np.random.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.from_numpy(rng.integers(0, 2, shape).astype(bool))
    if dtype.is_floating_point:
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype)
    info = torch.iinfo(dtype)
    return torch.from_numpy(rng.integers(max(info.min, -1000), min(info.max, 1000), shape)).to(dtype)


# ----- reads of the partition's data ------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["feat", "label", "train_mask", "nd_int32", "nd_uint8", "nd_float64", "nd_half"]
)
def test_partition_data_reads_equal_numpy(dist, name):
    rng = np.random.default_rng(11)
    expected = dist.ref[name]
    tensor = dist.graph.ndata[name]
    assert tensor.shape == expected.shape and not tensor.writable
    assert tensor.dtype == torch.from_numpy(expected[:1].copy()).dtype
    ids = random_ids(rng, NUM_NODES)
    for index in (ids, torch.from_numpy(ids), torch.from_numpy(ids).to(torch.int32), ids.tolist()):
        np.testing.assert_array_equal(tensor[index].numpy(), expected[ids])
    mask = rng.random(NUM_NODES) < 0.3
    np.testing.assert_array_equal(tensor[torch.from_numpy(mask)].numpy(), expected[mask])
    np.testing.assert_array_equal(tensor[250:350].numpy(), expected[250:350])
    np.testing.assert_array_equal(tensor[5].numpy(), expected[[5]])
    assert tensor[[]].shape == (0, *expected.shape[1:])


@pytest.mark.parametrize("name", ["feat", "label", "nd_half"])
def test_loader_shaped_reads_equal_numpy(dist, name):
    """Scattered seeds then long sorted stretches (a loader's input nodes): the long runs of each
    partition are copied in place, the rest scattered; the result must not depend on the split."""
    rng = np.random.default_rng(5)
    expected = dist.ref[name]
    seeds = rng.choice(NUM_NODES, 40, replace=False)
    others = np.setdiff1d(np.arange(NUM_NODES), seeds)
    for ids in (
        np.concatenate([seeds, others]),
        np.concatenate([seeds, np.sort(rng.choice(others, 150, replace=False))]),
        np.concatenate([np.arange(100), seeds, np.arange(NUM_NODES - 100, NUM_NODES)]),
    ):
        np.testing.assert_array_equal(dist.graph.ndata[name][ids].numpy(), expected[ids])


def test_read_dtype_option_casts_on_the_client(dist):
    half = dist.graph.ndata["nd_half"]
    assert half[[1, 2]].dtype == torch.float16, "float16 comes back as float16"
    as_float = half.read([1, 2], dtype=torch.float32)
    assert as_float.dtype == torch.float32
    np.testing.assert_array_equal(as_float.numpy(), dist.ref["nd_half"][[1, 2]].astype(np.float32))


# ----- run-time tensors: writes and reads ----------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def test_runtime_tensor_writes_and_reads_equal_reference(dist, dtype):
    rng = np.random.default_rng(5)
    shape = (NUM_NODES, 3)
    start = random_rows(rng, shape, dtype)
    bounds = dist.ctx.book.node_bounds
    calls = []

    def init(part_shape, init_dtype):
        assert init_dtype == dtype
        part = len(calls)
        calls.append(part_shape)
        return start[bounds[part] : bounds[part + 1]].clone()

    tensor = DistTensor(shape, dtype, name=unique_name(), init_func=init)
    assert sorted(calls) == sorted([(int(bounds[1] - bounds[0]), 3), (int(bounds[2] - bounds[1]), 3)])
    reference = start.clone()
    assert torch.equal(tensor[0:NUM_NODES], reference)
    for _ in range(3):
        ids = random_ids(rng, NUM_NODES, 150)
        rows = random_rows(rng, (ids.size, 3), dtype)
        tensor[torch.from_numpy(ids)] = rows
        for position, row_id in enumerate(ids):  # the last row given for an ID wins
            reference[int(row_id)] = rows[position]
        read_ids = random_ids(rng, NUM_NODES)
        assert torch.equal(tensor[read_ids], reference[torch.from_numpy(read_ids)])
    assert torch.equal(tensor[0:NUM_NODES], reference)
    if dtype != torch.bool:
        ids = random_ids(rng, NUM_NODES, 100)
        delta = random_rows(rng, (ids.size, 3), dtype)
        tensor.write(ids, delta, op="add")
        got = tensor[0:NUM_NODES]
        if dtype.is_floating_point:
            expected = reference.to(torch.float64).index_add_(
                0, torch.from_numpy(ids), delta.to(torch.float64)
            )
            tolerance = 0.1 if dtype in (torch.float16, torch.bfloat16) else 1e-6
            assert torch.allclose(got.to(torch.float64), expected, atol=tolerance, rtol=0.02), (
                "add sums duplicates"
            )
        else:  # integer adds wrap around the same way on both sides
            expected = reference.clone().index_add_(0, torch.from_numpy(ids), delta)
            assert torch.equal(got, expected), "add sums duplicate IDs"
    tensor.delete()


def test_write_through_numpy_and_masks(dist):
    tensor = DistTensor((NUM_NODES, 2), np.float64, name=unique_name())
    mask = np.zeros(NUM_NODES, dtype=bool)
    mask[[3, 400, 599]] = True
    tensor[mask] = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_array_equal(tensor[[599, 3]].numpy(), [[5.0, 6.0], [1.0, 2.0]])
    tensor[10:12] = torch.ones((2, 2), dtype=torch.float64)
    assert tensor[9:13].sum().item() == 4.0
    tensor[20] = torch.tensor([7.0, 8.0], dtype=torch.float64)
    assert tensor[20].tolist() == [[7.0, 8.0]]


def test_server_side_initializer(dist):
    tensor = DistTensor(
        (NUM_NODES, 4), torch.float32, name=unique_name(), init_func=InitSpec("uniform", -0.5, 0.5, 7)
    )
    rows = tensor[0:NUM_NODES]
    assert rows.min() >= -0.5 and rows.max() <= 0.5 and rows.std() > 0.1


# ----- creation, attach, deletion ------------------------------------------------------------------


def test_attach_conflict_and_late_attach_keeps_rows(dist):
    name = unique_name()
    first = DistTensor(
        (NUM_NODES, 4), torch.float32, name=name, init_func=lambda s, d: torch.ones(s, dtype=d)
    )
    first[[7, 500]] = torch.full((2, 4), 9.0)
    late = DistTensor(
        (NUM_NODES, 4), torch.float32, name=name, init_func=lambda s, d: torch.zeros(s, dtype=d)
    )
    assert torch.equal(late[[7, 500, 8]], torch.tensor([[9.0] * 4, [9.0] * 4, [1.0] * 4]))
    with pytest.raises(ValueError, match=r"\(600, 4\).*\(600, 5\)"):
        DistTensor((NUM_NODES, 5), torch.float32, name=name)
    with pytest.raises(ValueError, match="float32.*int32"):
        DistTensor((NUM_NODES, 4), torch.int32, name=name)
    assert torch.equal(first[[7]], torch.full((1, 4), 9.0)), (
        "a failed conflicting create leaves the rows alone"
    )
    assert DistTensor.attach(name).shape == (NUM_NODES, 4)


def test_non_persistent_tensor_is_deleted_when_released(dist):
    name = unique_name()
    tensor = DistTensor((NUM_NODES, 2), torch.float32, name=name)
    attached = DistTensor((NUM_NODES, 2), torch.float32, name=name)
    del attached
    gc.collect()
    assert dist.ctx.tensor_scheme(name, refresh=True) is not None, (
        "an attached handle does not own the tensor"
    )
    del tensor
    gc.collect()
    for part_id in range(dist.ctx.num_parts):
        assert name not in [s.name for s in dist.ctx.partition(part_id).list_tensors()]


def test_unnamed_tensors_are_unique_and_cannot_be_persistent(dist):
    a = DistTensor((NUM_NODES, 1), torch.int64)
    b = DistTensor((NUM_NODES, 1), torch.int64)
    assert a.name != b.name
    a[[1]] = torch.tensor([[5]])
    assert b[[1]].item() == 0
    with pytest.raises(ValueError, match="persistent"):
        DistTensor((NUM_NODES, 1), torch.int64, persistent=True)


def test_policy_inference(dist):
    num_edges = dist.graph.num_edges()
    assert DistTensor((num_edges,), torch.float32).part_policy.policy_str == "edge:_E"
    assert DistTensor((NUM_NODES, 2), torch.float32).part_policy.policy_str == "node:_N"
    with pytest.raises(ValueError, match="matches neither"):
        DistTensor((NUM_NODES + 1, 2), torch.float32)
    with pytest.raises(ValueError, match="part_policy"):
        DistTensor((NUM_NODES, 2), torch.float32, part_policy="edge")
    explicit = DistTensor((NUM_NODES,), torch.float32, part_policy=dist.graph.get_node_partition_policy())
    assert len(explicit) == NUM_NODES


@pytest.mark.parametrize("mode", ["remote"])
def test_exit_client_deletes_owned_tensors_and_keeps_persistent_ones(graph_files, cluster, mode):
    config = cluster_config(cluster, graph_files[0], "off")
    api.exit_client()
    api.initialize(config)
    temporary, kept = unique_name("tmp"), unique_name("kept")
    DistTensor((NUM_NODES, 2), torch.float32, name=temporary)
    holder = DistTensor((NUM_NODES, 2), torch.float32, name=kept, persistent=True)
    holder[[3]] = torch.tensor([[1.0, 2.0]])
    api.exit_client()
    ctx = api.initialize(config)
    try:
        assert ctx.tensor_scheme(temporary, refresh=True) is None
        survivor = DistTensor.attach(kept)
        assert survivor.persistent and survivor[[3]].tolist() == [[1.0, 2.0]]
        assert survivor.delete()
        assert ctx.tensor_scheme(kept, refresh=True) is None
    finally:
        api.exit_client()


# ----- bad input -----------------------------------------------------------------------------------


def test_bad_input_gives_clear_errors(dist):
    tensor = DistTensor((NUM_NODES, 2), torch.float32, name=unique_name())
    with pytest.raises(IndexError, match="600"):
        tensor[[0, 600]]
    with pytest.raises(IndexError, match="-3"):
        tensor[torch.tensor([-3])]
    with pytest.raises(TypeError, match="float"):
        tensor[torch.tensor([1.0, 2.0])]
    with pytest.raises(ValueError, match=r"shape \(2, 3\)"):
        tensor[[1, 2]] = torch.zeros((2, 3))
    with pytest.raises(TypeError, match="float64"):
        tensor[[1, 2]] = torch.zeros((2, 2), dtype=torch.float64)
    with pytest.raises(TypeError, match="list"):
        tensor[[1]] = [[1.0, 2.0]]
    with pytest.raises(ValueError, match="'multiply'"):
        tensor.write([1], torch.zeros((1, 2)), op="multiply")
    with pytest.raises(PermissionError, match="feat"):
        dist.graph.ndata["feat"][[1]] = torch.zeros((1, 8))
    with pytest.raises(KeyError, match="no_such_tensor"):
        DistTensor.attach("no_such_tensor")
    with pytest.raises(KeyError, match="no_such_tensor"):
        dist.graph.ndata["no_such_tensor"]
    with pytest.raises(TypeError, match="complex"):
        DistTensor((NUM_NODES, 2), torch.complex64)
    with pytest.raises(ValueError, match="name"):
        DistTensor((NUM_NODES, 2), torch.float32, name="")
    with pytest.raises(ValueError, match="init_func returned shape"):
        DistTensor((NUM_NODES, 2), torch.float32, name=unique_name(), init_func=lambda s, d: torch.zeros(3))
    # still serving afterwards
    tensor[[1]] = torch.ones((1, 2))
    assert tensor[[1]].sum().item() == 2.0


# ----- co-located reads ----------------------------------------------------------------------------


def test_colocated_reads_skip_the_server_and_equal_rpc_reads(graph_files, cluster):
    config_path, ref = graph_files
    api.exit_client()
    rpc_ctx = api.initialize(cluster_config(cluster, config_path, "off"))
    assert rpc_ctx.local_part_id is None
    ids = random_ids(np.random.default_rng(2), NUM_NODES)
    rpc_rows = DistGraph(GRAPH_NAME).ndata["feat"][ids]
    api.exit_client()
    ctx = api.initialize(cluster_config(cluster, config_path, "on"))
    try:
        assert ctx.local_part_id == 0 and ctx.local_reader(0) is not None and ctx.local_reader(1) is None
        feat = DistGraph(GRAPH_NAME).ndata["feat"]
        assert torch.equal(feat[ids], rpc_rows)
        np.testing.assert_array_equal(rpc_rows.numpy(), ref["feat"][ids])
        part0_ids = ids[ids < ctx.book.node_bounds[1]]
        before = [ctx.partition(p).stats().counters.get("pull_rows", 0) for p in range(2)]
        feat[part0_ids]
        feat[ids]
        after = [ctx.partition(p).stats().counters.get("pull_rows", 0) for p in range(2)]
        assert after[0] == before[0], "partition 0's read-only rows were read from its files, not its server"
        assert after[1] - before[1] == int((ids >= ctx.book.node_bounds[1]).sum())
        # writable tensors always go through the server, even for the co-located partition
        runtime = DistTensor((NUM_NODES, 1), torch.int64, name=unique_name())
        runtime[[0, 599]] = torch.tensor([[4], [6]])
        assert runtime[[0, 599]].tolist() == [[4], [6]]
        assert ctx.partition(0).stats().counters.get("pull_rows", 0) == after[0] + 1
    finally:
        api.exit_client()


# ----- two client processes --------------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np, torch
    from graphstore.client import api
    from graphstore.client.dist_graph import DistGraph
    from graphstore.client.dist_tensor import DistTensor

    config, name, num_nodes = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    rank = int(os.environ["RANK"])
    api.initialize(config)
    g = DistGraph(config["graph_name"])
    t = DistTensor((num_nodes, 4), torch.float32, name=name, persistent=True)
    mine = np.arange(rank, num_nodes, 2)
    for chunk in np.array_split(mine, 5):   # several writes, interleaving with the other process
        t[chunk] = torch.from_numpy(chunk[:, None] * 10.0 + np.arange(4) + rank * 0.5).float()
    g.barrier()
    theirs = np.arange(1 - rank, num_nodes, 2)
    expected = theirs[:, None] * 10.0 + np.arange(4) + (1 - rank) * 0.5
    got = t[theirs].numpy()
    if not np.array_equal(got, expected):
        print("mismatch", np.argwhere(got != expected)[:5], file=sys.stderr)
        sys.exit(3)
    g.barrier()
    api.exit_client()
    """
)


def test_two_client_processes_write_disjoint_rows_and_read_each_other(graph_files, cluster, tmp_path):
    config = cluster_config(cluster, graph_files[0], "auto")
    name = unique_name("shared")
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    env_base = trainer_group_env()
    procs = []
    try:
        for rank in range(2):
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(script), json.dumps(config), name, str(NUM_NODES)],
                    env={**env_base, "RANK": str(rank)},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        outputs = [proc.communicate(timeout=120) for proc in procs]
        for rank, (proc, (_, err)) in enumerate(zip(procs, outputs, strict=True)):
            assert proc.returncode == 0, f"writer {rank} exited {proc.returncode}: {err[-2000:]}"
    finally:
        end_processes(procs)
    with connected(config):
        rows = DistTensor.attach(name)[0:NUM_NODES].numpy()
        ids = np.arange(NUM_NODES)
        np.testing.assert_array_equal(rows, ids[:, None] * 10.0 + np.arange(4) + (ids % 2)[:, None] * 0.5)
        DistTensor.attach(name).delete()
