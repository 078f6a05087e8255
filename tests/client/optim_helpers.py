"""Shared helpers of the sparse-optimizer tests: a dense single-process reference of the update math,
the deterministic per-step gradient workload, and a harness that runs gloo trainer processes.

The reference is written independently of the server's vectorized code: it keeps dense state for the
whole embedding, builds a dense gradient matrix per step, and updates the touched rows through masks.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import queue
import traceback

import numpy as np
import torch

KINDS = ("adagrad", "rowwise_adagrad", "adam")


class DenseReference:
    """The optimizers' math on one dense float32 matrix (what every trainer together should compute).

    Args:
        kind: ``adagrad``, ``rowwise_adagrad`` or ``adam``.
        weight: the starting rows ``[num_rows, dim]`` (copied).
        lr, eps, beta1, beta2: hyper-parameters.
    """

    def __init__(self, kind: str, weight: np.ndarray, lr: float, eps: float, beta1=0.9, beta2=0.999):
        self.kind = kind
        self.weight = torch.tensor(weight, dtype=torch.float32)
        n, dim = self.weight.shape
        self.lr, self.eps, self.beta1, self.beta2 = lr, eps, beta1, beta2
        if kind == "adagrad":
            self.state = {"adagrad_sum": torch.zeros(n, dim)}
        elif kind == "rowwise_adagrad":
            self.state = {"rowwise_adagrad_sum": torch.zeros(n)}
        else:
            self.state = {
                "adam_step": torch.zeros(n, dtype=torch.int64),
                "adam_m": torch.zeros(n, dim),
                "adam_v": torch.zeros(n, dim),
            }

    def step(self, pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """One step over every trainer's recorded ``(ids, grads)``: duplicates averaged by count."""
        n, dim = self.weight.shape
        total = torch.zeros(n, dim, dtype=torch.float64)
        count = torch.zeros(n, dtype=torch.float64)
        for ids, grads in pairs:
            ids_t = torch.as_tensor(np.asarray(ids, dtype=np.int64))
            total.index_add_(0, ids_t, torch.as_tensor(np.asarray(grads, dtype=np.float64)))
            count.index_add_(0, ids_t, torch.ones(ids_t.shape[0], dtype=torch.float64))
        touched = count > 0
        g = torch.zeros(n, dim)
        g[touched] = (total[touched] / count[touched].unsqueeze(1)).float()
        if self.kind == "adagrad":
            acc = self.state["adagrad_sum"]
            acc[touched] += g[touched] ** 2
            self.weight[touched] -= self.lr * g[touched] / torch.sqrt(acc[touched] + self.eps)
        elif self.kind == "rowwise_adagrad":
            acc = self.state["rowwise_adagrad_sum"]
            acc[touched] += (g[touched] ** 2).mean(dim=1)
            self.weight[touched] -= self.lr * g[touched] / torch.sqrt(acc[touched] + self.eps).unsqueeze(1)
        else:
            steps, m, v = self.state["adam_step"], self.state["adam_m"], self.state["adam_v"]
            steps[touched] += 1
            m[touched] = self.beta1 * m[touched] + (1 - self.beta1) * g[touched]
            v[touched] = self.beta2 * v[touched] + (1 - self.beta2) * g[touched] ** 2
            t = steps[touched].double()
            m_hat = m[touched] / (1 - self.beta1**t).float().unsqueeze(1)
            v_hat = v[touched] / (1 - self.beta2**t).float().unsqueeze(1)
            self.weight[touched] -= self.lr * m_hat / (torch.sqrt(v_hat) + self.eps)

    def state_numpy(self) -> dict[str, np.ndarray]:
        return {k: v.numpy().copy() for k, v in self.state.items()}


def step_workload(seed: int, step: int, num_rows: int, dim: int, num_calls: int = 6, hot: int = 12):
    """The (ids, grads) every trainer together records at ``step``: ``num_calls`` forward calls, ids
    drawn with replacement from a small hot set plus random rows (duplicates within and across calls),
    call ``step % num_calls`` empty (with 4 trainers, trainer 3 reads nothing at steps 3, 9, ...).

    Returns:
        A list of ``(ids int64, grads float32 [len(ids), dim])``; trainer ``r`` of ``T`` takes calls
        ``r, r + T, ...`` (so the multiset per step does not depend on the trainer count).
    """
    rng = np.random.default_rng([seed, step])
    hot_ids = rng.choice(num_rows, size=min(hot, num_rows), replace=False)
    empty_call = step % num_calls  # so that, over the steps, every trainer sometimes reads no rows
    calls = []
    for call in range(num_calls):
        if call == empty_call:
            size = 0
        else:
            size = int(rng.integers(1, 40))
        ids = np.where(rng.random(size) < 0.5, rng.choice(hot_ids, size), rng.integers(0, num_rows, size))
        grads = rng.standard_normal((size, dim)).astype(np.float32)
        calls.append((ids.astype(np.int64), grads))
    return calls


