"""DistEmbedding: lookups, the trace the sparse optimizer reads, autocast, and the trace warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from graphstore.client.dist_embedding import DistEmbedding
from graphstore.client.dist_tensor import DistTensor
from graphstore.types import InitSpec
from tests.client import test_dist_tensor as shared
from tests.client.test_dist_tensor import NUM_NODES, unique_name

# The shared fixtures: a 2-partition graph, its 2 servers, and a client in each mode.
graph_files = shared.graph_files
cluster = shared.cluster
dist = shared.dist


def test_lookup_records_trace_and_gradients(dist):
    emb = DistEmbedding(NUM_NODES, 4, name=unique_name("emb"), init_func=lambda s, d: torch.ones(s, dtype=d))
    assert emb.num_embeddings == NUM_NODES and emb.embedding_dim == 4 and isinstance(emb.weight, DistTensor)
    assert emb.weight.name == emb.name and emb.part_policy.policy_str == "node:_N"
    ids = torch.tensor([3, 599, 3], dtype=torch.int32)
    rows = emb(ids)
    assert rows.requires_grad and rows.is_leaf and rows.dtype == torch.float32
    assert torch.equal(rows.detach(), torch.ones(3, 4))
    (rows * torch.arange(3.0)[:, None]).sum().backward()
    assert len(emb.trace) == 1
    traced_ids, traced_rows = emb.trace[0]
    assert traced_ids.dtype == torch.int64 and traced_ids.device.type == "cpu"
    assert traced_ids.tolist() == [3, 599, 3]
    assert traced_rows is rows and torch.equal(rows.grad, torch.arange(3.0)[:, None].expand(3, 4))
    emb.reset_trace()
    assert emb.trace == []


def test_lookup_reads_current_rows_and_no_trace_without_grad(dist):
    emb = DistEmbedding(NUM_NODES, 2, name=unique_name("emb"))
    emb.weight[[10, 11]] = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    with torch.no_grad():
        rows = emb(np.array([11, 10]))
    assert not rows.requires_grad and emb.trace == []
    assert rows.tolist() == [[3.0, 4.0], [1.0, 2.0]]
    with pytest.raises(IndexError, match=str(NUM_NODES)):
        emb([NUM_NODES])
    with pytest.raises(TypeError):
        emb(torch.tensor([1.5]))


def test_autocast_returns_low_precision_rows_with_float32_leaf(dist):
    emb = DistEmbedding(NUM_NODES, 3, name=unique_name("emb"), init_func=InitSpec("constant", 0.5))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = emb(torch.tensor([1, 2]))
        loss = (out * 2).sum()
    assert out.dtype == torch.bfloat16
    loss.backward()
    leaf = emb.trace[0][1]
    assert leaf.dtype == torch.float32 and leaf.grad.dtype == torch.float32
    assert torch.allclose(leaf.grad, torch.full((2, 3), 2.0))


def test_trace_warning_when_no_optimizer_step(dist):
    emb = DistEmbedding(NUM_NODES, 2, name=unique_name("emb"), trace_warn_calls=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(8):
            emb([1, 2])
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(messages) == 1 and "step()" in messages[0] and emb.name in messages[0]
    emb.reset_trace()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            emb([1])
    assert not [w for w in caught if issubclass(w.category, UserWarning)]


def test_embedding_attach_and_bad_arguments(dist):
    name = unique_name("emb")
    first = DistEmbedding(NUM_NODES, 2, name=name, init_func=InitSpec("constant", 3.0))
    second = DistEmbedding(NUM_NODES, 2, name=name)
    assert torch.equal(second([0, 1]).detach(), torch.full((2, 2), 3.0)), "attaching keeps the rows"
    with pytest.raises(ValueError, match=r"\(600, 2\).*\(600, 3\)"):
        DistEmbedding(NUM_NODES, 3, name=name)
    with pytest.raises(ValueError, match="embedding_dim"):
        DistEmbedding(NUM_NODES, 0)
    with pytest.raises(ValueError, match="matches neither"):
        DistEmbedding(NUM_NODES + 5, 2)
    del first, second
