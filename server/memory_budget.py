"""Memory admission: a new tensor (Init, Restore, optimizer state) is built only if it fits the budget.

The budget is the smaller of what this process's cgroup still allows (its limit minus its usage, v1
or v2) and the host's ``MemAvailable``, minus a margin kept free for answers in flight. Admitted
bytes stay *reserved* until the allocation is done, so concurrent requests cannot all pass one check
and run the server out of memory together. A refusal is a
:class:`~graphstore.errors.MemoryBudgetError` (a MemoryError; RESOURCE_EXHAUSTED) with the figures.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from graphstore.errors import MemoryBudgetError
from graphstore.server.host_memory import available_memory_bytes, cgroup_memory

DEFAULT_MARGIN_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class MemoryFigures:
    """What the budget was computed from (bytes; None where not known)."""

    host_available: int | None
    cgroup_free: int | None
    cgroup_limit: int | None

    def free_bytes(self) -> int | None:
        """The smaller of the host's and the cgroup's free memory; None when neither is known."""
        known = [v for v in (self.host_available, self.cgroup_free) if v is not None]
        return min(known) if known else None

    def describe(self) -> str:
        """``MemAvailable=... cgroup free=... of limit ...`` for error messages."""
        parts = []
        if self.host_available is not None:
            parts.append(f"host MemAvailable {self.host_available}")
        if self.cgroup_free is not None:
            parts.append(f"cgroup free {self.cgroup_free} of limit {self.cgroup_limit}")
        return ", ".join(parts) or "no memory figures"


def read_memory_figures() -> MemoryFigures:
    """The host's and this process's cgroup's figures now."""
    cgroup = cgroup_memory()
    return MemoryFigures(
        host_available=available_memory_bytes(),
        cgroup_free=cgroup.free_bytes if cgroup is not None else None,
        cgroup_limit=cgroup.limit_bytes if cgroup is not None else None,
    )


class MemoryBudget:
    """Admits allocations against the host's and the cgroup's free memory, minus a margin.

    Args:
        margin_bytes: memory kept free below the budget.
        figures: where the free memory is read from (tests pass fixed figures).
    """

    def __init__(
        self,
        margin_bytes: int = DEFAULT_MARGIN_BYTES,
        figures: Callable[[], MemoryFigures] = read_memory_figures,
    ) -> None:
        if margin_bytes < 0:
            raise ValueError(f"margin_bytes must be >= 0, got {margin_bytes}")
        self.margin_bytes = int(margin_bytes)
        self._figures = figures
        self._lock = threading.Lock()
        self._reserved = 0

    @contextmanager
    def admit(self, nbytes: int, what: str) -> Iterator[None]:
        """Reserve ``nbytes`` for the block that allocates them; the reservation ends with the block
        (the allocation then shows in the memory figures themselves).

        Args:
            nbytes: bytes about to be allocated.
            what: what is allocated, for the message (``tensor 'emb' of shape [...]``).

        Raises:
            MemoryBudgetError: ``nbytes`` does not fit the budget; the message gives the figures.
        """
        nbytes = int(nbytes)
        with self._lock:
            figures = self._figures()
            free = figures.free_bytes()
            if free is not None:
                budget = free - self.margin_bytes - self._reserved
                if nbytes > budget:
                    raise MemoryBudgetError(
                        f"memory_budget: {what} needs {nbytes} bytes, the server can admit {max(budget, 0)} "
                        f"({figures.describe()}, margin {self.margin_bytes}, reserved by requests in "
                        f"progress {self._reserved})",
                        "memory_budget",
                    )
            self._reserved += nbytes
        try:
            yield
        finally:
            with self._lock:
                self._reserved -= nbytes
