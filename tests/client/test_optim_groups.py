"""The sparse optimizers in groups named by device (``cpu:gloo``): the exchange runs on the group's CPU
backend whatever device the gradients are on, so CPU trainers and trainers that share one GPU (where
NCCL cannot run: it refuses two ranks on one GPU) both match the dense reference.

The CPU test runs everywhere; the shared-GPU one needs a CUDA device (``gpu`` marker).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributed as dist

from tests.client.optim_helpers import (
    KINDS,
    cluster_config,
    initial_rows,
    reference_run,
    run_trainers,
    train_embeddings,
)

DIM = 8
SEED = 41
STEPS = range(5)


def _group_worker(rank, world_size, cluster, names, orig_nid, device):
    from graphstore.client.api import exit_client, initialize
    from graphstore.client.device import bound_device, group_device

    initialize(cluster, device=device)
    try:
        embs, _ = train_embeddings(
            rank, world_size, names=names, init=initial_rows(len(orig_nid), DIM), orig_nid=orig_nid,
            steps=STEPS, seed=SEED, dim=DIM, device=bound_device(),
        )  # fmt: skip
        out = {
            "rows": {kind: emb.weight[torch.arange(len(orig_nid))].numpy() for kind, emb in embs.items()},
            "group": (str(dist.get_backend()), str(bound_device()), str(group_device())),
        }
        dist.barrier()  # rank 0 owns the embeddings: keep them until every trainer is done
        return out
    finally:
        exit_client()


def _run(small_graph, two_servers, tmp_path, prefix, device):
    config, graph = small_graph
    orig_nid = graph["orig_nid"]
    results = run_trainers(
        _group_worker,
        2,
        (
            cluster_config(config, two_servers.addresses),
            {k: f"{prefix}_{k}" for k in KINDS},
            orig_nid,
            device,
        ),
        str(tmp_path),
        backend="cpu:gloo",
        timeout_s=150,
    )
    refs = reference_run(initial_rows(len(orig_nid), DIM), STEPS, SEED, DIM)
    for out in results:
        assert out["group"] == ("cpu:gloo", device, "cpu")  # the exchange runs on the group's CPU backend
        for kind, ref in refs.items():
            want = ref.weight.numpy()[orig_nid]  # new-ID order
            np.testing.assert_allclose(out["rows"][kind], want, rtol=1e-5, atol=1e-5, err_msg=kind)


def test_cpu_trainers_in_a_cpu_gloo_group_match_the_dense_reference(small_graph, two_servers, tmp_path):
    _run(small_graph, two_servers, tmp_path, "cpugloo", "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_two_trainers_share_one_gpu_through_a_cpu_gloo_group(small_graph, two_servers, tmp_path):
    _run(small_graph, two_servers, tmp_path, "sharedgpu", "cuda:0")
