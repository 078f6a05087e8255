"""Distributed sparse optimizers for :class:`~graphstore.client.dist_embedding.DistEmbedding`.

``SparseAdagrad`` (element-wise or row-wise) and ``SparseAdam`` update only the embedding rows a
mini-batch touched. The rows and the optimizer state live on the partition servers; a step moves
gradients, never rows or state:

1. Each trainer gathers the (id, gradient) pairs its embeddings recorded since the last step
   (``emb.trace``), and sums duplicate ids locally (keeping a count per id).
2. When a ``torch.distributed`` process group exists (also with one rank), the pairs travel to the
   trainer that *owns* their rows, in one ``all_to_all_single`` per embedding after a size exchange
   (uneven splits; gloo on CPU, NCCL when the gradients are on CUDA). Ownership maps partitions onto
   trainers (:func:`trainer_assignment`). A trainer that saw no rows sends empty tensors.
3. The owner merges what it received: unique ids, gradients of the same id averaged over all their
   occurrences (the update is non-linear, so ids must be unique), and sends one ``PushGrad`` per
   server, in parallel. The server applies the update to the rows and their state under the tensor's
   write lock (:mod:`graphstore.server.optimizer`).
4. With more than one trainer, a last tiny ``all_reduce`` waits until every owner has pushed, so a row
   read after ``step()`` returns anywhere reflects the whole step, and a failed push raises everywhere.

Without a process group the trainer de-duplicates and pushes directly. Every wait is bounded: RPCs by
the client's deadline policy, collectives by the process group's timeout.
"""

from __future__ import annotations

import dataclasses
import time
import weakref
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from graphstore.types import OptimizerConfig

# The status a trainer sends beside its sizes: every trainer learns whether any trainer failed
# before the gradients moved, so all of them raise together and none waits for the others.
_STATUS_OK = 0
_STATUS_FAILED = 1


@dataclass
class StepTimings:
    """Cumulative wall time of the phases of :meth:`SparseGradOptimizer.step` (seconds).

    Attributes:
        steps: number of completed steps.
        gather_s: reading gradients from the traces and the local duplicate sum.
        exchange_s: the size exchange and the all_to_all of ids and gradients.
        merge_s: the owner's de-duplication and averaging.
        push_s: the PushGrad RPCs (they include the server's update).
        sync_s: waiting for the other trainers' pushes (groups of more than one trainer).
        rows_pushed: unique rows this trainer pushed.
    """

    steps: int = 0
    gather_s: float = 0.0
    exchange_s: float = 0.0
    merge_s: float = 0.0
    push_s: float = 0.0
    sync_s: float = 0.0
    rows_pushed: int = 0