def calls_of_rank(calls, rank: int, world_size: int):
    """The calls trainer ``rank`` makes (see :func:`step_workload`)."""
    return calls[rank::world_size]


def record_and_backward(emb, ids: np.ndarray, grads: np.ndarray, device=None) -> None:
    """Read ``emb[ids]`` as a model would and backpropagate ``sum(rows * grads)`` (rows.grad == grads)."""
    rows = emb(torch.from_numpy(ids), device=device) if device is not None else emb(torch.from_numpy(ids))
    coeff = torch.from_numpy(grads).to(rows.device)
    (rows.float() * coeff).sum().backward()


def fp16_rounded(grads: np.ndarray) -> np.ndarray:
    """The gradient a row gets through its float16 autocast view (what a dense reference is fed)."""
    return grads.astype(np.float16).astype(np.float32)


def scaled_backward(scaler, emb, calls, device=None) -> None:
    """Read each call's rows (onto ``device``) under fp16 autocast and backpropagate the scaled
    ``sum(rows * grads)``; with a power-of-two scale the unscaled gradients are ``fp16_rounded(grads)``."""
    device = torch.device("cpu") if device is None else torch.device(device)
    loss = torch.zeros((), device=device)
    with torch.autocast(device.type, dtype=torch.float16):
        for ids, grads in calls:
            rows = emb(torch.from_numpy(ids), device=device)
            assert rows.dtype == torch.float16
            loss = loss + (rows.float() * torch.from_numpy(grads).to(device)).sum()
    scaler.scale(loss).backward()


def _trainer_entry(target, rank, world_size, init_file, args, results, backend):
    os.environ["RANK"] = str(rank)
    os.environ["WORLD_SIZE"] = str(world_size)
    try:
        torch.set_num_threads(1)
        torch.distributed.init_process_group(
            backend,
            init_method=f"file://{init_file}",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=60),
        )
        try:
            value = target(rank, world_size, *args)
        except BaseException:
            torch.distributed.destroy_process_group()
            raise
    except BaseException:  # noqa: BLE001 - reported to the parent
        results.put((rank, "error", traceback.format_exc()))
        return
    # The result goes out before the group's teardown: torch 2.2's FileStore can hang in
    # destroy_process_group (about one run in five with 3 ranks); run_trainers then kills the process.
    results.put((rank, "ok", value))
    results.close()
    results.join_thread()  # flushed to the parent before anything can hang
    torch.distributed.destroy_process_group()


def run_trainers(
    target, world_size: int, args: tuple, tmp_dir: str, timeout_s: float = 120.0, backend="gloo"
):
    """Run ``target(rank, world_size, *args)`` in ``world_size`` trainer processes joined by a gloo group.

    Processes come from a forkserver (torch is imported once, each trainer forks in milliseconds). Every
    process is joined, or killed by PID on failure or timeout.

    Returns:
        The targets' return values by rank.

    Raises:
        AssertionError: with the failing trainers' tracebacks.
    """
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "numpy", "grpc", "graphstore.client.optim"])
    init_file = os.path.join(tmp_dir, f"pg-{os.getpid()}-{np.random.randint(1 << 30)}")
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_trainer_entry, args=(target, r, world_size, init_file, args, results, backend))
        for r in range(world_size)
    ]
    out: dict[int, object] = {}
    errors: list[str] = []
    try:
        for p in procs:
            p.start()
        for _ in range(world_size):
            try:
                rank, status, value = results.get(timeout=timeout_s)
            except queue.Empty:
                errors.append(f"timed out after {timeout_s} s waiting for trainers")
                break
            if status == "ok":
                out[rank] = value
            else:
                errors.append(f"rank {rank}:\n{value}")
                break
        for p in procs:
            p.join(timeout=10 if not errors else 2)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
        results.close()
    if errors:
        raise AssertionError("trainer failure:\n" + "\n".join(errors))
    return [out[r] for r in range(world_size)]


