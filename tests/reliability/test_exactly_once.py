"""Exactly-once writes for real: a TCP proxy between the client and a server process loses the answer of
a write after the server applied it; the client retries with the same request ID, the server answers
with its first answer, and the caller sees success with the write applied once (Push add, PushGrad,
Init with its init function, Delete, Checkpoint); an optimizer step whose answer from one server is lost
completes, and one that cannot complete names the server and is completed by ``retry()``."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import torch

from graphstore.client.transport import RemotePartition
from graphstore.client.transport.write_batch import WriteBatch
from graphstore.errors import IncompleteWriteError
from graphstore.rpc import RpcPolicy
from graphstore.types import InitSpec, OptimizerConfig
from tests.reliability.helpers import cluster_dict, free_ports, start_server, stop_all, wait_started
from tests.utils.fault_proxy import FaultProxy

POLICY = RpcPolicy(deadline_s=10, max_retries=3, backoff_initial_s=0.05)
ADAGRAD = OptimizerConfig("adagrad", lr=0.1)
ONE_STEP = 1.0 - 0.1  # a row of ones after one Adagrad step with gradient 1: 1 - lr * 1 / sqrt(1)


@pytest.fixture(scope="module")
def server_pair(graph, tmp_path_factory):
    """Two server processes shared by this module's tests (each test uses its own tensor names)."""
    part_config, _, _ = graph
    log_dir = tmp_path_factory.mktemp("exactly-once")
    started = []
    try:
        for k, port in enumerate(free_ports(2)):
            started.append(start_server(part_config, k, port, log_dir))
        for server in started:
            wait_started(server)
        yield started
    finally:
        stop_all(started)


@pytest.fixture
def proxied(server_pair):
    """A :class:`FaultProxy` in front of each server; yields the proxies."""
    proxies = [FaultProxy(server.address) for server in server_pair]
    try:
        yield proxies
    finally:
        for proxy in proxies:
            proxy.close()


@pytest.fixture
def remote(proxied):
    """A RemotePartition of partition 0 through its proxy, and the proxy."""
    client = RemotePartition(proxied[0].address, 0, POLICY)
    client.wait_ready(30)
    yield client, proxied[0]
    client.close()


def _owned(client) -> np.ndarray:
    meta = client.metadata()
    return np.arange(meta.node_bounds[client.part_id], meta.node_bounds[client.part_id + 1])


def _replays(client) -> int:
    return client.stats().counters["replayed_writes"]


def test_a_push_add_whose_answer_is_lost_is_applied_once(remote):
    client, proxy = remote
    ids = _owned(client)[:5]
    client.init_tensor("adds", (600, 2), "float32", "node")
    replays = _replays(client)
    proxy.drop_answers(1)
    client.push("adds", ids, np.ones((5, 2), np.float32), op="add")
    assert proxy.dropped == 1
    np.testing.assert_array_equal(client.pull("adds", ids), np.ones((5, 2), np.float32))
    assert _replays(client) == replays + 1


def test_a_push_grad_whose_answer_is_lost_is_one_step(remote):
    client, proxy = remote
    ids = _owned(client)[:3]
    client.init_tensor("emb", (600, 2), "float32", "node", init=InitSpec("constant", 1.0))
    proxy.drop_answers(1)
    client.push_grad("emb", ids, np.ones((3, 2), np.float32), ADAGRAD)
    assert proxy.dropped == 1
    np.testing.assert_allclose(client.pull("emb", ids), ONE_STEP, rtol=1e-6)


def test_init_delete_and_checkpoint_whose_answers_are_lost_answer_as_the_first_time(
    remote, proxied, tmp_path
):
    client, proxy = remote
    other = RemotePartition(proxied[1].address, 1, POLICY)  # partition 1's part of the checkpoint
    replays = _replays(client)
    proxy.drop_answers(1)
    created, scheme = client.init_tensor("made", (600, 1), "float32", "node", init=InitSpec("constant", 2.0))
    assert created and scheme.name == "made"  # not "attached": the retry gets the first answer
    assert proxy.dropped == 1
    other.init_tensor("made", (600, 1), "float32", "node", init=InitSpec("constant", 2.0))

    folder = f"ck-{uuid.uuid4().hex[:8]}"  # a name under the servers' checkpoint root
    proxy.drop_answers(1)
    files, rows = client.checkpoint(folder, ["made"], save_id="s1")
    assert proxy.dropped == 2 and rows == len(_owned(client)) and files
    other.checkpoint(folder, ["made"], save_id="s1")
    for each in (client, other):
        each.commit_checkpoint(folder, "s1", ["made"])

    proxy.drop_answers(1)
    assert client.delete_tensor("made") is True  # a second delete would have answered False
    assert proxy.dropped == 3
    assert "made" not in {s.name for s in client.list_tensors()}
    assert _replays(client) == replays + 3
    # The checkpoint written once is whole.
    assert client.restore(folder, ["made"]) == (["made"], rows)
    np.testing.assert_array_equal(client.pull("made", _owned(client)[:2]), np.full((2, 1), 2.0, np.float32))
    for each in (client, other):
        each.delete_tensor("made")
    other.close()