def trainer_assignment(num_parts: int, world_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Which trainers own the rows of each partition.

    With at least as many trainers as partitions, trainer ``t`` serves partition ``t * P // T``: each
    partition gets a contiguous block of ranks (the ranks launched on its host when trainers are
    started host by host); its rows are split among them by id. With fewer trainers than partitions,
    partition ``p`` goes to trainer ``p mod T``.

    Args:
        num_parts: number of partitions ``P``.
        world_size: number of trainers ``T``.

    Returns:
        ``(first, count)``: int64 arrays of length ``P``; partition ``p``'s rows belong to trainers
        ``first[p] .. first[p] + count[p] - 1``.

    Raises:
        ValueError: if either count is < 1.
    """
    if num_parts < 1:
        raise ValueError(f"num_parts must be >= 1, got {num_parts}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    parts = np.arange(num_parts, dtype=np.int64)
    if world_size >= num_parts:
        first = -((-parts * world_size) // num_parts)
        end = -((-(parts + 1) * world_size) // num_parts)
        return first, end - first
    return parts % world_size, np.ones(num_parts, dtype=np.int64)


def owner_of(
    ids: torch.Tensor, bounds: torch.Tensor, first: torch.Tensor, count: torch.Tensor
) -> torch.Tensor:
    """The owning trainer of each id (see :func:`trainer_assignment`), vectorized, on ``ids``' device.

    Args:
        ids: int64 global ids, within ``[bounds[0], bounds[-1])``.
        bounds: int64 ``num_parts + 1`` partition boundaries.
        first, count: the output of :func:`trainer_assignment` as int64 tensors.

    Returns:
        int64 owner ranks, one per id.
    """
    part = torch.searchsorted(bounds, ids, right=True) - 1
    return first[part] + torch.remainder(ids - bounds[part], count[part])


def sum_duplicates(ids: torch.Tensor, grads: torch.Tensor, counts: torch.Tensor | None = None):
    """Sum the gradients (and counts) of equal ids.

    Args:
        ids: int64 ``[n]``.
        grads: float32 ``[n, dim]``.
        counts: float32 ``[n]`` occurrences behind each row, or None for one each.

    Returns:
        ``(unique_ids, grad_sums, counts)``: sorted unique ids, the summed gradients and the summed counts.
    """
    if counts is None:
        counts = torch.ones(ids.shape[0], dtype=torch.float32, device=ids.device)
    unique_ids, inverse = torch.unique(ids, sorted=True, return_inverse=True)
    if unique_ids.shape[0] == ids.shape[0]:
        order = torch.empty_like(inverse)
        order[inverse] = torch.arange(ids.shape[0], device=ids.device)
        return unique_ids, grads[order], counts[order]
    sums = torch.zeros((unique_ids.shape[0], grads.shape[1]), dtype=torch.float32, device=grads.device)
    sums.index_add_(0, inverse, grads)
    total = torch.zeros(unique_ids.shape[0], dtype=torch.float32, device=ids.device)
    total.index_add_(0, inverse, counts)
    return unique_ids, sums, total


def mean_by_id(ids: torch.Tensor, grads: torch.Tensor, counts: torch.Tensor | None = None):
    """Unique ids and their gradients averaged over all occurrences (the reference's de-duplication).

    Args:
        ids: int64 ``[n]``.
        grads: float32 ``[n, dim]`` gradient sums.
        counts: float32 ``[n]`` occurrences summed into each row, or None for one each.

    Returns:
        ``(unique_ids, mean_grads)``, ids sorted.
    """
    unique_ids, sums, total = sum_duplicates(ids, grads, counts)
    return unique_ids, sums / total.unsqueeze(1)


def pack_rows(ids: torch.Tensor, grads: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """One float32 ``[n, dim + 3]`` buffer: gradients, the id's 64 bits as two float32 words, the count.

    One buffer means one all_to_all per embedding; the id bits are copied, never computed on, so
    they survive the float32 view exactly.
    """
    n, dim = grads.shape
    packed = torch.empty((n, dim + 3), dtype=torch.float32, device=grads.device)
    packed[:, :dim] = grads
    packed[:, dim : dim + 2] = ids.to(torch.int64).clone().view(torch.float32).view(n, 2)
    packed[:, dim + 2] = counts
    return packed


def unpack_rows(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inverse of :func:`pack_rows`: ``(ids, grads, counts)``."""
    n, width = packed.shape
    dim = width - 3
    # A fresh buffer: a contiguous slice may start at an odd float offset, which int64 cannot view.
    id_words = torch.empty((n, 2), dtype=torch.float32, device=packed.device)
    id_words.copy_(packed[:, dim : dim + 2])
    ids = id_words.view(torch.int64).view(n)
    return ids, packed[:, :dim], packed[:, dim + 2]


def exchange_sizes(send_counts: torch.Tensor, status: int, group=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Tell every trainer how many rows it will receive from each peer, and every peer's status.

    Args:
        send_counts: int64 ``[world_size, num_embeddings]``: rows this trainer sends to each peer, per
            embedding, on the exchange device.
        status: this trainer's status (0 = ready).
        group: the process group (None: the default group).

    Returns:
        ``(recv_counts [world_size, num_embeddings], peer_status [world_size])``.
    """
    world_size, num_emb = send_counts.shape
    buf = torch.empty((world_size, num_emb + 1), dtype=torch.int64, device=send_counts.device)
    buf[:, :num_emb] = send_counts
    buf[:, num_emb] = status
    out = torch.empty_like(buf)
    dist.all_to_all_single(out.view(-1), buf.view(-1), group=group)
    return out[:, :num_emb], out[:, num_emb]


def exchange_rows(
    packed: torch.Tensor, send_counts: list[int], recv_counts: list[int], group=None
) -> torch.Tensor:
    """All-to-all of packed rows with uneven splits (``all_to_all_single``; works on gloo and NCCL).

    Args:
        packed: ``[sum(send_counts), width]`` rows grouped by destination rank.
        send_counts: rows for each rank.
        recv_counts: rows from each rank (from :func:`exchange_sizes`).
        group: the process group.

    Returns:
        ``[sum(recv_counts), width]`` rows grouped by source rank.
    """
    out = torch.empty((sum(recv_counts), packed.shape[1]), dtype=packed.dtype, device=packed.device)
    dist.all_to_all_single(
        out, packed, output_split_sizes=recv_counts, input_split_sizes=send_counts, group=group
    )
    return out


def _dist_embedding_class():
    from graphstore.client.dist_embedding import DistEmbedding

    return DistEmbedding


class SparseGradOptimizer:
    """Base of the distributed sparse optimizers: gradient collection, exchange and push.

    Subclasses only choose the :class:`~graphstore.types.OptimizerConfig`.

    Args:
        params: the DistEmbeddings to optimize (a list, or a single one).
        config: the optimizer kind and hyper-parameters, sent with every push.

    Raises:
        TypeError: a parameter that is not a DistEmbedding.
        ValueError: no parameters, the same embedding twice, a non-float32 or non-2-D embedding,
            or a bad hyper-parameter.
    """

    def __init__(self, params, config: OptimizerConfig):
        dist_embedding = _dist_embedding_class()
        if isinstance(params, dist_embedding):
            params = [params]
        if not isinstance(params, Iterable) or isinstance(params, (str, bytes, torch.Tensor)):
            raise TypeError(f"params must be a list of DistEmbedding, got {type(params).__name__}")
        params = list(params)
        if not params:
            raise ValueError("params is empty: give the optimizer at least one DistEmbedding")
        names = set()
        for emb in params:
            if not isinstance(emb, dist_embedding):
                raise TypeError(
                    "sparse optimizers update graphstore DistEmbedding objects only, got "
                    f"{type(emb).__name__}"
                )
            if emb.name in names:
                raise ValueError(f"DistEmbedding {emb.name!r} appears twice in params")
            names.add(emb.name)
            dtype = getattr(emb.weight, "dtype", torch.float32)
            if dtype != torch.float32:
                raise ValueError(
                    f"DistEmbedding {emb.name!r} has dtype {dtype}; sparse optimizers update float32 "
                    "embeddings (read them as float16/bfloat16 under autocast instead)"
                )
        self._params = params
        self._config = config
        self.timings = StepTimings()
        self._executor: ThreadPoolExecutor | None = None
        self._bounds_cache: dict[tuple[str, str, int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    @property
    def params(self) -> list:
        """The optimized DistEmbeddings."""
        return list(self._params)

    @property
    def config(self) -> OptimizerConfig:
        """The kind and hyper-parameters sent with every push."""
        return self._config

    @property
    def lr(self) -> float:
        """The learning rate; assign to change it for the next steps (e.g. a schedule)."""
        return self._config.lr

    @lr.setter
    def lr(self, value: float) -> None:
        self._config = dataclasses.replace(self._config, lr=_as_float(value, "lr"))

    def save(self, path):
        """Checkpoint the embeddings and their optimizer state (``graphstore.client.checkpoint.save``)."""
        from graphstore.client import checkpoint

        return checkpoint.save(path, self._params, self)

    def load(self, path):
        """Restore the embeddings and their optimizer state (``graphstore.client.checkpoint.load``)."""
        from graphstore.client import checkpoint

        return checkpoint.load(path, self._params, self)

    def zero_grad(self) -> None:
        """Forget the rows and gradients recorded since the last step."""
        for emb in self._params:
            emb.reset_trace()

    def step(self) -> None:
        """Apply one update to every row the embeddings recorded since the last step, on all servers.

        With a process group, every trainer of the group must call ``step()`` (a collective).

        Raises:
            RuntimeError: nothing recorded since the last step / ``zero_grad()``, no gradient (no
                ``backward()``), another trainer's step failed before any gradient moved (nothing
                applied), or another trainer's push failed.
            KeyError: an embedding whose tensor no longer exists on the servers (nothing applied).
            ValueError / graphstore.errors.ServerError: a server refused or failed a push.
        """
        from graphstore.client.context import get_context

        ctx = get_context()
        group_active = dist.is_available() and dist.is_initialized()
        error: BaseException | None = None
        gathered = None
        existence = None
        t0 = time.perf_counter()
        try:
            traces = self._recorded_traces()
            # The existence check's RPCs overlap the gathering and the exchange; it is joined before
            # anything is pushed.
            existence = self._background().submit(self._check_exist, ctx)
            gathered = self._gather_local(traces, group_active)
        except Exception as exc:  # reported to the peers below, then re-raised
            error = exc
        t1 = time.perf_counter()
        try:
            if group_active:
                merged = self._exchange(ctx, gathered, error)
            else:
                if error is not None:
                    raise error
                merged = None
            t2 = time.perf_counter()
            push_error: BaseException | None = None
            try:
                if merged is None:
                    merged = [mean_by_id(ids, sums, counts) for ids, sums, counts in gathered]
                merged = [(ids.cpu().numpy(), grads.cpu().numpy()) for ids, grads in merged]
                t3 = time.perf_counter()
                existence.result()  # KeyError: an embedding is gone; push nothing
                self._push(ctx, merged)
            except Exception as exc:  # the peers learn about it in the agreement below
                push_error = exc
                t3 = time.perf_counter()
            t4 = time.perf_counter()
            if group_active and dist.get_world_size() > 1:
                self._agree_on_push(push_error)
            elif push_error is not None:
                raise push_error
            t5 = time.perf_counter()
        finally:
            for emb in self._params:
                emb.reset_trace()
        self.timings.steps += 1
        self.timings.gather_s += t1 - t0
        self.timings.exchange_s += t2 - t1
        self.timings.merge_s += t3 - t2
        self.timings.push_s += t4 - t3
        self.timings.sync_s += t5 - t4
        self.timings.rows_pushed += sum(ids.shape[0] for ids, _ in merged)

    @staticmethod
    def _agree_on_push(push_error: BaseException | None) -> None:
        """Wait until every trainer pushed (so a row read after ``step()`` returns is up to date) and
        make every trainer raise when any push failed."""
        rank, world_size = dist.get_rank(), dist.get_world_size()
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
        failed = torch.zeros(world_size, dtype=torch.int32, device=device)
        if push_error is not None:
            failed[rank] = 1
        dist.all_reduce(failed)
        if push_error is not None:
            raise push_error
        ranks = torch.nonzero(failed).flatten().tolist()
        if ranks:
            raise RuntimeError(
                f"sparse optimizer step failed on rank(s) {ranks} while pushing to the servers (see their "
                "error); the rows those ranks own may not have been updated in this step"
            )

    # -- the phases of a step -------------------------------------------------------------------

    def _background(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphstore-optim")
            weakref.finalize(self, self._executor.shutdown, wait=False)
        return self._executor

    def _recorded_traces(self) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
        """The embeddings' traces, checked to hold something with a gradient."""
        traces = [list(emb.trace) for emb in self._params]
        if not any(traces):
            raise RuntimeError(
                "step() called with nothing recorded: no DistEmbedding of this optimizer was read since "
                "the last step() or zero_grad(); call emb(ids) and loss.backward() first"
            )
        if not any(rows.grad is not None for trace in traces for _, rows in trace):
            raise RuntimeError(
                "step() found no gradients on the recorded embedding rows; call loss.backward() before step()"
            )
        return traces

    def _gather_local(
        self, traces, group_active: bool
    ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Per embedding: (unique ids, gradient sums, counts) recorded here, on the exchange device."""
        device = self._exchange_device(traces, group_active)
        gathered = []
        for emb, trace in zip(self._params, traces, strict=True):
            id_parts, grad_parts = [], []
            for ids, rows in trace:
                if rows.grad is None:
                    continue
                id_parts.append(ids.reshape(-1).to(device=device, dtype=torch.int64))
                grad = rows.grad.detach().reshape(ids.numel(), emb.embedding_dim)
                grad_parts.append(grad.to(device=device, dtype=torch.float32))
            if id_parts:
                ids = torch.cat(id_parts) if len(id_parts) > 1 else id_parts[0]
                grads = torch.cat(grad_parts) if len(grad_parts) > 1 else grad_parts[0]
            else:
                ids = torch.zeros(0, dtype=torch.int64, device=device)
                grads = torch.zeros((0, emb.embedding_dim), dtype=torch.float32, device=device)
            if grads.shape[1] != emb.embedding_dim:
                raise ValueError(
                    f"DistEmbedding {emb.name!r}: gradient width {grads.shape[1]} != embedding_dim "
                    f"{emb.embedding_dim}"
                )
            if ids.numel():
                lo, hi = int(ids.min()), int(ids.max())
                if lo < 0 or hi >= emb.num_embeddings:
                    bad = lo if lo < 0 else hi
                    raise IndexError(f"DistEmbedding {emb.name!r}: recorded id {bad} out of range")
            gathered.append(sum_duplicates(ids, grads))
        return gathered

    def _check_exist(self, ctx) -> None:
        """Every embedding's tensor still exists on every server (else nothing is pushed)."""
        calls = [lambda p=p: (p, ctx.partition(p).list_tensors()) for p in range(ctx.num_parts)]
        wanted = [emb.name for emb in self._params]
        for part_id, schemes in ctx.run_parallel(calls):
            present = {s.name for s in schemes}
            for name in wanted:
                if name not in present:
                    raise KeyError(
                        f"DistEmbedding {name!r} no longer exists on the server of partition {part_id} "
                        "(deleted or the servers restarted); nothing was updated"
                    )

    @staticmethod
    def _exchange_device(traces, group_active: bool) -> torch.device:
        """Where the gradients are gathered and exchanged: the GPU with an NCCL group, else the CPU.

        The choice depends only on the group's backend, so every trainer makes the same one (a mixed
        ``cpu:gloo,cuda:nccl`` group exchanges on the CPU). Without a group: where the gradients are.
        """
        if group_active:
            if str(dist.get_backend()) == "nccl":
                return torch.device("cuda", torch.cuda.current_device())
            return torch.device("cpu")
        for trace in traces:
            for _, rows in trace:
                if rows.grad is not None and rows.grad.is_cuda:
                    return rows.grad.device
        return torch.device("cpu")

    def _exchange(self, ctx, gathered, error: BaseException | None):
        """Route every embedding's rows to their owners; returns per embedding (ids, mean grads)."""
        world_size = dist.get_world_size()
        rank = dist.get_rank()
        device = gathered[0][0].device if gathered else self._exchange_device([], True)
        outgoing = []
        send_counts = torch.zeros((world_size, len(self._params)), dtype=torch.int64, device=device)
        if error is None:
            try:
                for index, (emb, (ids, sums, counts)) in enumerate(zip(self._params, gathered, strict=True)):
                    bounds, first, count = self._owner_tables(ctx, emb, world_size, device)
                    owners = owner_of(ids, bounds, first, count)
                    order = torch.argsort(owners, stable=True)
                    send_counts[:, index] = torch.bincount(owners, minlength=world_size)
                    outgoing.append(pack_rows(ids[order], sums[order], counts[order]))
            except Exception as exc:
                error = exc
        status = _STATUS_OK if error is None else _STATUS_FAILED
        recv_counts, peer_status = exchange_sizes(send_counts, status)
        if error is not None:
            raise error
        failed = torch.nonzero(peer_status != _STATUS_OK).flatten().tolist()
        if failed:
            raise RuntimeError(
                f"sparse optimizer step aborted on rank {rank}: rank(s) {failed} failed before the gradient "
                "exchange (see their error); nothing was updated"
            )
        send_lists = send_counts.t().tolist()
        recv_lists = recv_counts.t().tolist()
        merged = []
        for index, packed in enumerate(outgoing):
            received = exchange_rows(packed, send_lists[index], recv_lists[index])
            ids, sums, counts = unpack_rows(received)
            merged.append(mean_by_id(ids, sums, counts))
        return merged

    def _owner_tables(self, ctx, emb, world_size: int, device: torch.device):
        policy = _policy_of(ctx, emb)
        key = (policy, str(device), world_size)
        tables = self._bounds_cache.get(key)
        if tables is None:
            bounds = np.asarray(ctx.bounds(policy), dtype=np.int64)
            first, count = trainer_assignment(len(bounds) - 1, world_size)
            tables = tuple(
                torch.from_numpy(np.array(a, dtype=np.int64)).to(device) for a in (bounds, first, count)
            )
            self._bounds_cache[key] = tables
        return tables

    def _push(self, ctx, merged: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """One PushGrad per (embedding, server), all in flight together."""
        config = self._config
        calls = []
        for emb, (ids, grads) in zip(self._params, merged, strict=True):
            if ids.size == 0:
                continue
            policy = _policy_of(ctx, emb)
            for part_id, positions, part_ids in ctx.route(ids, policy):
                part_grads = np.ascontiguousarray(grads[positions])
                calls.append(
                    lambda p=part_id, n=emb.name, i=part_ids, g=part_grads: ctx.partition(p).push_grad(
                        n, i, g, config
                    )
                )
        if calls:
            ctx.run_parallel(calls)


def _policy_of(ctx, emb) -> str:
    scheme = ctx.tensor_scheme(emb.name)
    return scheme.policy if scheme is not None else "node"


class SparseAdagrad(SparseGradOptimizer):
    """Sparse Adagrad over DistEmbeddings, state on the servers.

    The default keeps one accumulator per element (``G += g*g``), as ``torch.optim.Adagrad`` does;
    ``rowwise=True`` keeps one per row (``G += mean(g*g)``), dividing the state memory by the
    embedding dimension. The update is ``w -= lr * g / sqrt(G + eps)``.

    Args:
        params: the DistEmbeddings to optimize.
        lr: learning rate (> 0).
        eps: added inside the square root.
        rowwise: one accumulator per row instead of per element.

    Raises:
        TypeError / ValueError: see :class:`SparseGradOptimizer`.
    """

    def __init__(self, params, lr: float, eps: float = 1e-10, rowwise: bool = False):
        kind = "rowwise_adagrad" if rowwise else "adagrad"
        super().__init__(
            params, OptimizerConfig(kind=kind, lr=_as_float(lr, "lr"), eps=_as_float(eps, "eps"))
        )
        self.rowwise = rowwise


class SparseAdam(SparseGradOptimizer):
    """Sparse Adam over DistEmbeddings, state (first and second moments, per-row step count) on the servers.

    Each row keeps its own step count, so the bias correction of a rarely seen row is that of its
    own number of updates: ``w -= lr * m_hat / (sqrt(v_hat) + eps)``.

    Args:
        params: the DistEmbeddings to optimize.
        lr: learning rate (> 0).
        betas: decay rates of the first and second moment, each in ``[0, 1)``.
        eps: added to the denominator.

    Raises:
        TypeError / ValueError: see :class:`SparseGradOptimizer`.
    """

    def __init__(self, params, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        if len(tuple(betas)) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        beta1, beta2 = (_as_float(b, "betas") for b in betas)
        config = OptimizerConfig(
            kind="adam", lr=_as_float(lr, "lr"), eps=_as_float(eps, "eps"), beta1=beta1, beta2=beta2
        )
        super().__init__(params, config)


def _as_float(value, label: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{label} must be a number, got {value!r}")
    return float(value)
