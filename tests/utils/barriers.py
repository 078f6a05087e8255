"""Ask whether participants wait at a server barrier, without joining it (for tests that must act only
once a participant is inside the barrier)."""

from __future__ import annotations

from collections.abc import Callable

PROBE_PARTICIPANT = "tests.barrier-probe"


def barrier_has_waiters(barrier: Callable[..., int], name: str) -> bool:
    """Whether someone waits at barrier ``name`` now.

    The probe arrives with a count of 1, which never waits: with nobody there it is released at once
    (one generation of ``name`` passes, which the waiters of later generations do not notice), and
    with participants waiting for more it is refused for its count. Either answer comes at once, so the
    probe cannot hold anyone up or be counted as one of them.

    Args:
        barrier: ``BarrierRegistry.wait`` or a partition's ``barrier`` (in-process or remote):
            ``(name, count, timeout_s, participant)``.
        name: the barrier's name.

    Returns:
        True when participants are waiting at ``name``.
    """
    try:
        barrier(name, 1, 5.0, PROBE_PARTICIPANT)
    except ValueError as exc:
        if "is waiting for" in str(exc):
            return True
        raise
    return False


def dist_graph_barrier_name(graph_name: str, master_addr: str, master_port: str) -> str:
    """The server-side barrier ``DistGraph.barrier`` uses for a trainer group (partition 0 keeps it)."""
    return f"graphstore.barrier.{graph_name}.{master_addr}:{master_port}"
