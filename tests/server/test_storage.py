"""TensorStore and its pure helpers: ID conversion, bfloat16 rounding, scatter-add, readers-writer lock."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from graphstore.dtypes import bfloat16_bits_to_float32, float32_to_bfloat16_bits
from graphstore.server.id_range import IdRange, to_local_ids
from graphstore.server.locks import ReadWriteLock
from graphstore.server.row_arithmetic import scatter_add
from graphstore.server.tensor_store import TensorStore
from graphstore.types import InitSpec
from tests.utils.threads import run_in_threads
from tests.utils.wait import wait_until


def _store() -> TensorStore:
    return TensorStore(1, {"node": IdRange(100, 200, 300), "edge": IdRange(1000, 1500, 2000)})


def test_to_local_ids_checks_the_owned_range():
    np.testing.assert_array_equal(
        to_local_ids(np.array([100, 199, 150]), 100, 200, "ids", "node", 1), [0, 99, 50]
    )
    with pytest.raises(
        ValueError, match=r"ids: node ID 200 is not owned by partition 1 \(it owns node IDs \[100, 200\)\)"
    ):
        to_local_ids(np.array([150, 200]), 100, 200, "ids", "node", 1)
    with pytest.raises(ValueError, match="node ID -1"):
        to_local_ids(np.array([-1]), 100, 200, "ids", "node", 1)
    with pytest.raises(ValueError, match="1-d"):
        to_local_ids(np.zeros((2, 2), np.int64), 100, 200, "ids", "node", 1)
    with pytest.raises(ValueError, match="integers"):
        to_local_ids(np.array([1.5]), 100, 200, "ids", "node", 1)
    assert to_local_ids(np.empty(0, np.int64), 100, 200, "ids", "node", 1).size == 0


def test_bfloat16_conversion_matches_torch():
    torch = pytest.importorskip("torch")
    values = np.concatenate(
        [
            np.random.default_rng(0).standard_normal(10_000).astype(np.float32) * 1e3,
            [0.0, -0.0, np.inf, -np.inf],
        ]
    ).astype(np.float32)
    bits = float32_to_bfloat16_bits(values)
    expected = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(bits, expected)
    np.testing.assert_array_equal(
        bfloat16_bits_to_float32(bits), torch.from_numpy(values).to(torch.bfloat16).float()
    )
    assert np.isnan(bfloat16_bits_to_float32(float32_to_bfloat16_bits(np.array([np.nan], np.float32))))[0]


@pytest.mark.parametrize(
    "dtype,storage", [("float32", np.float32), ("int64", np.int64), ("float16", np.float16)]
)
def test_scatter_add_sums_repeated_indices(dtype, storage):
    data = np.zeros((5, 2), storage)
    scatter_add(data, np.array([1, 3, 1, 1]), np.ones((4, 2), storage), dtype)
    np.testing.assert_array_equal(data[:, 0], [0, 3, 0, 1, 0])


def test_store_init_validation_and_memory_guard():
    store = _store()
    with pytest.raises(ValueError, match="non-empty name"):
        store.init("", (300, 2), "float32", "node")
    with pytest.raises(ValueError, match="policy"):
        store.init("x", (300, 2), "float32", "vertex")
    with pytest.raises(ValueError, match="row dimensions must be positive"):
        store.init("x", (300, 0), "float32", "node")
    with pytest.raises(ValueError, match="floating-point"):
        store.init("x", (300, 2), "int32", "node", init=InitSpec("uniform", 0, 1))
    with pytest.raises(ValueError, match="a <= b"):
        store.init("x", (300, 2), "float32", "node", init=InitSpec("uniform", 1, 0))
    with pytest.raises(ValueError, match="init.kind"):
        store.init("x", (300, 2), "float32", "node", init=InitSpec("xavier"))
    with pytest.raises(MemoryError, match="needs"):
        store.init("huge", (300, 10**12), "float64", "node")
    assert store.names() == []
    created, scheme = store.init("x", (2000, 3), "bfloat16", "edge", init=InitSpec("constant", 1.5))
    assert created and scheme.shape == (2000, 3)
    np.testing.assert_array_equal(bfloat16_bits_to_float32(store.pull("x", np.array([1000, 1499]))), 1.5)


def _waiting_on(lock: ReadWriteLock) -> int:
    """Threads blocked inside the lock (waiting on its condition)."""
    return len(lock._cond._waiters)


def test_readers_share_the_lock():
    lock = ReadWriteLock()
    # Each reader holds the lock until all four hold it: readers that excluded each other never get there.
    all_inside = threading.Barrier(4, timeout=30)

    def read() -> None:
        with lock.read():
            all_inside.wait()

    run_in_threads(read, [()] * 4)


def test_a_writer_excludes_readers_and_a_waiting_writer_holds_new_readers_back():
    lock = ReadWriteLock()
    order = []

    def read() -> None:
        with lock.read():
            order.append("read")

    reader = threading.Thread(target=read)
    with lock.write():
        reader.start()
        wait_until(lambda: _waiting_on(lock) == 1 or order, 30, "the reader to wait for the writer")
        order.append("write done")
    reader.join(30)
    assert order == ["write done", "read"]

    # A reader holds the lock; a writer queues behind it; a new reader must queue behind the writer.
    events = []
    holder_in, holder_out = threading.Event(), threading.Event()

    def holder() -> None:
        with lock.read():
            holder_in.set()
            holder_out.wait(30)

    def writer() -> None:
        with lock.write():
            events.append("write")

    def late_reader() -> None:
        with lock.read():
            events.append("late read")

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    holder_in.wait(30)
    threads.append(threading.Thread(target=writer))
    threads[1].start()
    wait_until(lambda: _waiting_on(lock) == 1, 30, "the writer to wait for the reader")
    threads.append(threading.Thread(target=late_reader))
    threads[2].start()
    wait_until(lambda: _waiting_on(lock) == 2 or events, 30, "the late reader to wait for the writer")
    holder_out.set()
    for thread in threads:
        thread.join(30)
    assert events == ["write", "late read"]
