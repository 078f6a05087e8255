"""Mini-batch loaders for distributed training: sampling and feature pulls run ahead in background
threads while the model trains on the current batch.

- :class:`DistDataLoader`: batches of a dataset of IDs through a user ``collate_fn`` (DGL's API).
- :class:`DistNodeDataLoader`: node classification: ``(input_nodes, output_nodes, blocks)`` with
  the input features on ``blocks[0].srcdata`` and the labels on ``blocks[-1].dstdata``.
- :class:`DistEdgeDataLoader`: link prediction: ``(input_nodes, pair_graph, [neg_pair_graph,] blocks)``.
- :class:`RemoteFeatureCache`: an opt-in in-memory copy of the most-sampled remote nodes' features.

Every loader yields the same number of batches on every trainer rank (DDP would hang otherwise):
the ranks agree on the largest batch count (an all-reduce over ``torch.distributed`` when it is
initialized), and a rank with fewer batches adds full batches taken by wrapping around its own
(shuffled) items. Batches are produced in order by a small thread pool, ``prefetch`` batches ahead;
an exception raised while producing a batch is raised by ``next()`` for that batch, and leaving the
loop early (``break``, an exception, garbage collection of the iterator) cancels the batches not
started and joins the threads.
"""

from __future__ import annotations

import collections
import functools
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from graphstore import dtypes
from graphstore.client.block import Block, compact_ids
from graphstore.client.buffers import RowBufferPool
from graphstore.client.constants import EID, NID
from graphstore.client.context import current_context
from graphstore.client.samplers import Uniform
from graphstore.client.sampling import find_edges, graph_context
from graphstore.ids import as_id_array
from graphstore.priority import DEFAULT_BACKGROUND_NICE, lower_thread_priority

LOADER_THREAD_PREFIX = "graphstore-loader"
# Feature buffers recycled per loaded feature: enough for the default prefetch of 2, the batch in
# training and the one being produced (more prefetch just allocates the extra batches afresh).
_RECYCLED_BATCHES = 4
EXCLUDE_MODES = (None, "self", "reverse_id")


# -- pure helpers ----------------------------------------------------------------------------------
def num_batches(num_items: int, batch_size: int, drop_last: bool) -> int:
    """How many batches ``num_items`` items make."""
    return num_items // batch_size if drop_last else -(-num_items // batch_size)


