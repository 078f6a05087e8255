"""Tests of embedding + optimizer-state checkpoints (graphstore.client.checkpoint).

The main test saves with 2 partitions and 4 trainers, restores into a fresh cluster of the same graph
partitioned 4 ways with 2 trainers, continues, and compares with one uninterrupted dense run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist

from graphstore.client import checkpoint
from graphstore.client.api import exit_client
from graphstore.client.dist_embedding import DistEmbedding
from graphstore.client.dist_graph import DistGraph
from graphstore.client.optim import SparseAdagrad, SparseAdam
from graphstore.launcher.local_servers import start_servers
from tests.client.optim_helpers import (
    KINDS,
    cluster_config,
    initial_rows,
    make_optimizer,
    make_reference,
    read_checkpoint,
    record_and_backward,
    reference_run,
    run_steps,
    run_trainers,
    step_workload,
    train_embeddings,
)
from tests.utils.graphs import make_partitioned_graph

DIM = 8
NUM_NODES = 300
SEED = 29
FIRST_STEPS = range(0, 5)
LATER_STEPS = range(5, 9)


def _rows(emb):
    return emb.weight[torch.arange(emb.num_embeddings)].numpy()


def _new_of_orig(orig_nid):
    new = np.empty(len(orig_nid), dtype=np.int64)
    new[orig_nid] = np.arange(len(orig_nid))
    return new


def _phase_one(rank, world_size, cluster, orig_nid, ckpt):
    from graphstore.client.api import exit_client, initialize

    initialize(cluster)
    try:
        names = {kind: f"ck_{kind}" for kind in KINDS}
        init = initial_rows(len(orig_nid), DIM)
        embs, opts = train_embeddings(
            rank, world_size, names=names, init=init, orig_nid=orig_nid, steps=FIRST_STEPS, seed=SEED, dim=DIM
        )
        infos = [checkpoint.save(ckpt, [embs[kind]], opts[kind]) for kind in KINDS]
        dist.barrier()
        return [(info.names, info.rows) for info in infos]
    finally:
        exit_client()


def _phase_two(rank, world_size, cluster, orig_nid, ckpt):
    from graphstore.client.api import exit_client, initialize

    initialize(cluster)
    try:
        names = {kind: f"ck_{kind}" for kind in KINDS}
        zeros = np.zeros((len(orig_nid), DIM), np.float32)  # overwritten by the restore
        embs, opts = train_embeddings(
            rank, world_size, names=names, init=zeros, orig_nid=orig_nid, steps=range(0), seed=SEED, dim=DIM
        )
        for kind in KINDS:
            # Gradients recorded before a load are dropped by it.
            record_and_backward(embs[kind], np.array([0, 1]), np.ones((2, DIM), np.float32))
            info = checkpoint.load(ckpt, [embs[kind]], opts[kind])
            assert embs[kind].trace == [] and info.names == (names[kind],)
        run_steps(rank, world_size, embs, opts, _new_of_orig(orig_nid), LATER_STEPS, SEED, DIM)
        rows = {kind: _rows(emb) for kind, emb in embs.items()}
        final = ckpt + "-final"
        for kind in KINDS:
            checkpoint.save(final, [embs[kind]], opts[kind])
        dist.barrier()
        return rows
    finally:
        exit_client()


def test_save_2_parts_4_trainers_restore_4_parts_2_trainers_continues_exactly(tmp_path):
    config_a, graph_a = make_partitioned_graph(tmp_path / "a", num_nodes=NUM_NODES, num_parts=2, seed=3)
    config_b, graph_b = make_partitioned_graph(tmp_path / "b", num_nodes=NUM_NODES, num_parts=4, seed=3)
    np.testing.assert_array_equal(graph_a["src"], graph_b["src"])  # one graph, two partitionings
    assert not np.array_equal(graph_a["orig_nid"], graph_b["orig_nid"])
    root = tmp_path / "root"
    with_root = ("--checkpoint-root", str(root))
    ckpt = "ckpt"  # a name under the servers' checkpoint root

    with start_servers(config_a, 2, with_root, log_dir=tmp_path / "logs-a") as group:
        saved = run_trainers(
            _phase_one,
            4,
            (cluster_config(config_a, group.addresses), graph_a["orig_nid"], ckpt),
            str(tmp_path),
        )
    assert saved[0] == saved[3]  # every rank got rank 0's result
    assert [info[1] for info in saved[0]] == [NUM_NODES] * 3
    # A fresh cluster (every server new) of the graph partitioned another way.
    with start_servers(config_b, 4, with_root, log_dir=tmp_path / "logs-b") as group:
        results = run_trainers(
            _phase_two,
            2,
            (cluster_config(config_b, group.addresses), graph_b["orig_nid"], ckpt),
            str(tmp_path),
        )

    refs = reference_run(initial_rows(NUM_NODES, DIM), range(0, LATER_STEPS.stop), SEED, DIM)
    for kind, ref in refs.items():
        want = ref.weight.numpy()[graph_b["orig_nid"]]
        for rows in results:
            np.testing.assert_allclose(rows[kind], want, rtol=1e-5, atol=1e-5, err_msg=kind)
        _, state_kind, state = read_checkpoint(str(root / "ckpt-final"), f"ck_{kind}", graph_b["orig_nid"])
        assert state_kind == kind
        for key, value in ref.state_numpy().items():
            np.testing.assert_allclose(
                state[key], value[graph_b["orig_nid"]], rtol=1e-5, atol=1e-5, err_msg=key
            )


# ----- standalone: round trip and bad input ---------------------------------------------------


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt-graphs")
    config, graph = make_partitioned_graph(root, num_nodes=NUM_NODES, num_parts=2)
    other, _ = make_partitioned_graph(root, num_nodes=NUM_NODES, num_parts=2, graph_name="othergraph")
    return config, graph, other


def _name(tmp_path, leaf: str) -> str:
    """A checkpoint name of this test alone (standalone checkpoints share the partition's root)."""
    return f"{tmp_path.name}/{leaf}"


@pytest.fixture
def standalone(graphs):
    exit_client()
    g = DistGraph("testgraph", part_config=graphs[0])
    yield g
    exit_client()


def _trained(kind, name, steps):
    init = initial_rows(NUM_NODES, DIM, seed=5)
    emb = DistEmbedding(NUM_NODES, DIM, name=name)
    emb.weight[torch.arange(NUM_NODES)] = torch.from_numpy(init)
    opt = make_optimizer(kind, [emb])
    ref = make_reference(kind, init)
    for step in steps:
        calls = step_workload(SEED, step, NUM_NODES, DIM)
        for ids, grads in calls:
            record_and_backward(emb, ids, grads)
        opt.step()
        ref.step(calls)
    return emb, opt, ref


@pytest.mark.parametrize("kind", KINDS)
def test_load_rolls_back_rows_and_state_in_the_same_cluster(standalone, kind, tmp_path):
    emb, opt, ref = _trained(kind, f"rt_{kind}", range(3))
    info = checkpoint.save(_name(tmp_path, "ck"), emb, opt)
    assert info.names == (emb.name,) and info.rows == NUM_NODES and info.files
    for step in range(3, 6):  # wander off ...
        for ids, grads in step_workload(SEED + 1, step, NUM_NODES, DIM):
            record_and_backward(emb, ids, grads)
        opt.step()
    checkpoint.load(_name(tmp_path, "ck"), [emb], opt)  # ... and come back
    np.testing.assert_allclose(_rows(emb), ref.weight.numpy(), rtol=1e-5, atol=1e-5)
    for step in range(3, 6):
        calls = step_workload(SEED, step, NUM_NODES, DIM)
        for ids, grads in calls:
            record_and_backward(emb, ids, grads)
        opt.step()
        ref.step(calls)
    np.testing.assert_allclose(_rows(emb), ref.weight.numpy(), rtol=1e-5, atol=1e-5)


def test_missing_folder_raises_and_changes_nothing(standalone, tmp_path):
    emb, opt, _ = _trained("adagrad", "missing", range(2))
    before = _rows(emb)
    with pytest.raises(FileNotFoundError, match="nope"):
        checkpoint.load(_name(tmp_path, "nope"), [emb], opt)
    with pytest.raises(FileNotFoundError):
        checkpoint.load(_name(tmp_path, "nope"), [emb])
    np.testing.assert_array_equal(_rows(emb), before)
    # A folder without this embedding in it.
    other = DistEmbedding(NUM_NODES, DIM, name="other_emb")
    checkpoint.save(_name(tmp_path, "partial"), [other])
    with pytest.raises(FileNotFoundError, match="missing"):
        checkpoint.load(_name(tmp_path, "partial"), [emb])
    np.testing.assert_array_equal(_rows(emb), before)


def test_checkpoint_of_another_graph_is_refused(graphs, tmp_path):
    config, _, other_config = graphs
    exit_client()
    try:
        DistGraph("othergraph", part_config=other_config)
        foreign, foreign_opt, _ = _trained("adagrad", "shared_name", range(2))
        checkpoint.save(_name(tmp_path, "foreign"), [foreign], foreign_opt)
        exit_client()
        # Each graph's standalone checkpoints live beside its own partition config: bring this one over.
        shutil.copytree(
            Path(other_config).parent / "checkpoints" / _name(tmp_path, "foreign"),
            Path(config).parent / "checkpoints" / _name(tmp_path, "foreign"),
        )
        DistGraph("testgraph", part_config=config)
        emb, opt, _ = _trained("adagrad", "shared_name", range(1))
        before = _rows(emb)
        with pytest.raises(ValueError, match="othergraph"):
            # Refused on the trainer (the folder is readable here).
            checkpoint.load(_name(tmp_path, "foreign"), [emb], opt)
        with pytest.raises(ValueError, match="othergraph"):
            checkpoint.load(_name(tmp_path, "foreign"), [emb])  # refused by the servers
        np.testing.assert_array_equal(_rows(emb), before)
    finally:
        exit_client()


def test_state_of_another_optimizer_kind_is_refused(standalone, tmp_path):
    emb, opt, _ = _trained("adagrad", "kinds", range(2))
    checkpoint.save(_name(tmp_path, "ck"), [emb], opt)
    before = _rows(emb)
    with pytest.raises(ValueError, match="adagrad"):
        checkpoint.load(_name(tmp_path, "ck"), [emb], SparseAdam([emb], lr=0.1))
    with pytest.raises(ValueError, match="adagrad"):
        checkpoint.load(_name(tmp_path, "ck"), [emb], SparseAdagrad([emb], lr=0.1, rowwise=True))
    np.testing.assert_array_equal(_rows(emb), before)


def test_bad_arguments(standalone, graphs, tmp_path):
    emb, opt, _ = _trained("adagrad", "args", range(1))
    with pytest.raises(TypeError, match="DistEmbedding"):
        checkpoint.save(_name(tmp_path, "x"), [torch.zeros(3)])
    with pytest.raises(TypeError, match="optimizer"):
        checkpoint.save(
            _name(tmp_path, "x"), [emb], torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        )
    with pytest.raises(ValueError, match="empty"):
        checkpoint.save(_name(tmp_path, "x"), [])
    with pytest.raises(TypeError, match="path"):
        checkpoint.save(3, [emb])
    with pytest.raises(ValueError, match="path"):
        checkpoint.save("", [emb])
    with pytest.raises(ValueError, match="absolute"):
        checkpoint.save(tmp_path / "x", [emb])
    with pytest.raises(ValueError, match="'..'"):
        checkpoint.save("../x", [emb])
    # Standalone checkpoints live under checkpoints/ beside the partition config, as a server's do.
    assert not (Path(graphs[0]).parent / "checkpoints" / _name(tmp_path, "x")).exists()
    # The optimizer's embeddings are saved with the ones named.
    info = checkpoint.save(_name(tmp_path, "y"), [], opt)
    assert info.names == ("args",)


def test_optimizer_save_and_load_methods(standalone, tmp_path):
    emb, opt, ref = _trained("rowwise_adagrad", "methods", range(2))
    info = opt.save(_name(tmp_path, "m"))
    assert info.names == ("methods",)
    record_and_backward(emb, np.arange(10), np.ones((10, DIM), np.float32))
    opt.step()
    opt.load(_name(tmp_path, "m"))
    np.testing.assert_allclose(_rows(emb), ref.weight.numpy(), rtol=1e-5, atol=1e-5)
