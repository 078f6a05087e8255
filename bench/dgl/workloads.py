"""The workloads of the side-by-side benchmark, written once and run against either system.

Each function takes a *system*: an adapter (``system_graphstore.py`` or ``system_dgl.py``) with the
same small interface over graphstore's client or DGL's ``dgl.distributed`` client:

- ``num_nodes``, ``part_ranges`` (the system's node-ID range ``[start, end)`` per partition) and
  ``to_system_ids(original_ids)`` (original graph IDs -> the system's relabelled IDs);
- ``pull(ids)``: the feature rows ``g.ndata['feat'][ids]``;
- ``sample_one_hop(seeds, fanout)``: ``sample_neighbors`` of the seeds, returns the edge count;
- ``sample_blocks(seeds, fanouts)``: the system's ``NeighborSampler(fanouts).sample_blocks``,
  returns ``(input_nodes, output_nodes, blocks)``;
- ``embedding(num_rows, dim, name)`` and ``sparse_adagrad(embedding, lr)``;
- ``thread_safe``: False when concurrent calls from several threads are not supported (the
  multi-thread pulls then serialize the calls with a lock, as an application would have to);
- optionally ``wire_counts()``: ``{method: {"calls", "request_bytes", "answer_bytes"}}`` sent to the
  servers so far (graphstore's ``call_counts()``); where it exists, the 1-hop workload records what
  its timed calls sent and received (``wire``), which sizes the 1-hop gRPC ceiling.

Every random choice comes from a seed and is drawn in the *original* ID space (or as positions
inside a partition), so both systems get the same work: the same original nodes, mapped through
each system's own relabelling. numpy and torch only: this module runs in both venvs.
"""

from __future__ import annotations

import contextlib
import fnmatch
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

LOCALITIES = ("local", "remote", "mixed")
PULL_ROWS = (1_000, 10_000, 100_000)
PULL_THREADS = (1, 4)
ADAGRAD_ROWS = (1_000, 10_000)
EMBEDDING_DIM = 64
ONE_HOP_SEEDS, ONE_HOP_FANOUT = 1024, 10
TWO_HOP_BATCH, TWO_HOP_FANOUTS = 1024, (25, 10)
# The headline figures (``make bench-dgl-publish``, the README's table): the remote and mixed pulls of
# 1k and 10k rows, the 1-hop sample, the 2-hop batch with features, SparseAdagrad on 1k rows, the
# epoch and the partitioner.
HEADLINE = (
    "pull/remote/1000/*",
    "pull/remote/10000/*",
    "pull/mixed/1000/*",
    "pull/mixed/10000/*",
    "sample/1hop",
    "sample/2hop+feat",
    "adagrad/1000",
    "graphsage_epoch",
    "partition",
)


@dataclass
class Repeats:
    """How many timed calls each workload makes (after ``warmup`` untimed ones)."""

    pull_rows_per_measure: int = 300_000
    pull_min_calls: int = 8
    one_hop: int = 30
    two_hop: int = 10
    adagrad_steps: int = 12
    warmup: int = 2

    @classmethod
    def quick(cls) -> Repeats:
        """A few calls each: the smoke mode."""
        return cls(
            pull_rows_per_measure=60_000, pull_min_calls=4, one_hop=8, two_hop=3, adagrad_steps=4, warmup=1
        )


def init_uniform(shape, dtype) -> torch.Tensor:
    """Initial embedding rows, uniform in [-0.01, 0.01] (module level: DGL pickles it to the servers)."""
    return torch.empty(tuple(shape), dtype=dtype).uniform_(-0.01, 0.01)


def embedding_name(rows: int) -> str:
    """The DistEmbedding name of the SparseAdagrad workload on ``rows`` rows."""
    return f"bench_emb_{rows}"


