"""Background threads of a trainer run at a lower scheduling priority than its training thread."""

from __future__ import annotations

import functools
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from graphstore.client.context import get_context, set_context
from graphstore.client.dataloader import LOADER_THREAD_PREFIX, DistNodeDataLoader
from graphstore.client.dist_graph import DistGraph
from graphstore.client.samplers import NeighborSampler
from graphstore.priority import DEFAULT_BACKGROUND_NICE, MAX_NICE, check_nice, lower_thread_priority
from tests.utils.graphs import make_partitioned_graph

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")


def thread_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@linux_only
def test_lower_thread_priority_changes_only_the_calling_thread():
    base = thread_nice()
    with ThreadPoolExecutor(1, initializer=functools.partial(lower_thread_priority, 3)) as pool:
        assert pool.submit(thread_nice).result() == min(base + 3, MAX_NICE)
    assert thread_nice() == base  # the caller keeps its priority
    with ThreadPoolExecutor(1, initializer=functools.partial(lower_thread_priority, 0)) as pool:
        assert pool.submit(thread_nice).result() == base


@linux_only
def test_lower_thread_priority_caps_at_19():
    def twice() -> int:
        lower_thread_priority(15)
        lower_thread_priority(15)
        return thread_nice()

    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(twice).result() == MAX_NICE


@pytest.mark.parametrize("bad", [-1, 20, 1.5, True, "10"])
def test_check_nice_rejects_bad_values(bad):
    with pytest.raises(ValueError, match="background_nice"):
        check_nice(bad)


@linux_only
def test_rpc_pool_and_loader_threads_run_below_the_training_thread(tmp_path):
    config, graph = make_partitioned_graph(tmp_path, num_nodes=400, num_parts=2)
    g = DistGraph("testgraph", part_config=config)
    try:
        ctx = get_context()
        assert ctx.background_nice == DEFAULT_BACKGROUND_NICE
        base = thread_nice()
        seen: dict[str, int] = {}

        def note(where: str) -> None:
            seen[where] = thread_nice()

        ctx.run_parallel([lambda: note("main"), lambda: note("pool")])
        assert seen["main"] == base
        assert seen["pool"] == min(base + DEFAULT_BACKGROUND_NICE, MAX_NICE)

        loader = DistNodeDataLoader(g, torch.arange(64), NeighborSampler([2]), batch_size=16, prefetch=2)
        loader_nices = []
        original = loader._produce

        def produce(positions: np.ndarray):
            if threading.current_thread().name.startswith(LOADER_THREAD_PREFIX):
                loader_nices.append(thread_nice())
            return original(positions)

        loader._produce = produce
        assert len(list(loader)) == 4
        assert loader_nices and set(loader_nices) == {min(base + DEFAULT_BACKGROUND_NICE, MAX_NICE)}
    finally:
        set_context(None).close()