def test_a_dist_tensor_whose_init_answer_is_lost_runs_its_init_function_once(graph, proxied):
    from graphstore.client.api import exit_client, initialize
    from graphstore.client.dist_tensor import DistTensor

    part_config, _, _ = graph
    config = cluster_dict(part_config, [int(p.address.rsplit(":", 1)[1]) for p in proxied], local_read="off")
    ctx = initialize(config)
    calls = []

    def init_func(shape, dtype):
        calls.append(shape)
        return torch.full(shape, 3.0, dtype=dtype)

    try:
        for proxy in proxied:
            proxy.drop_answers(1)  # each partition's first answer: its Init
        tensor = DistTensor((600, 2), torch.float32, name="filled", init_func=init_func, persistent=True)
        assert [p.dropped for p in proxied] == [1, 1]
        assert len(calls) == ctx.num_parts  # once per partition, by the one creator
        np.testing.assert_array_equal(tensor[torch.arange(600)].numpy(), np.full((600, 2), 3.0, np.float32))
        tensor.delete()
    finally:
        exit_client()


def test_an_optimizer_step_whose_answer_from_one_server_is_lost_is_applied_once_everywhere(graph, proxied):
    from graphstore.client.api import exit_client, initialize
    from graphstore.client.dist_embedding import DistEmbedding
    from graphstore.client.optim import SparseAdagrad

    part_config, _, _ = graph
    config = cluster_dict(part_config, [int(p.address.rsplit(":", 1)[1]) for p in proxied], local_read="off")
    ctx = initialize(config)
    try:
        emb = DistEmbedding(600, 2, name="step_emb", init_func=lambda shape, dtype: torch.ones(shape))
        opt = SparseAdagrad([emb], lr=0.1)
        ids = torch.tensor([int(ctx.book.node_bounds[0]), int(ctx.book.node_bounds[1])])  # one per server
        emb(ids).sum().backward()
        proxied[1].drop_answers(1, skip=1)  # server 1: the step's existence check passes, its push is lost
        opt.step()
        assert proxied[1].dropped == 1
        np.testing.assert_allclose(emb.weight[ids].numpy(), ONE_STEP, rtol=1e-6)
    finally:
        exit_client()


def test_a_write_batch_a_server_does_not_answer_names_it_and_retry_completes_it(remote, proxied):
    client0, _ = remote
    client1 = RemotePartition(
        proxied[1].address, 1, RpcPolicy(deadline_s=5, max_retries=1, backoff_initial_s=0.05)
    )
    try:
        rows = [_owned(client0)[:2], _owned(client1)[:2]]
        for client in (client0, client1):
            client.init_tensor("w", (600, 2), "float32", "node", init=InitSpec("constant", 1.0))
        batch = WriteBatch("step", lambda calls: [call() for call in calls])
        for client, ids in zip((client0, client1), rows, strict=True):
            batch.add(
                client.address, client.prepare_push_grad("w", ids, np.ones((2, 2), np.float32), ADAGRAD)
            )
        proxied[1].drop_answers(100)  # server 1 applies, its answers never arrive
        with pytest.raises(IncompleteWriteError) as caught:
            batch.run()
        assert caught.value.failed.keys() == {client1.address}
        assert caught.value.applied == [client0.address]
        assert client1.address in str(caught.value) and client0.address in str(caught.value)
        proxied[1].disarm()
        caught.value.retry()  # the same request IDs: server 1 answers with its first answer
        for client, ids in zip((client0, client1), rows, strict=True):
            np.testing.assert_allclose(client.pull("w", ids), ONE_STEP, rtol=1e-6)
    finally:
        client1.close()


def test_a_replay_older_than_the_window_is_refused_naming_it_and_not_applied(remote):
    from graphstore.errors import StaleRequestError
    from graphstore.server.durability.replay_window import DEFAULT_PER_CLIENT

    client, _ = remote
    ids = _owned(client)[:1]
    client.init_tensor("old", (600, 2), "float32", "node", init=InitSpec("constant", 1.0))
    step = client.prepare_push_grad("old", ids, np.ones((1, 2), np.float32), ADAGRAD)
    step()
    for _ in range(DEFAULT_PER_CLIENT + 1):  # the window forgets the step's ID
        client.delete_tensor("never-there")
    with pytest.raises(
        StaleRequestError, match=r"request \d+ of client '.*' is older than this server's replay"
    ):
        step()
    np.testing.assert_allclose(client.pull("old", ids), ONE_STEP, rtol=1e-6)  # applied once, not twice