def batch_plan(
    num_items: int,
    batch_size: int,
    num_batches_total: int,
    drop_last: bool,
    order: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Positions of the items in each batch of one epoch.

    The first ``num_batches(num_items, batch_size, drop_last)`` batches cover ``order`` once (the
    last one may be short unless ``drop_last``); batches past those (to reach ``num_batches_total``)
    are full batches continuing around ``order`` cyclically, without repeating an item inside a batch.

    Args:
        num_items: number of items of this rank.
        batch_size: items per batch.
        num_batches_total: batches to produce (at least this rank's own count).
        drop_last: drop the last short batch of the rank's own items.
        order: the epoch's item order (a permutation of ``range(num_items)``); identity when None.

    Returns:
        One int64 position array per batch.

    Raises:
        ValueError: padding batches requested while the rank has no items.
    """
    if order is None:
        order = np.arange(num_items, dtype=np.int64)
    own = num_batches(num_items, batch_size, drop_last)
    plan = [order[start : start + batch_size] for start in range(0, own * batch_size, batch_size)]
    if num_batches_total > own:
        if num_items == 0:
            raise ValueError(
                f"this rank has no items but other ranks have {num_batches_total} batches; give every "
                "rank at least one item (node_split / edge_split do)"
            )
        width = min(batch_size, num_items)
        for index in range(own, num_batches_total):
            positions = (index * batch_size + np.arange(width)) % num_items
            plan.append(order[positions])
    return plan


def agree_on_batch_count(own_batches: int, num_items: int) -> tuple[int, int]:
    """The largest batch count and the smallest item count over the ranks of the default
    ``torch.distributed`` group (a collective call: every rank must make it), or
    ``(own_batches, num_items)`` when no group is initialized."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return own_batches, num_items
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    counts = torch.tensor([own_batches, -num_items], dtype=torch.int64, device=device)
    dist.all_reduce(counts, op=dist.ReduceOp.MAX)
    return int(counts[0]), -int(counts[1])


# -- background production -------------------------------------------------------------------------
class PrefetchIterator:
    """Produces ``produce(item)`` for each item of ``items`` in order, ``prefetch`` ahead in worker threads.

    ``prefetch=0`` produces each batch in the caller's thread when asked (no threads). The worker
    threads run ``background_nice`` lower than normal (see :mod:`graphstore.priority`).
    """

    def __init__(
        self,
        produce: Callable,
        items: Sequence,
        prefetch: int,
        num_workers: int = 1,
        background_nice: int = 0,
    ):
        self._produce = produce
        self._items = items
        self._prefetch = max(0, int(prefetch))
        self._next_submit = 0
        self._next_yield = 0
        self._pending: collections.deque[Future] = collections.deque()
        self._executor: ThreadPoolExecutor | None = None
        if self._prefetch > 0 and len(items) > 0:
            workers = max(1, min(int(num_workers), self._prefetch))
            self._executor = ThreadPoolExecutor(
                workers,
                thread_name_prefix=LOADER_THREAD_PREFIX,
                initializer=functools.partial(lower_thread_priority, background_nice),
            )
            self._fill()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self):
        return self

    def _fill(self) -> None:
        while len(self._pending) < self._prefetch and self._next_submit < len(self._items):
            self._pending.append(self._executor.submit(self._produce, self._items[self._next_submit]))
            self._next_submit += 1

    def __next__(self):
        if self._executor is None:
            if self._next_yield >= len(self._items):
                raise StopIteration
            item = self._items[self._next_yield]
            self._next_yield += 1
            return self._produce(item)
        if not self._pending:
            self.close()
            raise StopIteration
        future = self._pending.popleft()
        self._fill()
        try:
            result = future.result()
        except BaseException:
            self.close()
            raise
        self._next_yield += 1
        return result

    def close(self) -> None:
        """Cancel the batches not started, wait for the running ones, end the threads. Idempotent."""
        executor, self._executor = self._executor, None
        self._next_yield = len(self._items)
        if executor is None:
            return
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        executor.shutdown(wait=True, cancel_futures=True)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to clean
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _LoaderBase:
    """Shared machinery: the item array, shuffling, equal batch counts, prefetching iterators."""

    def __init__(
        self,
        num_items: int,
        batch_size: int,
        shuffle: bool,
        drop_last: bool,
        prefetch: int,
        num_workers: int,
        seed: int | None,
        equal_batches: bool,
    ):
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if int(prefetch) < 0:
            raise ValueError(f"prefetch must be >= 0, got {prefetch}")
        if int(num_workers) < 1:
            raise ValueError(f"num_workers must be at least 1, got {num_workers}")
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.prefetch = int(prefetch)
        self.num_workers = int(num_workers)
        self._seed = seed
        self._epoch = 0
        self._num_items = int(num_items)
        self.num_own_batches = num_batches(self._num_items, self.batch_size, self.drop_last)
        if equal_batches:
            most, fewest_items = agree_on_batch_count(self.num_own_batches, self._num_items)
            if most > 0 and fewest_items == 0:
                # A rank without items cannot pad its batches and every other rank would wait for it
                # in DDP: fail on every rank alike.
                raise ValueError(
                    f"a trainer rank has no items while another has {most} batches; give every rank at "
                    "least one item (node_split / edge_split do)"
                )
            self._num_batches = most
        else:
            self._num_batches = self.num_own_batches
        self._iterators: weakref.WeakSet[PrefetchIterator] = weakref.WeakSet()

    def __len__(self) -> int:
        return self._num_batches

    def _epoch_order(self) -> np.ndarray:
        if not self.shuffle:
            return np.arange(self._num_items, dtype=np.int64)
        seed = None if self._seed is None else (self._seed, self._epoch)
        return np.random.default_rng(seed).permutation(self._num_items)

    def _produce(self, positions: np.ndarray):
        raise NotImplementedError

    def __iter__(self) -> PrefetchIterator:
        plan = batch_plan(
            self._num_items, self.batch_size, self._num_batches, self.drop_last, self._epoch_order()
        )
        self._epoch += 1
        ctx = current_context()
        nice = ctx.background_nice if ctx is not None else DEFAULT_BACKGROUND_NICE
        iterator = PrefetchIterator(self._produce, plan, self.prefetch, self.num_workers, nice)
        self._iterators.add(iterator)
        return iterator

    def close(self) -> None:
        """Stop every iterator of this loader that is still running."""
        for iterator in list(self._iterators):
            iterator.close()


def _as_item_ids(ids, name: str) -> np.ndarray:
    """IDs or a boolean mask -> int64 IDs."""
    if isinstance(ids, torch.Tensor) and ids.dtype == torch.bool:
        return torch.nonzero(ids, as_tuple=True)[0].numpy()
    if isinstance(ids, np.ndarray) and ids.dtype == np.bool_:
        return np.flatnonzero(ids)
    return as_id_array(ids, name)


class DistDataLoader(_LoaderBase):
    """Batches of a dataset through ``collate_fn``, produced in background threads.

    Args:
        dataset: a tensor / numpy array of IDs (or any indexable sequence).
        batch_size: items per batch.
        shuffle: reshuffle every epoch.
        collate_fn: turns a batch (same kind as ``dataset``: a tensor slice for a tensor) into what the
            loader yields; identity by default.
        drop_last: drop the last short batch.
        queue_size: DGL's name for ``prefetch`` (used when given).
        prefetch: batches produced ahead (0: produce in the caller's thread).
        num_workers: background threads.
        seed: shuffling seed (epoch ``e`` uses ``(seed, e)``).
        equal_batches: agree with the other trainer ranks on the batch count (a collective call
            at construction when ``torch.distributed`` is initialized).
    """

    def __init__(
        self,
        dataset,
        batch_size: int,
        shuffle: bool = False,
        collate_fn: Callable | None = None,
        drop_last: bool = False,
        queue_size: int | None = None,
        *,
        prefetch: int = 2,
        num_workers: int = 1,
        seed: int | None = None,
        equal_batches: bool = True,
    ):
        self.dataset = dataset
        self.collate_fn = collate_fn
        super().__init__(
            len(dataset),
            batch_size,
            shuffle,
            drop_last,
            queue_size if queue_size is not None else prefetch,
            num_workers,
            seed,
            equal_batches,
        )

    def _produce(self, positions: np.ndarray):
        if isinstance(self.dataset, torch.Tensor):
            batch = self.dataset[torch.from_numpy(positions)]
        elif isinstance(self.dataset, np.ndarray):
            batch = self.dataset[positions]
        else:
            batch = [self.dataset[int(p)] for p in positions]
        return self.collate_fn(batch) if self.collate_fn is not None else batch


class RemoteFeatureCache:
    """An in-memory copy of a read-only node feature for the remote nodes sampled most often.

    A sampled node enters a batch through one of its out-edges (in-edges with ``edge_dir='out'``), so
    the nodes of highest out-degree outside the co-located partition are the ones whose rows most
    often cross the network. The cache pulls the rows of the top ``fraction`` of them once; reads
    serve those rows from memory and ask the DistTensor (co-located reads, RPCs) for the rest.
    Only features loaded from the partition files and never written are cached (rows cannot change).

    Args:
        g: the DistGraph.
        name: the node feature.
        fraction: share (0..1] of the non-co-located nodes to cache.
        edge_dir: the sampler's edge direction (ranks nodes by out- or in-degree).

    Raises:
        KeyError: an unknown feature.
        ValueError: a writable or run-time feature, or a fraction outside (0, 1].
    """

    _DENSE_SLOTS_MAX_NODES = 1 << 26

    def __init__(self, g, name: str, fraction: float, edge_dir: str = "in"):
        if not 0.0 < float(fraction) <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        tensor = g.ndata[name]
        scheme = tensor.scheme
        if scheme.writable or not scheme.from_partition:
            raise ValueError(
                f"node feature {name!r} is writable or created at run time; only read-only partition "
                "features can be cached"
            )
        ctx = graph_context(g)
        num_nodes = int(g.num_nodes())
        candidates = np.arange(num_nodes, dtype=np.int64)
        if ctx.local_part_id is not None:
            start, end = ctx.book.node_bounds[ctx.local_part_id], ctx.book.node_bounds[ctx.local_part_id + 1]
            candidates = np.concatenate([candidates[:start], candidates[end:]])
        count = int(round(float(fraction) * candidates.size))
        if count and count < candidates.size:
            degree = (g.out_degrees if edge_dir == "in" else g.in_degrees)(
                torch.from_numpy(candidates)
            ).numpy()
            candidates = candidates[np.argpartition(-degree, count - 1)[:count]]
        self.node_ids = np.sort(candidates[:count])
        self.name = name
        self._tensor = tensor
        self._dtype = scheme.dtype
        self._rows = tensor.pull_storage(self.node_ids)
        if num_nodes <= self._DENSE_SLOTS_MAX_NODES:
            self._slots = np.full(num_nodes, -1, dtype=np.int32)
            self._slots[self.node_ids] = np.arange(self.node_ids.size, dtype=np.int32)
        else:
            self._slots = None
        self._lock = threading.Lock()
        self.hits = 0
        self.lookups = 0

    @property
    def nbytes(self) -> int:
        """Memory the cached rows take."""
        return int(self._rows.nbytes)

    @property
    def hit_rate(self) -> float:
        """Share of the rows read so far that came from the cache."""
        return self.hits / self.lookups if self.lookups else 0.0

    def _slots_of(self, ids: np.ndarray) -> np.ndarray:
        if self._slots is not None:
            return self._slots[ids]
        where = np.minimum(np.searchsorted(self.node_ids, ids), max(self.node_ids.size - 1, 0))
        found = self.node_ids.size > 0 and (self.node_ids[where] == ids)
        return np.where(found, where, -1)

    def read(self, ids) -> torch.Tensor:
        """The feature rows of ``ids`` (same values and dtype as ``g.ndata[name][ids]``)."""
        ids = as_id_array(ids, "ids")
        slots = self._slots_of(ids)
        hit = slots >= 0
        hits = int(hit.sum())
        with self._lock:
            self.hits += hits
            self.lookups += ids.size
        if hits == ids.size:
            out = self._rows[slots]
        else:
            out = np.empty((ids.size, *self._rows.shape[1:]), dtype=self._rows.dtype)
            out[hit] = self._rows[slots[hit]]
            miss = ~hit
            out[miss] = self._tensor.pull_storage(ids[miss])
        return dtypes.to_torch(out, self._dtype)


class _GraphLoaderBase(_LoaderBase):
    """Feature pulls and device moves shared by the node and edge loaders."""

    def _init_graph(self, g, sampler, device, load_features, load_labels, cache_remote_features=0.0) -> None:
        self.g = g
        self.graph_sampler = sampler
        self.device = torch.device(device) if device is not None else None
        if isinstance(load_features, str):
            load_features = (load_features,)
        self.load_features = tuple(load_features or ())
        self.load_labels = load_labels
        available = set(g.ndata.keys())
        wanted = list(self.load_features) + ([load_labels] if load_labels else [])
        for name in wanted:
            if name not in available:
                raise KeyError(
                    f"node data {name!r} does not exist on the graph (available: {sorted(available)}); "
                    "pass load_features=() / load_labels=None to load nothing"
                )
        # Input features of a batch are tens of MB: their memory is recycled once a batch is dropped.
        self._buffers = RowBufferPool(max_buffers=_RECYCLED_BATCHES * max(1, len(self.load_features)))
        self.feature_caches: dict[str, RemoteFeatureCache] = {}
        if isinstance(cache_remote_features, Mapping):
            self.feature_caches = {n: c for n, c in cache_remote_features.items() if n in self.load_features}
        elif cache_remote_features:
            edge_dir = getattr(sampler, "edge_dir", "in")
            for name in self.load_features:
                self.feature_caches[name] = RemoteFeatureCache(g, name, cache_remote_features, edge_dir)

    def _attach(
        self, input_nodes: torch.Tensor, output_nodes: torch.Tensor | None, blocks: list[Block]
    ) -> None:
        for name in self.load_features:
            cache = self.feature_caches.get(name)
            if cache is not None:
                rows = cache.read(input_nodes)
            else:
                rows = self.g.ndata[name].read(input_nodes, buffers=self._buffers)
            blocks[0].srcdata[name] = rows
        if self.load_labels and output_nodes is not None:
            blocks[-1].dstdata[self.load_labels] = self.g.ndata[self.load_labels][output_nodes]

    def _move(self, obj):
        if self.device is None:
            return obj
        if isinstance(obj, (Block, PairGraph)):
            return obj.to(self.device)
        if isinstance(obj, torch.Tensor):
            return obj.to(self.device)
        if isinstance(obj, list):
            return [self._move(o) for o in obj]
        return obj


class DistNodeDataLoader(_GraphLoaderBase):
    """Mini-batches for node classification: ``(input_nodes, output_nodes, blocks)``.

    ``blocks[0].srcdata[f]`` holds the input features ``f`` of ``load_features`` and
    ``blocks[-1].dstdata[load_labels]`` the output nodes' labels, pulled in the background.

    Args:
        g: the DistGraph.
        nids: the training node IDs of this rank (e.g. from ``node_split``), or a boolean mask.
        sampler: a :class:`~graphstore.client.samplers.NeighborSampler` (anything with ``sample_blocks``).
        batch_size, shuffle, drop_last: as in PyTorch.
        device: where to put the blocks and their data (default: CPU).
        load_features: node features to pull for the input nodes.
        load_labels: node data to pull for the output nodes (None: none).
        prefetch: batches produced ahead (0: no background threads).
        num_workers: background threads.
        seed: shuffling seed.
        equal_batches: agree with the other trainer ranks on the batch count.
        cache_remote_features: keep this share (0..1) of the other partitions' nodes' input features
            in memory, chosen by degree (see :class:`RemoteFeatureCache`); 0 caches nothing; or a
            ``{feature: RemoteFeatureCache}`` mapping to share caches between loaders.

    Raises:
        KeyError: a feature or label name the graph does not have.
        ValueError: bad sizes, or a cache of a writable feature.
    """

    def __init__(
        self,
        g,
        nids,
        sampler,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        device=None,
        load_features: Sequence[str] | str = ("feat",),
        load_labels: str | None = "label",
        prefetch: int = 2,
        num_workers: int = 1,
        seed: int | None = None,
        equal_batches: bool = True,
        cache_remote_features: float | Mapping[str, RemoteFeatureCache] = 0.0,
    ):
        self.nids = _as_item_ids(nids, "nids")
        self._init_graph(g, sampler, device, load_features, load_labels, cache_remote_features)
        super().__init__(
            self.nids.size, batch_size, shuffle, drop_last, prefetch, num_workers, seed, equal_batches
        )

    def _produce(self, positions: np.ndarray):
        seeds = self.nids[positions]
        input_nodes, output_nodes, blocks = self.graph_sampler.sample_blocks(self.g, seeds)
        self._attach(input_nodes, output_nodes, blocks)
        return self._move(input_nodes), self._move(output_nodes), self._move(blocks)


class PairGraph:
    """The edges of a link-prediction batch (positive or negative pairs) over compact node IDs.

    Its nodes are the batch's seed nodes (the output nodes of the blocks, same order): ``edges()``
    gives local endpoints, ``ndata[NID]`` the nodes' global IDs, ``edata[EID]`` the global edge IDs
    (positive pairs only).
    """

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, node_ids: torch.Tensor, eids=None):
        self._src, self._dst = src, dst
        self.ndata: dict[str, torch.Tensor] = {NID: node_ids}
        self.edata: dict[str, torch.Tensor] = {} if eids is None else {EID: eids}

    def num_nodes(self) -> int:
        """Number of nodes (the batch's seed nodes)."""
        return int(self.ndata[NID].shape[0])

    number_of_nodes = num_nodes

    def num_edges(self) -> int:
        """Number of pairs."""
        return int(self._src.shape[0])

    number_of_edges = num_edges

    def edges(self, form: str = "uv"):
        """``(src, dst)`` local IDs (``form="uv"``), or with the local edge IDs (``form="all"``).

        Raises:
            ValueError: for an unknown ``form``.
        """
        if form == "uv":
            return self._src, self._dst
        if form == "all":
            return self._src, self._dst, torch.arange(self.num_edges(), device=self._src.device)
        raise ValueError(f"form must be 'uv' or 'all', got {form!r}")

    @property
    def edge_index(self) -> torch.Tensor:
        """``[2, E]`` local edge index."""
        return torch.stack([self._src, self._dst])

    def to(self, device, non_blocking: bool = False) -> PairGraph:
        """A copy on ``device``."""
        out = PairGraph.__new__(PairGraph)
        out._src = self._src.to(device, non_blocking=non_blocking)
        out._dst = self._dst.to(device, non_blocking=non_blocking)
        out.ndata = {k: v.to(device, non_blocking=non_blocking) for k, v in self.ndata.items()}
        out.edata = {k: v.to(device, non_blocking=non_blocking) for k, v in self.edata.items()}
        return out

    def __repr__(self) -> str:
        return f"PairGraph(num_nodes={self.num_nodes()}, num_edges={self.num_edges()})"


