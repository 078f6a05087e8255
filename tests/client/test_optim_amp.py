"""Mixed precision with the sparse optimizers: ``GradScaler.unscale_`` / ``GradScaler.step`` on a
SparseAdagrad / SparseAdam (graphstore.client.optim.amp).

Under CPU fp16 autocast with a power-of-two loss scale, the unscaled gradient of a row read through a
DistEmbedding is exactly its float16-rounded coefficient, so the results are compared with the dense
reference fed those rounded gradients. The all-or-nothing test runs 2 gloo trainers against 2 real
servers; a forced inf on one trainer skips the step on both.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributed as dist

from graphstore.client.api import exit_client
from graphstore.client.dist_embedding import DistEmbedding
from graphstore.client.dist_graph import DistGraph
from tests.client.optim_helpers import (
    KINDS,
    calls_of_rank,
    cluster_config,
    fp16_rounded,
    initial_rows,
    make_optimizer,
    make_reference,
    run_trainers,
    scaled_backward,
    step_workload,
)

# torch.amp.GradScaler("cpu") arrived in torch 2.3; the CUDA-only scaler of torch 2.2 disables itself
# without a GPU, so the fp16 tests need torch >= 2.3 on the CPU (bf16 needs no scaler and runs on any).
needs_cpu_scaler = pytest.mark.skipif(
    not hasattr(torch.amp, "GradScaler"), reason="needs torch.amp.GradScaler('cpu') (torch >= 2.3)"
)

DIM = 8
SEED = 29
SCALE = 2.0**10  # a power of two: scaling and unscaling are exact


@pytest.fixture
def standalone(small_graph):
    exit_client()
    yield DistGraph("testgraph", part_config=small_graph[0])
    exit_client()


def rows_of(emb) -> np.ndarray:
    return emb.weight[torch.arange(emb.num_embeddings)].numpy()


def assert_rows_match_reference(emb, kind, init, steps, rounding=fp16_rounded) -> None:
    """The rows equal the dense reference after ``steps`` (each a list of ``(ids, grads)`` calls), fed
    the gradients as the low-precision views produced them (``rounding``)."""
    ref = make_reference(kind, init)
    for calls in steps:
        ref.step([(ids, rounding(grads)) for ids, grads in calls])
    np.testing.assert_allclose(rows_of(emb), ref.weight.numpy(), rtol=1e-5, atol=1e-6)


def scaler_step(scaler, opt) -> None:
    scaler.step(opt)
    scaler.update()


def new_embedding(g, name):
    n = g.num_nodes()
    init = initial_rows(n, DIM)
    emb = DistEmbedding(n, DIM, name=name)
    emb.weight[torch.arange(n)] = torch.from_numpy(init)
    return emb, init


@needs_cpu_scaler
@pytest.mark.parametrize("kind", KINDS)
def test_amp_sparse_scaler_step_uses_unscaled_gradients(standalone, kind):
    emb, init = new_embedding(standalone, f"amp_step_{kind}")
    opt = make_optimizer(kind, [emb])
    scaler = torch.amp.GradScaler("cpu", init_scale=SCALE)
    steps = [step_workload(SEED, step, emb.num_embeddings, DIM) for step in range(3)]
    for calls in steps:
        scaled_backward(scaler, emb, calls)
        scaler_step(scaler, opt)
    assert_rows_match_reference(emb, kind, init, steps)
    assert opt.timings.steps == 3 and opt.timings.steps_skipped == 0
    assert not hasattr(opt, "grad_scale") and not hasattr(opt, "found_inf")


@needs_cpu_scaler
def test_amp_sparse_unscale_then_step_unscales_once(standalone):
    emb, init = new_embedding(standalone, "amp_unscale")
    opt = make_optimizer("adagrad", [emb])
    scaler = torch.amp.GradScaler("cpu", init_scale=SCALE)
    calls = step_workload(SEED, 1, emb.num_embeddings, DIM)
    scaled_backward(scaler, emb, calls)
    scaler.unscale_(opt)
    recorded = [(ids, rows.grad.numpy().copy()) for ids, rows in emb.trace]
    for (_, grad), (_, want) in zip(recorded, calls, strict=True):
        np.testing.assert_array_equal(grad, fp16_rounded(want))  # unscaled in place, as GradScaler does
    scaler_step(scaler, opt)
    assert_rows_match_reference(emb, "adagrad", init, [calls])  # not unscaled twice


@needs_cpu_scaler
def test_amp_sparse_non_finite_gradient_skips_the_step(standalone):
    emb, init = new_embedding(standalone, "amp_inf")
    opt = make_optimizer("adam", [emb])
    scaler = torch.amp.GradScaler("cpu", init_scale=SCALE)
    calls = step_workload(SEED, 2, emb.num_embeddings, DIM)
    poisoned = [(ids, grads.copy()) for ids, grads in calls]
    poisoned[-1][1][0, 0] = np.inf
    scaled_backward(scaler, emb, poisoned)
    scaler_step(scaler, opt)
    np.testing.assert_array_equal(rows_of(emb), init)
    assert opt.timings.steps_skipped == 1 and opt.timings.steps == 0
    assert emb.trace == []
    assert scaler.get_scale() == SCALE * scaler.get_backoff_factor()
    # The next finite step is an ordinary first step (Adam's state untouched by the skipped one).
    scaled_backward(scaler, emb, calls)
    scaler_step(scaler, opt)
    assert_rows_match_reference(emb, "adam", init, [calls])


def test_amp_sparse_bf16_needs_no_scaler(standalone):
    emb, init = new_embedding(standalone, "amp_bf16")
    opt = make_optimizer("rowwise_adagrad", [emb])
    calls = step_workload(SEED, 3, emb.num_embeddings, DIM)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = sum((emb(torch.from_numpy(ids)).float() * torch.from_numpy(g)).sum() for ids, g in calls)
    loss.backward()
    opt.step()

    def bf16_rounded(grads):
        return torch.from_numpy(grads).bfloat16().float().numpy()

    assert_rows_match_reference(emb, "rowwise_adagrad", init, [calls], rounding=bf16_rounded)


# ----- 2 trainer processes (gloo) against 2 real servers: all or nothing -------------------------


INF_STEP = 1  # the step at which trainer 1 records an inf gradient
STEPS = range(4)


def _amp_worker(rank, world_size, cluster, prefix, orig_nid):
    from graphstore.client.api import initialize
    from graphstore.client.device import bound_device

    initialize(cluster, device="cpu")  # CPU trainers: the default gloo exchange
    try:
        n = len(orig_nid)
        new_of_orig = np.empty(n, dtype=np.int64)
        new_of_orig[orig_nid] = np.arange(n)
        embs = {}
        for kind in KINDS:
            if rank == 0:
                embs[kind] = DistEmbedding(n, DIM, name=f"{prefix}_{kind}")
                embs[kind].weight[torch.arange(n)] = torch.from_numpy(initial_rows(n, DIM)[orig_nid])
        dist.barrier()
        for kind in KINDS:
            if rank != 0:
                embs[kind] = DistEmbedding(n, DIM, name=f"{prefix}_{kind}")
        opts = {kind: make_optimizer(kind, [emb]) for kind, emb in embs.items()}
        scaler = torch.amp.GradScaler("cpu", init_scale=SCALE)
        out = {"before_inf": {}, "after_inf": {}, "bound": str(bound_device())}
        for step in STEPS:
            mine = calls_of_rank(step_workload(SEED, step, n, DIM), rank, world_size)
            mine = [(new_of_orig[ids], grads.copy()) for ids, grads in mine]
            if step == INF_STEP and rank == 1:
                next(grads for ids, grads in mine if len(ids))[0, 0] = np.inf
            for kind, emb in embs.items():
                scaled_backward(scaler, emb, mine)
                if step == STEPS[-1]:
                    scaler.unscale_(opts[kind])  # the explicit unscale_ path, once
                if step == INF_STEP:
                    out["before_inf"][kind] = rows_of(emb)
                scaler.step(opts[kind])
                if step == INF_STEP:
                    dist.barrier()  # a push from the other trainer would have landed by now
                    out["after_inf"][kind] = rows_of(emb)
            scaler.update()
        out["rows"] = {kind: rows_of(emb) for kind, emb in embs.items()}
        out["skipped"] = {kind: opt.timings.steps_skipped for kind, opt in opts.items()}
        dist.barrier()  # rank 0 owns the embeddings: keep them until every trainer is done
        return out
    finally:
        exit_client()


@needs_cpu_scaler
def test_amp_sparse_inf_on_one_trainer_skips_the_step_on_every_server(small_graph, two_servers, tmp_path):
    config, graph = small_graph
    orig_nid = graph["orig_nid"]
    cluster = cluster_config(config, two_servers.addresses)
    results = run_trainers(_amp_worker, 2, (cluster, "amp2", orig_nid), str(tmp_path), timeout_s=150)
    init = initial_rows(len(orig_nid), DIM)
    assert [out["bound"] for out in results] == ["cpu", "cpu"]
    for kind in KINDS:
        ref = make_reference(kind, init)
        for step in STEPS:
            if step != INF_STEP:
                calls = step_workload(SEED, step, len(orig_nid), DIM)
                ref.step([(ids, fp16_rounded(grads)) for ids, grads in calls])
        want = ref.weight.numpy()[orig_nid]  # new-ID order
        for rank, out in enumerate(results):
            # Trainer 0's gradients were finite, yet no row of any server changed in that step.
            np.testing.assert_array_equal(out["after_inf"][kind], out["before_inf"][kind], err_msg=kind)
            assert out["skipped"][kind] == 1, (rank, kind)
            np.testing.assert_allclose(out["rows"][kind], want, rtol=1e-5, atol=1e-5, err_msg=kind)
