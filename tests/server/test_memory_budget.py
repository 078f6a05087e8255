"""Memory admission: the cgroup limit (v1 and v2) and MemAvailable, minus a margin, with reservations
held while an allocation is in progress; a refusal names the figures."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from graphstore.errors import LimitExceededError, MemoryBudgetError
from graphstore.server.host_memory import available_memory_bytes, cgroup_memory
from graphstore.server.id_range import IdRange
from graphstore.server.memory_budget import MemoryBudget, MemoryFigures
from graphstore.server.tensor_store import TensorStore

MiB = 1024 * 1024


def _fake_cgroups(tmp_path, v2_path: str, v1_path: str, files: dict[str, str]) -> tuple[str, str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    proc = tmp_path / "cgroup"
    proc.write_text(f"4:memory:{v1_path}\n1:cpu:/\n0::{v2_path}\n")
    sys_root = tmp_path / "sys"
    for relative, text in files.items():
        path = sys_root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(proc), str(sys_root)


def test_cgroup_v2_limit_of_the_process_or_an_ancestor(tmp_path):
    proc, sys_root = _fake_cgroups(
        tmp_path,
        "/jobs/a",
        "/",
        {
            "jobs/a/memory.max": "max\n",
            "jobs/a/memory.current": "100\n",
            "jobs/memory.max": f"{1024 * MiB}\n",
            "jobs/memory.current": f"{900 * MiB}\n",
        },
    )
    cgroup = cgroup_memory(proc, sys_root)
    assert cgroup is not None and cgroup.limit_bytes == 1024 * MiB and cgroup.free_bytes == 124 * MiB
    assert cgroup.path.endswith("jobs")


def test_cgroup_v1_limit_and_no_limit(tmp_path):
    proc, sys_root = _fake_cgroups(
        tmp_path,
        "/",
        "/docker/c1",
        {
            "memory/docker/c1/memory.limit_in_bytes": f"{2048 * MiB}\n",
            "memory/docker/c1/memory.usage_in_bytes": f"{48 * MiB}\n",
            "memory/memory.limit_in_bytes": "9223372036854771712\n",  # v1's "unlimited"
        },
    )
    cgroup = cgroup_memory(proc, sys_root)
    assert cgroup is not None and cgroup.free_bytes == 2000 * MiB
    unlimited, root = _fake_cgroups(
        tmp_path / "u", "/", "/", {"memory/memory.limit_in_bytes": "9223372036854771712"}
    )
    assert cgroup_memory(unlimited, root) is None
    assert cgroup_memory(str(tmp_path / "missing"), root) is None


def test_meminfo_is_read(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nMemAvailable:   2048 kB\n")
    assert available_memory_bytes(str(meminfo)) == 2048 * 1024
    assert available_memory_bytes(str(tmp_path / "none")) is None


def test_budget_is_the_smaller_figure_minus_margin_and_reservations():
    figures = MemoryFigures(host_available=1000 * MiB, cgroup_free=400 * MiB, cgroup_limit=2048 * MiB)
    budget = MemoryBudget(100 * MiB, lambda: figures)
    with budget.admit(200 * MiB, "first"):
        # 400 free - 100 margin - 200 reserved by the allocation in progress: 100 MiB left.
        with pytest.raises(MemoryBudgetError, match="second needs .* cgroup free 419430400 of limit") as exc:
            with budget.admit(150 * MiB, "second"):
                pass
        assert isinstance(exc.value, MemoryError) and isinstance(exc.value, LimitExceededError)
        with budget.admit(100 * MiB, "third"):
            pass
    with budget.admit(300 * MiB, "after the first is done"):
        pass
    unknown = MemoryBudget(0, lambda: MemoryFigures(None, None, None))
    with unknown.admit(10**15, "anything"):  # no figures (not Linux): nothing to check against
        pass


def test_concurrent_inits_cannot_overrun_the_budget():
    """Six inits of 400 MiB held at once against a 2000 MiB budget: five fit, the sixth is refused."""
    figures = MemoryFigures(host_available=None, cgroup_free=2000 * MiB, cgroup_limit=2000 * MiB)
    budget = MemoryBudget(0, lambda: figures)
    admitted, refused = [], []
    inside = threading.Barrier(6, timeout=10)

    def init(k: int) -> None:
        try:
            with budget.admit(400 * MiB, f"tensor {k}"):
                admitted.append(k)
                inside.wait()
        except MemoryBudgetError:
            refused.append(k)
            inside.wait()

    threads = [threading.Thread(target=init, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(admitted) == 5 and len(refused) == 1  # 5 x 400 MiB = 2000 MiB exactly fits


def test_tensor_store_init_is_admitted_against_the_budget():
    tight = MemoryBudget(
        0, lambda: MemoryFigures(host_available=64 * MiB, cgroup_free=None, cgroup_limit=None)
    )
    store = TensorStore(0, {"node": IdRange(0, 1000, 1000), "edge": IdRange(0, 10, 10)}, memory=tight)
    created, _ = store.init("small", (1000, 16), "float32", "node")
    assert created
    with pytest.raises(
        MemoryBudgetError,
        match="tensor 'big' of shape \\[1000, 100000\\].*needs 400000000 bytes.*host MemAvailable",
    ):
        store.init("big", (1000, 100_000), "float32", "node")
    assert store.names() == ["small"]
    np.testing.assert_array_equal(store.pull("small", np.array([0]))[0], np.zeros(16, np.float32))
