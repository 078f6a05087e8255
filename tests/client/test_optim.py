"""Tests of the distributed sparse optimizers (graphstore.client.optim).

Pure functions (ownership, packing, de-duplication) are tested directly; the exchange runs in real
gloo process groups; the optimizers run against 2 real servers with 1, 2 and 4 trainer processes and
are compared with a dense single-process reference (tests/client/optim_helpers.py).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.distributed as dist

from graphstore.client.optim.dedup import mean_by_id, sum_duplicates
from graphstore.client.optim.exchange import exchange_rows, exchange_sizes, pack_rows, unpack_rows
from graphstore.client.optim.ownership import owner_of, trainer_assignment
from tests.client.optim_helpers import run_trainers

# ----- pure functions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "num_parts, world_size", [(1, 1), (2, 1), (2, 2), (2, 4), (2, 3), (4, 2), (3, 8), (5, 3)]
)
def test_trainer_assignment_covers_every_trainer_and_partition(num_parts, world_size):
    first, count = trainer_assignment(num_parts, world_size)
    assert first.shape == count.shape == (num_parts,)
    assert (count >= 1).all() and (first >= 0).all() and (first + count <= world_size).all()
    served = np.concatenate([np.arange(f, f + c) for f, c in zip(first, count, strict=True)])
    if world_size >= num_parts:
        # Every trainer owns rows of exactly one partition, in contiguous rank blocks.
        np.testing.assert_array_equal(np.sort(served), np.arange(world_size))
        np.testing.assert_array_equal(served, np.arange(world_size))
        assert count.max() - count.min() <= 1
    else:
        np.testing.assert_array_equal(first, np.arange(num_parts) % world_size)
        np.testing.assert_array_equal(count, 1)


def test_trainer_assignment_agrees_with_node_split_home_partitions():
    from graphstore.client.rank_split import rank_partitions

    for num_parts in (1, 2, 3, 4):
        for world_size in range(1, 9):
            first, count = trainer_assignment(num_parts, world_size)
            for rank in range(world_size):
                mine = [p for p in range(num_parts) if first[p] <= rank < first[p] + count[p]]
                assert mine == rank_partitions(rank, world_size, num_parts)


def test_trainer_assignment_rejects_bad_counts():
    with pytest.raises(ValueError, match="num_parts"):
        trainer_assignment(0, 2)
    with pytest.raises(ValueError, match="world_size"):
        trainer_assignment(2, 0)


def test_owner_of_splits_each_partition_among_its_trainers():
    bounds = np.array([0, 10, 30, 31], dtype=np.int64)
    first, count = trainer_assignment(3, 7)  # partition trainers: [0,1,2], [3,4], [5,6]
    ids = np.arange(31, dtype=np.int64)
    owners = owner_of(*(torch.from_numpy(a) for a in (ids, bounds, first, count))).numpy()
    part = np.searchsorted(bounds, ids, side="right") - 1
    for p in range(3):
        mine = owners[part == p]
        assert set(mine) <= set(range(first[p], first[p] + count[p]))
        np.testing.assert_array_equal(mine, first[p] + (ids[part == p] - bounds[p]) % count[p])
    assert owner_of(
        torch.zeros(0, dtype=torch.int64), *(torch.from_numpy(a) for a in (bounds, first, count))
    ).shape == (0,)


def test_pack_rows_round_trips_every_id_bit_pattern():
    ids = torch.tensor(
        [0, 1, 2**31 - 1, 2**31, 2**40 + 7, 2**62 + 12345, 0x7F800001, 0x7FC00000], dtype=torch.int64
    )
    grads = torch.randn(ids.shape[0], 5)
    counts = torch.arange(1, ids.shape[0] + 1, dtype=torch.float32)
    packed = pack_rows(ids, grads, counts)
    assert packed.dtype == torch.float32 and packed.shape == (ids.shape[0], 8)
    back_ids, back_grads, back_counts = unpack_rows(packed.clone())
    torch.testing.assert_close(back_ids, ids, rtol=0, atol=0)
    torch.testing.assert_close(back_grads, grads, rtol=0, atol=0)
    torch.testing.assert_close(back_counts, counts, rtol=0, atol=0)
    empty = pack_rows(torch.zeros(0, dtype=torch.int64), torch.zeros(0, 5), torch.zeros(0))
    assert [t.shape[0] for t in unpack_rows(empty)] == [0, 0, 0]


def test_mean_by_id_averages_duplicates_by_count():
    ids = torch.tensor([5, 3, 5, 9, 5, 3])
    grads = torch.tensor([[1.0], [2.0], [3.0], [4.0], [5.0], [6.0]])
    unique, mean = mean_by_id(ids, grads)
    assert unique.tolist() == [3, 5, 9]
    assert mean.flatten().tolist() == [4.0, 3.0, 4.0]
    # Partial sums with counts (what the trainers send) give the same mean as the raw rows.
    u, s, c = sum_duplicates(ids, grads)
    assert c.tolist() == [2.0, 3.0, 1.0]
    again_ids, again_mean = mean_by_id(
        torch.cat([u[:1], u]), torch.cat([s[:1] * 0, s]), torch.cat([c[:1] * 0 + 1, c])
    )
    assert again_ids.tolist() == [3, 5, 9]
    torch.testing.assert_close(again_mean.flatten(), torch.tensor([8.0 / 3.0, 3.0, 4.0]))


def test_sum_duplicates_without_duplicates_sorts_rows_with_ids():
    ids = torch.tensor([7, 2, 4])
    grads = torch.tensor([[7.0, 7.0], [2.0, 2.0], [4.0, 4.0]])
    u, s, c = sum_duplicates(ids, grads)
    assert u.tolist() == [2, 4, 7]
    assert s[:, 0].tolist() == [2.0, 4.0, 7.0]
    assert c.tolist() == [1.0, 1.0, 1.0]


# ----- the exchange over real gloo groups --------------------------------------------------------


def _exchange_worker(rank, world_size, seed):
    """Every trainer sends random rows (some trainers none) to their owners; returns what it received."""
    rng = np.random.default_rng([seed, rank])
    bounds = torch.tensor([0, 40, 100])
    first, count = (torch.from_numpy(a) for a in trainer_assignment(2, world_size))
    size = 0 if rank == 1 else int(rng.integers(1, 60))
    ids = torch.from_numpy(rng.integers(0, 100, size))
    grads = torch.from_numpy(rng.standard_normal((size, 3)).astype(np.float32))
    u, s, c = sum_duplicates(ids, grads)
    owners = owner_of(u, bounds, first, count)
    order = torch.argsort(owners, stable=True)
    send = torch.bincount(owners, minlength=world_size).reshape(world_size, 1)
    recv, status = exchange_sizes(send, 0)
    assert status.tolist() == [0] * world_size
    got = exchange_rows(pack_rows(u[order], s[order], c[order]), send[:, 0].tolist(), recv[:, 0].tolist())
    assert got.shape[0] == int(recv.sum())
    r_ids, r_sums, r_counts = unpack_rows(got)
    assert bool((owner_of(r_ids, bounds, first, count) == rank).all())
    final_ids, final_mean = mean_by_id(r_ids, r_sums, r_counts)
    return ids.numpy(), grads.numpy(), final_ids.numpy(), final_mean.numpy(), dist.get_backend()


@pytest.mark.parametrize("world_size", [1, 3])
def test_exchange_delivers_each_row_to_its_owner_averaged(world_size, tmp_path):
    results = run_trainers(_exchange_worker, world_size, (42,), str(tmp_path), timeout_s=90)
    assert all(r[4] == "gloo" for r in results)
    all_ids = np.concatenate([r[0] for r in results])
    all_grads = np.concatenate([r[1] for r in results])
    seen = np.concatenate([r[2] for r in results])
    # Every distinct id arrives at exactly one owner.
    np.testing.assert_array_equal(np.sort(seen), np.unique(all_ids))
    for _, _, ids, means, _ in results:
        for i, row in zip(ids, means, strict=True):
            np.testing.assert_allclose(row, all_grads[all_ids == i].mean(axis=0), rtol=1e-5, atol=1e-6)


# ----- standalone mode (in-process partitions): results, bad input, autocast --------------------

from graphstore.client.api import exit_client  # noqa: E402
from graphstore.client.dist_embedding import DistEmbedding  # noqa: E402
from graphstore.client.dist_graph import DistGraph  # noqa: E402
from graphstore.client.optim import SparseAdagrad, SparseAdam  # noqa: E402
from tests.client.optim_helpers import KINDS, DenseReference, record_and_backward, step_workload  # noqa: E402

DIM = 8


@pytest.fixture
def standalone(small_graph):
    exit_client()
    g = DistGraph("testgraph", part_config=small_graph[0])
    yield g
    exit_client()


def _make_optimizer(kind, embs, lr=0.1):
    if kind == "adam":
        return SparseAdam(embs, lr=lr, betas=(0.8, 0.95), eps=1e-6)
    return SparseAdagrad(embs, lr=lr, eps=1e-6, rowwise=kind == "rowwise_adagrad")


def _reference(kind, init, lr=0.1):
    return DenseReference(kind, init, lr, 1e-6, 0.8, 0.95)


def _new_embedding(g, name, seed=0):
    n = g.num_nodes()
    init = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    emb = DistEmbedding(n, DIM, name=name)
    emb.weight[torch.arange(n)] = torch.from_numpy(init)
    return emb, init


def _rows(emb):
    return emb.weight[torch.arange(emb.num_embeddings)].numpy()


@pytest.mark.parametrize("kind", KINDS)
def test_standalone_steps_match_dense_reference(standalone, kind):
    emb, init = _new_embedding(standalone, f"sa_{kind}")
    opt = _make_optimizer(kind, [emb])
    ref = _reference(kind, init)
    for step in range(6):
        calls = step_workload(5, step, emb.num_embeddings, DIM)
        for ids, grads in calls:
            record_and_backward(emb, ids, grads)
        opt.step()
        ref.step(calls)
        assert emb.trace == []
    np.testing.assert_allclose(_rows(emb), ref.weight.numpy(), rtol=1e-5, atol=1e-5)
    assert opt.timings.steps == 6 and opt.timings.rows_pushed > 0


@pytest.mark.parametrize("bad_lr", [0.0, -0.5, float("nan"), float("inf"), "0.1", True])
def test_bad_learning_rate_is_refused(standalone, bad_lr):
    emb, _ = _new_embedding(standalone, "bad_lr")
    with pytest.raises(ValueError, match="lr"):
        SparseAdagrad([emb], lr=bad_lr)
    with pytest.raises(ValueError, match="lr"):
        SparseAdam([emb], lr=bad_lr)
    opt = SparseAdagrad([emb], lr=0.1)
    with pytest.raises(ValueError, match="lr"):
        opt.lr = 0.0
    opt.lr = 0.2
    assert opt.lr == 0.2 and opt.config.kind == "adagrad"


def test_bad_params_and_hyperparameters_are_refused(standalone):
    emb, _ = _new_embedding(standalone, "bad_params")
    with pytest.raises(TypeError, match="DistEmbedding"):
        SparseAdagrad([torch.nn.Embedding(10, 4)], lr=0.1)
    with pytest.raises(TypeError, match="DistEmbedding"):
        SparseAdam([emb, emb.weight], lr=0.1)
    with pytest.raises(TypeError, match="list of DistEmbedding"):
        SparseAdagrad(torch.zeros(3), lr=0.1)
    with pytest.raises(ValueError, match="empty"):
        SparseAdagrad([], lr=0.1)
    with pytest.raises(ValueError, match="twice"):
        SparseAdagrad([emb, emb], lr=0.1)
    with pytest.raises(ValueError, match="betas"):
        SparseAdam([emb], lr=0.1, betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="betas"):
        SparseAdam([emb], lr=0.1, betas=(0.9,))
    with pytest.raises(ValueError, match="eps"):
        SparseAdagrad([emb], lr=0.1, eps=-1.0)
    half = DistEmbedding(emb.num_embeddings, DIM, name="half_emb", dtype=torch.float16)
    with pytest.raises(ValueError, match="float32"):
        SparseAdagrad([half], lr=0.1)
    # A single embedding (not in a list) is accepted, as torch optimizers accept a bare parameter.
    assert SparseAdagrad(emb, lr=0.1).params == [emb]


def test_step_with_nothing_recorded_raises_and_changes_nothing(standalone):
    emb, init = _new_embedding(standalone, "nothing")
    opt = SparseAdagrad([emb], lr=0.1)
    with pytest.raises(RuntimeError, match="nothing recorded"):
        opt.step()
    record_and_backward(emb, np.array([1, 2]), np.ones((2, DIM), np.float32))
    opt.zero_grad()
    assert emb.trace == []
    with pytest.raises(RuntimeError, match="nothing recorded"):
        opt.step()
    emb(torch.tensor([3, 4]))  # read but no backward
    with pytest.raises(RuntimeError, match="backward"):
        opt.step()
    with torch.no_grad():
        emb(torch.tensor([5]))  # not recorded under no_grad
    assert emb.trace == []
    np.testing.assert_array_equal(_rows(emb), init)


def test_embedding_deleted_on_servers_raises_and_nothing_is_applied(standalone):
    keep, keep_init = _new_embedding(standalone, "keep_me")
    gone, _ = _new_embedding(standalone, "delete_me", seed=1)
    opt = SparseAdam([keep, gone], lr=0.1)
    record_and_backward(keep, np.array([0, 1, 150, 299]), np.ones((4, DIM), np.float32))
    record_and_backward(gone, np.array([2, 3]), np.ones((2, DIM), np.float32))
    assert gone.weight.delete()
    with pytest.raises(KeyError, match="delete_me"):
        opt.step()
    np.testing.assert_array_equal(_rows(keep), keep_init)
    # The keep_me rows have no optimizer state yet: a fresh Adagrad on them is accepted (no kind clash).
    record_and_backward(keep, np.array([0]), np.ones((1, DIM), np.float32))
    SparseAdagrad([keep], lr=0.1).step()
    assert not np.array_equal(_rows(keep)[0], keep_init[0])


def test_another_optimizer_kind_on_the_same_state_is_refused(standalone):
    emb, _ = _new_embedding(standalone, "kind_clash")
    record_and_backward(emb, np.array([1]), np.ones((1, DIM), np.float32))
    SparseAdagrad([emb], lr=0.1).step()
    before = _rows(emb)
    record_and_backward(emb, np.array([1]), np.ones((1, DIM), np.float32))
    with pytest.raises(ValueError, match="adagrad"):
        SparseAdam([emb], lr=0.1).step()
    np.testing.assert_array_equal(_rows(emb), before)


@pytest.mark.parametrize("amp_dtype", [torch.bfloat16, torch.float16])
def test_autocast_reads_low_precision_and_updates_with_float32_grads(standalone, amp_dtype):
    emb, init = _new_embedding(standalone, f"amp_{str(amp_dtype)[6:]}")
    opt = SparseAdagrad([emb], lr=0.1, eps=1e-6)
    linear = torch.nn.Linear(DIM, 3)
    ids = torch.tensor([4, 9, 4, 200])
    with torch.autocast("cpu", dtype=amp_dtype):
        rows = emb(ids)
        assert rows.dtype == amp_dtype
        loss = linear(rows).float().pow(2).sum()
    loss.backward()
    ((_, leaf),) = emb.trace
    assert leaf.dtype == torch.float32 and leaf.grad.dtype == torch.float32
    grads = leaf.grad.numpy().copy()
    opt.step()
    ref = DenseReference("adagrad", init, 0.1, 1e-6)
    ref.step([(ids.numpy(), grads)])
    np.testing.assert_allclose(_rows(emb), ref.weight.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.array_equal(_rows(emb)[4], init[4])


# ----- 1, 2 and 4 trainer processes (gloo) against 2 real servers ------------------------------

from tests.client.optim_helpers import (  # noqa: E402
    cluster_config,
    initial_rows,
    read_checkpoint,
    reference_run,
    train_embeddings,
)

NUM_STEPS = 8
SEED = 17


def _distributed_worker(rank, world_size, cluster, prefix, orig_nid, ckpt_dir):
    from graphstore.client import checkpoint
    from graphstore.client.api import exit_client, initialize

    initialize(cluster)
    try:
        names = {kind: f"{prefix}_{kind}" for kind in KINDS}
        init = initial_rows(len(orig_nid), DIM)
        embs, opts = train_embeddings(
            rank,
            world_size,
            names=names,
            init=init,
            orig_nid=orig_nid,
            steps=range(NUM_STEPS),
            seed=SEED,
            dim=DIM,
        )
        # No barrier first: when step() returns, every trainer's part of the step has been applied.
        rows = {kind: _rows(emb) for kind, emb in embs.items()}
        for kind in KINDS:
            checkpoint.save(ckpt_dir, [embs[kind]], opts[kind])
        timings = {kind: opt.timings for kind, opt in opts.items()}
        dist.barrier()  # rank 0 owns the embeddings: keep them until every trainer is done
        return rows, timings
    finally:
        exit_client()


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_trainers_match_dense_reference(world_size, small_graph, two_servers, tmp_path):
    config, graph = small_graph
    cluster = cluster_config(config, two_servers.addresses)
    prefix = f"dist{world_size}"
    ckpt = f"{tmp_path.name}/ckpt"  # under the servers' default root, checkpoints/ beside the config
    results = run_trainers(
        _distributed_worker,
        world_size,
        (cluster, prefix, graph["orig_nid"], ckpt),
        str(tmp_path),
        timeout_s=150,
    )
    orig_nid = graph["orig_nid"]
    refs = reference_run(initial_rows(len(orig_nid), DIM), range(NUM_STEPS), SEED, DIM)
    for kind, ref in refs.items():
        want_rows = ref.weight.numpy()[orig_nid]  # new-ID order
        for rank_rows, _ in results:
            np.testing.assert_allclose(rank_rows[kind], want_rows, rtol=1e-5, atol=1e-5)
        rows, state_kind, state = read_checkpoint(
            os.path.join(os.path.dirname(config), "checkpoints", ckpt), f"{prefix}_{kind}", orig_nid
        )
        assert state_kind == kind
        np.testing.assert_allclose(rows, want_rows, rtol=1e-5, atol=1e-5)
        want_state = ref.state_numpy()
        assert set(state) == set(want_state)
        for key, value in want_state.items():
            np.testing.assert_allclose(state[key], value[orig_nid], rtol=1e-5, atol=1e-5, err_msg=key)
    # Every trainer exchanged (a process group exists, also with one rank) and the owners pushed all rows.
    pushed = sum(timings["adagrad"].rows_pushed for _, timings in results)
    touched = sum(
        np.unique(np.concatenate([ids for ids, _ in step_workload(SEED, s, len(orig_nid), DIM)])).size
        for s in range(NUM_STEPS)
    )
    assert pushed == touched


def _error_worker(rank, world_size, cluster, prefix):
    from graphstore.client.api import exit_client, initialize

    initialize(cluster)
    try:
        n = get_context_rows()
        emb = DistEmbedding(n, DIM, name=f"{prefix}_emb")
        dist.barrier()
        before = _rows(emb)
        opt = SparseAdagrad([emb], lr=0.1)
        outcome = {}
        # Rank 1 recorded nothing: it raises its own error, rank 0 learns of it; nothing is applied.
        if rank == 0:
            record_and_backward(emb, np.array([1, 2, 250]), np.ones((3, DIM), np.float32))
        try:
            opt.step()
        except RuntimeError as exc:
            outcome["nothing"] = str(exc)
        dist.barrier()
        outcome["unchanged"] = bool(np.array_equal(_rows(emb), before))
        # The group is still in step: a normal step works on every rank.
        record_and_backward(emb, np.array([rank, 100 + rank]), np.ones((2, DIM), np.float32))
        opt.step()
        outcome["changed"] = _rows(emb)[[0, 1, 100, 101]].tolist() != before[[0, 1, 100, 101]].tolist()
        # The embedding disappears from the servers: every rank gets the KeyError, nothing applied.
        other = DistEmbedding(n, DIM, name=f"{prefix}_other")
        dist.barrier()
        opt2 = SparseAdagrad([other, emb], lr=0.1)
        record_and_backward(emb, np.array([5, 6]), np.ones((2, DIM), np.float32))
        record_and_backward(other, np.array([5, 6]), np.ones((2, DIM), np.float32))
        dist.barrier()
        if rank == 0:
            other.weight.delete()
        dist.barrier()
        snapshot = _rows(emb)
        try:
            opt2.step()
        except KeyError as exc:
            outcome["deleted"] = str(exc)
        outcome["unchanged_after_delete"] = bool(np.array_equal(_rows(emb), snapshot))
        dist.barrier()
        return outcome
    finally:
        exit_client()


def get_context_rows():
    from graphstore.client.context import get_context

    return get_context().num_rows("node")


def test_errors_are_raised_on_every_trainer_and_nothing_is_applied(small_graph, two_servers, tmp_path):
    cluster = cluster_config(small_graph[0], two_servers.addresses)
    results = run_trainers(_error_worker, 2, (cluster, "errs"), str(tmp_path), timeout_s=120)
    assert "nothing recorded" in results[1]["nothing"]
    assert "rank(s) [1]" in results[0]["nothing"]
    for outcome in results:
        assert outcome["unchanged"] and outcome["changed"] and outcome["unchanged_after_delete"]
        assert "errs_other" in outcome["deleted"]