def ids_for(system, rng: np.random.Generator, locality: str, count: int) -> torch.Tensor:
    """``count`` random node IDs (with replacement) of the system for a locality.

    ``local``: positions in partition 0 (the client's co-located one), ``remote``: positions in
    partition 1, ``mixed``: original IDs over the whole graph, mapped to the system's IDs.
    """
    if locality == "mixed":
        return system.to_system_ids(rng.integers(0, system.num_nodes, count))
    part = {"local": 0, "remote": 1}[locality]
    start, end = system.part_ranges[part]
    positions = rng.integers(0, 2**62, count) % (end - start)
    return torch.from_numpy(positions + start)


def pull_calls(rows: int, threads: int, repeats: Repeats) -> int:
    """Timed calls of a pull measurement: about ``pull_rows_per_measure`` rows, a multiple of ``threads``."""
    calls = max(repeats.pull_min_calls, repeats.pull_rows_per_measure // rows)
    return -(-calls // threads) * threads


def pull(system, locality: str, rows: int, threads: int, seed: int, repeats: Repeats) -> dict:
    """Throughput of ``g.ndata['feat'][ids]`` from ``threads`` client threads: rows/s and MB/s."""
    calls = pull_calls(rows, threads, repeats)
    rng = np.random.default_rng([seed, rows, LOCALITIES.index(locality)])
    id_sets = [ids_for(system, rng, locality, rows) for _ in range(calls + repeats.warmup)]
    for ids in id_sets[: repeats.warmup]:
        system.pull(ids)
    timed = id_sets[repeats.warmup :]
    lock = contextlib.nullcontext() if system.thread_safe else threading.Lock()

    def pull_shard(shard) -> int:
        width = 0
        for ids in shard:
            with lock:
                width = system.pull(ids).shape[1]
        return width

    start = time.perf_counter()
    if threads == 1:
        widths = [pull_shard(timed)]
    else:
        with ThreadPoolExecutor(threads) as pool:
            widths = list(pool.map(pull_shard, [timed[k::threads] for k in range(threads)]))
    seconds = time.perf_counter() - start
    row_bytes = widths[0] * 4
    total_rows = calls * rows
    return {
        "rows_per_s": total_rows / seconds,
        "mb_per_s": total_rows * row_bytes / seconds / 1e6,
        "calls": calls,
    }


def one_hop(system, seed: int, repeats: Repeats) -> dict:
    """``sample_neighbors`` of 1,024 random seeds with fanout 10: seeds/s (median call)."""
    rng = np.random.default_rng([seed, 1])
    seed_sets = [
        system.to_system_ids(rng.choice(system.num_nodes, ONE_HOP_SEEDS, replace=False))
        for _ in range(repeats.one_hop + repeats.warmup)
    ]
    for seeds in seed_sets[: repeats.warmup]:
        system.sample_one_hop(seeds, ONE_HOP_FANOUT)
    wire_counts = getattr(system, "wire_counts", None)
    before = wire_counts() if wire_counts else None
    times, edges = [], []
    for seeds in seed_sets[repeats.warmup :]:
        start = time.perf_counter()
        edges.append(system.sample_one_hop(seeds, ONE_HOP_FANOUT))
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    result = {
        "seeds_per_s": ONE_HOP_SEEDS / median,
        "median_ms": median * 1e3,
        "edges_per_call": float(np.mean(edges)),
        "samples": len(times),
    }
    if wire_counts:
        result["wire"] = wire_difference(before, wire_counts())
    return result


def wire_difference(before: dict, after: dict) -> dict:
    """What was sent between two ``wire_counts()`` snapshots, per method with at least one call.

    >>> wire_difference({"Pull": {"calls": 1, "request_bytes": 8, "answer_bytes": 40}},
    ...                 {"Pull": {"calls": 3, "request_bytes": 24, "answer_bytes": 120}})
    {'Pull': {'calls': 2, 'request_bytes': 16, 'answer_bytes': 80}}
    """
    zero = {"calls": 0, "request_bytes": 0, "answer_bytes": 0}
    difference = {}
    for method, counts in after.items():
        earlier = before.get(method, zero)
        change = {field: counts[field] - earlier[field] for field in zero}
        if change["calls"]:
            difference[method] = change
    return difference


def two_hop(system, seed: int, repeats: Repeats, with_features: bool) -> dict:
    """Blocks of a 1,024-seed batch, fanouts [25, 10] (and the input nodes' features): batches/s."""
    rng = np.random.default_rng([seed, 2])
    seed_sets = [
        system.to_system_ids(rng.choice(system.num_nodes, TWO_HOP_BATCH, replace=False))
        for _ in range(repeats.two_hop + repeats.warmup)
    ]

    def batch(seeds):
        input_nodes, _, _ = system.sample_blocks(seeds, TWO_HOP_FANOUTS)
        if with_features:
            system.pull(input_nodes)
        return int(input_nodes.shape[0])

    for seeds in seed_sets[: repeats.warmup]:
        batch(seeds)
    times, inputs = [], []
    for seeds in seed_sets[repeats.warmup :]:
        start = time.perf_counter()
        inputs.append(batch(seeds))
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    return {"batches_per_s": 1.0 / median, "median_ms": median * 1e3, "input_nodes": float(np.mean(inputs))}


def sparse_adagrad(system, rows: int, seed: int, repeats: Repeats, name: str, steps: int) -> dict:
    """Training steps of a ``[num_nodes, 64]`` DistEmbedding with SparseAdagrad on ``rows`` unique rows.

    A step reads the rows (``emb(ids)``), backpropagates ``sum(rows**2)`` and calls ``step()``;
    ``steps`` timed steps follow the warm-up ones (0: the embedding and optimizer are only created).
    """
    emb = system.embedding(system.num_nodes, EMBEDDING_DIM, name)
    optimizer = system.sparse_adagrad(emb, 0.01)
    if steps == 0:
        return {}
    rng = np.random.default_rng([seed, 3, rows])
    id_sets = [
        system.to_system_ids(rng.choice(system.num_nodes, rows, replace=False))
        for _ in range(steps + repeats.warmup)
    ]

    def step(ids):
        values = emb(ids)
        (values * values).sum().backward()
        optimizer.step()

    for ids in id_sets[: repeats.warmup]:
        step(ids)
    start = time.perf_counter()
    for ids in id_sets[repeats.warmup :]:
        step(ids)
    seconds = time.perf_counter() - start
    return {"steps_per_s": steps / seconds, "ms_per_step": seconds * 1e3 / steps}


def selected(key: str, patterns: list[str] | None) -> bool:
    """Whether workload ``key`` matches one of the shell-style ``patterns`` (None: every workload).

    >>> selected("pull/mixed/1000/4t", ["pull/mixed/*"]), selected("sample/1hop", ["pull/*"])
    (True, False)
    """
    return patterns is None or any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns)


def client_workloads(system, seed: int, repeats: Repeats, patterns: list[str] | None = None) -> dict:
    """The single-client workloads whose keys match ``patterns`` (None: all), in a fixed order;
    returns ``{workload key: figures}``.

    The SparseAdagrad embeddings and optimizers are created even when their steps are not selected:
    DGL creates them collectively with its peer client, which always takes part.
    """
    results = {}
    for locality in LOCALITIES:
        for rows in PULL_ROWS:
            for threads in PULL_THREADS:
                key = f"pull/{locality}/{rows}/{threads}t"
                if selected(key, patterns):
                    results[key] = pull(system, locality, rows, threads, seed, repeats)
    if selected("sample/1hop", patterns):
        results["sample/1hop"] = one_hop(system, seed, repeats)
    if selected("sample/2hop", patterns):
        results["sample/2hop"] = two_hop(system, seed, repeats, with_features=False)
    if selected("sample/2hop+feat", patterns):
        results["sample/2hop+feat"] = two_hop(system, seed, repeats, with_features=True)
    for rows in ADAGRAD_ROWS:
        key = f"adagrad/{rows}"
        steps = repeats.adagrad_steps if selected(key, patterns) else 0
        result = sparse_adagrad(system, rows, seed, repeats, embedding_name(rows), steps)
        if steps:
            results[key] = result
    return results
