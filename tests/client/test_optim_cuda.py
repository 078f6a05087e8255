"""The sparse optimizers' CUDA path: a 1-rank NCCL group with the gradients on the GPU gives the same
embeddings as the same steps under a 1-rank gloo group on the CPU (and as the dense reference), and
fp16 autocast with a CUDA GradScaler unscales the gradients and skips a step with an inf.

Skipped cleanly where no CUDA device (or no NCCL) is present.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
import torch.distributed as dist

from tests.client.optim_helpers import (
    KINDS,
    fp16_rounded,
    make_optimizer,
    make_reference,
    record_and_backward,
    reference_run,
    run_trainers,
    scaled_backward,
    step_workload,
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


def _worker(rank, world_size, part_config, use_cuda):
    from graphstore.client.api import exit_client
    from graphstore.client.device import bind_device
    from graphstore.client.dist_embedding import DistEmbedding
    from graphstore.client.dist_graph import DistGraph

    # The trainer's device, never the thread's current one: the step runs in a fresh thread below.
    device = bind_device("cuda:0") if use_cuda else None
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
                _in_fresh_thread(opt.step)
            out[kind] = emb.weight[torch.arange(n)].numpy()
        return out
    finally:
        exit_client()


def _in_fresh_thread(fn):
    errors = []
    thread = threading.Thread(target=lambda: _record_error(fn, errors))
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def _record_error(fn, errors):
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - re-raised by the caller's thread
        errors.append(exc)


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


INF_STEP = 1


def _amp_worker(rank, world_size, part_config):
    from graphstore.client.api import exit_client
    from graphstore.client.device import bind_device
    from graphstore.client.dist_embedding import DistEmbedding
    from graphstore.client.dist_graph import DistGraph

    device = bind_device("cuda")  # cuda:LOCAL_RANK, LOCAL_RANK unset: cuda:0
    g = DistGraph("testgraph", part_config=part_config)
    try:
        n = g.num_nodes()
        emb = DistEmbedding(n, DIM, name="cuda_amp")
        emb.weight[torch.arange(n)] = torch.from_numpy(
            np.random.default_rng([SEED, 123]).standard_normal((n, DIM)).astype(np.float32)
        )
        opt = make_optimizer("adagrad", [emb])
        scaler = (
            torch.amp.GradScaler("cuda", init_scale=2.0**10)
            if hasattr(torch.amp, "GradScaler")
            else torch.cuda.amp.GradScaler(init_scale=2.0**10)
        )
        out = {}
        for step in range(3):
            calls = [(ids, grads.copy()) for ids, grads in step_workload(SEED, step, n, DIM)]
            if step == INF_STEP:
                calls[-1][1][0, 0] = np.inf
                out["before_inf"] = emb.weight[torch.arange(n)].numpy()
            scaled_backward(scaler, emb, calls, device=device)
            assert all(rows.grad.device == device for _, rows in emb.trace)
            scaler.step(opt)
            scaler.update()
            if step == INF_STEP:
                out["after_inf"] = emb.weight[torch.arange(n)].numpy()
        out["rows"] = emb.weight[torch.arange(n)].numpy()
        out["skipped"] = opt.timings.steps_skipped
        return out
    finally:
        exit_client()


def test_amp_sparse_fp16_on_gpu_unscales_and_skips_an_inf_step(tmp_path):
    config, _ = make_partitioned_graph(tmp_path / "g", num_nodes=300, num_parts=2)
    (out,) = run_trainers(_amp_worker, 1, (config,), str(tmp_path), backend="nccl", timeout_s=180)
    np.testing.assert_array_equal(out["after_inf"], out["before_inf"])
    assert out["skipped"] == 1
    init = np.random.default_rng([SEED, 123]).standard_normal((300, DIM)).astype(np.float32)
    ref = make_reference("adagrad", init)
    for step in (0, 2):
        ref.step([(ids, fp16_rounded(grads)) for ids, grads in step_workload(SEED, step, 300, DIM)])
    np.testing.assert_allclose(out["rows"], ref.weight.numpy(), rtol=1e-5, atol=1e-5)
