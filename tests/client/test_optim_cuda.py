"""The sparse optimizers' CUDA path: a 1-rank NCCL group with the gradients on the GPU gives the same
embeddings as the same steps under a 1-rank gloo group on the CPU (and as the dense reference).

Skipped cleanly where no CUDA device (or no NCCL) is present.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributed as dist

from tests.client.optim_helpers import (
    KINDS,
    make_optimizer,
    record_and_backward,
    reference_run,
    run_trainers,
    step_workload,
    stop_forkserver,
)
from tests.utils.graphs import make_partitioned_graph

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or not dist.is_nccl_available(), reason="needs a CUDA device and NCCL"
    ),
]

DIM = 16
SEED = 3
STEPS = range(6)


@pytest.fixture(scope="module", autouse=True)
def _end_forkserver():
    yield
    stop_forkserver()


def _worker(rank, world_size, part_config, use_cuda):
    from graphstore.client.api import exit_client
    from graphstore.client.dist_embedding import DistEmbedding
    from graphstore.client.dist_graph import DistGraph

    if use_cuda:
        torch.cuda.set_device(0)
    device = torch.device("cuda", 0) if use_cuda else None
    g = DistGraph("testgraph", part_config=part_config)  # standalone: partitions in-process
    try:
        n = g.num_nodes()
        init = np.random.default_rng([SEED, 123]).standard_normal((n, DIM)).astype(np.float32)
        out = {"backend": dist.get_backend()}
        for kind in KINDS:
            emb = DistEmbedding(n, DIM, name=f"cuda_{kind}")
            emb.weight[torch.arange(n)] = torch.from_numpy(init)
            opt = make_optimizer(kind, [emb])
            for step in STEPS:
                for ids, grads in step_workload(SEED, step, n, DIM):
                    record_and_backward(emb, ids, grads, device=device)
                if use_cuda:
                    assert all(rows.grad.is_cuda for _, rows in emb.trace)
                opt.step()
            out[kind] = emb.weight[torch.arange(n)].numpy()
        return out
    finally:
        exit_client()


def test_nccl_on_gpu_matches_gloo_on_cpu(tmp_path):
    config, _ = make_partitioned_graph(tmp_path / "g", num_nodes=300, num_parts=2)
    (gpu,) = run_trainers(_worker, 1, (config, True), str(tmp_path), backend="nccl", timeout_s=180)
    (cpu,) = run_trainers(_worker, 1, (config, False), str(tmp_path), backend="gloo", timeout_s=180)
    assert gpu["backend"] == "nccl" and cpu["backend"] == "gloo"
    init = np.random.default_rng([SEED, 123]).standard_normal((300, DIM)).astype(np.float32)
    refs = reference_run(init, STEPS, SEED, DIM)
    for kind in KINDS:
        np.testing.assert_allclose(gpu[kind], cpu[kind], rtol=1e-5, atol=1e-5, err_msg=kind)
        np.testing.assert_allclose(cpu[kind], refs[kind].weight.numpy(), rtol=1e-5, atol=1e-5, err_msg=kind)