def stop_forkserver() -> None:
    """End the multiprocessing forkserver process if one was started (test teardown)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    stop = getattr(server, "_stop", None)
    if stop is not None:
        stop()


def cluster_config(part_config: str, addresses: list[str], graph_name: str = "testgraph") -> dict:
    """The client config dict for servers at ``addresses`` (partition ``i`` at ``addresses[i]``)."""
    servers = []
    for part_id, address in enumerate(addresses):
        host, port = address.rsplit(":", 1)
        servers.append({"host": host, "port": int(port), "part_id": part_id})
    return {"graph_name": graph_name, "part_config": part_config, "servers": servers}


def initial_rows(num_rows: int, dim: int, seed: int = 0) -> np.ndarray:
    """Deterministic starting rows of the test embeddings (indexed by original node ID)."""
    return np.random.default_rng([seed, 123]).standard_normal((num_rows, dim)).astype(np.float32)


def make_optimizer(kind: str, embs, lr: float = 0.1):
    """The optimizer of ``kind`` the distributed tests use (hyper-parameters match :func:`make_reference`)."""
    from graphstore.client.optim import SparseAdagrad, SparseAdam

    if kind == "adam":
        return SparseAdam(embs, lr=lr, betas=(0.8, 0.95), eps=1e-6)
    return SparseAdagrad(embs, lr=lr, eps=1e-6, rowwise=kind == "rowwise_adagrad")


def make_reference(kind: str, init: np.ndarray, lr: float = 0.1) -> DenseReference:
    """The dense reference matching :func:`make_optimizer`."""
    return DenseReference(kind, init, lr, 1e-6, 0.8, 0.95)


def read_checkpoint(path: str, name: str, orig_nid: np.ndarray, graph_name: str = "testgraph"):
    """Rows, optimizer kind and state of ``name`` in a checkpoint, in the order of ``orig_nid``.

    Uses the server's own restore code with every node as "local" (``orig_nid[i]`` = original ID of row i).
    """
    from graphstore.checkpoint_layout import tensor_root
    from graphstore.server.durability.checkpoint import read_meta, restore_tensor

    root = str(tensor_root(path, name))  # a cluster-wide save keeps its tensors in its save folder
    return restore_tensor(root, read_meta(root, name, graph_name), np.asarray(orig_nid))


def train_embeddings(rank, world_size, *, names, init, orig_nid, steps, seed, dim, lr=0.1, device=None):
    """Create or attach the embeddings ``names[kind]`` and run ``steps`` (a range) of the workload.

    Rank 0 creates each embedding and writes ``init`` (original-ID order) into it; the others attach
    after a barrier. The workload's ids are original IDs, mapped to this partitioning's IDs. The rows
    are read onto ``device`` (None: the CPU), where their gradients are computed.

    Returns:
        ``(embs, opts)`` by kind.
    """
    import torch.distributed as dist

    from graphstore.client.dist_embedding import DistEmbedding

    num_rows = len(orig_nid)
    new_of_orig = np.empty(num_rows, dtype=np.int64)
    new_of_orig[orig_nid] = np.arange(num_rows)
    embs = {}
    if rank == 0:
        for kind, name in names.items():
            embs[kind] = DistEmbedding(num_rows, dim, name=name)
            embs[kind].weight[torch.arange(num_rows)] = torch.from_numpy(init[orig_nid])
    dist.barrier()
    if rank != 0:
        for kind, name in names.items():
            embs[kind] = DistEmbedding(num_rows, dim, name=name)
    opts = {kind: make_optimizer(kind, [emb], lr) for kind, emb in embs.items()}
    run_steps(rank, world_size, embs, opts, new_of_orig, steps, seed, dim, device)
    return embs, opts


def run_steps(rank, world_size, embs, opts, new_of_orig, steps, seed, dim, device=None) -> None:
    """Each step: this rank's share of the workload through every embedding, then every optimizer's step."""
    num_rows = len(new_of_orig)
    for step in steps:
        mine = calls_of_rank(step_workload(seed, step, num_rows, dim), rank, world_size)
        for kind, emb in embs.items():
            for ids, grads in mine:
                record_and_backward(emb, new_of_orig[ids], grads, device=device)
            opts[kind].step()


def reference_run(init: np.ndarray, steps, seed: int, dim: int, lr: float = 0.1) -> dict[str, DenseReference]:
    """The dense references (original-ID order) after ``steps`` of the workload, by kind."""
    refs = {kind: make_reference(kind, init, lr) for kind in KINDS}
    for step in steps:
        calls = step_workload(seed, step, init.shape[0], dim)
        for ref in refs.values():
            ref.step(calls)
    return refs