class DistEdgeDataLoader(_GraphLoaderBase):
    """Mini-batches for link prediction over edges.

    Yields ``(input_nodes, pair_graph, blocks)``, or ``(input_nodes, pair_graph, neg_pair_graph, blocks)``
    with a negative sampler; the blocks' output nodes are the pair graphs' nodes (every endpoint of
    the batch's positive and negative pairs). The batch's own edges can be kept out of the sampled
    blocks, so the model does not see the edges it must predict.

    Args:
        g: the DistGraph.
        eids: the training edge IDs of this rank (e.g. from ``edge_split``), or a boolean mask.
        sampler: a NeighborSampler.
        batch_size, shuffle, drop_last: as in PyTorch.
        negative_sampler: ``Uniform(k)`` or any callable ``(g, eids) -> (neg_src, neg_dst)``.
        exclude: ``None``, ``'self'`` (drop the batch's edges from the blocks) or ``'reverse_id'``
            (also their reverse edges, given by ``reverse_eids``).
        reverse_eids: for ``'reverse_id'``: ``reverse_eids[e]`` is the ID of edge ``e``'s reverse.
        device, load_features, prefetch, num_workers, seed, equal_batches, cache_remote_features: as in
            DistNodeDataLoader.

    Raises:
        ValueError: an unknown ``exclude``, or ``'reverse_id'`` without a full ``reverse_eids``.
        KeyError: a feature name the graph does not have.
    """

    def __init__(
        self,
        g,
        eids,
        sampler,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        negative_sampler: Callable | None = None,
        exclude: str | None = None,
        reverse_eids=None,
        device=None,
        load_features: Sequence[str] | str = ("feat",),
        prefetch: int = 2,
        num_workers: int = 1,
        seed: int | None = None,
        equal_batches: bool = True,
        cache_remote_features: float | Mapping[str, RemoteFeatureCache] = 0.0,
    ):
        if exclude not in EXCLUDE_MODES:
            raise ValueError(f"exclude must be one of {EXCLUDE_MODES}, got {exclude!r}")
        self.eids = _as_item_ids(eids, "eids")
        self._init_graph(g, sampler, device, load_features, None, cache_remote_features)
        self._num_nodes = int(graph_context(g).book.num_nodes())
        num_edges = int(graph_context(g).book.num_edges())
        self.reverse_eids = None
        if exclude == "reverse_id":
            if reverse_eids is None:
                raise ValueError("exclude='reverse_id' needs reverse_eids (the reverse edge of each edge)")
            self.reverse_eids = as_id_array(reverse_eids, "reverse_eids")
            if self.reverse_eids.size != num_edges:
                raise ValueError(
                    f"reverse_eids must have one entry per edge ({num_edges}), got {self.reverse_eids.size}"
                )
        self.exclude = exclude
        self.negative_sampler = negative_sampler
        super().__init__(
            self.eids.size, batch_size, shuffle, drop_last, prefetch, num_workers, seed, equal_batches
        )

    def _produce(self, positions: np.ndarray):
        batch_eids = self.eids[positions]
        src, dst = find_edges(self.g, batch_eids)
        src_np, dst_np = src.numpy(), dst.numpy()
        arrays = [src_np, dst_np]
        if self.negative_sampler is not None:
            if isinstance(self.negative_sampler, Uniform):
                neg_src, neg_dst = self.negative_sampler.from_sources(src_np, self._num_nodes)
            else:
                neg_src, neg_dst = self.negative_sampler(self.g, torch.from_numpy(batch_eids))
            arrays += [as_id_array(neg_src, "neg_src"), as_id_array(neg_dst, "neg_dst")]
        seeds, local = compact_ids(np.empty(0, dtype=np.int64), arrays, self._num_nodes)
        seeds_t = torch.from_numpy(seeds)
        excluded = None
        if self.exclude == "self":
            excluded = batch_eids
        elif self.exclude == "reverse_id":
            excluded = np.concatenate([batch_eids, self.reverse_eids[batch_eids]])
        input_nodes, _, blocks = self.graph_sampler.sample_blocks(self.g, seeds_t, exclude_eids=excluded)
        self._attach(input_nodes, None, blocks)
        pair = PairGraph(
            torch.from_numpy(local[0]), torch.from_numpy(local[1]), seeds_t, torch.from_numpy(batch_eids)
        )
        if self.negative_sampler is None:
            return self._move(input_nodes), self._move(pair), self._move(blocks)
        neg_pair = PairGraph(torch.from_numpy(local[2]), torch.from_numpy(local[3]), seeds_t)
        return self._move(input_nodes), self._move(pair), self._move(neg_pair), self._move(blocks)
