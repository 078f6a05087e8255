"""``SparseGradOptimizer``: the base of the distributed sparse optimizers; one step collects,
exchanges, merges and pushes the gradients of the embedding rows a mini-batch touched.

``SparseAdagrad`` (element-wise or row-wise) and ``SparseAdam`` update only the embedding rows a
mini-batch touched. The rows and the optimizer state live on the partition servers; a step moves
gradients, never rows or state:

1. Each trainer gathers the (id, gradient) pairs its embeddings recorded since the last step
   (``emb.trace``), and sums duplicate ids locally (keeping a count per id).
2. When a ``torch.distributed`` process group exists (also with one rank), the pairs travel to the
   trainer that *owns* their rows, in one ``all_to_all_single`` per embedding after a size exchange
   (uneven splits) on the group's device (:func:`~graphstore.client.device.group_device`: the CPU for
   gloo and ``cpu:gloo,cuda:nccl`` groups, the trainer's bound GPU for an NCCL group). Ownership maps
   partitions onto trainers (:mod:`~graphstore.client.optim.ownership`). A trainer that saw no rows
   sends empty tensors. Under a ``GradScaler`` (:mod:`~graphstore.client.optim.amp`) the gradients are
   unscaled while gathered, and a trainer that found an inf/NaN says so in its size-exchange status:
   then every trainer skips the step and nothing is pushed.
3. The owner merges what it received: unique ids, gradients of the same id averaged over all their
   occurrences (the update is non-linear, so ids must be unique), and sends one ``PushGrad`` per
   server, in parallel. The server applies the update to the rows and their state under the tensor's
   write lock (:mod:`graphstore.server.optimizer`). Each push's request IDs are fixed before it is sent:
   a push whose answer was lost is retried with the same IDs and applied once; when a server stays
   unreachable, the step raises :class:`~graphstore.errors.IncompleteWriteError` naming the servers
   that did not apply their part, and its ``retry()`` completes the step (each part applied once).
4. With more than one trainer, a last tiny ``all_reduce`` waits until every owner has pushed, so a row
   read after ``step()`` returns anywhere reflects the whole step, and a failed push raises everywhere.

Without a process group the trainer de-duplicates and pushes directly. Every wait is bounded: RPCs by
the client's deadline policy, collectives by the process group's timeout.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterable

import numpy as np
import torch
import torch.distributed as dist

from graphstore.client import checkpoint
from graphstore.client.context import get_context
from graphstore.client.device import group_device
from graphstore.client.dist_embedding import DistEmbedding
from graphstore.client.optim.amp import forget_scaler_state, recorded_param_groups, scaler_state
from graphstore.client.optim.dedup import mean_by_id, sum_duplicates
from graphstore.client.optim.exchange import (
    agree_on_push,
    exchange_rows,
    exchange_sizes,
    pack_rows,
    unpack_rows,
)
from graphstore.client.optim.ownership import owner_of, trainer_assignment
from graphstore.client.optim.step_timings import StepTimings
from graphstore.client.transport.channel import wait_all
from graphstore.client.transport.write_batch import WriteBatch
from graphstore.types import OptimizerConfig

# The status a trainer sends beside its sizes: every trainer learns whether any trainer failed
# before the gradients moved, so all of them raise together and none waits for the others.
_STATUS_OK = 0
_STATUS_FAILED = 1
_STATUS_NONFINITE = 2  # a GradScaler found an inf/NaN gradient here: every trainer skips the step


class SparseGradOptimizer:
    """Base of the distributed sparse optimizers: gradient collection, exchange and push.

    Subclasses only choose the :class:`~graphstore.types.OptimizerConfig`. Under fp16 autocast,
    ``scaler.unscale_(opt)`` and ``scaler.step(opt)`` work as for a torch optimizer, all or nothing
    across the trainer group (:mod:`graphstore.client.optim.amp`).

    Args:
        params: the DistEmbeddings to optimize (a list, or a single one).
        config: the optimizer kind and hyper-parameters, sent with every push.

    Raises:
        TypeError: a parameter that is not a DistEmbedding.
        ValueError: no parameters, the same embedding twice, a non-float32 or non-2-D embedding,
            or a bad hyper-parameter.
    """

    # GradScaler.step calls step() itself, with grad_scale / found_inf set, instead of skipping it
    # locally on an inf (see graphstore.client.optim.amp).
    _step_supports_amp_scaling = True

    def __init__(self, params, config: OptimizerConfig):
        if isinstance(params, DistEmbedding):
            params = [params]
        if not isinstance(params, Iterable) or isinstance(params, (str, bytes, torch.Tensor)):
            raise TypeError(f"params must be a list of DistEmbedding, got {type(params).__name__}")
        params = list(params)
        if not params:
            raise ValueError("params is empty: give the optimizer at least one DistEmbedding")
        names = set()
        for emb in params:
            if not isinstance(emb, DistEmbedding):
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
        self._bounds_cache: dict[tuple[str, str, int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    @property
    def params(self) -> list:
        """The optimized DistEmbeddings."""
        return list(self._params)

    @property
    def param_groups(self) -> list[dict]:
        """The rows recorded since the last step, as one parameter group: what ``GradScaler.unscale_``
        unscales (their ``.grad``) and checks for inf/NaN."""
        return recorded_param_groups(self._params)

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
        self._config = dataclasses.replace(self._config, lr=as_float(value, "lr"))

    def save(self, path):
        """Checkpoint the embeddings and their optimizer state (``graphstore.client.checkpoint.save``)."""
        return checkpoint.save(path, self._params, self)

    def load(self, path):
        """Restore the embeddings and their optimizer state (``graphstore.client.checkpoint.load``)."""
        return checkpoint.load(path, self._params, self)

    def zero_grad(self) -> None:
        """Forget the rows and gradients recorded since the last step."""
        for emb in self._params:
            emb.reset_trace()

    def step(self) -> None:
        """Apply one update to every row the embeddings recorded since the last step, on all servers.

        With a process group, every trainer of the group must call ``step()`` (a collective). Called by
        ``GradScaler.step(opt)``, it unscales the gradients and, when any trainer found an inf/NaN one,
        is skipped on every trainer (``timings.steps_skipped`` counts those steps).

        Raises:
            RuntimeError: nothing recorded since the last step / ``zero_grad()``, no gradient (no
                ``backward()``), another trainer's step failed before any gradient moved (nothing
                applied), or another trainer's push failed.
            KeyError: an embedding whose tensor no longer exists on the servers (nothing applied).
            ValueError / graphstore.errors.ServerError: a server refused or failed a push.
        """
        ctx = get_context()
        group_active = dist.is_available() and dist.is_initialized()
        inv_scale, nonfinite = scaler_state(self)
        error: BaseException | None = None
        gathered = None
        existence = None
        t0 = time.perf_counter()
        try:
            traces = self._recorded_traces()
            # The existence check's calls are in flight during the gathering and the exchange; they are
            # answered before anything is pushed.
            existence = self._start_existence_check(ctx)
            gathered = self._gather_local(traces, group_active, inv_scale)
        except Exception as exc:  # reported to the peers below, then re-raised
            error = exc
        t1 = time.perf_counter()
        try:
            if group_active:
                merged = self._exchange(ctx, gathered, error, nonfinite)
            elif error is not None:
                raise error
            else:
                merged = _SKIP if nonfinite else None
            if merged is _SKIP:  # the group agreed: a non-finite gradient somewhere, nothing changes
                self.timings.steps_skipped += 1
                return
            t2 = time.perf_counter()
            push_error: BaseException | None = None
            try:
                if merged is None:
                    merged = [mean_by_id(ids, sums, counts) for ids, sums, counts in gathered]
                merged = [(ids.cpu().numpy(), grads.cpu().numpy()) for ids, grads in merged]
                t3 = time.perf_counter()
                started, existence = existence, None  # each started call is answered exactly once
                self._check_exist(wait_all([wait for _, wait in started]), started)  # KeyError: push nothing
                self._push(ctx, merged)
            except Exception as exc:  # the peers learn about it in the agreement below
                push_error = exc
                t3 = time.perf_counter()
            t4 = time.perf_counter()
            if group_active and dist.get_world_size() > 1:
                agree_on_push(push_error, group_device())
            elif push_error is not None:
                raise push_error
            t5 = time.perf_counter()
        except BaseException:
            forget_scaler_state(self)
            raise
        finally:
            if existence:  # a step that failed before its check was read: answer the calls in flight
                try:
                    wait_all([wait for _, wait in existence])
                except Exception:  # noqa: BLE001 - the step's own error is the one raised
                    pass
            for emb in self._params:
                emb.reset_trace()
        self.timings.steps += 1
        self.timings.gather_s += t1 - t0
        self.timings.exchange_s += t2 - t1
        self.timings.merge_s += t3 - t2
        self.timings.push_s += t4 - t3
        self.timings.sync_s += t5 - t4
        self.timings.rows_pushed += sum(ids.shape[0] for ids, _ in merged)

    # -- the phases of a step -------------------------------------------------------------------

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
        self, traces, group_active: bool, inv_scale: torch.Tensor | None
    ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Per embedding: (unique ids, gradient sums, counts) recorded here, on the exchange device,
        unscaled by ``inv_scale`` (None: not scaled)."""
        device = self._exchange_device(traces, group_active)
        if inv_scale is not None:
            inv_scale = inv_scale.to(device)
        gathered = []
        for emb, trace in zip(self._params, traces, strict=True):
            id_parts, grad_parts = [], []
            for ids, rows in trace:
                if rows.grad is None:
                    continue
                id_parts.append(ids.reshape(-1).to(device=device, dtype=torch.int64))
                grad = rows.grad.detach().reshape(ids.numel(), emb.embedding_dim)
                grad = grad.to(device=device, dtype=torch.float32)
                grad_parts.append(grad if inv_scale is None else grad * inv_scale)
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

    @staticmethod
    def _start_existence_check(ctx) -> list[tuple[int, Callable[[], list]]]:
        """Ask every server for its tensors now (over the call streams, no thread); the answers are read
        by :meth:`_check_exist`."""
        started = []
        for part_id in range(ctx.num_parts):
            partition = ctx.partition(part_id)
            start = getattr(partition, "list_tensors_started", None)
            started.append((part_id, start() if start is not None else partition.list_tensors))
        return started

    def _check_exist(self, answers: list[list], started: list[tuple[int, Callable]]) -> None:
        """Every embedding's tensor still exists on every server (else nothing is pushed).

        Raises:
            KeyError: naming the embedding and the partition whose server lacks it.
        """
        wanted = [emb.name for emb in self._params]
        for (part_id, _), schemes in zip(started, answers, strict=True):
            present = {s.name for s in schemes}
            for name in wanted:
                if name not in present:
                    raise KeyError(
                        f"DistEmbedding {name!r} no longer exists on the server of partition {part_id} "
                        "(deleted or the servers restarted); nothing was updated"
                    )

    @staticmethod
    def _exchange_device(traces, group_active: bool) -> torch.device:
        """Where the gradients are gathered and exchanged: the group's device (the bound GPU with an
        NCCL group, else the CPU; see :func:`~graphstore.client.device.group_device`), or without a
        group where the gradients are."""
        if group_active:
            return group_device()
        for trace in traces:
            for _, rows in trace:
                if rows.grad is not None and rows.grad.is_cuda:
                    return rows.grad.device
        return torch.device("cpu")

    def _exchange(self, ctx, gathered, error: BaseException | None, nonfinite: bool):
        """Route every embedding's rows to their owners; returns per embedding (ids, mean grads), or
        ``_SKIP`` when a trainer found a non-finite gradient (then no row moves)."""
        world_size = dist.get_world_size()
        rank = dist.get_rank()
        device = gathered[0][0].device if gathered else self._exchange_device([], True)
        outgoing = []
        send_counts = torch.zeros((world_size, len(self._params)), dtype=torch.int64, device=device)
        if error is None and not nonfinite:
            try:
                for index, (emb, (ids, sums, counts)) in enumerate(zip(self._params, gathered, strict=True)):
                    bounds, first, count = self._owner_tables(ctx, emb, world_size, device)
                    owners = owner_of(ids, bounds, first, count)
                    order = torch.argsort(owners, stable=True)
                    send_counts[:, index] = torch.bincount(owners, minlength=world_size)
                    outgoing.append(pack_rows(ids[order], sums[order], counts[order]))
            except Exception as exc:
                error = exc
        status = _STATUS_FAILED if error is not None else _STATUS_NONFINITE if nonfinite else _STATUS_OK
        recv_counts, peer_status = exchange_sizes(send_counts, status)
        if error is not None:
            raise error
        failed = torch.nonzero(peer_status == _STATUS_FAILED).flatten().tolist()
        if failed:
            raise RuntimeError(
                f"sparse optimizer step aborted on rank {rank}: rank(s) {failed} failed before the gradient "
                "exchange (see their error); nothing was updated"
            )
        if bool((peer_status == _STATUS_NONFINITE).any()):
            return _SKIP
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
        """One PushGrad per (embedding, server), all in flight together, each with fixed request IDs.

        Raises:
            graphstore.errors.IncompleteWriteError: a server did not apply its part (named with the
                servers that did); ``retry()`` on it completes the step.
        """
        config = self._config
        batch = WriteBatch("sparse optimizer step", ctx.run_parallel)
        for emb, (ids, grads) in zip(self._params, merged, strict=True):
            if ids.size == 0:
                continue
            policy = _policy_of(ctx, emb)
            for part_id, positions, part_ids in ctx.route(ids, policy):
                partition = ctx.partition(part_id)
                part_grads = np.ascontiguousarray(grads[positions])
                prepare = getattr(partition, "prepare_push_grad", None)
                if prepare is not None:
                    send = prepare(emb.name, part_ids, part_grads, config)
                else:  # in-process: no answer can be lost
                    send = functools.partial(partition.push_grad, emb.name, part_ids, part_grads, config)
                batch.add(getattr(partition, "address", "") or f"partition {part_id}", send)
        if len(batch):
            batch.run()


# What _exchange returns when the group skips the step.
_SKIP = object()


def _policy_of(ctx, emb) -> str:
    scheme = ctx.tensor_scheme(emb.name)
    return scheme.policy if scheme is not None else "node"


def as_float(value, label: str) -> float:
    """A hyper-parameter as a float.

    Raises:
        ValueError: ``value`` is not a number (a bool is not one either); the message names ``label``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{label} must be a number, got {value!r}")
    return float(value)
